#!/bin/bash
# Issue 23, session 27 request (written by the lead, session 26; <= 280 s on one H200): the solo design's encoder call
# again, with twice the budget (more pairs per process: F's control, 0.9978 [0.9867, 1.0120], missed the rule's
# [0.99, 1.01] at 88-136 pairs a process). Same rules as below (unchanged, fixed before R2); R2 + F read "not
# decided" over the two calls, so this call and the one after it form a new pair under the same rules: the criterion
# is shown if both show the same verdict. Run it twice (order kprof,proton then proton,kprof), filing each with
# solo_verdict.py over the two new calls' files only.
#
# --- F's header, for the design and the rules ---
# Issue 23, session 26, helper ovh26, second call F (<= 150 s on one H200; the lead runs it on merged main after the merge, in place of R3): kprof against Proton on the encoder, each
# profiler in its own processes, in its own state. Every file under $OUT back.
#
# Design (docs/performance.md, "kprof against Proton, each in its own processes", 2026-11-29, s26):
# `reconcile_profilers overhead --fine-order solo --profilers proton,kprof --rounds 2`: four processes from one fork
# server, kprof, Proton, Proton, kprof (this call F: proton,kprof -> Proton, kprof, kprof, Proton), each with an equal share of
# the budget. In each process one profiler P only: blocks of 8 adjacent pairs, P/base and none/none2 (base, none,
# none2 unprofiled), each order in half of them; every P segment bracketed by P's own start and stop (kprof:
# profiler.start/finalize, CUPTI initialised once and never finalized, as a user's process; Proton:
# proton.start/finalize, which finalizes its own CUPTI, as C2's Proton segments); one untimed settle step after
# each switch, a synchronize closing every segment; the block's control pairs take the switch into P (P's start)
# and into base (P's stop) in turn, each padded to the median in-pair switch into that state. A process's P/base is its profiler's overhead in its own state; nothing is finalized for the
# other profiler.
#
# Rules, fixed now, before any run (bench/experiments/profiler_overhead/solo_verdict.py applies them):
# - pairs: every process's blocks after its first 2; kprof's pooled over the call's kprof processes, Proton's over
#   its Proton processes; kprof/Proton = median(kprof/base pairs) / median(proton/base pairs), its interval
#   [lo_K/hi_P, hi_K/lo_P] from the two medians' 97.5% sign-test intervals (>= 95% together);
# - control met: none/none2 pooled over the call's processes has its 95% sign-test interval inside [0.99, 1.01],
#   AND in every process, for P and for base, the control pairs' median in-pair gap padded for that state is within
#   25% of the median in-pair switch into it inside P/base pairs;
# - "not above Proton: shown" if the control is met, the upper bound <= 1.00 and every cross pairing (one kprof
#   process's median over one Proton process's) < 1.00; "above Proton: shown" if the lower bound > 1.00 and every
#   cross pairing > 1.00; else not decided;
# - void if a process is missing or failed, or a sampled kprof or Proton profile is missing or empty;
# - over calls: the criterion is shown if R2 and the second call (R3; there was none, so F) show the same verdict.
# Reported, not deciding: the Hodges-Lehmann shift kprof vs Proton pairs, each process's P/base and control, the
# unprofiled step of kprof's processes against Proton's (host speed differs between processes), settle/timed.
# R2 (2026-11-29 22:34 UTC) ran this design at commit 2d660833: the control pairs padded to the pooled median in-pair
# switch and the gap matched pooled. This call runs a6a41277's (committed 22:32, before R2's result was seen): the
# control pairs take P's start and P's stop in turn, the gap matched per direction (solo_verdict.py falls back to the
# pooled match for R2's file, which has no per-direction record).
export PYTHONUNBUFFERED=1
date -u +%FT%TZ | tee $OUT/date.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader > $OUT/gpu.txt 2>&1
N=profiler_overhead_s27_solo_encoder_${ORDER_TAG:-a}_h200
timeout 265 python3 -m bench reconcile_profilers overhead --spawn fork --profilers ${PROFILERS:-kprof,proton} --rounds 2 \
  --workloads encoder --budget 240 --fine 3 --fine-settle 1 --fine-order solo --settle-pairs 2 --pre 1 --grace 2 \
  --name $N --results-dir $OUT > $OUT/solo_encoder.log 2>&1
echo "solo encoder rc $? at $(date -u +%T)"
grep '"error"' $OUT/solo_encoder.log | cut -c1-300
f=$OUT/$N.json; [ -f $f ] || f=$OUT/$N.partial.json
python3 bench/experiments/profiler_overhead/solo_verdict.py $f --out $OUT/solo_verdict_f.json > $OUT/verdict_f.txt 2>&1
tail -11 $OUT/verdict_f.txt
# the pair of new calls is judged together after the second: solo_verdict.py FIRST.json SECOND.json --out ...
