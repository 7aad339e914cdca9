#!/bin/bash
# mem25 R1 (issue #21; hard limit 40 s). Load-side cache hints on softmax fwd 8192^2 fp16 and rope 4x4096x32x128
# bf16, each kernelc's own PTX edited (mem21/variants.py's edits; SASS checked on CPU by mem25/load_hints_sass.py),
# interleaved with the shipped build, Triton and Triton's A/A, one process, as many rounds as fit (--row-seconds).
# softmax fwd (both loads read once): nc (LDG.E.128.CONSTANT), ncna (.NA.CONSTANT), l1na (.NA), ldcs (.EF, = L1
# evict_first), lu (.LU), l2pf (.LTC256B), l2ef (L2 evict_first policy). rope (loads 0-3 cos/sin, reused by every
# batch's program: `:nost`; 4-7 q, read once then written in place: `:st`): ncc (cos/sin on the read-only path; q is written, so
# not .nc), and on q only l1naq, ldcsq, luq, l2efq; l2pf on all eight.
set -u
T0=$(date +%s); END=$((T0 + 37))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem25_out}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
V=bench/experiments/mem21/variants.py
S=$(( $(left) - 2 )); RS=$(( (S - 7) / 2 ))   # ~5 s of imports and CUDA start, then two rows
timeout $S python3 $V "softmax fwd" rope --rounds 12 --row-seconds $RS \
  --col "softmax fwd/nc=own+nc" --col "softmax fwd/ncna=own+ncna" --col "softmax fwd/l1na=own+l1na" \
  --col "softmax fwd/ldcs=own+ldcs" --col "softmax fwd/lu=own+lu" --col "softmax fwd/l2pf=own+l2pf" \
  --col "softmax fwd/l2ef=own+l2ef" \
  --col "rope/ncc=own+nc:nost" --col "rope/l1naq=own+l1na:st" --col "rope/ldcsq=own+ldcs:st" \
  --col "rope/luq=own+lu:st" --col "rope/l2efq=own+l2ef:st" --col "rope/rl2pf=own+l2pf" \
  --out $RES/loadhints.json > $RES/loadhints.log 2>&1
echo "variants rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error" $RES/loadhints.log | head -2 | cut -c1-150
python3 bench/experiments/mem25/summarize.py $RES/loadhints.json --json $RES/summary.json 2>&1 | tee $RES/summary.txt \
  | sed 's/triton\[control\]/A\/A/' | cut -c1-110
echo "== done in $(( $(date +%s) - T0 ))s"
