#!/bin/bash
# att22 round 3 (run from the tree's root, PYTHONPATH set, $OUT the results folder): the branch's D=128 backward
# defaults -- the separate pass (its launch plan; WS non-causal by DKDV_WS), ds (WS non-causal by DS_WS), flat
# (FLAT_KNOBS) -- against the same without WS and cuDNN, N 4096 and 16384, both masks; then the GPU tests of the
# changed code. <= 120 s.
set -u
RES=${OUT:-/tmp/att22_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 116))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S=bench/experiments/att22/bwd_ab.py
E="cudnn def sepnows ds dsnows flatd"
echo "== 1: compile in parallel"
timeout 30 python3 $S --warm --head-dim 128 --causal 0 --entries def sepnows ds > $RES/warm0a.log 2>&1 &
timeout 30 python3 $S --warm --head-dim 128 --causal 0 --entries dsnows flatd > $RES/warm0b.log 2>&1 &
timeout 30 python3 $S --warm --head-dim 128 --causal 1 --entries def ds flatd > $RES/warm1a.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 85 )); [ $T -gt 16 ] && T=16
timeout $T python3 $S --head-dim 128 --causal 0 --entries $E --rounds 3 --rep-ms 50 --out $RES/n4096_c0.json \
  > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 70 )); [ $T -gt 14 ] && T=14
timeout $T python3 $S --head-dim 128 --causal 1 --entries cudnn def ds flatd --rounds 3 --rep-ms 50 \
  --out $RES/n4096_c1.json > $RES/n4096_c1.log 2>&1
echo "== 4: GPU tests, $(left)s left"
T=$(( $(left) - 22 )); [ $T -gt 55 ] && T=55
[ $T -gt 10 ] && timeout $T python3 -m pytest -q tests/gpu/test_gpu_attention.py -k \
  "d128_dkdv_with_a_producer or (backward_vs_sdpa and 128 and (separate or ds or flat))" > $RES/gpu_tests.log 2>&1
tail -n 4 $RES/gpu_tests.log
echo "== 5: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 1 )); [ $T -gt 22 ] && T=22
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def sepnows ds dsnows \
  --rounds 2 --rep-ms 200 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log 2>/dev/null | grep '^N=' | \
  sed 's/  err def/ e/; s/cuDNN\/this/r/'
echo "== done in $(( $(date +%s) - T0 ))s"
