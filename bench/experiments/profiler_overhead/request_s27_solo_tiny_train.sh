#!/bin/bash
# Issue 23, next session's request (prepared in s26 by ovh26; CPU-tested as far as it goes): the solo design of s26 on
# the tiny loop and `train`, the consistency checks R2 had no room for. Time limit: <= 200 s on one H200 (tiny 60 s
# of budget in a 75-s timeout, train 100 s in 118 s, the verdicts ~2 s). Every file under $OUT back.
#
# Design and rule: s26's (docs/performance.md, "kprof against Proton, each in its own processes"; the header of
# request_s26_ovh26_f.sh), per workload: four processes, Proton, kprof, kprof, Proton (tiny) and kprof, Proton,
# Proton, kprof (train); P/base and none/none2 pairs in each; kprof/Proton = median(kprof/base) / median(proton/base)
# with the Bonferroni interval of the two 97.5% sign-test intervals; the control met if none/none2 pooled is inside
# [0.99, 1.01] at 95% and every process's per-direction gaps match within 25%; "not above Proton: shown" if the
# control is met, the upper bound <= 1.00 and every cross pairing < 1.00; "above" mirrored; void if a process or a
# sampled profile is missing. One call per workload here: reported as one call's verdict (the rule asks two).
# Fixed now, before any run.
export PYTHONUNBUFFERED=1
date -u +%FT%TZ | tee $OUT/date.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader > $OUT/gpu.txt 2>&1
run() {   # workload, profilers (order), budget, timeout, settle ms
  local N=profiler_overhead_s27_solo_$1_h200
  timeout $4 python3 -m bench reconcile_profilers overhead --spawn fork --profilers $2 --rounds 2 --workloads $1 \
    --budget $3 --fine 3 --fine-settle $5 --fine-order solo --settle-pairs 2 --pre 1 --grace 2 \
    --name $N --results-dir $OUT > $OUT/solo_$1.log 2>&1
  echo "solo $1 rc $? at $(date -u +%T)"
  grep '"error"' $OUT/solo_$1.log | cut -c1-300
  local f=$OUT/$N.json; [ -f $f ] || f=$OUT/$N.partial.json
  python3 bench/experiments/profiler_overhead/solo_verdict.py $f --out $OUT/solo_verdict_$1.json > $OUT/verdict_$1.txt 2>&1
  tail -6 $OUT/verdict_$1.txt
}
run tiny proton,kprof 60 75 3
run train kprof,proton 100 118 1
