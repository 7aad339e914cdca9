#!/bin/bash
# After call F (request_s26_ovh26_f.sh): its files into bench/results and the verdict over R2 and F, by the rule
# fixed before R2 (solo_verdict.py), then issue 23's status again.  Run from the tree's root: record_s26_f.sh F_OUT_DIR
set -e
F=$1; R=bench/results; N=profiler_overhead_s26_solo_encoder_f_h200
f=$F/$N.json; [ -f $f ] || f=$F/$N.partial.json
gzip -c $f > $R/$(basename $f).gz
cp $F/solo_encoder.log $R/$N.log
python3 bench/experiments/profiler_overhead/solo_verdict.py $R/profiler_overhead_s26_solo_encoder_r2_h200.json.gz \
  $R/$(basename $f).gz --out $R/profiler_overhead_s26_solo_verdict_h200.json | tee $R/profiler_overhead_s26_solo_verdict_h200.log
python3 bench/experiments/profiler_overhead/issue23_status.py --out $R/profiler_overhead_s26_issue23_status.json \
  | tee $R/profiler_overhead_s26_issue23_status.log
