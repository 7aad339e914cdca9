#!/bin/bash
# att26's request for session 26 (time limit: 120 s on one H200). Run from the tree's root (main + branch cau26's
# diff), PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. The D=128 causal backward (ds):
# (1) the GPU tests of ONE_LOOP (against torch autograd) beside the compiles; (2) N 4096 causal: cuDNN, the default
# and the variants (bwd_ab.py's entries: one, onews, onewsrows, rows), interleaved rounds; (3) N 16384 causal, the
# same without rows. Nothing else is timed. <= 115 s.
set -u
RES=${OUT:-/tmp/att26_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 115))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/att26/bwd_ab.py
E4="cudnn def one onews onewsrows rows"
E16="cudnn def one onews onewsrows"
echo "== 1: GPU tests and compiles in parallel"
timeout 45 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py -k causal_in_one_loop \
  > $RES/gpu_tests.log 2>&1 &
timeout 35 python3 $S --warm --seq 2048 --head-dim 128 --causal 1 --entries ${E4#cudnn } > $RES/warm4k.log 2>&1 &
# causal at N 16384 runs heads in groups of 4 (ds under 4x dQ's bytes: GROUP=4 in its kernels): compiled at that shape
timeout 35 python3 $S --warm --seq 16384 --head-dim 128 --causal 1 --entries ${E16#cudnn } > $RES/warm16k.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
grep -E "passed|failed|error" $RES/gpu_tests.log | tail -n 2
echo "== 2: N 4096 causal, $(left)s left"
T=$(( $(left) - 40 )); [ $T -gt 24 ] && T=24
timeout $T python3 $S --head-dim 128 --causal 1 --entries $E4 --rounds 4 --rep-ms 30 \
  --out $RES/n4096_c1.json > $RES/n4096_c1.log 2>&1
echo "== 3: N 16384 causal, $(left)s left"
T=$(( $(left) - 4 )); [ $T -gt 36 ] && T=36
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries $E16 --rounds 3 \
  --rep-ms 100 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== summary"
cat $RES/n4096_c1.log $RES/n16384_c1.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
