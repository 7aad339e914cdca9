#!/bin/bash
# kvr27's R3 request (time limit: 120 s on one H200). Run from the tree's root (main + branch kvr27's diff), PYTHONPATH
# set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. The timed A/B of the one default whose code the fix changes,
# the fused D=64 causal backward (FUSED_KV_REGS: K's register A fragment in loops with a pinned wgmma wait):
# KERNELC_WGMMA_A_REGS_PINNED keep (main's build) / stage (kvr27's default) / unpin, and kv0 (no KV_REGS), cuDNN beside,
# interleaved in one process, N 4096 (6 rounds) and 16384 (5 rounds); a second kvregs_ws_check and the D=64 GPU tests
# alongside the compiles.
set -u
RES=${OUT:-/tmp/kvr27_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 115))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
X=bench/experiments/kvr27
E="cudnn keep stage unpin kv0"
echo "== 1: compiles (one process an entry), the check and the GPU tests in parallel"
for e in ${E#cudnn }; do
  timeout 45 python3 $X/fused_ab.py --warm --seq 1024 --head-dim 64 --causal 1 --entries $e > $RES/warm_$e.log 2>&1 &
done
timeout 45 python3 bench/experiments/d64b27/kvregs_ws_check.py --seq 1024 --out $RES/kvregs.json > $RES/kvregs.log 2>&1 &
timeout 50 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py \
  -k "d64_kv_regs_without_a_producer or d64_default_backward" > $RES/gpu_tests.log 2>&1 &
wait
grep -h "fused regs" $RES/warm_*.log | sort -u
grep "rel err" $RES/kvregs.log | sed 's/  rel err dq dk dv / /'
grep -E "passed|failed" $RES/gpu_tests.log | tail -n 1; grep -E "^(FAILED|ERROR)" $RES/gpu_tests.log | head -n 4
echo "== 2: N 4096 causal, $(left)s left"
T=$(( $(left) - 40 )); [ $T -gt 30 ] && T=30
timeout $T python3 $X/fused_ab.py --seq 4096 --head-dim 64 --causal 1 --entries $E --rounds 6 --rep-ms 30 \
  --out $RES/ab4096.json > $RES/ab4096.log 2>&1
echo "== 3: N 16384 causal, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 45 ] && T=45
[ $T -gt 10 ] && timeout $T python3 $X/fused_ab.py --seq 16384 --head-dim 64 --causal 1 --entries $E --rounds 5 \
  --rep-ms 100 --out $RES/ab16384.json > $RES/ab16384.log 2>&1
echo "== summary"
cat $RES/ab4096.log $RES/ab16384.log 2>/dev/null | grep '^N=' | \
  sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=64//; s/ causal=1//'
echo "== done in $(( $(date +%s) - T0 ))s"
