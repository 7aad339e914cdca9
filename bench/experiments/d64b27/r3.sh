#!/bin/bash
# d64b27's R3 request (time limit: 90 s on one H200). Run from the tree's root (main + branch d64b27's diff),
# PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. D=64's new non-causal default (the separate
# pass in D=128's form, through the launch plan) against cuDNN and the fused kernel (the default before), interleaved
# rounds, gradients checked: N 4096 (4 rounds) and N 16384 (3 rounds), a second call after R2; the GPU tests of the
# new default (both masks, ragged N) beside the compiles. <= 85 s.
set -u
RES=${OUT:-/tmp/d64b27_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 85))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64b27/bwd_ab.py
E="cudnn def fused"
echo "== 1: GPU tests of the default and compiles in parallel"
timeout 40 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py -k "d64_default_backward" \
  > $RES/gpu_tests.log 2>&1 &
for e in def fused; do
  timeout 35 python3 $S --warm --seq 1024 --head-dim 64 --causal 0 --entries $e > $RES/warm_$e.log 2>&1 &
done
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $RES/gpu_tests.log | tail -n 8
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 30 )); [ $T -gt 25 ] && T=25
timeout $T python3 $S --head-dim 64 --causal 0 --entries $E --rounds 4 --rep-ms 30 \
  --out $RES/n4096.json > $RES/n4096.log 2>&1
echo "== 3: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 35 ] && T=35
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 64 --causal 0 --entries $E --rounds 3 \
  --rep-ms 100 --out $RES/n16384.json > $RES/n16384.log 2>&1
echo "== summary"
cat $RES/n4096.log $RES/n16384.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=64//; s/ causal=0//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
