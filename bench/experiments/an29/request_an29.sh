#!/bin/bash
# Session 29 (issue 27, "the analyzer raises no false alarm on these kernels"): an28 again with a sampling period
# the long kernels' hardware buffer holds. an28 (s28 R4) lost 12 of 18 kernels' samples at the default period
# (2^10 cycles, 128 MB hardware buffer) on 10-75 ms kernels; 2^15 cycles with 256 MB keeps a 75 ms kernel's
# samples (about 2.4 M) inside the buffer. Limit 100 s on one H200. $OUT: the results folder.
export RES=${OUT:-/tmp/an29}; mkdir -p $RES
PCS_MODE=pcsampling:period=15:hw_mb=256 PARGS="--seq 16384 --only fwd fp8 bwd bwd64 cudnn" \
  bash bench/experiments/att21/r1.sh
grep -h "overflow\|samples" $RES/attn_pcs.analyze.txt 2>/dev/null | head -20
