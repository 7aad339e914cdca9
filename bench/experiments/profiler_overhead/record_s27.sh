#!/bin/bash
# After session 27's two encoder calls (request_s27_solo_encoder.sh, ORDER_TAG a and b): their files into
# bench/results, the verdict over the two new calls by the rule fixed in s26 (solo_verdict.py), issue 23's status.
# Run from the tree's root: record_s27.sh A_OUT_DIR B_OUT_DIR
set -e
R=bench/results; files=()
for d in "$1:a" "$2:b"; do
  dir=${d%:*}; t=${d##*:}; N=profiler_overhead_s27_solo_encoder_${t}_h200
  f=$dir/$N.json; [ -f $f ] || f=$dir/$N.partial.json
  gzip -c $f > $R/$(basename $f).gz; cp $dir/solo_encoder.log $R/$N.log; files+=($R/$(basename $f).gz)
done
python3 bench/experiments/profiler_overhead/solo_verdict.py "${files[@]}" \
  --out $R/profiler_overhead_s27_solo_verdict_h200.json | tee $R/profiler_overhead_s27_solo_verdict_h200.log
python3 bench/experiments/profiler_overhead/issue23_status.py --out $R/profiler_overhead_s27_issue23_status.json \
  | tee $R/profiler_overhead_s27_issue23_status.log
