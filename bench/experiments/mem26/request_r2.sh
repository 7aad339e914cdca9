#!/bin/bash
# mem26 R2 (issue #21; hard limit 60 s). softmax fwd 8192^2 fp16 and rope 4x4096x32x128 bf16: (1) headroom: the
# shipped build, Triton and streaming copies of the same bytes and launch shape (mem26/copies.py under kernelc and
# Triton, torch's copy_) in the same interleaved rounds; (2) levers on the launch shape and stores, each an edit
# of kernelc's own PTX (mem21/variants.py): rev (programs in reverse order), pers (persistent grid: one program a
# resident slot, looping over the rows), stna (stores .L1::no_allocate); on rope cos/sin kept in L2 (el: evict_last
# policy on their loads; bmaj: batch-major program order). One process, as many rounds as fit.
set -u
T0=$(date +%s); END=$((T0 + 57))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem26_out}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
V=bench/experiments/mem21/variants.py
S=$(( $(left) - 2 )); RS=$(( (S - 8) / 2 ))   # imports, CUDA start and compiles, then two rows
# softmax fwd: 31-32 registers, 4 blocks of 16 warps an SM -> 132 x 4 = 528 resident programs;
# rope's persistent build: 56 registers (CPU, sm_90a), 9 blocks of 4 warps an SM -> 1188. rope: el = cos/sin loads
# under an L2 evict_last policy (PTX edit: one policy for the kernel); elk = the same by the compiler's knob
# (KERNELC_L2_REUSE=evict_last: passes/l2_reuse.py); bmaj = the 4 batches' programs of one position adjacent
timeout $S python3 $V "softmax fwd" rope --rounds 16 --row-seconds $RS --copies \
  --col "softmax fwd/rev=own+rev" --col "softmax fwd/stna=own+stna" --col "softmax fwd/pers=own+pers:8192/528" \
  --col "rope/pers=own+pers:16384/1188" --col "rope/el=own+l2el:nost" --col "rope/bmaj=own+bmajor:4" \
  --col "rope/elk=own@KERNELC_L2_REUSE=evict_last" \
  --out $RES/headroom.json > $RES/headroom.log 2>&1
echo "variants rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error" $RES/headroom.log | head -3 | cut -c1-150
python3 bench/experiments/mem26/headroom.py $RES/headroom.json --json $RES/summary.json > $RES/summary.txt 2>&1
sed 's/triton\[control\]/A\/A/' $RES/summary.txt | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
