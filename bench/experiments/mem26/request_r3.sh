#!/bin/bash
# mem26 R3 (issue #21; hard limit 60 s): a second call on softmax fwd 8192^2 fp16 and rope 4x4096x32x128 bf16 --
# the shipped build, Triton, Triton's A/A and the streaming copies (kernelc's and torch's) of R2, plus COLS below,
# in two processes of one row each (the status table's figure is per process).
set -u
T0=$(date +%s); END=$((T0 + 57))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem26_out}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
V=bench/experiments/mem21/variants.py
COLS_SM=()
COLS_RO=()
S=$(( ($(left) - 3) / 2 ))
timeout $S python3 $V "softmax fwd" --rounds 16 --row-seconds $(( S - 4 )) --copies "${COLS_SM[@]}" \
  --out $RES/sm_p1.json > $RES/sm_p1.log 2>&1
echo "softmax fwd rc=$? (limit ${S}s)"
S=$(( $(left) - 2 ))
timeout $S python3 $V rope --rounds 16 --row-seconds $(( S - 4 )) --copies "${COLS_RO[@]}" \
  --out $RES/rope_p1.json > $RES/rope_p1.log 2>&1
echo "rope rc=$? (limit ${S}s)"
grep -hE "Error|error" $RES/*.log | head -3 | cut -c1-150
python3 bench/experiments/mem26/headroom.py $RES/sm_p1.json $RES/rope_p1.json --json $RES/summary.json \
  > $RES/summary.txt 2>&1
sed 's/triton\[control\]/A\/A/' $RES/summary.txt | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
