#!/bin/bash
# lrope26 -> session 27 (issue #21; hard limit 60 s; run in the root of a tree with .ext/liger). Liger-Kernel's rope
# (_triton_rope, Liger's source unmodified, launched with rope_forward's arguments), Llama-3-8B's heads (32 q, 8 kv,
# head_dim 128) at 4 x 4096 tokens bf16: kernelc's default (KERNELC_L2_REUSE=evict_last: with cos_bs == 1 its cos/sin
# loads take the L2 evict_last policy, since simplify folds the constant tl.where(cos_bs == 1, ...)), kernelc[l2off]
# (KERNELC_L2_REUSE=off: the same PTX as main before lrope26, bench/experiments/mem26/results/liger_rope_check.json),
# Triton and Triton's A/A, interleaved in one process (bench/experiments/mem26/liger_rope.py). Rows: cos_bs 1 (the
# policy's case) and cos_bs 4 (one cos row per token: both kernelc builds the same code; a control of the pair).
set -u
T0=$(date +%s); END=$((T0 + 57))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/lrope26_out}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
S=$(( $(left) - 2 )); RS=$(( (S - 12) / 2 ))   # imports, CUDA start and 6 compiles, then two rows
timeout $S python3 bench/experiments/mem26/liger_rope.py --cos-bs 1,4 --rounds 40 --row-seconds $RS \
  --out $RES/liger_rope.json > $RES/liger_rope.log 2>&1
echo "liger_rope rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error|MISMATCH" $RES/liger_rope.log | head -3 | cut -c1-150
grep -E "^rope|^  |^cos_bs" $RES/liger_rope.log | cut -c1-160
echo "== done in $(( $(date +%s) - T0 ))s"
