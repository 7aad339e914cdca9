#!/bin/bash
# Session 25 request R1 (helper t06s25, issue #20, <= 80 s): does KERNELC_REUSE_SYNC=needed make tutorial 03's fp8
# matmul faster? Replaces request_s25_fp8_epilogue.sh, whose six processes each had a 1-8 s budget under a ~4.5 s
# import (no `needed` numbers) and whose correctness run was cut by its 14-s timeout after 3 tests.
# 1. correctness under `needed` (tests/gpu/test_gpu_store_conversion.py: 14 GEMMs whose epilogue conversion takes a
#    finished ring's bytes; every one of their kernels compiles differently under `needed`, checked on CPU), in the
#    background while 2. compiles;
# 2. reuse_sync_ab.py: ONE kernelc process, tutorial 03 loaded once per variant (each its own kernel cache), held to
#    kernelc's and Triton's S24 picks at 256^3 fp8; it waits for 1. to finish, then rounds all/needed/needed/all of
#    GPU-only time (busy pattern) until ~20 s before the limit; verdict rule fixed in the script's doc;
# 3. if >= 14 s are left: one Triton process at the same two configs (host_gpu_split.py, context only: across
#    processes).
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-75}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
G=bench/experiments/tutorial_gaps
D=$OUT/reuse_sync_s25_r1_h200; mkdir -p $D
export KERNELC_AUTOTUNE_DISK_CACHE=0
P03K="BLOCK_SIZE_M=128/BLOCK_SIZE_N=32/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=4/s=4"   # kernelc's S24 pick
P03T="BLOCK_SIZE_M=64/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/w=4/s=4"   # Triton's S24 pick
CASES="m03:256:fp8:$P03K m03:256:fp8:$P03T"
el() { echo $(( $(date +%s) - T0 )); }
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 4"
KERNELC_REUSE_SYNC=needed timeout 40 python3 -m pytest -q -p no:cacheprovider $XD tests/gpu/test_gpu_store_conversion.py \
  > $D/correctness_needed.log 2>&1 &
PYT=$!
timeout $(( LIMIT - 4 - $(el) )) python3 $G/reuse_sync_ab.py --tutorials $TUT --cases $CASES --calls 60 \
  --budget-s 60 --until $(( T0 + LIMIT - 20 )) --wait-pid $PYT --out $D/ab.json > $D/ab.log 2>&1
echo "A/B rc=$? at $(el) s" | tee -a $D/call_log.txt
wait $PYT; echo "correctness (needed) rc=$? : $(tail -1 $D/correctness_needed.log)" | tee -a $D/call_log.txt
left=$(( LIMIT - $(el) ))
if [ $left -ge 14 ]; then
  timeout $(( left - 2 )) python3 $G/host_gpu_split.py --impl triton --tutorials $TUT --cases $CASES --repeats 3 \
    --calls 60 --budget-s $(( left - 8 )) --no-gc-off --tag t1 --out $D/triton.json > $D/triton.log 2>&1
  echo "Triton process rc=$? at $(el) s" | tee -a $D/call_log.txt
else
  echo "Triton process skipped: $left s left" | tee -a $D/call_log.txt
fi
tail -8 $D/ab.log
python3 - $D/triton.json <<'PY' 2>/dev/null
import json, statistics, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if "busy_ms" in r]
for c in sorted({r["case"] for r in rows}):
    b = [r["busy_ms"] * 1e3 for r in rows if r["case"] == c]
    print(f"Triton {c.split(':')[3][:40]}: busy (mean of calls) median {statistics.median(b):.3f} us over {len(b)}")
PY
echo "== done in $(el) s"
