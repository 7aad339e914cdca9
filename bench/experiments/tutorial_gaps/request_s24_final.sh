#!/bin/bash
# Session 24, call F (helper t06s24, limit 25 s), on merged main: tutorial 03's two 2-warp fp8 configs at 256^3 under
# kernelc (fp8 mma.sync as fp16 MMAs on converted fragments, passes/fp8_dot.py fp8_mma="f16") and under Triton in one
# call, processes kernelc then Triton (R2 timed kernelc alone: 5.89 / 6.00 us; R1's Triton 6.45 / 6.24 us).
set -u
T0=$(date +%s)
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
D=$OUT/fp8_mma_f16_s24_F_h200; mkdir -p $D
C1="BLOCK_SIZE_M=32/BLOCK_SIZE_N=64/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=2/s=5"
C2="BLOCK_SIZE_M=64/BLOCK_SIZE_N=32/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=2/s=5"
for impl in kernelc triton; do
  timeout 11 python3 bench/experiments/tutorial_gaps/host_gpu_split.py --impl $impl --tutorials $TUT \
    --cases m03:256:fp8:$C1 m03:256:fp8:$C2 --repeats 3 --budget-s 8 --sweep-s 0 --no-gc-off --out $D/p.$impl.json \
    > $D/p.$impl.log 2>&1
  echo "$impl rc=$? at $(( $(date +%s) - T0 )) s"
done
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $D --json $D/summary.json > $D/summary.txt 2>&1
grep -E "^m03.*range" $D/summary.txt | sed 's/BLOCK_SIZE_//g' | cut -c1-170
echo "== done in $(( $(date +%s) - T0 )) s"
