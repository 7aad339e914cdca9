#!/bin/bash
# mem27 R2 (issue #21; hard limit 90 s). Liger-Kernel's rope (cos_bs 1: its cos/sin rows re-read by the 4 batches)
# and the bench row rope 4x4096x32x128 bf16, interleaved in one process (bench/experiments/mem27/ab27.py), columns:
# on = KERNELC_L2_REUSE=evict_last (main's default), off, en = off + cos/sin loads in the policy's instruction form
# with an evict_normal policy (the form's cost, nothing kept), k = off + evict_last as an immediate policy (no
# createpolicy), offo = off reading its own copy of cos/sin (does `on` keep lines that the others' reads then hit?),
# Triton and its A/A. Row liger4 (cos_bs 4: one cos/sin row per token, nothing re-read within a launch): off, en,
# el = off + evict_last on cos/sin (the policy's cost where nothing recurs; a gain would mean lines kept across
# launches, through the L2 flush between them).
set -u
T0=$(date +%s); END=$((T0 + 87))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem27_r2_out}; mkdir -p $RES
export LIGER_ROPE=$PWD/.ext/gpu/liger/rope.py
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
S=$(( $(left) - 2 )); RS=$(( (S - 16) / 3 ))
timeout $S python3 bench/experiments/mem27/ab27.py --rows liger1,ours,liger4 --rounds 60 --row-seconds $RS \
  --col liger1/on=evict_last --col ours/on=evict_last --col off=off --col en=off+l2en:nost \
  --col liger1/k=off+l2elk:nost --col ours/k=off+l2elk:nost --col liger1/offo=off@own --col ours/offo=off@own \
  --col liger4/el=off+l2el:nost \
  --out $RES/ab27_r2.json > $RES/ab27_r2.log 2>&1
echo "ab27 rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error|MISMATCH" $RES/ab27_r2.log | head -3 | cut -c1-150
grep -E "^liger|^ours|^  " $RES/ab27_r2.log | grep -v builds | cut -c1-150
grep -E "builds" $RES/ab27_r2.log | cut -c1-400
echo "== done in $(( $(date +%s) - T0 ))s"
