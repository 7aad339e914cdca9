#!/bin/bash
# att23 round 1 (run from the tree's root, PYTHONPATH set, $OUT the results folder): ds under bounded workspaces
# (heads in groups under 2x / 4x dQ's bytes, with and without the dQ GEMMs on a second stream) against ds (8 GiB),
# the default (separate pass) and cuDNN, D=128, N 4096 and 16384, both masks; the GPU test of the new paths. <= 150 s.
set -u
RES=${OUT:-/tmp/att23_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 145))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S=bench/experiments/att23/bwd_ab.py
E="cudnn def ds dsx2 dsx2o dsx2op dsx4 dsx4o"
echo "== 1: compile in parallel, and the GPU test of the new paths"
timeout 40 python3 $S --warm --head-dim 128 --causal 0 --entries def ds dsx2o > $RES/warm0.log 2>&1 &
timeout 40 python3 $S --warm --head-dim 128 --causal 1 --entries def ds dsx2o > $RES/warm1.log 2>&1 &
timeout 40 python3 -m pytest -q tests/gpu/test_gpu_attention.py -k "keys_in_chunks" > $RES/gpu_tests.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn; tail -n 3 $RES/gpu_tests.log
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 95 )); [ $T -gt 20 ] && T=20
timeout $T python3 $S --head-dim 128 --causal 0 --entries $E --rounds 3 --rep-ms 50 --out $RES/n4096_c0.json \
  > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 75 )); [ $T -gt 18 ] && T=18
timeout $T python3 $S --head-dim 128 --causal 1 --entries $E --rounds 3 --rep-ms 50 --out $RES/n4096_c1.json \
  > $RES/n4096_c1.log 2>&1
echo "== 4: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 36 )); [ $T -gt 36 ] && T=36
[ $T -gt 10 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries $E ds8go --rounds 2 \
  --rep-ms 200 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: N 16384 causal, $(left)s left"
T=$(( $(left) - 1 )); [ $T -gt 34 ] && T=34
[ $T -gt 10 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries $E ds8go --rounds 2 \
  --rep-ms 200 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | grep '^N=' | \
  sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//'
echo "== done in $(( $(date +%s) - T0 ))s"
