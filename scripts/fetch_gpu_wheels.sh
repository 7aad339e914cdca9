#!/usr/bin/env bash
# On the CPU machine: fetch what the lent GPU machine (Python 3.12, no network) lacks into .wheels/
# (git-ignored; pass `.wheels/core` and, for profiler runs, `.wheels/profiler` as device `carry` paths).
# llvmlite's wheel (60 MB) is repacked with xz to fit the 64 MiB carry limit.
set -euo pipefail
cd "$(dirname "$0")/.."
plat=(--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_25_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64)
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d "$@"; }
mkdir -p .wheels/core .wheels/profiler
dl .wheels/core pyelftools==0.33 nvidia-cuda-nvdisasm==13.2.86
dl .wheels/profiler cupti-python==13.4.0 nvidia-cuda-cupti==13.4.92 llnl-hatchet==2026.2.0 pydot multiprocess dill \
   caliper-reader textX arpeggio
if [ ! -f .wheels/core/llvmlite-0.50.0-py312.tar.xz ]; then
  tmp=$(mktemp -d)
  dl "$tmp" llvmlite==0.50.0
  (cd "$tmp" && unzip -q llvmlite-*.whl && tar cf - llvmlite llvmlite-0.50.0.dist-info | xz -T0 -9 > llvmlite.tar.xz)
  mv "$tmp/llvmlite.tar.xz" .wheels/core/llvmlite-0.50.0-py312.tar.xz
  rm -rf "$tmp"
fi
if [ ! -f .wheels/core/libdevice.10.bc ]; then   # from NVIDIA's nvvm wheel (no local CUDA needed)
  tmp=$(mktemp -d)
  dl "$tmp" "nvidia-nvvm==13.*"
  (cd "$tmp" && unzip -q -o nvidia_nvvm-*.whl 'nvidia/cu13/nvvm/libdevice/libdevice.10.bc')
  cp "$tmp/nvidia/cu13/nvvm/libdevice/libdevice.10.bc" .wheels/core/
  rm -rf "$tmp"
fi
du -sh .wheels/*
