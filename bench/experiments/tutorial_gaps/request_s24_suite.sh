#!/bin/bash
# Next session's first call (written s23): issue 20's one-run table, all nine tutorials under Triton and kernelc side by side in one call
# (bench/triton_tutorials.py --suite: 01-05, 07, 08 from empty caches, 06 and 09 from dry-run-warmed caches, 06 at
# N_CTX 2048, 03 and 08 at 2 points, one run per runtime, 06's first call from empty caches last if time is left),
# then status_table.py --run. Run alone as `call.sh S24 suite24:590` with the run tool's timeout 600 (09 alone took 209 s in s23 R1b; the suite with 09 ~520 s).
set -u
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
sha256sum $TUT/0[1-9]-*.py | cut -c1-16 | tr '\n' ' '; echo
R=$OUT/triton_tutorials_suite_s24.json
python3 bench/triton_tutorials.py --suite --deadline 560 --tutorials $TUT --out $R > $OUT/suite.log 2>&1
echo "suite rc=$? ($(( $(date +%s) - T0 )) s)"
python3 bench/experiments/tutorial_gaps/status_table.py --run $R --earlier bench/results/triton_tutorials_status_s23.json \
  --json $OUT/triton_tutorials_status_s24.json --md $OUT/triton_tutorials_status_s24.md > $OUT/status.log 2>&1
echo "status rc=$?"
grep -E "skipped|no run from|wrote|warm (kernelc|triton)" $OUT/suite.log | cut -c1-150
grep -E "^\| 0" $OUT/triton_tutorials_status_s24.md | cut -c1-230
tail -1 $OUT/status.log
echo "== done in $(( $(date +%s) - T0 ))s"
