#!/bin/bash
# mem27 R3 (issue #21; hard limit 90 s). R2 showed that the columns' shared cos/sin decided the A/B: a column that
# keeps the rows in L2 under evict_last (lines that survive the 256 MB flush between launches) lets every other
# column that reads the same tensor hit them (R2: `off` with its own copy 0.8-0.9% slower than `off` sharing one).
# Here every kernelc column reads its own copy of cos/sin (@own; Triton and its A/A share one that no kernelc column
# reads): on = this branch's default (KERNELC_L2_REUSE=evict_last, the policy as a constant), off; ond / offd: the
# same two, each launch followed by a kernel that gives the copy's lines back the normal priority (demote.py), so the
# flush empties them: ond/offd is what the policy does within one launch. Rows: liger1 (Liger's rope, cos_bs 1), ours (rope 4x4096x32x128 bf16), llama4 (Liger's
# llama4_rope, not tuned on; skipped if .ext/gpu/liger/llama4_rope.py is absent), liger4 (cos_bs 4, nothing re-read
# within a launch: k = off + the policy; a gain there is lines kept from one launch to the next).
set -u
T0=$(date +%s); END=$((T0 + 87))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem27_r3_out}; mkdir -p $RES
export LIGER_ROPE=$PWD/.ext/gpu/liger/rope.py LIGER_LLAMA4=$PWD/.ext/gpu/liger/llama4_rope.py
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
ROWS=liger1,ours,llama4,liger4; [ -f "$LIGER_LLAMA4" ] || { ROWS=liger1,ours,liger4; echo "no $LIGER_LLAMA4: llama4 skipped"; }
N=$(echo $ROWS | tr , '\n' | wc -l)
S=$(( $(left) - 2 )); RS=$(( (S - 18) / N ))
timeout $S python3 bench/experiments/mem27/ab27.py --rows $ROWS --rounds 60 --row-seconds $RS \
  --col off=off@own --col liger1/on=evict_last@own --col ours/on=evict_last@own --col llama4/on=evict_last@own \
  --col liger1/ond=evict_last@demote --col ours/ond=evict_last@demote --col liger1/offd=off@demote \
  --col ours/offd=off@demote --col liger4/k=off+l2elk:nost@own \
  --out $RES/ab27_r3.json > $RES/ab27_r3.log 2>&1
echo "ab27 rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error|MISMATCH" $RES/ab27_r3.log | head -3 | cut -c1-150
grep -E "^liger|^ours|^llama|^  " $RES/ab27_r3.log | grep -v builds | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
