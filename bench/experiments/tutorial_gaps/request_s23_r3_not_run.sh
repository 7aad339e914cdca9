#!/bin/bash
# NOT RUN: session 23 had no R3 (device time); kept as the record of what it would have run.
# t06s23 R3: the tutorials whose rows in the last status run (S22) were not all >= 0.95 -- 02 (0.945 at 256) and 06
# (d64 causal forward, fp16 0.932 and fp8 0.759) -- again through the suite runner on this branch's final code:
# 02 from empty caches, 06 from dry-run-warmed caches at N_CTX 2048 with its first call from empty caches last,
# two rounds (best of the two per point, as --repeats keeps; the runner logs the collector's runs inside each
# do_bench), then status_table.py --run. <= 300 s.
set -u
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
sha256sum $TUT/0[26]-*.py | cut -c1-16 | tr '\n' ' '; echo
R=$OUT/triton_tutorials_02_06_s23_r3.json
python3 bench/triton_tutorials.py --suite --only 02,06 --repeats 2 --max-seconds 240 --deadline 280 --warm-jobs 8 \
  --tutorials $TUT --out $R > $OUT/suite.log 2>&1
echo "suite rc=$? ($(( $(date +%s) - T0 )) s)"
python3 bench/experiments/tutorial_gaps/status_table.py --run S22=bench/results/triton_tutorials_suite_s22_h200.json.gz \
  --run R3=$R --earlier bench/results/triton_tutorials_status_s22.json \
  --json $OUT/status_s23_r3.json --md $OUT/status_s23_r3.md > $OUT/status.log 2>&1
echo "status rc=$?"
grep -E "warm (kernelc|triton)|skipped|round|another round|no run from" $OUT/suite.log | cut -c1-150
grep -E "fused-attention|softmax-performance" $OUT/suite.log | grep -E "d64-fwd|softmax" | cut -c1-160 | head -8
grep -E "^\| 0[26]" $OUT/status_s23_r3.md | cut -c1-300
echo "== done in $(( $(date +%s) - T0 ))s"
