"""The 128-byte CUtensorMaps that Triton 3.6's launcher and kernelc's runtime encode for the same host
``TensorDescriptor`` (tutorial 06's fp8 K and V^T at d64 and d128, and an fp16 K), byte by byte
(issue #20, docs/triton-tutorials.md "06's fp8 d64: the ring's wait"; a GPU is needed: the CUDA driver
encodes). kernelc's map is encoded at each L2 promotion in ``--promotion`` to show which one Triton's equals.

    python3 bench/experiments/fp8x/tensormap_diff.py [--promotion 256 128]

Triton's map is read from the object ``fill_tma_descriptor`` returns (a ``PyCUtensorMap``: the map at offset 128,
its alignment). Nothing here is a test.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--promotion", type=int, nargs="+", default=[256, 128])
    args = ap.parse_args(argv)
    import torch
    import triton  # the real one: this process never installs kernelc's alias
    from kernelc.runtime import tensor_map as TM
    from l2_promotion_ab import PROMOTION
    utils = triton.runtime.driver.active.utils
    Z, H, N = 4, 32, 4096
    cases = []
    for D in (64, 128):
        y = Z * H * N
        k = torch.empty(Z, H, N, D, device="cuda", dtype=torch.float8_e5m2)
        vt = torch.empty(Z, H, D, N, device="cuda", dtype=torch.float8_e5m2)
        bn = 64
        sw = {64: 2, 128: 3}[D]
        cases.append((f"d{D} fp8 K [{bn},{D}]", k, "fp8e5", [y, D], [D, 1], [bn, D], sw, 1))
        cases.append((f"d{D} fp8 V^T [{D},{bn}]", vt, "fp8e5", [D, y], [N, 1], [D, bn], {64: 2}[bn], 1))
    k16 = torch.empty(Z, H, N, 64, device="cuda", dtype=torch.float16)
    cases.append(("d64 fp16 K [64,64]", k16, "fp16", [Z * H * N, 64], [64, 1], [64, 64], 3, 2))
    for name, t, kd, shape, strides, block, sw, esz in cases:
        tmap = utils.fill_tma_descriptor(t.data_ptr(), sw, esz, 0 if esz == 1 else 6, block, shape, strides, 0)
        tri = ctypes.string_at(id(tmap) + 128, 128)
        print(f"== {name}: Triton {tri.hex()}")
        for p in args.promotion:
            kc = TM.encode(dataclasses.replace(TM.tensor_map_params(kd, t.data_ptr(), shape, strides, block),
                                               l2_promotion=PROMOTION[p]))
            diff = [i for i in range(128) if kc[i] != tri[i]]
            print(f"   kernelc L2 {p:>3}B {kc.hex()}  bytes differing from Triton's: {diff or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
