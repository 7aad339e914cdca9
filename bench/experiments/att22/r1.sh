#!/bin/bash
# att22 round 1 (run from the tree's root, PYTHONPATH set, $OUT the results folder): the D=128 backward's dK/dV loop
# with a producer warpgroup (the kernel's WS constexpr; setmaxnreg consumers at 232 or, KERNELC_WS_CONSUMER_REGS=240, 240), in the separate pass and in ds, against
# the defaults and cuDNN; with the consumer warpgroups in ping-pong (KERNELC_WS_PINGPONG=1); dq_mode="flat" (5 matmuls, dQ^T added by kl.bulk_add from the dK/dV loop) at 64-query steps;
# variants interleaved round by round in one process per shape and mask. <= 140 s.
set -u
RES=${OUT:-/tmp/att22_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 136))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
git log -1 --format=%H 2>/dev/null
S=bench/experiments/att22/bwd_ab.py
E0="cudnn def gen even ws ws240 ws240pp ds dsws dsws240 dsws2_240pp flat flatf flat32w"
E1="cudnn def gen even ws ws240 ws2_240 ws240pp wsu ds dsws2 dsws2_240 dsws2_240pp flat flatf"
echo "== 1: compile in parallel"
timeout 45 python3 $S --warm --head-dim 128 --causal 0 --entries def gen even ws ws240 > $RES/warm0a.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 0 --entries ds dsws dsws240 > $RES/warm0b.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 0 --entries ws240pp dsws2_240pp > $RES/warm0d.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 1 --entries ws240pp dsws2_240pp > $RES/warm1d.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 0 --entries flat flatf flat32w > $RES/warm0c.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 1 --entries def gen even ws ws240 ws2_240 wsu > $RES/warm1a.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 1 --entries ds dsws2 dsws2_240 > $RES/warm1b.log 2>&1 &
timeout 45 python3 $S --warm --head-dim 128 --causal 1 --entries flat flatf > $RES/warm1c.log 2>&1 &
wait; tail -n 2 $RES/warm*.log | grep -v Warn
echo "== 2: D=128 N 4096 non-causal, $(left)s left"
T=$(( $(left) - 60 )); [ $T -gt 30 ] && T=30
timeout $T python3 $S --head-dim 128 --causal 0 --entries $E0 --rounds 3 --rep-ms 50 --out $RES/n4096_c0.json \
  > $RES/n4096_c0.log 2>&1
echo "== 3: D=128 N 4096 causal, $(left)s left"
T=$(( $(left) - 35 )); [ $T -gt 30 ] && T=30
timeout $T python3 $S --head-dim 128 --causal 1 --entries $E1 --rounds 3 --rep-ms 50 --out $RES/n4096_c1.json \
  > $RES/n4096_c1.log 2>&1
echo "== 4: D=128 N 16384 non-causal, $(left)s left"
T=$(( $(left) - 14 )); [ $T -gt 22 ] && T=22
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn gen ws240 ds dsws240 flatf --rounds 2 \
  --rep-ms 250 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: D=128 N 16384 causal, $(left)s left"
T=$(( $(left) - 1 )); [ $T -gt 16 ] && T=16
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries cudnn gen ws240 ds dsws2_240 flatf --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | grep '^N=\|setmaxnreg' | \
  sed 's/  err def/ e/; s/cuDNN\/this/r/'
echo "== done in $(( $(date +%s) - T0 ))s"
