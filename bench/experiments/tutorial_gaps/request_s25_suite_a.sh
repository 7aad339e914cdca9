#!/bin/bash
# Next session's first call (written s24): issue 20's table with repeats, part A of two. S24 (one run per runtime,
# all nine in 514 s) left four points below 0.95 that R1's interleaved re-measurements put at or above Triton
# (host-bound readings). Here each tutorial runs several times per runtime, alternating which goes first, and each
# point's figure is the median with its pairing range (bench/triton_tutorials.py --repeats > 1). Part A: 03, 05, 08
# (the S24 low points) x3, then 01, 02, 04, 07 x2, from empty caches, --suite's points. S24's seconds a repeat (both
# runtimes): 03 54, 05 31, 08 44 -> ~390 s; 01 16, 02 17, 04 13, 07 11 -> ~115 s. Run as `call.sh S25A suite25a:590`.
set -u
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null; cat .ext/gpu/req/HEAD.txt 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
sha256sum $TUT/0[1-9]-*.py | cut -c1-16 | tr '\n' ' '; echo
python3 bench/triton_tutorials.py --suite --only 03,05,08 --order 03,05,08 --repeats 3 --deadline 420 \
  --tutorials $TUT --out $OUT/triton_tutorials_suite_s25a1.json > $OUT/suite_a1.log 2>&1
echo "a1 rc=$? ($(( $(date +%s) - T0 )) s)"
left=$(( 575 - ($(date +%s) - T0) ))
python3 bench/triton_tutorials.py --suite --only 01,02,04,07 --order 01,02,04,07 --repeats 2 --deadline $left \
  --tutorials $TUT --out $OUT/triton_tutorials_suite_s25a2.json > $OUT/suite_a2.log 2>&1
echo "a2 rc=$? ($(( $(date +%s) - T0 )) s)"
grep -hE "skipped|kernelc/Triton geomean" $OUT/suite_a*.log | cut -c1-160 | head -30
echo "== done in $(( $(date +%s) - T0 ))s"
