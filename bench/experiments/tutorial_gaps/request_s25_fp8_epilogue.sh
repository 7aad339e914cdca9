#!/bin/bash
# Session 25 request (helper fp825, issue #20, <= 60 s): tutorial 03's fp8 matmul at 256^3 held to kernelc's and
# Triton's S24 picks (128x32x32 w4 s4, 64x128x64 w4 s4), GPU time (busy_ms) under kernelc with
# KERNELC_REUSE_SYNC=all (default: the epilogue's second cp.async.wait_all and its fence.proxy.async ->
# MEMBAR.ALL.CTA) and =needed (both left out and the first wait a cp.async.wait_group 0, passes/smem_offsets.py),
# and under Triton. Processes interleaved
# K_all T K_needed K_needed T K_all after a parallel compile-only warm-up (beside it: GPU tests under needed); host_gpu_summary.py per variant against
# the same two Triton processes, and needed/all per case over every pairing of their processes.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-56}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
S=bench/experiments/tutorial_gaps/host_gpu_split.py
D=$OUT/fp8_epilogue_s25_h200; mkdir -p $D/all $D/needed $D/raw
export KERNELC_AUTOTUNE_DISK_CACHE=0
P03K="BLOCK_SIZE_M=128/BLOCK_SIZE_N=32/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=4/s=4"   # kernelc's S24 pick
P03T="BLOCK_SIZE_M=64/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/w=4/s=4"   # Triton's S24 pick
CASES="m03:256:fp8:$P03K m03:256:fp8:$P03T"
el() { echo $(( $(date +%s) - T0 )); }
run() {  # impl variant tag budget: one process
  local impl=$1 v=$2 tag=$3 b=$4
  KERNELC_REUSE_SYNC=$v timeout $(( b + 15 )) python3 $S --impl $impl --tutorials $TUT --cases $CASES --repeats 3 \
    --budget-s $b --no-gc-off --tag $tag --out $D/raw/$tag.$impl.$v.json > $D/raw/$tag.$impl.$v.log 2>&1
  echo "$tag $impl $v rc=$? budget $b s, at $(el) s" | tee -a $D/call_log.txt
}
# correctness of the opt-in on the GPU, beside the compile-only warm-up (nothing is timed while it runs): the
# epilogue conversions in a finished ring's bytes (plain and persistent GEMMs; at most 14 s). A missing fence would
# be a race: a pass here does not prove the fence unneeded (the PTX ISA's rule does), a failure would disprove it.
KERNELC_REUSE_SYNC=needed timeout 14 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gpu_store_conversion.py \
  > $D/correctness_needed.log 2>&1 &
# compile-only warm-up (the cache key holds KERNELC_REUSE_SYNC: both variants compile)
for iv in kernelc:all kernelc:needed triton:all; do
  KERNELC_REUSE_SYNC=${iv#*:} timeout 25 python3 $S --impl ${iv%%:*} --tutorials $TUT --cases $CASES --warm-only \
    --out $D/raw/warm.${iv%%:*}.${iv#*:}.json > $D/raw/warm.${iv%%:*}.${iv#*:}.log 2>&1 &
done
wait
echo "warm + correctness done at $(el) s; correctness (needed): $(tail -1 $D/correctness_needed.log)" | tee -a $D/call_log.txt
n=0
for iv in kernelc:all triton:all kernelc:needed kernelc:needed triton:all kernelc:all; do
  n=$((n + 1))
  left=$(( LIMIT - 4 - $(el) ))
  budget=$(( left / (7 - n) - 5 ))   # ~5 s a process for its import and exit
  [ $budget -lt 1 ] && budget=1      # at least the visits started in its first second
  [ $left -lt 7 ] && { echo "p$n $iv skipped: $left s left" | tee -a $D/call_log.txt; continue; }
  run ${iv%%:*} ${iv#*:} p$n $budget
done
for v in all needed; do
  cp $D/raw/p*.kernelc.$v.json $D/$v/ 2>/dev/null; cp $D/raw/p*.triton.all.json $D/$v/ 2>/dev/null
  python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $D/$v --json $D/$v/summary.json > $D/$v/summary.txt 2>&1
  echo "== kernelc $v vs Triton:"; grep -E "busy range" $D/$v/summary.txt | sed -E 's/T\/k ms range[^;]*; //' | cut -c1-160
done
python3 - $D <<'PY'
import glob, itertools, json, os, statistics, sys
d = sys.argv[1]
med = {}  # (case, variant) -> [per-process median busy_ms]
for p in sorted(glob.glob(os.path.join(d, "raw", "p*.kernelc.*.json"))):
    v = p.rsplit(".", 2)[-2]
    rows = json.load(open(p)).get("rows", [])
    for case in sorted({r["case"] for r in rows if "error" not in r}):
        med.setdefault((case, v), []).append(statistics.median(r["busy_ms"] for r in rows
                                                               if r.get("case") == case and "error" not in r))
out = {}
for case in sorted({c for c, _ in med}):
    a, n = med.get((case, "all"), []), med.get((case, "needed"), [])
    if a and n:
        pairs = [x / y for x, y in itertools.product(a, n)]   # all/needed: above 1 means needed is faster
        out[case] = {"all_us": [x * 1e3 for x in a], "needed_us": [x * 1e3 for x in n],
                     "all_over_needed_median": statistics.median(a) / statistics.median(n),
                     "pairings": [min(pairs), max(pairs)]}
        label = case.split(":")[3].replace("BLOCK_SIZE_", "").replace("/GROUP_SIZE_M=8", "")
        print(f"{label:28s} busy all/needed {out[case]['all_over_needed_median']:.4f} "
              f"pairings [{min(pairs):.4f}, {max(pairs):.4f}] all {statistics.median(a)*1e3:.2f} us "
              f"needed {statistics.median(n)*1e3:.2f} us")
json.dump(out, open(os.path.join(d, "all_vs_needed.json"), "w"), indent=1)
PY
grep -h "Error\|error" $D/raw/*.log | head -3
echo "== done in $(el) s"
