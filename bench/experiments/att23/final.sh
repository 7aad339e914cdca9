#!/bin/bash
# att23 final (merged main; env set, $OUT the results folder): the D=128 backward cells of issue 27 with the new default
# (ds under 4x dQ's bytes) against cuDNN, N 4096 (and the separate pass, the old default) and 16384, both masks, B=4,
# H=32, fp16, attention_bwd called directly (bench/experiments/att23/bwd_ab.py). Decides the four D=128 cells'
# readings on the merged tree. <= 60 s.
set -u
RES=${OUT:-/tmp/att23_final}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 57))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/att23/bwd_ab.py
echo "== 1: compile in parallel"
timeout 16 python3 $S --warm --seq 2048 --head-dim 128 --causal 0 --entries def sep > $RES/warm0.log 2>&1 &
timeout 16 python3 $S --warm --seq 2048 --head-dim 128 --causal 1 --entries def sep > $RES/warm1.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 31 )); [ $T -gt 10 ] && T=10
timeout $T python3 $S --head-dim 128 --causal 0 --entries cudnn def sep --rounds 3 --rep-ms 40 \
  --out $RES/n4096_c0.json > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 22 )); [ $T -gt 9 ] && T=9
timeout $T python3 $S --head-dim 128 --causal 1 --entries cudnn def sep --rounds 3 --rep-ms 40 \
  --out $RES/n4096_c1.json > $RES/n4096_c1.log 2>&1
echo "== 4: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 10 )); [ $T -gt 12 ] && T=12
[ $T -gt 6 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: N 16384 causal, $(left)s left"
T=$(( $(left) )); [ $T -gt 10 ] && T=10
[ $T -gt 6 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries cudnn def --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
