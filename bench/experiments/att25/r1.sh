#!/bin/bash
# att25 round 1 (run from the tree's root, PYTHONPATH set, $OUT the results folder): (1) the GPU tests of ROWS_TMA (ds
# at D=128 with the LSE/delta rows ringed by TMA, against torch autograd) beside the compiles; (2) the four D=128
# backward cells: cuDNN, the default and `rows` (the default with ROWS_TMA), interleaved rounds; (3) the two variants'
# kernels by CUPTI at N 4096 (kernels.py). <= 145 s.
set -u
RES=${OUT:-/tmp/att25_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 140))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/att25/bwd_ab.py
echo "== 1: GPU tests and compiles in parallel"
timeout 45 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py -k rows_ringed \
  > $RES/gpu_tests.log 2>&1 &
timeout 30 python3 $S --warm --seq 2048 --head-dim 128 --causal 0 --entries def rows > $RES/warm0.log 2>&1 &
timeout 30 python3 $S --warm --seq 2048 --head-dim 128 --causal 1 --entries def rows > $RES/warm1.log 2>&1 &
# causal at N 16384 runs heads in groups of 4 (GROUP=4 in its kernels): compiled at that shape
timeout 30 python3 $S --warm --seq 16384 --head-dim 128 --causal 1 --entries def rows > $RES/warm16k.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
grep -E "passed|failed|error" $RES/gpu_tests.log | tail -n 2
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 80 )); [ $T -gt 14 ] && T=14
timeout $T python3 $S --head-dim 128 --causal 0 --entries cudnn def rows --rounds 4 --rep-ms 40 \
  --out $RES/n4096_c0.json > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 66 )); [ $T -gt 13 ] && T=13
timeout $T python3 $S --head-dim 128 --causal 1 --entries cudnn def rows --rounds 4 --rep-ms 30 \
  --out $RES/n4096_c1.json > $RES/n4096_c1.log 2>&1
echo "== 4: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 34 )); [ $T -gt 24 ] && T=24
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def rows --rounds 3 \
  --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: N 16384 causal, $(left)s left"
T=$(( $(left) - 12 )); [ $T -gt 18 ] && T=18
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries cudnn def rows --rounds 3 \
  --rep-ms 100 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== 6: kernel by kernel (CUPTI) at N 4096 non-causal, $(left)s left"
T=$(left); [ $T -gt 14 ] && T=14
[ $T -gt 7 ] && timeout $T python3 bench/experiments/att25/kernels.py --seq 4096 --causal 0 --rounds 2 --calls 3 \
  --out $RES/kernels4096.json > $RES/kernels4096.log 2>&1
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
grep -h '^N=' $RES/kernels4096.log 2>/dev/null | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
