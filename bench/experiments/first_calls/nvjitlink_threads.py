"""Do nvJitLink links run side by side in threads of one process? N copies of one PTX (tutorial 08's
``grouped_matmul_tma_kernel`` at 128x256x64, 3 stages, 8 warps, without its launch bound, as kernelc's assembler
first builds it) assembled by N threads of this process, and by N warm worker processes, for N = 1, 2, 4, 8.

    python3 bench/experiments/first_calls/nvjitlink_threads.py --tutorials DIR [--ns 1,2,4,8] [--out FILE.json]

If the threads' wall time grows with N while the processes' stays flat, links serialise within a process (the
reason kernelc's ``llvm_pool`` also assembles in its workers when compiles overlap). CPU only.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

_DATA = None


def _init(data):
    global _DATA
    _DATA = data
    _build()


def _build(_=None):
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    t0 = time.perf_counter()
    P._nvjitlink_cubin(_DATA, parse_target("sm_90a"), 3, (), "k")
    return time.perf_counter() - t0


def _ptx(tutorials: str) -> bytes:
    import importlib.util
    from bench.bench_compile import _SIG08, _kernel_module
    from kernelc.compat import install
    install()
    path = os.path.join(tempfile.mkdtemp(prefix="nvjl_"), "k08.py")
    with open(path, "w") as f:
        f.write(_kernel_module(os.path.join(tutorials, "08-grouped-gemm.py")))
    spec = importlib.util.spec_from_file_location("nvjl_k08", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import kernelc
    from kernelc.compiler.backend import ptxas as P
    ck = kernelc.compile(mod.grouped_matmul_tma_kernel, dict(_SIG08),
                         dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, NUM_SM=132, FP8=False),
                         target="sm_90a", num_warps=8, num_stages=3, divisibility={"group_size": 1})
    return P._MAXNTID_RE.sub(b"", ck.asm["ptx"].encode())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", required=True)
    ap.add_argument("--ns", default="1,2,4,8")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    global _DATA
    _DATA = _ptx(a.tutorials)
    _build()   # loads nvJitLink
    rows = []
    ns = [int(n) for n in a.ns.split(",")]
    ctx = mp.get_context("spawn")
    with ctx.Pool(max(ns), initializer=_init, initargs=(_DATA,)) as pool:
        pool.map(_build, range(max(ns)))   # every worker warm
        for n in ns:
            with ThreadPoolExecutor(n) as ex:
                t0 = time.perf_counter()
                each = list(ex.map(_build, range(n)))
                threads = time.perf_counter() - t0
            t0 = time.perf_counter()
            peach = pool.map(_build, range(n), chunksize=1)
            procs = time.perf_counter() - t0
            rows.append({"n": n, "threads_wall_s": threads, "threads_each_s": each, "processes_wall_s": procs,
                         "processes_each_s": peach})
            print(f"{n} links: threads {threads:.2f} s (each {min(each):.2f}-{max(each):.2f}), "
                  f"processes {procs:.2f} s (each {min(peach):.2f}-{max(peach):.2f})", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
