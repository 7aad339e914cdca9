#!/bin/bash
# att23 round 2 (run from the tree's root, PYTHONPATH set, $OUT the results folder): the new D=128 default (ds under 4x
# dQ's bytes) against the separate pass (the old default), ds at 8 GiB and cuDNN, N 4096 and 16384, both masks; ds with
# keys in chunks at 16384 (half a head's dS^T); then the GPU tests of the changed code in the time left. <= 110 s.
set -u
RES=${OUT:-/tmp/att23_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 106))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S=bench/experiments/att23/bwd_ab.py
E="cudnn def sep ds"
echo "== 1: compile in parallel"
timeout 20 python3 $S --warm --seq 2048 --head-dim 128 --causal 0 --entries def sep dsk2 > $RES/warm0.log 2>&1 &
timeout 20 python3 $S --warm --seq 2048 --head-dim 128 --causal 1 --entries def sep > $RES/warm1.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 70 )); [ $T -gt 12 ] && T=12
timeout $T python3 $S --head-dim 128 --causal 0 --entries $E --rounds 3 --rep-ms 40 --out $RES/n4096_c0.json \
  > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 58 )); [ $T -gt 11 ] && T=11
timeout $T python3 $S --head-dim 128 --causal 1 --entries $E --rounds 3 --rep-ms 40 --out $RES/n4096_c1.json \
  > $RES/n4096_c1.log 2>&1
echo "== 4: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 36 )); [ $T -gt 22 ] && T=22
[ $T -gt 10 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries $E dsk2 \
  --rounds 2 --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: N 16384 causal, $(left)s left"
T=$(( $(left) - 18 )); [ $T -gt 18 ] && T=18
[ $T -gt 10 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries $E \
  --rounds 2 --rep-ms 150 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== 6: GPU tests, $(left)s left"
T=$(( $(left) )); [ $T -gt 10 ] && timeout $T python3 -m pytest -q -rA tests/gpu/test_gpu_attention.py \
  -k "(keys_in_chunks and 1000) or (backward_vs_sdpa and None)" > $RES/gpu_tests.log 2>&1
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $RES/gpu_tests.log | tail -n 6
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
