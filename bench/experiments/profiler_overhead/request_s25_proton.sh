#!/bin/bash
# Issue 23, next session's request (designed in s25 by prx25, CPU only): kprof against Proton in the swap design,
# with its own control, one process per workload. <= 330 s on one H200; nothing beside it. Every file under $OUT back.
#
# Design (docs/performance.md, "kprof against Proton pair by pair", 2026-11-29): `reconcile_profilers overhead
# --profilers kprof --against proton --fine 3 --fine-order swap`: blocks of 8 adjacent pairs (kprof/Proton and
# none/none2, each order in half of them), every profiler segment bracketed by its own start and stop (untimed;
# Proton's finalize unsubscribes and finalizes CUPTI, so kprof's CUPTI attaches again at its next start), one or more
# untimed settle steps after each start, a synchronize closing every segment, the switches into none/none2 padded
# (spinning) to the median in-pair kprof<->Proton switch so the control's two segments are as far apart as kprof's and
# Proton's. Sized from the stored runs (proton_pairs_size.py, results/proton_pairs_size_s25_cpu.log): at a 12-ms
# switch, 234 (tiny), 596 (encoder) and 17 (train) control pairs for a +-0.7% interval, 17.5 / 84 / 3.5 s of pairs.
#
# Rules, fixed now, before any run (this run alone decides; s19's block figures stay beside it, not pooled):
# - each workload's figure is the median over ALL pairs (the first 2 blocks left out) with its sign-test 95% interval;
#   the block median is reported, not deciding;
# - the control none/none2 is met if its interval lies inside [0.99, 1.01] AND its median in-pair gap is within 25% of
#   kprof/Proton's (swap_gap_ms; otherwise its pairs were not spaced as the compared ones and it validates nothing);
# - "not above Proton" is shown if the control is met and kprof/Proton's upper bound is <= 1.00; "above Proton" is
#   shown if its lower bound is > 1.00; otherwise not decided;
# - void for a workload if any sampled profile of kprof or Proton is missing or empty (out_bytes), or the run did
#   not end by itself (then its rounds file is reported, not judged).
# Reported beside the verdict, not deciding: each state's settle step over its timed step; the run's two halves
# (kprof/Proton, control, switch time: does anything grow over ~1000 starts and finalizes in one process?).
export PYTHONUNBUFFERED=1
date -u +%FT%TZ | tee $OUT/date.txt
run() {   # workload, budget, timeout, settle ms
  local wl=$1
  timeout $3 python3 -m bench reconcile_profilers overhead --spawn fork --profilers kprof --against proton \
    --workloads $wl --budget $2 --fine 3 --fine-settle $4 --fine-order swap --settle-pairs 2 --pre 1 --grace 2 \
    --name profiler_overhead_s25_swap_${wl}_h200 --results-dir $OUT > $OUT/swap_$wl.log 2>&1
  echo "$wl swap rc $? at $(date -u +%T)"
}
run tiny 45 62 3
run encoder 150 170 1
run train 60 78 1
python3 bench/experiments/profiler_overhead/swap_verdict.py "$OUT" 2>&1 | tail -16
