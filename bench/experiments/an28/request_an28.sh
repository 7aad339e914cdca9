#!/bin/bash
# Session 28 (issue 27, "the analyzer raises no false alarm on these kernels"): kprof's instruction sampling and timing
# of the attention defaults at N 16384 (B=4, H=32; the fp16 forwards, the fp8 forward at D=128 -- fp828's top-refilled
# one loop when causal --, the default backwards -- D=64 causal's separate pass in D=128's form since d64c28 --), then
# kprof-analyze on both profiles: att21's r1.sh with profile_attention.py at N 16384, one iteration a kernel.
# Limit 100 s on one H200. $OUT: the results folder.
export RES=${OUT:-/tmp/an28}; mkdir -p $RES
PARGS="--seq 16384 --only fwd fp8 bwd bwd64 cudnn" bash bench/experiments/att21/r1.sh
