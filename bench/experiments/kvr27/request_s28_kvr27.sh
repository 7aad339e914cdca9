#!/bin/bash
# kvr27's request for session 28 (time limit: 110 s on one H200). Run from the tree's root (main with kvr27 merged),
# PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. The default KERNELC_WGMMA_A_REGS_PINNED=auto on
# the GPU (session 27's R2/R3 ran stage / unpin / keep; auto's builds equal stage's for the four WS=0 KV_REGS kernels and
# keep's for the fused D=64 causal default on CPU with nvJitLink 13.0.88, not yet on a GPU):
# 1. the launches' own builds: the WS=0 KV_REGS kernels compiled again (compiled_again, a_regs 0, nothing overwritten);
#    kvregs_ws_check.py (12 rows ~0); the D=64 GPU tests;
# 2. the fused D=64 causal default: auto against keep (main's build before kvr27) and cuDNN, N 4096 (6 rounds) and
#    16384 (4 rounds), interleaved (auto should time as keep: the same code).
set -u
RES=${OUT:-/tmp/kvr27_s28}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 105))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
X=bench/experiments/kvr27
echo "== 1: builds, check, GPU tests"
timeout 50 python3 $X/launch_build.py --json $RES/build_auto.json > $RES/build_auto.log 2>&1 &
timeout 50 python3 bench/experiments/d64b27/kvregs_ws_check.py --seq 1024 --out $RES/kvregs.json > $RES/kvregs.log 2>&1 &
timeout 55 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py -k "d64" \
  > $RES/gpu_tests.log 2>&1 &
for e in keep auto; do
  timeout 45 python3 $X/fused_ab.py --warm --seq 1024 --head-dim 64 --causal 1 --entries $e > $RES/warm_$e.log 2>&1 &
done
wait
python3 -c "
import json; d=json.load(open('$RES/build_auto.json')); print(d['assembler'])
for r in d['rows']: print(' ', r['kernel'], r['regs'], r['a_regs'], len(r['overwritten_a_fragments']), r['compiled_again'])
" 2>&1 | tail -n 13
grep "rel err" $RES/kvregs.log | sed 's/  rel err dq dk dv / /'
grep -E "passed|failed" $RES/gpu_tests.log | tail -n 1; grep -h "fused regs" $RES/warm_*.log | sort -u
echo "== 2: fused A/B, $(left)s left"
T=$(( $(left) - 35 )); [ $T -gt 25 ] && T=25
timeout $T python3 $X/fused_ab.py --seq 4096 --head-dim 64 --causal 1 --entries cudnn keep auto --rounds 6 \
  --rep-ms 30 --out $RES/ab4096.json > $RES/ab4096.log 2>&1
T=$(( $(left) - 2 )); [ $T -gt 10 ] && timeout $T python3 $X/fused_ab.py --seq 16384 --head-dim 64 --causal 1 \
  --entries cudnn keep auto --rounds 4 --rep-ms 100 --out $RES/ab16384.json > $RES/ab16384.log 2>&1
cat $RES/ab4096.log $RES/ab16384.log 2>/dev/null | grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=64//'
echo "== done in $(( $(date +%s) - T0 ))s"
