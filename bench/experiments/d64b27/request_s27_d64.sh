#!/bin/bash
# d64b27's request for session 27. Time limit: 110 s on one H200. Run from the tree's root (main + branch d64b27's
# diff), PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR. Not run yet (session 26 had no R3).
# (1) the GPU tests of the D=64 WS form and of the D=64 default (both masks), and which part of R2's wrong sepwskv is at
# fault (kvregs_ws_check.py: KV_REGS x WS x ROWS_TMA against the separate pass), beside the compiles; (2) a second call
# of R2's N 4096 and N 16384 non-causal A/B (cuDNN, the fused default, sepws, sepwsq), more rounds. <= 105 s.
set -u
RES=${OUT:-/tmp/d64b27_s27}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 105))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64b27/bwd_ab.py
E="cudnn def sepws sepwsq"
echo "== 1: GPU tests, the KV_REGS check and compiles in parallel"
timeout 45 python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_gpu_attention.py \
  -k "d64_separate_dkdv_in_the_d128_form or d64_default_backward" > $RES/gpu_tests.log 2>&1 &
timeout 45 python3 bench/experiments/d64b27/kvregs_ws_check.py --seq 1024 --out $RES/kvregs_ws.json \
  > $RES/kvregs_ws.log 2>&1 &
for e in def sepws sepwsq; do
  timeout 35 python3 $S --warm --seq 1024 --head-dim 64 --causal 0 --entries $e > $RES/warm_$e.log 2>&1 &
done
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $RES/gpu_tests.log | tail -n 20
grep "KV_REGS" $RES/kvregs_ws.log
echo "== 2: N 4096 non-causal, $(left)s left"
T=$(( $(left) - 30 )); [ $T -gt 25 ] && T=25
timeout $T python3 $S --head-dim 64 --causal 0 --entries $E --rounds 6 --rep-ms 30 \
  --out $RES/n4096.json > $RES/n4096.log 2>&1
echo "== 3: N 16384 non-causal, $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 35 ] && T=35
[ $T -gt 8 ] && timeout $T python3 $S --seq 16384 --head-dim 64 --causal 0 --entries $E --rounds 4 \
  --rep-ms 100 --out $RES/n16384.json > $RES/n16384.log 2>&1
echo "== summary"
cat $RES/n4096.log $RES/n16384.log 2>/dev/null | \
  grep '^N=' | sed 's/  err def/ e/; s/cuDNN\/this/r/; s/ D=64//; s/ causal=0//; s/ cudnn [0-9.e+-]*$//'
echo "== done in $(( $(date +%s) - T0 ))s"
