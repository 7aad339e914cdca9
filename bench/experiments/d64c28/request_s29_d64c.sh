#!/bin/bash
# d64c28's request for session 29. Time limit: 100 s on one H200. Run from the tree's root (main with d64c28 merged),
# PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. Not run yet; tested on CPU as far as it goes
# (SMOKE=1: the interpreter at N 256, no cuDNN; bench/experiments/d64c28/results/smoke_cpu_request_s29.log).
# The question: should D=64 causal's long-sequence default (the separate pass in D=128's form, from N 16384 since
# d64c28) start at 8192 (or 12288)? In R2 and R3 every form of it lost the first round at 8192 and won the other five:
# the rounds confounded the place in the order with the entries (the entry right after cuDNN's in round 1 ran fastest).
# Here every entry takes every place as often (--rotate) after 2 s of untimed calls (--settle-ms), 8 rounds at 8192
# (cuDNN, def = the fused kernel there, sep = the new form, sep_k4 = it with dK/dV at 4 stages, R3's most even), then
# 8 at 12288 (cuDNN, def, sep). A flip to a lower threshold needs the new form ahead of def in every round, in two calls.
set -u
RES=${OUT:-/tmp/d64c28_s29}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 96))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader 2>/dev/null | tee $RES/gpu.txt
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64c28/bwd_ab.py
X=""; N2=8192; N3=12288; SET=2000
if [ "${SMOKE:-0}" = 1 ]; then X="--device cpu --batch 1 --heads 2"; N2=256; N3=256; SET=0; export KERNELC_INTERPRET=1; fi
echo "== 1: compiles"
timeout 40 python3 $S $X --warm --seq $N2 --entries def sep sep_k4 > $RES/warm.log 2>&1
tail -n 1 $RES/warm.log
echo "== 2: N 8192 causal, rotated, $(left)s left"
T=$(( $(left) - 30 )); [ $T -gt 40 ] && T=40
timeout $T python3 $S $X --seq $N2 --entries cudnn def sep sep_k4 --rounds 8 --rotate --settle-ms $SET --rep-ms 60 \
  --out $RES/n8192.json > $RES/n8192.log 2>&1
echo "== 3: N 12288 causal, rotated, $(left)s left"
T=$(( $(left) - 1 )); [ $T -gt 30 ] && T=30
[ $T -gt 10 ] && timeout $T python3 $S $X --seq $N3 --entries cudnn def sep --rounds 8 --rotate --settle-ms $SET \
  --rep-ms 60 --out $RES/n12288.json > $RES/n12288.log 2>&1
echo "== summary (cuDNN/this)"
cat $RES/n8192.log $RES/n12288.log 2>/dev/null | grep '^N=' | sed 's/cudnn\/this/c/; s/  err / e /'
echo "== done in $(( $(date +%s) - T0 ))s"
