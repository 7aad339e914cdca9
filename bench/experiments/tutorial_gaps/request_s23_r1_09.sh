#!/bin/bash
# t06s23 R1: tutorial 09 alone through the suite runner (bench/triton_tutorials.py --suite --only 09: both compile
# caches warmed by dry runs, 8 processes an implementation at once, then one measured run per runtime, its checks,
# its profile table and first calls), then status_table.py --run on it, so issue 20's table gets 09's row. <= 200 s.
set -u
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
sha256sum $TUT/09-*.py | cut -c1-16
R=$OUT/triton_tutorials_09_s23_r1.json
python3 bench/triton_tutorials.py --suite --only 09 --deadline 188 --warm-jobs 8 --tutorials $TUT --out $R \
  > $OUT/suite09.log 2>&1
echo "suite rc=$? ($(( $(date +%s) - T0 )) s)"
python3 bench/experiments/tutorial_gaps/status_table.py --run $R --earlier bench/results/triton_tutorials_status_s22.json \
  --json $OUT/status_09_s23_r1.json --md $OUT/status_09_s23_r1.md > $OUT/status.log 2>&1
echo "status rc=$?"
grep -E "warm (kernelc|triton)|skipped|rc=|passed|first call|kernelc/Triton|\] *[0-9]" $OUT/suite09.log | cut -c1-170 | tail -22
echo "== done in $(( $(date +%s) - T0 ))s"
