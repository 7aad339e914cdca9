#!/bin/bash
# Part B of issue 20's table with repeats (written s24; see request_s25_suite_a.sh): 06 (N_CTX 2048) and 09, from
# dry-run-warmed caches as --suite does, two runs per runtime alternating which goes first. S24's seconds a repeat
# (both runtimes): 06 56, 09 121, plus ~99 s of dry runs -> ~455 s. Then the status table from parts A and B and S24
# (each tutorial's row from the latest run that measured it). Run as `call.sh S25B suite25b:590`; part A's results
# must be in .ext/gpu/req/s25a/ (copied there from its archive before this call) for the combined table.
set -u
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
python3 bench/triton_tutorials.py --suite --only 06,09 --order 06,09 --repeats 2 --deadline 560 \
  --tutorials $TUT --out $OUT/triton_tutorials_suite_s25b.json > $OUT/suite_b.log 2>&1
echo "b rc=$? ($(( $(date +%s) - T0 )) s)"
RUNS="--run S24=bench/results/triton_tutorials_suite_s24_h200.json.gz"
for f in .ext/gpu/req/s25a/triton_tutorials_suite_s25a1.json .ext/gpu/req/s25a/triton_tutorials_suite_s25a2.json; do
  [ -f $f ] && RUNS="$RUNS --run S25A=$f"
done
python3 bench/experiments/tutorial_gaps/status_table.py $RUNS --run S25B=$OUT/triton_tutorials_suite_s25b.json \
  --earlier bench/results/triton_tutorials_status_s24.json \
  --json $OUT/triton_tutorials_status_s25.json --md $OUT/triton_tutorials_status_s25.md > $OUT/status.log 2>&1
echo "status rc=$?"
grep -E "^\| 0" $OUT/triton_tutorials_status_s25.md | cut -c1-230
echo "== done in $(( $(date +%s) - T0 ))s"
