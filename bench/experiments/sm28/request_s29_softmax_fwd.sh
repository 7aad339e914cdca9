#!/bin/bash
# sm28's follow-up for a later session (issue #21, softmax fwd 8192^2 fp16; hard limit 70 s). NOT run in session 28.
# s28 R2 (bench/results/s28_sm28_R2_h200/) timed PTX edits of the shipped build in one process: the exact ones
# rcp +0.13% [0.08, 0.17], w0 +0.06%, redux +0.08% on softmax fwd (no round above +0.3%), mtree and amax slower;
# its pair column had a race (the barrier after the pairs' stores was removed) and does not count. This asks:
#   rcp     div.full by the row sum as rcp.approx.ftz + mul (exact: the sum of exp(x - max x) is in [1, n])
#   ftz     ex2.approx.ftz (not provably exact: subnormal exps can move a partial sum's last bit)
#   rcpftz  both;  wrr: w0 + redux + rcp (the exact edits that were faster, without mtree)
#   pair    the max's cross-warp step removed, (max, sum) pairs exchanged (fixed; NOT exact: a question only)
# a second process for rcp, whether the small exact gains add up to the 0.3% a default change needs, and whether
# the max's cross-warp step costs the row time at all. Outputs checked against the shipped build's bits first.
set -u
T0=$(date +%s); END=$((T0 + 66))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/sm28_s29}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
SM=(rcp=own+rcp ftz=own+ftz rcpftz=own+rcp+ftz wrr=own+w0+redux+rcp pair=own+pair pairw0=own+pair+w0)
COLS=(); for c in "${SM[@]}"; do COLS+=(--col "softmax fwd/$c"); done
timeout 12 python3 bench/experiments/sm28/exact.py "softmax fwd" "${COLS[@]}" --out $RES/exact.json > $RES/exact.log 2>&1
echo "exact rc=$?"; grep -c "n_differ_from_shipped.: 0," $RES/exact.log | sed 's/^/columns bit-identical to shipped: /'
S=$(( $(left) - 2 ))
timeout $S python3 bench/experiments/sm28/cols.py "softmax fwd" --rounds 24 --row-seconds $(( S - 4 )) \
  "${COLS[@]}" --out $RES/variants.json > $RES/variants.log 2>&1
echo "variants rc=$? (limit ${S}s)"
grep -E "Error|error" $RES/variants.log | head -3 | cut -c1-150
python3 bench/experiments/sm28/summarize.py $RES/variants.json --json $RES/summary.json | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
