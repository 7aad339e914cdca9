#!/bin/bash
# d64c28's GPU request (session 28, R2 and R3: the same script twice; time limit 110 s on one H200). Run from the
# tree's root (main + branch d64c28's diff), PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR, Triton
# 3.6 and .ext/tutorials/06-fused-attention.py there. D=64 causal's new default from N 16384 on (the separate pass in
# D=128's form, WS=2 and both tails: d64c27's `sepc2`): (1) its GPU tests beside the compiles (ours and tutorial 06's);
# (2) N 16384 causal: cuDNN, the default called directly (`def`) and through autograd (`ag`), the fused kernel (the
# default before), tutorial 06, 6 rounds interleaved; (3) N 8192: cuDNN, the default (fused there), `sep` (the new
# form), 6 rounds; (4) N 12288 the same if time is left; (5) N 16384 under
# torch.profiler: def's, ag's and cuDNN's kernels' GPU time a call beside their CUDA-event time (R3). Tested on CPU as far as it goes (SMOKE=1: the interpreter at
# N 256, no cuDNN / tutorial 06; the GPU tests skip). E8: the entries at N 8192 (R3: the new form's variants too,
# warmed beside the tests).
set -u
RES=${OUT:-/tmp/d64c28_out}; mkdir -p $RES
LIMIT=${LIMIT:-110}
T0=$(date +%s); END=$((T0 + LIMIT - 4))
left() { echo $(( END - $(date +%s) )); }
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-${TMPDIR:-/tmp}/d64c28_triton_cache}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64c28/bwd_ab.py
T06=.ext/tutorials/06-fused-attention.py
X=""; N1=16384; N2=8192; N3=12288; W=16384; WT=16384
if [ "${SMOKE:-0}" = 1 ]; then
  X="--device cpu --batch 1 --heads 2"; N1=256; N2=256; N3=256; W=256; WT=256; export KERNELC_INTERPRET=1
fi
# the new default's tests (N 16384 + 0, 2, 4 through the plan; 16384 and 16388 through autograd; its dK/dV form at N
# 1000 and 1024); the fused kernel below 16384 and the one-loop forms are unchanged (A28: 12 passed)
K="(long_length and True) or long_default_through_autograd or (d64_causal_one_loop and dkdv2)"
echo "== 1: GPU tests and compiles in parallel"
timeout 55 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py -k "$K" \
  > $RES/gpu_tests.log 2>&1 &
timeout 50 python3 $S $X --warm --seq $W --entries sep fused ag > $RES/warm_ours.log 2>&1 &
timeout 50 python3 $S $X --warm --seq $WT --entries t06 --tutorial06 $T06 > $RES/warm_t06.log 2>&1 &
E8=${E8:-cudnn def sep}
V8=$(echo " $E8 " | tr ' ' '\n' | grep '^sep_' | tr '\n' ' ')
[ -n "$V8" ] && timeout 50 python3 $S $X --warm --seq $N2 --entries $V8 > $RES/warm_var.log 2>&1 &
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
grep -E "^(FAILED|ERROR)|passed|failed|error" $RES/gpu_tests.log | tail -n 6
echo "== 2: N 16384 causal, $(left)s left"
T=$(( $(left) - 26 )); [ $T -gt 40 ] && T=40
timeout $T python3 $S $X --seq $N1 --entries cudnn def ag fused t06 --rounds 6 --rep-ms 100 --tutorial06 $T06 \
  --out $RES/n16384.json > $RES/n16384.log 2>&1
echo "== 3: N 8192 causal, $(left)s left"
T=$(( $(left) - 12 )); [ $T -gt 30 ] && T=30
[ $T -gt 8 ] && timeout $T python3 $S $X --seq $N2 --entries $E8 --rounds 6 --rep-ms 50 \
  --out $RES/n8192.json > $RES/n8192.log 2>&1
T=$(( $(left) - 14 )); [ $T -gt 18 ] && T=18
echo "== 4: N 12288 causal, ${T}s"
[ $T -gt 9 ] && timeout $T python3 $S $X --seq $N3 --entries cudnn def sep --rounds 4 --rep-ms 60 \
  --out $RES/n12288.json > $RES/n12288.log 2>&1
T=$(( $(left) - 1 )); [ $T -gt 14 ] && T=14
echo "== 5: N 16384 under torch.profiler (def, ag, cudnn), ${T}s"
[ $T -gt 8 ] && timeout $T python3 $S $X --seq $N1 --entries def ag cudnn --prof --rounds 4 \
  --out $RES/prof16384.json > $RES/prof16384.log 2>&1
echo "== summary (cuDNN/this, t06/this)"
cat $RES/n16384.log $RES/n8192.log $RES/n12288.log 2>/dev/null | grep '^N=' | \
  sed 's/cudnn\/this/c/; s/t06\/this/t/; s/  err / e /'
grep -E "^N=|^ " $RES/prof16384.log 2>/dev/null | head -n 12
echo "== done in $(( $(date +%s) - T0 ))s"
