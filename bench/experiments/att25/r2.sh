#!/bin/bash
# att25 R2 (main + this branch, PYTHONPATH set, $OUT the results folder): the D=128 backward's default (ds with its
# LSE/delta rows ringed by TMA non-causal, DS_ROWS_TMA) against cuDNN and against the default before att25 (norows:
# ROWS_TMA off) at N 4096 both masks and N 16384 non-causal; the two variants by CUPTI at N 4096. <= 106 s.
set -u
RES=${OUT:-/tmp/att25_f}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 100))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
S=bench/experiments/att25/bwd_ab.py
echo "== 1: compile"
timeout 25 python3 $S --warm --seq 2048 --head-dim 128 --causal 0 --entries def norows > $RES/warm0.log 2>&1 &
timeout 25 python3 $S --warm --seq 2048 --head-dim 128 --causal 1 --entries def > $RES/warm1.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
echo "== 2: N 4096 both masks, $(left)s left"
T=$(( $(left) - 44 )); [ $T -gt 26 ] && T=26
timeout $T python3 $S --head-dim 128 --causal 0 1 --entries cudnn def norows --rounds 3 --rep-ms 40 \
  --out $RES/n4096.json > $RES/n4096.log 2>&1
echo "== 3: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 14 )); [ $T -gt 26 ] && T=26
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 --entries cudnn def norows --rounds 2 \
  --rep-ms 150 --out $RES/n16384_c0.json > $RES/n16384_c0.log 2>&1
echo "== 4: kernel by kernel (CUPTI) at N 4096 non-causal, $(left)s left"
T=$(left); [ $T -gt 14 ] && T=14
[ $T -gt 7 ] && timeout $T python3 bench/experiments/att25/kernels.py --seq 4096 --causal 0 --rounds 2 --calls 3 \
  --out $RES/kernels4096.json > $RES/kernels4096.log 2>&1
echo "== summary"
cat $RES/n4096.log $RES/n16384_c0.log 2>/dev/null | grep '^N=' | \
  sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=128//; s/ cudnn [0-9.e+-]*$//'
grep -h '^N=' $RES/kernels4096.log 2>/dev/null | cut -c1-160
echo "== done in $(( $(date +%s) - T0 ))s"
