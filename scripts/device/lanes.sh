#!/usr/bin/env bash
# On a GPU machine with several GPUs: one lane of requests per GPU, in parallel (lane i on GPU i).
#   bash scripts/device/lanes.sh TAG "lane 0 items" "lane 1 items" ...     (items as for call.sh)
# Prints and returns one file, lanes_TAG.txt, besides each request's archive (the device returns at most 8 files).
set -u
export REPO=$PWD
TAG=$1; shift
OUTROOT=${OUT:-/tmp/out}; mkdir -p $OUTROOT
source scripts/device/setup.sh   # once, before the lanes share /tmp/site
cd $REPO
gpus=$(nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1)
i=0
for L in "$@"; do
  (export CUDA_VISIBLE_DEVICES=$i; bash scripts/device/call.sh ${TAG}g$i $L > $OUTROOT/.lane$i 2>&1) &
  i=$((i+1))
done
wait
{ echo "$gpus"
  i=0
  for L in "$@"; do echo "######## lane $i (GPU $i): $L"; cat $OUTROOT/.lane$i; rm -f $OUTROOT/.lane$i; i=$((i+1)); done
} > $OUTROOT/lanes_$TAG.txt
cat $OUTROOT/lanes_$TAG.txt
