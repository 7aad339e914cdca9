#!/bin/bash
# att21 round 2 (run from the archive's root, PYTHONPATH set, $RES the results folder): the attention backward's dK/dV
# loop prefetching the next trip's LSE/delta rows into L1 (kl.prefetch, the kernels' L1_PF) against the defaults and
# cuDNN, in one process per configuration, variants interleaved. <= 90 s.
set -u
T0=$(date +%s); END=$((T0 + 86))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S=bench/experiments/att21/bwd_ab.py
E128="cudnn def gen pf sepeven seppfeven dq128 seppf128 ds dspf"
echo "== 1: compile in parallel"
timeout 40 python3 $S --warm --head-dim 128 --causal 0 --entries $E128 > $RES/warm128_0.log 2>&1 &
timeout 40 python3 $S --warm --head-dim 128 --causal 1 --entries $E128 > $RES/warm128_1.log 2>&1 &
timeout 40 python3 $S --warm --head-dim 64 --causal 0 1 --entries def gen pf > $RES/warm64.log 2>&1 &
wait; tail -n 2 $RES/warm*.log
echo "== 2: D=128 N 4096 (decisive), $(left)s left"
T=$(( $(left) - 30 )); [ $T -gt 30 ] && T=30
timeout $T python3 $S --head-dim 128 --causal 0 1 --entries $E128 --rounds 3 --rep-ms 50 --out $RES/d128_n4096.json \
  > $RES/d128_n4096.log 2>&1
echo "== 3: D=64 N 4096, $(left)s left"
T=$(( $(left) - 17 )); [ $T -gt 12 ] && T=12
[ $T -gt 5 ] && timeout $T python3 $S --head-dim 64 --causal 0 1 --entries cudnn def gen pf --rounds 3 --rep-ms 40 \
  --out $RES/d64_n4096.json > $RES/d64_n4096.log 2>&1
echo "== 4: D=128 N 16384 non-causal, $(left)s left"
T=$(( $(left) - 1 )); [ $T -gt 20 ] && T=20
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def pf ds dspf --rounds 2 \
  --rep-ms 250 --out $RES/d128_n16384.json > $RES/d128_n16384.log 2>&1
echo "== summary"
cat $RES/d128_n4096.log $RES/d64_n4096.log $RES/d128_n16384.log 2>/dev/null | grep -v Warning | tail -40
echo "== done in $(( $(date +%s) - T0 ))s"
