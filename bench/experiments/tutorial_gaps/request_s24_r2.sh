#!/bin/bash
# Session 24, call R2 (helper t06s24, limit 30 s): sm_90 fp8 dots on mma.sync now issue fp16 m16n8k16 MMAs on
# converted fragments (passes/fp8_dot.py fp8_mma="f16"); ptxas emulated fp8 mma.sync with zero-C HMMAs and FADDs.
# 1. correctness: tests/gpu/test_gpu_fp8.py's mma.sync matmul cases (BM 32 w4, BM 64 w2; e4m3, e5m2, mixed; both B
#    layouts) against torch's fp32 matmul; 2. GPU time of tutorial 03's two 2-warp fp8 configs at 256^3 (kernelc
#    only; R1 read kernelc 7.30 / 6.31 us, Triton 6.45 / 6.24 us at 32x64x32 / 64x32x32 w2 s5).
set -u
T0=$(date +%s)
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
D=$OUT/fp8_mma_f16_s24_R2_h200; mkdir -p $D
C1="BLOCK_SIZE_M=32/BLOCK_SIZE_N=64/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=2/s=5"
C2="BLOCK_SIZE_M=64/BLOCK_SIZE_N=32/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=2/s=5"
timeout 11 python3 bench/experiments/tutorial_gaps/host_gpu_split.py --impl kernelc --tutorials $TUT \
  --cases m03:256:fp8:$C1 m03:256:fp8:$C2 --repeats 3 --budget-s 8 --sweep-s 0 --no-gc-off --out $D/p1.kernelc.json \
  > $D/p1.kernelc.log 2>&1
echo "timing rc=$? at $(( $(date +%s) - T0 )) s"
left=$(( 29 - $(date +%s) + T0 ))
timeout $left python3 -m pytest -q -p no:cacheprovider -n 4 tests/gpu/test_gpu_fp8.py -k "100x72x96 or 64x64x128" \
  > $D/pytest_fp8_mma.log 2>&1
echo "pytest rc=$? at $(( $(date +%s) - T0 )) s: $(grep -E "passed|failed|error" $D/pytest_fp8_mma.log | tail -1 | cut -c1-120)"

python3 - $D/p1.kernelc.json <<'PY'
import json, statistics, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no timing json: {e}")
for c in sorted({r["case"] for r in d["rows"]}):
    rs = [r for r in d["rows"] if r["case"] == c and "busy_ms" in r]
    err = [r["error"][:80] for r in d["rows"] if r["case"] == c and "error" in r]
    if rs:
        print(c.split(":")[3][:40], "busy us", [round(r["busy_ms"] * 1e3, 2) for r in rs], "median",
              round(statistics.median(r["busy_ms"] for r in rs) * 1e3, 2))
    if err:
        print(c, "errors", err)
PY
echo "== done in $(( $(date +%s) - T0 )) s"
