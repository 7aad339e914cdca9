#!/bin/bash
# mc29 R1 (issue 27): the L2 -> SM ceiling the fp8 forward's K/V stream meets. Limit 150 s (own guard 140 s).
# probe.py: K and V^T of every head streamed by the default's grid (256 x 128 programs at N 16384) through plain
# loads (ldg_*: nothing but the bytes) and through the TMA ring with the forward's two dots but no softmax (dots_*),
# 64- and 128-row programs, and the fp8 default itself, interleaved round by round in one process.
# Run in the repository root with PYTHONPATH set.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/mc29_out}/mc29_r1
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
git log -1 --format=%H >> "$RES/env.txt" 2>/dev/null
timeout 130 python3 bench/experiments/mc29/probe.py --out "$RES/n16384.jsonl" --seq 16384 --reps 15 --calls 5 \
  --budget-s 100 > "$RES/n16384.log" 2>&1
echo "probe rc=$? at $(( $(date +%s) - T0 ))s"
grep -h "==\|FAILED\|budget\|Error" "$RES/n16384.log" | tail -20
echo "== done in $(( $(date +%s) - T0 ))s"
