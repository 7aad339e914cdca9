#!/bin/bash
# att22 round 2 (run from the tree's root, PYTHONPATH set, $OUT the results folder): D=128 backward, N 4096 and 16384,
# both masks: ds with and without the dK/dV loop's producer warpgroup (WS; consumers at 240 registers by the branch's
# KERNELC_WS_CONSUMER_REGS=auto), in ping-pong; ds under a 1 / 2 GiB workspace (heads in groups); dq_mode="flat" at
# 32-query steps with WS and DQ_FIRST (5 matmuls, no N^2 workspace); then the new GPU tests. <= 140 s.
set -u
RES=${OUT:-/tmp/att22_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 136))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S=bench/experiments/att22/bwd_ab.py
E0="cudnn gen ds dsws dswspp ds1g flat32w flat32wpp"
E1="cudnn gen ds ds1g flat32w"
echo "== 1: compile in parallel"
timeout 40 python3 $S --warm --head-dim 128 --causal 0 --entries gen ds dsws > $RES/warm0a.log 2>&1 &
timeout 40 python3 $S --warm --head-dim 128 --causal 0 --entries dswspp flat32w flat32wpp > $RES/warm0b.log 2>&1 &
timeout 40 python3 $S --warm --head-dim 128 --causal 1 --entries gen ds flat32w > $RES/warm1a.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 85 )); [ $T -gt 25 ] && T=25
timeout $T python3 $S --head-dim 128 --causal 0 --entries $E0 --rounds 3 --rep-ms 50 --out $RES/n4096_c0.json \
  > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 68 )); [ $T -gt 18 ] && T=18
timeout $T python3 $S --head-dim 128 --causal 1 --entries $E1 --rounds 3 --rep-ms 50 --out $RES/n4096_c1.json \
  > $RES/n4096_c1.log 2>&1
echo "== 4: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 45 )); [ $T -gt 24 ] && T=24
timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn ds dsws ds1g dsws1g flat32w --rounds 2 \
  --rep-ms 250 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: N 16384 causal, $(left)s left"
T=$(( $(left) - 28 )); [ $T -gt 16 ] && T=16
timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries cudnn ds ds1g ds2g flat32w --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== 6: GPU tests, $(left)s left"
T=$(( $(left) - 1 ))
[ $T -gt 10 ] && timeout $T python3 -m pytest -q -x tests/gpu/test_gpu_attention.py -k \
  "d128_dkdv_with_a_producer or (backward_vs_sdpa and flat)" > $RES/gpu_tests.log 2>&1
tail -n 3 $RES/gpu_tests.log
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | grep '^N=' | \
  sed 's/  err def/ e/; s/cuDNN\/this/r/'
echo "== done in $(( $(date +%s) - T0 ))s"
