#!/bin/bash
# d64s27's request for session 28. Time limit: 120 s on one H200. Run from the tree's root (main with d64s27 merged),
# PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. Tested on CPU as far as it goes (the interpreter
# at a small N: bwd_ab.py --device cpu). Not run yet.
# Whether D=64 non-causal's new form (the separate pass in D=128's form with both loops' async tails: the default from
# N 8192 on, DEFAULT_DQ_MODES_LONG) should start below 8192: in session 27's R2 it was faster than the fused kernel in 5
# of 6 rounds at N 4096 (-0.5% to -8.9%, +0.9% in the sixth). Here `sepwsq_t` (that form) against `fused` and cuDNN at
# N 2048 and 4096, 8 rounds each, interleaved; and `sepwsq_zat` (with KERNELC_WGMMA_ZERO_ACC=ws, 0.1-2.7% on top at
# 16384 in R2, a tie in R3) at 4096 and 16384 for a third reading.
set -u
RES=${OUT:-/tmp/d64s27_s28}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 115))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64s27/bwd_ab.py
echo "== 1: compiles in parallel"
for e in fused sepwsq_t sepwsq_zat; do
  timeout 40 python3 $S --warm --seq 1024 --entries $e > "$RES/warm_$e.log" 2>&1 &
done
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
for N in 2048 4096; do
  echo "== N $N, $(left)s left"
  T=$(( $(left) - 45 )); [ $T -gt 25 ] && T=25
  [ $T -gt 8 ] && timeout $T python3 $S --seq $N --entries cudnn fused sepwsq_t sepwsq_zat --rounds 8 --rep-ms 25 \
    --out $RES/n$N.json > $RES/n$N.log 2>&1
done
echo "== N 16384, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 40 ] && T=40
[ $T -gt 12 ] && timeout $T python3 $S --seq 16384 --entries cudnn def sepwsq_t sepwsq_zat --rounds 4 --rep-ms 100 \
  --out $RES/n16384.json > $RES/n16384.log 2>&1
echo "== summary"
cat $RES/n2048.log $RES/n4096.log $RES/n16384.log 2>/dev/null | grep '^N=' | sed 's/cuDNN\/this/r/; s/  err first/ e/'
echo "== done in $(( $(date +%s) - T0 ))s"
