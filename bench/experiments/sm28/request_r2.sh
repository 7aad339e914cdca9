#!/bin/bash
# As run: call R2 ran this version (branch sm28 at d600db9e, 2026-11-30 ~02:46 UTC); the pair edit it timed had a race
# (edits.py says which), fixed after the call.
# sm28 R2 (issue #21, softmax fwd 8192^2 fp16; hard limit 100 s). Hypotheses as PTX edits of kernelc's shipped
# build (bench/experiments/sm28/edits.py), interleaved with the shipped build, Triton and Triton's A/A
# (mem21/variants.py through sm28/cols.py), one process:
#   w0    the broadcast cross-warp combine only in warp 0 (exact)
#   redux the max butterflies as redux.sync.max.s32 on an order-preserving key (exact)
#   w0r   both;  mtree: the in-thread max chain as a tree (exact);  rcp: div.full by the row sum as rcp + mul
#   exact all four;  amax: the max's cross-warp step as a shared atomic max a warp (exact); amaxr: + redux, w0
#   ftz: ex2.approx.ftz (s22's knob again, now with intervals); exact2: amaxr + mtree + rcp
#   pair: NOT exact (a question): the max's cross-warp step removed, (max, sum) pairs exchanged
# log_softmax fwd (the same two broadcast reductions) gets the exact edits that apply to it.
set -u
T0=$(date +%s); END=$((T0 + 96))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/sm28_out}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
git rev-parse HEAD > $RES/commit.txt 2>/dev/null
COLS=(--col "w0=own+w0" --col "redux=own+redux" --col "w0r=own+w0+redux" --col "mtree=own+mtree"
  --col "softmax fwd/rcp=own+rcp" --col "softmax fwd/exact=own+w0+redux+mtree+rcp"
  --col "log_softmax fwd/exact=own+w0+redux+mtree" --col "amax=own+amax" --col "amaxr=own+amax+redux+w0"
  --col "softmax fwd/ftz=own+ftz" --col "softmax fwd/exact2=own+amax+redux+w0+mtree+rcp"
  --col "softmax fwd/pair=own+pair")
# outputs against the shipped build's, element for element (the exact edits must give its bits)
timeout 20 python3 bench/experiments/sm28/exact.py "softmax fwd" "log_softmax fwd" "${COLS[@]}" \
  --out $RES/exact.json > $RES/exact.log 2>&1
echo "exact rc=$?"; grep -c "n_differ_from_shipped.: 0," $RES/exact.log | sed 's/^/columns bit-identical to shipped: /'
S=$(( $(left) - 3 )); RS=$(( (S - 12) * 55 / 100 ))   # imports and compiles, then two rows (softmax fwd longer)
timeout $S python3 bench/experiments/sm28/cols.py "softmax fwd" "log_softmax fwd" --rounds 16 --row-seconds $RS \
  "${COLS[@]}" --out $RES/variants.json > $RES/variants.log 2>&1
echo "variants rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error" $RES/variants.log | head -3 | cut -c1-150
grep -E "errs" $RES/variants.log | cut -c1-120
grep -E "^[a-z_]+ fwd|^   (kernelc|triton)" $RES/variants.log | sed 's/triton\[control\]/A\/A/; s/  regs.*\/kernelc/  \/shipped/; s/  regs.*//' | cut -c1-110
echo "== done in $(( $(date +%s) - T0 ))s"
