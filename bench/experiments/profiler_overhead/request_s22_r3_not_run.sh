#!/bin/bash
# ovh22 R3 (issue 23), <= 118 s. Return every file under $OUT.
# (a) in parallel, <= 60 s: the two GPU profiler test files on this branch's final kprof code (lazy records on until
#     CUDA's first context when started before it; scopes' entry/exit inlined); kprof under python -m kprof
#     examples/train.py with session 21's lazy path (s21: all 1170 kernels at the root in R2), the same with the
#     scope timelines on CUPTI's clock (s21_cupticlk: if it places them, the loss is a clock base, not missing
#     records), and the branch, each dumping its backend's API-record count and clock offsets; raw CUPTI's clock
#     against REALTIME before/after CUDA comes up in 3 orders.
# (b) alone, ~55 s: the encoder, --fine-order pairs as R1/R2 (pooled with R2 by R2's rule; R1's files were lost).
timeout 60 python3 -m pytest -q -n 6 -p no:cacheprovider tests/profiler/test_gpu_profiler.py \
  tests/profiler/test_gpu_distributed.py > $OUT/gpu_tests.log 2>&1 &
P1=$!
( timeout 58 python3 bench/experiments/profiler_overhead/lazy_before_cuda.py --kprof --out $OUT/lazy_kprof.json \
    > $OUT/lazy_kprof.log 2>&1; echo "kprof diag rc $?" >> $OUT/lazy_kprof.log ) &
timeout 58 python3 bench/experiments/profiler_overhead/lazy_before_cuda.py --variants ctx_first,off_before_ctx,on_through_ctx \
  --out $OUT/lazy_before_cuda.json > $OUT/lazy_before_cuda.log 2>&1
wait $P1; echo "pytest rc $?"; wait
tail -4 $OUT/lazy_before_cuda.log | cut -c1-200; tail -4 $OUT/lazy_kprof.log | cut -c1-300
grep -E "passed|failed" $OUT/gpu_tests.log | tail -3; grep FAILED $OUT/gpu_tests.log | head -5
timeout 56 python3 -m bench reconcile_profilers overhead --spawn fork --profilers kprof --workloads encoder \
  --budget 42 --fine 3 --fine-settle 1 --fine-order pairs --settle-pairs 2 --pre 1 --grace 2 \
  --name ovh22_r3_enc_pairs --results-dir $OUT > $OUT/enc_pairs.log 2>&1
echo "enc rc $?"; grep -A3 "fine, adjacent pairs" $OUT/enc_pairs.log | tail -3
