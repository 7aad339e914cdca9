#!/bin/bash
# Issue 23, session 25, helper ovh25, call R2 (<= 60 s on one H200).  R1 (20:21 UTC, 5 variants on the tiny loop, ~60-100
# cycles each): CUPTI's own calls with cupti.finalize() after each stop grew +16.1%/100 cycles [2 se 2.9] (bare-fin),
# kprof + finalize +18.9 [9.7], kprof + Proton +20.3 [18.5]; without finalize bare -2.4 [5.5], kprof -0.5 [7.0].
# R2, one fresh process per variant, a full garbage collection only every 100 cycles (R1's per-cycle one took ~0.1 s
# of each ~0.12-s cycle).  kprof-onefin: kprof cycles (a user profiling each epoch), with a single cupti.finalize()
# after cycle 250 (R1: in the processes that finalized, the unprofiled launch cost ~8.2-9.3 us against ~6.7 in those
# that did not, and kprof's excess ~2-2.5 us against ~0.8): kprof's growth without finalize over ~250 cycles, and
# whether one finalize raises the cost for the rest of the process.  Which of CUPTI's calls grows with finalize:
# bare-fin-noapi (no launch API records touched) and kprof-fin-noprobe (kprof's lazy start not turning them on and
# off to probe, its stop not turning off what is off).
# Rules, fixed before the run: a series "grows" if its growth per 100 cycles minus 2 standard errors is > 0.5%, "flat"
# if plus 2 se is < 0.5%, otherwise not decided (R1's); one finalize "raises" kprof's cost if the median ratio
# profiled/unprofiled after it exceeds the one before by more than 0.05 (the unprofiled step's medians reported
# beside it).  The API records' toggling is the part that grows if bare-fin-noapi is flat (R1: bare-fin grew); kprof
# can then avoid it on a loop without scopes if kprof-fin-noprobe is flat.
# CYCLE_FAKE=1 (CPU dry run): tests/profiler/fake_cupti.py for cupti; no figure from it means anything.
export PYTHONUNBUFFERED=1
S=bench/experiments/profiler_overhead/cycle_drift.py
FAKE=${CYCLE_FAKE:+--fake}
T0=$(date +%s)
date -u +%FT%TZ | tee $OUT/date.txt
go() {   # variant workload cycles deadline_s timeout_s warmup
  local left=$(( 57 - ($(date +%s) - T0) ))
  if [ $left -lt $5 ]; then echo "$1 $2 skipped (${left} s left)"; return; fi
  timeout $5 python3 $S $FAKE --variant $1 --workload $2 --cycles $3 --deadline-s $4 --warmup $6 --gc-every 100 --onefin-at 250 \
    --outdir $OUT > $OUT/cycle_$1_$2.log 2>&1
  echo "$1 $2 rc $? at $(date -u +%T)"
}
go kprof-onefin tiny 2000 8 17 300
go bare-fin-noapi tiny 2000 5 13 300
go kprof-fin-noprobe tiny 2000 5 13 300
python3 $S --summary $OUT/cycle_*.json 2>&1 | tee $OUT/summary.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    try: d=json.loads(l)
    except Exception: print(l.rstrip()); continue
    print(d['variant'], d['workload'], d['cycles'], 'growth/100', d['growth_per_100_cycles_%'], '+-', d['growth_2se_%'],
          'none/100', d['none_growth_per_100_cycles_%'], '+-', d['none_growth_2se_%'], 'ratio', d['ratio_first'], '->',
          d['ratio_last'], 'excess us', d['excess_us_first'], '->', d['excess_us_last'], 'start/stop ms',
          d['start_ms_first'], d['stop_ms_first'], '->', d['start_ms_last'], d['stop_ms_last'], 'threads', d['threads'],
          'rss', d['rss_mb'], 'onefin', d['onefin'])"
echo "total $(( $(date +%s) - T0 )) s"
