#!/bin/bash
# d64s27's R3 request (session 27). Time limit: 150 s on one H200. Run from the tree's root (main + branch d64s27's
# diff), PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR.
# (1) the GPU tests of the changed code (the D=64 default, also from its long length on; the separate pass with the
# async tails under the producer warpgroups) beside the compiles; (2) the A/B at N 16384 (4 rounds): cuDNN, `def` (the
# default through its launch plan: from N 8192 on the separate pass in D=128's form with its async tails), `fused` (the
# default before), sepwsq (R2's baseline, no tails), sepwsq_zat (with KERNELC_WGMMA_ZERO_ACC=ws); (3) N 8192, 4 rounds:
# cuDNN, def, fused; (4) N 4096, 6 rounds: cuDNN, def (fused there), sepwsq_t (the new form at 4096).
set -u
RES=${OUT:-/tmp/d64s27_r3}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 145))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64s27/bwd_ab.py
E16="cudnn def fused sepwsq sepwsq_zat"
E8="cudnn def fused"
E4="cudnn def sepwsq_t"
# the GPU tests the change reaches: D=64 non-causal's separate pass (now D=128's form with its tails), its default
# from N 8192 on, the async tails under the producer warpgroups (causal D=64 and D=128 are unchanged)
K="d64_separate or long_length or ((vs_sdpa_backward or candidate or bit_for_bit or register_a or trip_ahead"
K="$K or d64_default_backward) and False and not 128)"
echo "== 1: GPU tests and compiles in parallel"
timeout 75 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py -k "$K" \
  > $RES/gpu_tests.log 2>&1 &
for e in def fused sepwsq sepwsq_t sepwsq_zat; do
  timeout 50 python3 $S --warm --seq 1024 --entries $e > "$RES/warm_$e.log" 2>&1 &
done
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
grep -E "^(FAILED|ERROR)|passed|failed" $RES/gpu_tests.log | tail -n 8
echo "== 2: A/B N 16384, $(left)s left"
T=$(( $(left) - 42 )); [ $T -gt 45 ] && T=45
timeout $T python3 $S --seq 16384 --entries $E16 --rounds 4 --rep-ms 100 --out $RES/n16384.json > $RES/n16384.log 2>&1
echo "== 3: A/B N 8192, $(left)s left"
T=$(( $(left) - 22 )); [ $T -gt 25 ] && T=25
[ $T -gt 8 ] && timeout $T python3 $S --seq 8192 --entries $E8 --rounds 4 --rep-ms 60 --out $RES/n8192.json \
  > $RES/n8192.log 2>&1
echo "== 4: A/B N 4096, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 22 ] && T=22
[ $T -gt 8 ] && timeout $T python3 $S --seq 4096 --entries $E4 --rounds 6 --rep-ms 30 --out $RES/n4096.json \
  > $RES/n4096.log 2>&1
echo "== summary"
cat $RES/n16384.log $RES/n8192.log $RES/n4096.log 2>/dev/null | grep '^N=' | sed 's/cuDNN\/this/r/; s/  err first/ e/'
echo "== done in $(( $(date +%s) - T0 ))s"
