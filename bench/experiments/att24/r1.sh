#!/bin/bash
# att24 round 1 (run from the tree's root, PYTHONPATH set, $OUT the results folder): (1) the four D=128 backward cells,
# the default (ds under 4x dQ's bytes) against cuDNN, interleaved rounds, with the default's dK/dV kernel compiled under
# KERNELC_WGMMA_ZERO_ACC=ws (za), ds at 4 stages without a producer warpgroup (dss4), causal: ds with a producer
# warpgroup without / with the knob (dswsc / zawsc) and head groups of 4 (dsg4) beside them; (2) the backward kernel by kernel
# (split.py: ds's dK/dV kernel with its dS^T store against the separate pass's at the same config without it, the dQ
# GEMM, cuDNN's kernels) at N 4096 and 16384; (3) PC samples of the default and cuDNN at N 16384 non-causal (pcs.py),
# kprof-analyze on them. <= 140 s.
set -u
RES=${OUT:-/tmp/att24_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 134))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/att24/bwd_ab.py
SP=bench/experiments/att24/split.py
echo "== 1: compile in parallel"
timeout 24 python3 $S --warm --seq 2048 --head-dim 128 --causal 0 --entries def za dss4 > $RES/warm0.log 2>&1 &
timeout 24 python3 $S --warm --seq 2048 --head-dim 128 --causal 1 --entries def dswsc zawsc dsg4 > $RES/warm1.log 2>&1 &
timeout 24 python3 $SP --warm --seq 1024 --batch 1 --heads 16 --causal 0 --no-prof > $RES/warms0.log 2>&1 &
# causal at N 16384 runs heads in groups of 4 (GROUP=4 in its kernels): compiled at that shape
timeout 24 python3 $S --warm --seq 16384 --head-dim 128 --causal 1 --entries def zawsc > $RES/warm16k.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 95 )); [ $T -gt 12 ] && T=12
timeout $T python3 $S --head-dim 128 --causal 0 --entries cudnn def za dss4 --rounds 4 --rep-ms 40 \
  --out $RES/n4096_c0.json > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 82 )); [ $T -gt 13 ] && T=13
timeout $T python3 $S --head-dim 128 --causal 1 --entries cudnn def dswsc zawsc dsg4 --rounds 4 --rep-ms 30 \
  --out $RES/n4096_c1.json > $RES/n4096_c1.log 2>&1
echo "== 4: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 64 )); [ $T -gt 18 ] && T=18
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def za --rounds 3 \
  --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: N 16384 causal, $(left)s left"
T=$(( $(left) - 50 )); [ $T -gt 14 ] && T=14
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries cudnn def zawsc --rounds 3 \
  --rep-ms 100 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== 6: kernel by kernel at N 4096, $(left)s left"
T=$(( $(left) - 40 )); [ $T -gt 12 ] && T=12
[ $T -gt 6 ] && timeout $T python3 $SP --seq 4096 --causal 0 --rounds 2 --rep-ms 30 --out $RES/split4096.json \
  > $RES/split4096.log 2>&1
echo "== 7: PC samples at N 16384, $(left)s left"
T=$(( $(left) - 22 )); [ $T -gt 18 ] && T=18
[ $T -gt 8 ] && timeout $T python3 -m kprof -m pcsampling -o $RES -n pcs16k bench/experiments/att24/pcs.py \
  --seq 16384 --causal 0 > $RES/pcs16k.log 2>&1; echo "rc $?"
T=$(( $(left) - 12 )); [ $T -gt 10 ] && T=10
[ $T -gt 2 ] && [ -f $RES/pcs16k.hatchet ] && timeout $T python3 -m analyzer $RES/pcs16k.hatchet --top 0 \
  --no-check --no-color --lines 14 --bundle-artifacts -o $RES/pcs16k.analyze.txt > $RES/pcs16k.analyze.log 2>&1
[ -f $RES/pcs16k.hatchet ] && gzip -f $RES/pcs16k.hatchet
echo "== 8: kernel by kernel at N 16384, $(left)s left"
T=$(left); [ $T -gt 6 ] && timeout $T python3 $SP --seq 16384 --batch 1 --heads 16 --causal 0 --rounds 2 \
  --rep-ms 60 --out $RES/split16384.json > $RES/split16384.log 2>&1
echo "== 9: GPU tests of the knob in the time left, $(left)s left"
T=$(left); [ $T -gt 8 ] && timeout $T python3 -m pytest -q -rA tests/gpu/test_gpu_attention.py -k zero_started \
  > $RES/gpu_tests.log 2>&1
grep -E "passed|failed" $RES/gpu_tests.log 2>/dev/null | tail -n 2
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
grep -h '^N=' $RES/split4096.log $RES/split16384.log 2>/dev/null | grep -v '_preprocess\|sep_all' | cut -c1-100
echo "== done in $(( $(date +%s) - T0 ))s"
