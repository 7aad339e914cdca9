#!/bin/bash
# Issue 23, session 25, helper ovh25, call R1 (<= 150 s on one H200): does a profiler's per-launch cost grow with its
# start/stop cycles in one process (C2: kprof/Proton 0.98 -> 1.05 between the encoder run's halves, kprof's excess
# over the control growing with its ~600 cycles, Proton's flat), and is it kprof's code or CUPTI's?
# cycle_drift.py, one fresh process per variant (its docstring): kprof alone (a user profiling per epoch; with this
# branch's bound on what a stop leaves referenced, and with every start's kept as before: kprof-keepall), kprof then
# Proton (the swap design's sequence), CUPTI's calls alone with and without cupti.finalize (and with it but without
# the launch API records kprof toggles at each start: bare-fin-noapi), kprof + finalize; the
# tiny loop (kprof arms no API records there), then the encoder (scopes: API records on) with kprof and with
# CUPTI's calls alone (its none segments' drift over the run was +14% in C2, every state's: CUPTI's or the host's?).
# Rule, fixed before the run: a variant "grows" if its growth per 100 cycles minus 2 standard errors is > 0.5%,
# "flat" if plus 2 se is < 0.5%, otherwise not decided.  kprof's code is implicated if kprof grows and bare-fin/bare
# (the same CUPTI calls) are flat; CUPTI's if bare-fin or bare grows about as much; the bound is the fix if
# kprof-keepall grows and kprof is flat.
# CYCLE_FAKE=1 (CPU dry run): tests/profiler/fake_cupti.py for cupti; no figure from it means anything.
export PYTHONUNBUFFERED=1
S=bench/experiments/profiler_overhead/cycle_drift.py
FAKE=${CYCLE_FAKE:+--fake}
T0=$(date +%s)
date -u +%FT%TZ | tee $OUT/date.txt
(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print(torch.__version__)") > $OUT/env.txt 2>&1
go() {   # variant workload cycles deadline_s timeout_s warmup
  local left=$(( 146 - ($(date +%s) - T0) ))
  if [ $left -lt $5 ]; then echo "$1 $2 skipped (${left} s left)"; return; fi
  timeout $5 python3 $S $FAKE --variant $1 --workload $2 --cycles $3 --deadline-s $4 --warmup $6 --outdir $OUT \
    > $OUT/cycle_$1_$2.log 2>&1
  echo "$1 $2 rc $? at $(date -u +%T)"
}
go kprof tiny 1000 5 15 300
go kprof-keepall tiny 1000 5 15 300
go kprof-proton tiny 1000 5 17 300
go bare-fin tiny 1000 5 14 300
go bare tiny 1000 5 14 300
go bare-fin-noapi tiny 1000 5 14 300
go kprof-fin tiny 1000 5 15 300
go kprof encoder 1000 9 25 20
go bare-fin encoder 1000 9 23 20
python3 $S --summary $OUT/cycle_*.json 2>&1 | tee $OUT/summary.jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    try: d=json.loads(l)
    except Exception: print(l.rstrip()); continue
    print(d['variant'], d['workload'], d['cycles'], 'growth/100', d['growth_per_100_cycles_%'], '+-', d['growth_2se_%'],
          'none/100', d['none_growth_per_100_cycles_%'], '+-', d['none_growth_2se_%'], 'ratio', d['ratio_first'], '->', d['ratio_last'], 'excess us', d['excess_us_first'], '->', d['excess_us_last'],
          'start/stop ms', d['start_ms_first'], d['stop_ms_first'], '->', d['start_ms_last'], d['stop_ms_last'],
          'threads', d['threads'], 'rss', d['rss_mb'], 'keep', d['keepalive'], 'outst', d['outstanding'])"
echo "total $(( $(date +%s) - T0 )) s"
