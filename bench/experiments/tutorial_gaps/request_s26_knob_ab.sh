#!/bin/bash
# Session 26 request (written s25 by helper ab26, issue #20). Time limit: 150 s on one H200 (LIMIT below; ask for
# 150). Two one-process A/Bs with reuse_sync_ab.py (each value's own copy of the tutorial, compiled under it; rounds
# A/B/B/A of GPU-only time; verdict rule fixed in the script's doc):
# 1. KERNELC_REUSE_SYNC all/needed on the kernels `needed` changes that R1 (s25) did not time: 03's matmul_kernel
#    fp16 at 4096^3 and 512^3 and fp8 at 1024^3, 08's grouped_matmul_kernel (4 x 1024^2), 06's backward (D 64 and
#    128, causal, N 1024), 09's matmul_kernel and matmul_kernel_persistent (8192x8192x512); each held to one config.
#    In the background meanwhile: tests/gpu/test_gpu_store_conversion.py under `needed` (correctness, as R1); the
#    A/B waits for it (untimed) before its rounds.
# 2. KERNELC_TMA_ELECT tid/elect on 09's flattened matmul_kernel_descriptor_persistent (main's auto: tid) at two
#    configs.
# Each process: ~4.5 s import + ~10-20 s compiles + rounds; budgets leave room above that. CPU check of every case's
# PTX difference: `reuse_sync_ab.py --cpu-ptx` (docs/triton-tutorials.md, "next session's request").
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-145}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
G=bench/experiments/tutorial_gaps
D=$OUT/knob_ab_s26_h200; mkdir -p $D
export KERNELC_AUTOTUNE_DISK_CACHE=0
# the cases, literal (tests/compat/test_reuse_sync_ab.py reads these two lines)
REUSE_CASES="m03:4096:fp16:BLOCK_SIZE_M=128/BLOCK_SIZE_N=256/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/w=8/s=3 m03:512:fp16:BLOCK_SIZE_M=64/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/w=4/s=4 m03:1024:fp8:BLOCK_SIZE_M=128/BLOCK_SIZE_N=256/BLOCK_SIZE_K=128/GROUP_SIZE_M=8/w=8/s=3 g08:1024:triton:BLOCK_SIZE_M=128/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64 b06:64:1:1024:128x64x3x4 b06:128:1:1024:128x64x3x4 p09:naive:8192:8192:512:BLOCK_SIZE_M=128/BLOCK_SIZE_N=256/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/w=8/s=3 p09:persistent:8192:8192:512:BLOCK_SIZE_M=128/BLOCK_SIZE_N=256/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/w=8/s=3"
ELECT_CASES="p09:descriptor:8192:8192:512:BLOCK_SIZE_M=128/BLOCK_SIZE_N=256/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/EPILOGUE_SUBTILE=False/w=8/s=3 p09:descriptor:8192:8192:512:BLOCK_SIZE_M=128/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/EPILOGUE_SUBTILE=False/w=4/s=4"
el() { echo $(( $(date +%s) - T0 )); }
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 4"
KERNELC_REUSE_SYNC=needed timeout 40 python3 -m pytest -q -p no:cacheprovider $XD tests/gpu/test_gpu_store_conversion.py \
  > $D/correctness_needed.log 2>&1 &
PYT=$!
# 1: rounds until 55 s before the limit (leaves ~50 s for 2.)
timeout $(( LIMIT - 50 - $(el) )) python3 $G/reuse_sync_ab.py --knob REUSE_SYNC --values all needed --tutorials $TUT \
  --cases $REUSE_CASES --calls 30 --budget-s 60 --until $(( T0 + LIMIT - 55 )) --wait-pid $PYT \
  --out $D/reuse_sync_ab.json > $D/reuse_sync_ab.log 2>&1
echo "REUSE_SYNC A/B rc=$? at $(el) s" | tee -a $D/call_log.txt
wait $PYT; echo "correctness (needed) rc=$? : $(tail -1 $D/correctness_needed.log)" | tee -a $D/call_log.txt
# 2: what is left, rounds until 6 s before the limit
left=$(( LIMIT - $(el) ))
if [ $left -ge 25 ]; then
  timeout $(( left - 2 )) python3 $G/reuse_sync_ab.py --knob TMA_ELECT --values tid elect --tutorials $TUT \
    --cases $ELECT_CASES --calls 30 --budget-s 60 --until $(( T0 + LIMIT - 6 )) --out $D/tma_elect_ab.json \
    > $D/tma_elect_ab.log 2>&1
  echo "TMA_ELECT A/B rc=$? at $(el) s" | tee -a $D/call_log.txt
else
  echo "TMA_ELECT A/B skipped: $left s left" | tee -a $D/call_log.txt
fi
grep -E "^differ|^compiles|us, |^overall|^KERNELC" $D/reuse_sync_ab.log | cut -c1-170
grep -E "^differ|^compiles|us, |^overall|^KERNELC" $D/tma_elect_ab.log 2>/dev/null | cut -c1-170
echo "== done in $(el) s"
