#!/bin/bash
# Next session's request (session 27; time limit: 100 s on one H200), helper cau27's: a second call of tutorial 06's
# ratio and a third of the D=128 causal default against cuDNN, on merged main. Run from the tree's root, PYTHONPATH
# set, $OUT the results folder, a fresh KERNELC_CACHE_DIR, Triton 3.6 and .ext/tutorials/06-fused-attention.py there.
# The same as session 26's R2 (bench/experiments/att27/r2.sh: the GPU tests of the default, then N 4096 / 16384 /
# 2048 causal: cuDNN, the default, the two-loop kernel, tutorial 06, onews; N 4096 also g4, untimed so far).
# Tested on CPU as far as it goes (no GPU: the flow and the timeouts; bwd_ab.py with --device cpu).
LIMIT=100 bash bench/experiments/att27/r2.sh
