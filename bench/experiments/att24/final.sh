#!/bin/bash
# att24 final (merged main; env set, $OUT the results folder): the D=128 backward's default against cuDNN at N 4096, both
# masks, in one process (bench/experiments/att24/bwd_ab.py, 3 rounds each): more readings of two of issue 27's D=128
# cells on the merged tree. <= 25 s (the process is stopped at 23 s).
set -u
RES=${OUT:-/tmp/att24_final}; mkdir -p $RES
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
timeout 22 python3 bench/experiments/att24/bwd_ab.py --head-dim 128 --causal 0 1 --entries cudnn def --rounds 3 \
  --rep-ms 30 --out $RES/n4096.json > $RES/n4096.log 2>&1; echo "rc $?"
grep '^N=' $RES/n4096.log | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
