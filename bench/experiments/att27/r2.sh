#!/bin/bash
# att27's GPU request (session 26, R2 and R3; time limit 100 s R2 / 90 s R3 on one H200). Run from the tree's root
# (main + branch cau27's diff), PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. D=128 causal's new
# default backward (ds, ONE_LOOP + WS=1 + ROWS_TMA: DS_ONE_LOOP): (1) its GPU tests and the ones of ONE_LOOP / ROWS_TMA
# against torch autograd, beside the compiles (ours and tutorial 06's); (2) N 4096 causal and (3) N 16384 causal:
# cuDNN, the default, the two-loop kernel (old), tutorial 06, interleaved rounds (bwd_ab.py); (4) N 2048 if time is left.
set -u
RES=${OUT:-/tmp/att27_out}; mkdir -p $RES
LIMIT=${LIMIT:-100}
T0=$(date +%s); END=$((T0 + LIMIT - 4))
left() { echo $(( END - $(date +%s) )); }
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-${TMPDIR:-/tmp}/att27_triton_cache}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/att27/bwd_ab.py
T06=.ext/tutorials/06-fused-attention.py
echo "== 1: GPU tests and compiles in parallel"
timeout 50 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py \
  -k "causal_default_backward or causal_in_one_loop or rows_ringed_by_tma or (backward_vs_sdpa_backward and None)" \
  > $RES/gpu_tests.log 2>&1 &
timeout 40 python3 $S --warm --seq 4096 --causal 1 --entries def old onews g4 t06 --tutorial06 $T06 > $RES/warm4k.log 2>&1 &
timeout 40 python3 $S --warm --seq 16384 --causal 1 --entries def old t06 --tutorial06 $T06 > $RES/warm16k.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log | grep -v Warn
grep -E "passed|failed|error" $RES/gpu_tests.log | tail -n 2
echo "== 2: N 4096 causal, $(left)s left"
T=$(( $(left) - 30 )); [ $T -gt 20 ] && T=20
timeout $T python3 $S --seq 4096 --causal 1 --entries cudnn def old t06 onews g4 --rounds 4 --rep-ms 30 \
  --tutorial06 $T06 --out $RES/n4096_c1.json > $RES/n4096_c1.log 2>&1
echo "== 3: N 16384 causal, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 30 ] && T=30
[ $T -gt 12 ] && timeout $T python3 $S --seq 16384 --causal 1 --entries cudnn def old t06 --rounds 3 --rep-ms 100 \
  --tutorial06 $T06 --out $RES/n16384_c1.json > $RES/n16384_c1.log 2>&1
T=$(( $(left) - 1 )); [ $T -gt 12 ] && T=12
echo "== 4: N 2048 causal, ${T}s"
[ $T -gt 8 ] && timeout $T python3 $S --seq 2048 --causal 1 --entries cudnn def old --rounds 3 --rep-ms 20 \
  --out $RES/n2048_c1.json > $RES/n2048_c1.log 2>&1
echo "== summary (cuDNN/this, t06/this)"
cat $RES/n4096_c1.log $RES/n16384_c1.log $RES/n2048_c1.log 2>/dev/null | grep '^N=' | \
  sed 's/ D=128 causal=1//; s/cudnn\/this/c/; s/t06\/this/t/; s/  err def/ e/; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
