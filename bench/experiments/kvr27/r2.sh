#!/bin/bash
# kvr27's R2 request (time limit: 110 s on one H200). Run from the tree's root (main + branch kvr27's diff), PYTHONPATH
# set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. Why the 64 x 128 8-warp D=64 dK/dV kernel with KV_REGS and
# no producer warpgroup computed wrong dK/dV (call A27), and the fix (KERNELC_WGMMA_A_REGS_PINNED, default stage):
# 1. the builds the launches run (assembler versions, a_regs / pinned waits, overwritten A fragments in the SASS),
#    with the fix and as before it (keep); the check kvregs_ws_check.py (12 rows) under stage / keep / unpin; the GPU
#    tests of the D=64 forms with the fix, and the new WS=0 KV_REGS tests as before the fix (they must fail);
# 2. a short interleaved A/B of the fused D=64 causal default (its K fragment): keep / stage / unpin / kv0, N 4096.
set -u
RES=${OUT:-/tmp/kvr27_out}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 105))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
pip list 2>/dev/null | grep -i -E "nvjitlink|cuda-bindings|^torch |^triton " | tr -s ' ' | tr '\n' ';'; echo
X=bench/experiments/kvr27
echo "== 1: builds, checks and GPU tests in parallel"
KERNELC_WGMMA_A_REGS_PINNED=keep timeout 50 python3 $X/launch_build.py --kv 1,2 --json $RES/build_keep.json \
  --dump $RES/dump_keep > $RES/build_keep.log 2>&1 &
timeout 50 python3 $X/launch_build.py --json $RES/build_stage.json > $RES/build_stage.log 2>&1 &
for m in stage keep unpin; do
  KERNELC_WGMMA_A_REGS_PINNED=$m timeout 55 python3 bench/experiments/d64b27/kvregs_ws_check.py --seq 1024 \
    --out $RES/kvregs_$m.json > $RES/kvregs_$m.log 2>&1 &
done
timeout 60 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py -k "d64" \
  > $RES/gpu_tests.log 2>&1 &
KERNELC_WGMMA_A_REGS_PINNED=keep timeout 60 python3 -m pytest -q -rA -p no:cacheprovider \
  tests/gpu/test_gpu_attention.py -k "kv_regs_without_a_producer" > $RES/gpu_tests_keep.log 2>&1 &
wait
echo "-- builds (kernel regs a_regs pinned overwritten-fragments)"
for f in $RES/build_keep.json $RES/build_stage.json; do
  python3 -c "
import json,sys; d=json.load(open('$f')); print('$f'.split('/')[-1], d['assembler'])
for r in d['rows']: print(' ', r['kernel'], r['regs'], r['spills'], r['a_regs'], r['pinned_waits'], len(r['overwritten_a_fragments']))
" 2>&1 | tail -n 14
done
for m in stage keep unpin; do echo "-- kvregs $m"; grep "rel err" $RES/kvregs_$m.log | sed 's/  rel err dq dk dv / /'; done
echo "-- GPU tests (fixed):"; grep -E "passed|failed" $RES/gpu_tests.log | tail -n 1
grep -E "^(FAILED|ERROR)" $RES/gpu_tests.log | head -n 5
echo "-- GPU tests, WS=0 KV_REGS as before the fix (keep):"; grep -E "passed|failed" $RES/gpu_tests_keep.log | tail -n 1
echo "== 2: fused D=64 causal A/B, N 4096, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 40 ] && T=40
[ $T -gt 15 ] && timeout $T python3 $X/fused_ab.py --seq 4096 --head-dim 64 --causal 1 \
  --entries cudnn keep stage unpin kv0 --rounds 2 --rep-ms 20 --out $RES/ab4096.json > $RES/ab4096.log 2>&1
grep -E "fused regs|^N=" $RES/ab4096.log | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=64//; s/ causal=1//'
echo "== done in $(( $(date +%s) - T0 ))s"
