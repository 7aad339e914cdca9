#!/bin/bash
# sm28 R2 (issue #21, softmax fwd 8192^2 fp16; hard limit 100 s). Hypotheses as PTX edits of kernelc's shipped
# build (bench/experiments/sm28/edits.py), interleaved with the shipped build, Triton and Triton's A/A
# (mem21/variants.py through sm28/cols.py), one process:
#   w0    the broadcast cross-warp combine only in warp 0 (exact)
#   redux the max butterflies as redux.sync.max.s32 on an order-preserving key (exact)
#   mtree: the in-thread max chain as a tree (exact);  rcp: div.full by the row sum as rcp + mul
#   exact all four;  amax: the max's cross-warp step as a shared atomic max a warp (exact); amaxr: + redux, w0
#   ftz: ex2.approx.ftz (s22's knob again, now with intervals); exact2: amaxr + mtree + rcp
#   pair: NOT exact (a question): the max's cross-warp step removed, (max, sum) pairs exchanged
#   kredux, kw0, kw0r: the compiler's own builds under this branch's knobs KERNELC_REDUCE_REDUX / _W0 (off by default)
# log_softmax fwd (the same two broadcast reductions) gets the exact edits that apply to it.
set -u
T0=$(date +%s); END=$((T0 + 96))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/sm28_out}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
git rev-parse HEAD > $RES/commit.txt 2>/dev/null
# softmax fwd: every column; log_softmax fwd: the exact edits that apply and the knob builds; cross_entropy (its max
# in the vocabulary loop takes redux too): the knob builds only
SM=(w0=own+w0 redux=own+redux mtree=own+mtree rcp=own+rcp exact=own+w0+redux+mtree+rcp amax=own+amax
  amaxr=own+amax+redux+w0 ftz=own+ftz exact2=own+amax+redux+w0+mtree+rcp pair=own+pair
  kredux=own@KERNELC_REDUCE_REDUX=1 kw0=own@KERNELC_REDUCE_W0=1 kw0r=own@KERNELC_REDUCE_REDUX=1,KERNELC_REDUCE_W0=1)
LS=(w0=own+w0 redux=own+redux mtree=own+mtree exact=own+w0+redux+mtree amax=own+amax amaxr=own+amax+redux+w0
  kredux=own@KERNELC_REDUCE_REDUX=1 kw0r=own@KERNELC_REDUCE_REDUX=1,KERNELC_REDUCE_W0=1)
CE=(kredux=own@KERNELC_REDUCE_REDUX=1 kw0r=own@KERNELC_REDUCE_REDUX=1,KERNELC_REDUCE_W0=1)
COLS=(); for c in "${SM[@]}"; do COLS+=(--col "softmax fwd/$c"); done
for c in "${LS[@]}"; do COLS+=(--col "log_softmax fwd/$c"); done
CEC=(); for c in "${CE[@]}"; do CEC+=(--col "cross/$c"); done
# outputs against the shipped build's, element for element (the exact edits must give its bits)
timeout 16 python3 bench/experiments/sm28/exact.py "softmax fwd" "log_softmax fwd" "${COLS[@]}" \
  --out $RES/exact.json > $RES/exact.log 2>&1
echo "exact rc=$?"; grep -c "n_differ_from_shipped.: 0," $RES/exact.log | sed 's/^/columns bit-identical to shipped: /'
S=$(( $(left) - 3 )); RS=$(( (S - 14) / 2 ))   # imports, two rows, then cross_entropy's (4 columns: ~12 s)
timeout $S python3 bench/experiments/sm28/cols.py "softmax fwd" "log_softmax fwd" cross --rounds 16 --row-seconds $RS \
  "${COLS[@]}" "${CEC[@]}" --out $RES/variants.json > $RES/variants.log 2>&1
echo "variants rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error" $RES/variants.log | head -3 | cut -c1-150
grep -E "errs" $RES/variants.log | cut -c1-120
grep -E "^[a-z_]+ (fwd|2048)|^   (kernelc|triton)" $RES/variants.log | sed 's/triton\[control\]/A\/A/; s/  regs.*\/kernelc/  \/shipped/; s/  regs.*//' | cut -c1-110
echo "== done in $(( $(date +%s) - T0 ))s"
