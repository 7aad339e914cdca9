#!/bin/bash
# att23 final (merged main; env set, $OUT the results folder): the D=128 backward cells of issue 27 with the new default
# (ds under 4x dQ's bytes) against cuDNN, N 4096 and 16384, both masks, B=4, H=32, fp16, attention_bwd called directly
# (bench/experiments/att23/bwd_ab.py): decides the four D=128 cells' readings on the merged tree. Then, in the time
# left, ds's dQ GEMM alone at N 16384 (B=1, H=16) at three configs (gemm_ab.py; it was measured at 4096 only). <= 60 s.
set -u
RES=${OUT:-/tmp/att23_final}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 57))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/att23/bwd_ab.py
G=bench/experiments/att23/gemm_ab.py
echo "== 1: compile in parallel"
timeout 16 python3 $S --warm --seq 2048 --head-dim 128 --causal 0 --entries def > $RES/warm0.log 2>&1 &
timeout 16 python3 $S --warm --seq 2048 --head-dim 128 --causal 1 --entries def > $RES/warm1.log 2>&1 &
timeout 16 python3 $G --warm --seq 1024 --causal 0 --variants base s4 n128s3 > $RES/warmg.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 33 )); [ $T -gt 9 ] && T=9
timeout $T python3 $S --head-dim 128 --causal 0 --entries cudnn def --rounds 3 --rep-ms 40 \
  --out $RES/n4096_c0.json > $RES/n4096_c0.log 2>&1
echo "== 3: N 4096 causal, $(left)s left"
T=$(( $(left) - 25 )); [ $T -gt 8 ] && T=8
timeout $T python3 $S --head-dim 128 --causal 1 --entries cudnn def --rounds 3 --rep-ms 40 \
  --out $RES/n4096_c1.json > $RES/n4096_c1.log 2>&1
echo "== 4: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 14 )); [ $T -gt 11 ] && T=11
[ $T -gt 6 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 5: N 16384 causal, $(left)s left"
T=$(( $(left) - 5 )); [ $T -gt 10 ] && T=10
[ $T -gt 6 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 1 --entries cudnn def --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
echo "== 6: the dQ GEMM alone at N 16384, $(left)s left"
T=$(( $(left) )); [ $T -gt 7 ] && timeout $T python3 $G --seq 16384 --batch 1 --heads 16 --causal 0 \
  --variants base s4 n128s3 --rounds 2 --rep-ms 60 --out $RES/gemm16384.json > $RES/gemm16384.log 2>&1
echo "== summary"
cat $RES/n4096_c0.log $RES/n4096_c1.log $RES/n16384_c0.log $RES/n16384_c1.log $RES/gemm16384.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
