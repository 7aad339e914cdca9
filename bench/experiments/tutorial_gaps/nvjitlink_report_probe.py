"""Does nvJitLink's info log carry ptxas's ``-v`` report (``Used N registers``) every time it assembles a PTX,
or only the first time in a process? Assembles one memory-bound kernel's PTX (without its launch bound) four
times: twice before and twice after a CUDA context exists (torch), then a copy with one comment line added.

    python3 bench/experiments/tutorial_gaps/nvjitlink_report_probe.py

Prints, per assembly, the log's length, whether the report is there, and the cubin's registers. Written for
the bench's variant columns (docs/performance.md, "The variant columns", 2026-11-27): on an H200 every column
after the first compiled with the launch bound, which is what a missing report made ptx_to_cubin do. Result
there (nvJitLink 13.0, 2026-11-27 14:33): no report for any of the five assemblies of the PTX kernelc.compile
had assembled first (101-character logs), the report for the copy with a comment (335 characters). On CPU,
nvJitLink 13.5 and 13.0.88 report every time.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

import kernelc  # noqa: E402
from cubintools import inspect_cubin  # noqa: E402
from examples.kernels import memory_bound as K  # noqa: E402
from kernelc.compiler.backend.ptxas import _MAXNTID_RE, _nvjitlink_cubin, parse_ptxas_report  # noqa: E402
from cubintools.target import parse_target  # noqa: E402


def main():
    from cuda.bindings import nvjitlink
    sig = dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32")
    ck = kernelc.compile(K.geglu_fwd_kernel, sig, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in sig})
    ptx = _MAXNTID_RE.sub(b"", ck.asm["ptx"].encode())
    tgt = parse_target("sm_90a")
    print("nvJitLink", nvjitlink.version(), flush=True)

    def once(label, data):
        res = _nvjitlink_cubin(data, tgt, 3, (), "kernel.ptx")
        report = parse_ptxas_report(res.info_log)
        regs = inspect_cubin(res.cubin).kernel("geglu_fwd_kernel").n_regs
        print(f"{label:28s} log {len(res.info_log):5d} chars, report {'yes' if report else 'NO '}, "
              f"cubin {regs} registers", flush=True)

    once("first", ptx)
    once("same PTX again", ptx)
    try:
        import torch
        torch.zeros(1, device="cuda")
        print("CUDA context made (torch)", flush=True)
    except Exception as e:
        print(f"no CUDA context: {type(e).__name__}: {e}", flush=True)
    once("same PTX, context", ptx)
    once("same PTX, context, again", ptx)
    once("PTX + a comment line", ptx + b"\n// probe\n")


if __name__ == "__main__":
    main()
