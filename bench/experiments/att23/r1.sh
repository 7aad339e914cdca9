#!/bin/bash
# att23 round 1 (run from the tree's root, PYTHONPATH set, $OUT the results folder): ds under bounded workspaces
# (heads in groups under 2x / 4x dQ's bytes, with and without the dQ GEMMs on a second stream) against ds (8 GiB),
# the default (separate pass) and cuDNN, D=128, N 4096 and 16384, both masks; ds's dQ GEMM alone at other configs
# (N 4096); the GPU test of the new paths. <= 150 s.
set -u
RES=${OUT:-/tmp/att23_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 146))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S=bench/experiments/att23/bwd_ab.py
G=bench/experiments/att23/gemm_ab.py
E="cudnn def ds dsx2 dsx2o dsx2op dsx4 dsx4o"
E16="cudnn def ds dsx2 dsx2o dsx2op ds8go"
echo "== 1: compile in parallel, and the GPU test of the new paths"
timeout 45 python3 $S --warm --head-dim 128 --causal 0 --entries def ds dsx2o > $RES/warm0.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 1 --entries def ds dsx2o > $RES/warm1.log 2>&1 &
timeout 45 python3 $G --warm --seq 2048 --causal 0 1 > $RES/warmg.log 2>&1 &
timeout 45 python3 -m pytest -q tests/gpu/test_gpu_attention.py -k "keys_in_chunks" > $RES/gpu_tests.log 2>&1 &
wait; tail -qn 2 $RES/warm*.log | grep -v Warn; tail -n 3 $RES/gpu_tests.log
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 84 )); [ $T -gt 16 ] && T=16
timeout $T python3 $S --head-dim 128 --causal 0 --entries $E --rounds 3 --rep-ms 40 --out $RES/n4096_c0.json \
  > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 68 )); [ $T -gt 15 ] && T=15
timeout $T python3 $S --head-dim 128 --causal 1 --entries $E --rounds 3 --rep-ms 40 --out $RES/n4096_c1.json \
  > $RES/n4096_c1.log 2>&1
echo "== 4: the dQ GEMM alone, N 4096, $(left)s left"
T=$(( $(left) - 52 )); [ $T -gt 15 ] && T=15
timeout $T python3 $G --seq 4096 --causal 0 1 --rounds 3 --rep-ms 30 --out $RES/gemm4096.json > $RES/gemm4096.log 2>&1
echo "== 5: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 25 )); [ $T -gt 28 ] && T=28
[ $T -gt 10 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries $E16 --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 6: N 16384 causal, $(left)s left"
T=$(( $(left) - 1 )); [ $T -gt 25 ] && T=25
[ $T -gt 10 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries $E16 --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/gemm4096.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
