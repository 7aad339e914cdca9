#!/bin/bash
# mem22 R1 (issue #21): (1) softmax fwd/bwd variants against Triton, two processes each; (2) matmul_tma bf16 4096^3,
# 766f1cd against this tree in ONE process, launches interleaved (pinned 128x128 w4 s3 + each tree's autotuner; a
# second process pinned only). Own deadline 135 s; every step has its own timeout.
set -u
T0=$(date +%s); END=$((T0 + 135))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem22_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log -1 --format=%H > $RES/tree_head.txt 2>/dev/null
V=bench/experiments/mem21/variants.py
FWD="--col ftz=own@KERNELC_EXP_FTZ=softmax --col lds4=own@KERNELC_REDUCE_XWARP=lds4 --col lds=own@KERNELC_REDUCE_XWARP=lds --col l4ftz=own@KERNELC_REDUCE_XWARP=lds4,KERNELC_EXP_FTZ=softmax"
BWD="--col lds4=own@KERNELC_REDUCE_XWARP=lds4 --col l4c40=cap40@KERNELC_REDUCE_XWARP=lds4 --col lds=own@KERNELC_REDUCE_XWARP=lds"
for P in 1 2; do
  S=$(( $(left) - 70 )); [ $S -gt 22 ] && S=22
  if [ $S -lt 8 ]; then echo "variants process $P skipped ($(left)s left)"; continue; fi
  echo "== (1) softmax fwd + log_softmax fwd, process $P (limit ${S}s)"
  timeout $S python3 $V "softmax fwd" "log_softmax fwd" --rounds 4 $FWD --out $RES/fwd_p$P.json > $RES/fwd_p$P.log 2>&1; echo "rc=$?"
  S=$(( $(left) - 70 )); [ $S -gt 15 ] && S=15
  if [ $S -lt 8 ]; then echo "bwd process $P skipped ($(left)s left)"; continue; fi
  echo "== (1) softmax bwd, process $P (limit ${S}s)"
  timeout $S python3 $V "softmax bwd" --rounds 4 $BWD --out $RES/bwd_p$P.json > $RES/bwd_p$P.log 2>&1; echo "rc=$?"
done
echo "== (2) matmul_tma bf16 4096^3, 766f1cd vs this tree in one process ($(left)s left)"
TGZ=.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br/pre21.tgz
A=/tmp/pre21_m22; mkdir -p $A && tar xzf $TGZ -C $A && echo "766f1cd tree from $TGZ"
AB=bench/experiments/mem22/ab_one_process.py
S=$(( $(left) - 24 )); [ $S -gt 46 ] && S=46
timeout $S python3 $AB --old $A --new $PWD --pin 128x128x4x3 --auto --rounds 40 --cache /tmp/kc_m22_p1 \
  --out $RES/ab1p_p1.json > $RES/ab1p_p1.log 2>&1; echo "rc=$?"; grep -v "^taken" $RES/ab1p_p1.log | tail -4 | cut -c1-400
S=$(( $(left) - 1 )); [ $S -gt 26 ] && S=26
if [ $S -ge 10 ]; then
  timeout $S python3 $AB --old $A --new $PWD --pin 128x128x4x3 --rounds 60 --cache /tmp/kc_m22_p2 \
    --out $RES/ab1p_p2.json > $RES/ab1p_p2.log 2>&1; echo "rc=$?"; tail -2 $RES/ab1p_p2.log | cut -c1-400
else echo "ab process 2 skipped ($(left)s left)"; fi
RES=$RES python3 - <<'PY'
import json, glob, os, math
for p in sorted(glob.glob(os.environ["RES"] + "/*_p*.json")):
    if "ab1p" in p: continue
    for r in json.load(open(p))["rows"]:
        n = len(r.get("rounds", []))
        if not n: continue
        cols = r["rounds"][0]["log"]
        print(os.path.basename(p), r["benchmark"][:14], n, "rds:",
              " ".join(f"{c.replace('kernelc','k')}={math.exp(sum(rd['log'][c] for rd in r['rounds'])/n):.4f}" for c in cols))
PY
echo "== done in $(( $(date +%s) - T0 ))s"
