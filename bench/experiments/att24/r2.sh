#!/bin/bash
# att24 round 2 (run from the tree's root, PYTHONPATH set, $OUT the results folder): does KERNELC_WGMMA_ZERO_ACC=ws make
# the non-causal D=128 default (ds, its dK/dV loop with a producer warpgroup) faster? R1: 3 of 4 rounds faster at N 4096
# (mean 1.6%), a tie at 16384. The default and za interleaved with cuDNN, more rounds; then the knob's GPU tests in the
# time left. <= 60 s (the script stops itself at 56 s).
set -u
RES=${OUT:-/tmp/att24_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 56))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S=bench/experiments/att24/bwd_ab.py
echo "== 1: compile"
timeout 14 python3 $S --warm --seq 2048 --head-dim 128 --causal 0 --entries def za > $RES/warm0.log 2>&1
tail -qn 1 $RES/warm0.log
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 24 )); [ $T -gt 12 ] && T=12
timeout $T python3 $S --head-dim 128 --causal 0 --entries cudnn def za --rounds 6 --rep-ms 40 \
  --out $RES/n4096_c0.json > $RES/n4096_c0.log 2>&1
echo "== 3: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 18 ] && T=18
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def za --rounds 3 \
  --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 4: GPU tests of the knob, $(left)s left"
T=$(left); [ $T -gt 6 ] && timeout $T python3 -m pytest -q -rA tests/gpu/test_gpu_attention.py -k zero_started \
  > $RES/gpu_tests.log 2>&1
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $RES/gpu_tests.log 2>/dev/null | tail -n 6
echo "== summary"
cat $RES/n4096_c0.log $RES/n16384_c0.log 2>/dev/null | grep '^N=' | \
  sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
