#!/bin/bash
# mem27 -> session 28 (issue #21; hard limit 120 s). Not run. The rule marks every load that recurs pid % n programs
# later, whatever the size D of the table it keeps (rope: seq_len x the marked bytes of a program; 2 MB at 4096
# positions). Past the L2 (50 MB on an H200) evict_last would keep more than the L2 holds. Here the bench row and
# Liger's rope (cos_bs 1) at 2 x 65536 tokens (D 32 MB / 16 MB) and 2 x 131072 (64 MB / 32 MB): on (the default),
# off, and the same two with their lines given back the normal priority after each launch (ond/offd: within one
# launch), every kernelc column its own cos/sin. Then, at this session's shape (4 x 4096), what R2/R3 left open: the
# constant form's own cost (enk = off + the same loads under the constant evict_normal policy: nothing kept) and a
# kernelc A/A (on2, a second `on`), the position effect R3 had no column for. Needs .ext/gpu/liger/rope.py.
set -u
T0=$(date +%s); END=$((T0 + 117))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem27_s28_out}; mkdir -p $RES
export LIGER_ROPE=$PWD/.ext/gpu/liger/rope.py
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
for SL in 65536 131072; do
  S=$(( $(left) / 3 - 1 )); [ $SL = 131072 ] && S=$(( $(left) / 2 - 1 )); RS=$(( (S - 14) / 2 ))
  timeout $S python3 bench/experiments/mem27/ab27.py --rows ours,liger1 --bsz 2 --seq-len $SL --rounds 30 \
    --row-seconds $RS --col off=off@own --col on=evict_last@own --col ond=evict_last@demote --col offd=off@demote \
    --out $RES/ab27_sl$SL.json > $RES/ab27_sl$SL.log 2>&1
  echo "seq_len $SL: rc=$? (limit ${S}s)"
  grep -E "^liger|^ours|^  " $RES/ab27_sl$SL.log | grep -v builds | cut -c1-150
done
S=$(( $(left) - 2 )); RS=$(( (S - 14) / 2 ))
timeout $S python3 bench/experiments/mem27/ab27.py --rows liger1,ours --rounds 40 --row-seconds $RS \
  --col off=off@own --col on=evict_last@own --col on2=evict_last@own --col enk=off+l2enk:nost@own \
  --out $RES/ab27_form.json > $RES/ab27_form.log 2>&1
echo "form/A-A: rc=$? (limit ${S}s)"
grep -E "^liger|^ours|^  " $RES/ab27_form.log | grep -v builds | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
