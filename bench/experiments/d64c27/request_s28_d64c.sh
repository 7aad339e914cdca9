#!/bin/bash
# d64c27's request for session 28. Time limit: 110 s on one H200. Run from the tree's root (main with d64c27 merged),
# PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. Tested on CPU as far as it goes (the interpreter
# at N 256: bwd_ab.py --device cpu, the GPU tests skip there). Not run yet.
# Whether D=64 causal at N 16384 (and 8192) should run the separate pass in D=128's form with causal's one loop
# (CAUSAL_LONG_CANDIDATES, opt-in): `sepc` ("d64c": dK/dV one loop + producer + rows by TMA, no dK/dV tail; dQ 128x128
# s3 with its tail), `sepc2` ("d64c2": dK/dV two loops, the producer for the unmasked one (WS=2), its tail), `sepc_tk`
# (sepc + the dK/dV tail, serialised by ptxas on CPU's sm_90a), `sepc_nt` (sepc without tails) against `fused` (the
# default) and cuDNN, interleaved, 4 rounds at 16384; then the candidates' GPU tests; then 8192 (cudnn fused sepc
# sepc2). A flip needs a candidate ahead of fused in every round at 16384 (and at 8192 for that length).
set -u
RES=${OUT:-/tmp/d64c27_s28}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 105))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64c27/bwd_ab.py
# SMOKE=1: the script's steps on CPU (the interpreter, N 256 for every length, one batch of 2 heads, no cuDNN)
X=""; N1=16384; N2=8192
if [ "${SMOKE:-0}" = 1 ]; then X="--device cpu --batch 1 --heads 2"; N1=256; N2=256; export KERNELC_INTERPRET=1; fi
echo "== 1: compiles in parallel"
for e in fused sepc sepc2 sepc_tk sepc_nt; do
  timeout 40 python3 $S $X --warm --seq 1024 --entries $e > "$RES/warm_$e.log" 2>&1 &
done
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
echo "== 2: N 16384 causal, $(left)s left"
T=$(( $(left) - 40 )); [ $T -gt 35 ] && T=35
[ $T -gt 12 ] && timeout $T python3 $S $X --seq $N1 --entries cudnn fused sepc sepc2 sepc_tk sepc_nt --rounds 4 \
  --rep-ms 100 --out $RES/n$N1.json > $RES/n16384.log 2>&1
echo "== 3: GPU tests, $(left)s left"
T=$(( $(left) - 14 )); [ $T -gt 30 ] && T=30
[ $T -gt 8 ] && timeout $T python3 -m pytest -q -x tests/gpu/test_gpu_attention.py -k "d64_causal" -p no:cacheprovider \
  > $RES/gpu_tests.log 2>&1
tail -n 3 $RES/gpu_tests.log
echo "== 4: N 8192 causal, $(left)s left"
T=$(( $(left) - 1 )); [ $T -gt 20 ] && T=20
[ $T -gt 6 ] && timeout $T python3 $S $X --seq $N2 --entries cudnn fused sepc sepc2 --rounds 4 --rep-ms 50 \
  --out $RES/n$N2.json > $RES/n8192.log 2>&1
echo "== summary"
cat $RES/n16384.log $RES/n8192.log 2>/dev/null | grep '^N=' | sed 's/cuDNN\/this/r/; s/  err first/ e/'
echo "== done in $(( $(date +%s) - T0 ))s"
