#!/bin/bash
# (Ran as session 26's R2 at commit e973024; its entry sepwskv has since been removed from bwd_ab.py: wrong dK.)
# d64b27's R2 request (time limit: 100 s on one H200). Run from the tree's root (main + branch d64b27's diff),
# PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. The D=64 non-causal backward: cuDNN, the fused
# default and the separate pass with its dK/dV kernel in D=128's form (bwd_ab.py's entries), interleaved rounds, every
# entry's gradients checked against the default's and cuDNN's; N 4096 (4 rounds) then N 16384 (3 rounds); then the GPU
# tests of the WS form in what time is left. <= 95 s.
set -u
RES=${OUT:-/tmp/d64b27_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 95))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64b27/bwd_ab.py
E4="cudnn def sep sepws sepwsnr sepwskv sepwsq sepwsq64"
E16="cudnn def sepws sepwskv sepwsq sepwsq64"
echo "== 1: compiles, one process an entry (N 1024: the same kernels as 4096 and 16384)"
for e in ${E4#cudnn }; do
  timeout 40 python3 $S --warm --seq 1024 --head-dim 64 --causal 0 --entries $e > $RES/warm_$e.log 2>&1 &
done
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
grep -h "dkdv regs" $RES/warm_*.log | sort -u
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 45 )); [ $T -gt 30 ] && T=30
timeout $T python3 $S --head-dim 64 --causal 0 --entries $E4 --rounds 4 --rep-ms 30 \
  --out $RES/n4096.json > $RES/n4096.log 2>&1
echo "== 3: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 12 )); [ $T -gt 40 ] && T=40
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 64 --causal 0 --entries $E16 --rounds 3 \
  --rep-ms 100 --out $RES/n16384.json > $RES/n16384.log 2>&1
echo "== 4: GPU tests of the D=64 WS form (what time is left), $(left)s left"
T=$(( $(left) - 1 ))
[ $T -gt 5 ] && timeout $T python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py \
  -k "d64_separate_dkdv_in_the_d128_form" > $RES/gpu_tests.log 2>&1
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $RES/gpu_tests.log | tail -n 12
echo "== summary"
cat $RES/n4096.log $RES/n16384.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=64//; s/ causal=0//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
