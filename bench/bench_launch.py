"""Host time per call: kernelc against Triton, torch.add and a bare cuLaunchKernel.

Two parts, both measured in this one process:

- a cached launch of a tiny kernel (``kernel[(1,)](...)``), bare launches, the ctypes route, a no-op launch hook;
- the host patterns of Triton's tutorials as they call their kernels (``bench/launch_patterns_src.txt``, one source
  built by both compilers): 01 (grid function of meta), 02 (``warmup()`` every call, then the compiled kernel's
  launch), 03 (autotuned, strides as ints), 05 (tuple grid, float argument, ``num_warps``/``num_ctas``), 06 (four
  host ``TensorDescriptor``s a call, ``set_allocator``, autotune with ``early_config_prune`` and a config
  ``pre_hook`` that sets the block shapes), 09 (device-side descriptors through ``set_allocator``,
  ``launch_metadata``), and 09 again with a launch hook installed that reads the metadata (as a profiler does).

Each value is the host time of one call issued back to back (the kernels are a few microseconds of GPU work, so
the GPU keeps up), best of ``--rounds`` rounds in which kernelc and Triton alternate, with the median alongside.

    python3 bench/bench_launch.py [--rounds 5] [--calls 2000] [--patterns 01,02,03,05,06,09,09hook]
                                  [--label NAME] [--no-basic] [--profile DIR]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, module_from_source, to_triton, triton_twin, write_results  # noqa: E402

N_LAUNCH = 20000
PATTERNS = ("01", "02", "03", "05", "06", "09", "09hook")
PATTERN_SRC = os.path.join(ROOT, "bench", "launch_patterns_src.txt")


def per_launch_us(fn, n=N_LAUNCH, sync=None, clock=time.perf_counter):
    """Best host time of one ``fn()`` over three runs of ``n`` calls (after 200 warm-up calls)."""
    sync = sync or _sync
    for _ in range(200):
        fn()
    sync()
    best = float("inf")
    for _ in range(3):
        t0 = clock()
        for _ in range(n):
            fn()
        t1 = clock()
        sync()
        best = min(best, (t1 - t0) / n * 1e6)
    return best


def _sync():
    import torch
    torch.cuda.synchronize()


def pattern_module(impl: str):
    """The tutorial host patterns built by ``impl`` ("kernelc" or "triton")."""
    src = open(PATTERN_SRC).read()
    if impl == "triton":
        src = to_triton(src).replace("kernelc.tools.tensor_descriptor", "triton.tools.tensor_descriptor")
    return module_from_source(src, f"launch_patterns_{impl}", prefix="launch_patterns_")


def pattern_calls(mod, device: str, props: dict):
    """{pattern: (call, check)}: each call runs the pattern once on fixed inputs; check() says whether the last
    call's output is right (compared with torch on the same inputs)."""
    import torch
    torch.manual_seed(0)
    out = {}
    x, y, o = (torch.rand(4096, device=device) for _ in range(3))
    out["01"] = (lambda: mod.p01(x, y, o), lambda: torch.allclose(o, x + y))
    xs = torch.randn(256, 256, device=device)
    ys = torch.empty_like(xs)
    out["02"] = (lambda: mod.p02(xs, ys, props), lambda: torch.allclose(ys, torch.softmax(xs, 1), atol=1e-5))
    a = torch.randn(256, 256, device=device, dtype=torch.float16)
    b = torch.randn(256, 256, device=device, dtype=torch.float16)
    c = torch.empty(256, 256, device=device, dtype=torch.float16)
    out["03"] = (lambda: mod.p03(a, b, c), lambda: torch.equal(c, a))
    xl = torch.randn(256, 512, device=device, dtype=torch.float16)
    yl = torch.empty_like(xl)
    w = torch.rand(512, device=device, dtype=torch.float16)
    bb = torch.rand(512, device=device, dtype=torch.float16)
    mean = torch.empty(256, device=device)
    rstd = torch.empty(256, device=device)
    ref = torch.nn.functional.layer_norm(xl.float(), (512,), w.float(), bb.float(), 1e-5)
    out["05"] = (lambda: mod.p05(xl, yl, w, bb, mean, rstd), lambda: torch.allclose(yl.float(), ref, atol=2e-2))
    q, k, v = (torch.randn(1, 2, 128, 64, device=device, dtype=torch.float16) for _ in range(3))
    att_o = torch.empty_like(q)
    m = torch.empty(1, 2, 128, device=device)
    out["06"] = (lambda: mod.p06(q, k, v, att_o, m),
                 lambda: torch.allclose(att_o.float(), q.float() * 0.5) and torch.equal(m, q.float().amax(-1)))
    c9 = torch.empty(256, 256, device=device, dtype=torch.float16)
    out["09"] = (lambda: mod.p09(a, b, c9, props["multiprocessor_count"]), lambda: torch.equal(c9, a))
    out["09hook"] = out["09"]
    return out


class _Hook:
    """A launch hook that reads the launch metadata, as a profiler does: kernelc's hooks, Triton's HookChain."""

    def __init__(self, impl):
        self.impl = impl
        self.handle = None

    def __enter__(self):
        if self.impl == "kernelc":
            from kernelc.runtime import hooks
            self.handle = hooks.register(enter=lambda rec: rec.launch_metadata)
        else:
            from triton import knobs
            self.handle = lambda lazy: lazy.get() if lazy is not None else None
            knobs.runtime.launch_enter_hook.add(self.handle)
        return self

    def __exit__(self, *exc):
        if self.impl == "kernelc":
            from kernelc.runtime import hooks
            hooks.unregister(self.handle)
        else:
            from triton import knobs
            knobs.runtime.launch_enter_hook.remove(self.handle)


def measure_patterns(impls, patterns, rounds, calls, device="cuda", props=None, sync=None, profile=None,
                     check=True, clock=time.perf_counter):
    """{impl: {pattern: [us per call, one per round]}}; impls alternate inside each round, order flipped each
    round. ``check``: verify each pattern's output once (off where no kernel really runs)."""
    import contextlib
    mods = {impl: pattern_module(impl) for impl in impls}
    if props is None:
        import torch
        from kernelc.runtime.driver import active
        props = active.utils.get_device_properties(torch.cuda.current_device())
    calls_of = {impl: pattern_calls(mods[impl], device, props) for impl in impls}
    times = {impl: {p: [] for p in patterns} for impl in impls}
    wrong = measure_patterns.wrong = []
    for impl in impls:
        for p in patterns:
            call = calls_of[impl][p][0]
            with (_Hook(impl) if p.endswith("hook") else contextlib.nullcontext()):
                t0 = time.perf_counter()
                call()  # compile, autotune
                print(f"{impl} {p}: first call {time.perf_counter() - t0:.2f} s", flush=True)
            (sync or _sync)()
            if check and not calls_of[impl][p][1]():
                wrong.append(f"{impl}:{p}")
                print(f"pattern {p} under {impl} computed a wrong result", file=sys.stderr)
    for rnd in range(rounds):
        order = impls if rnd % 2 == 0 else impls[::-1]
        for p in patterns:
            for impl in order:
                call = calls_of[impl][p][0]
                with (_Hook(impl) if p.endswith("hook") else contextlib.nullcontext()):
                    times[impl][p].append(per_launch_us(call, calls, sync, clock))
            print(f"round {rnd} pattern {p}: " + "  ".join(f"{impl} {times[impl][p][-1]:.2f} us" for impl in impls),
                  flush=True)
    if profile:
        _profile(calls_of, impls, patterns, profile)
    return times


def _profile(calls_of, impls, patterns, folder, n=2000):
    """cProfile of n calls per pattern and implementation, as text sorted by own time (``folder``)."""
    import contextlib
    import cProfile
    import io
    import pstats
    os.makedirs(folder, exist_ok=True)
    for impl in impls:
        for p in patterns:
            call = calls_of[impl][p][0]
            with (_Hook(impl) if p.endswith("hook") else contextlib.nullcontext()):
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(n):
                    call()
                pr.disable()
            s = io.StringIO()
            st = pstats.Stats(pr, stream=s)
            st.sort_stats("tottime").print_stats(25)
            st.sort_stats("cumulative").print_stats(25)
            with open(os.path.join(folder, f"profile_{impl}_{p}.txt"), "w") as f:
                f.write(f"{n} calls of pattern {p} under {impl}\n" + s.getvalue())


def basic_rows():
    """The cached launch of a tiny kernel: kernelc, Triton, torch.add, bare cuda-python, ctypes, a no-op hook."""
    import ctypes
    import torch
    from cuda.bindings import driver
    from examples.kernels import vector_add as K
    from kernelc.runtime import hooks
    import kernelc
    T = triton_twin("vector_add")
    x, y, o = (torch.rand(1024, device="cuda") for _ in range(3))
    n = x.numel()
    ours = lambda: K.add_kernel[(1,)](x, y, o, n, BLOCK_SIZE=1024)  # noqa: E731
    tri = lambda: T.add_kernel[(1,)](x, y, o, n, BLOCK_SIZE=1024)  # noqa: E731
    tadd = lambda: torch.add(x, y, out=o)  # noqa: E731
    # bare cuda-python launch of our compiled kernel with a prebuilt argument tuple
    ours()
    ent = next(iter(K.add_kernel._cuda_state["cache"].values()))
    f = ent.function.function
    stream = torch.cuda.current_stream().cuda_stream
    args = ((x.data_ptr(), y.data_ptr(), o.data_ptr(), n),
            (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))
    bare = lambda: driver.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, stream, args, 0)  # noqa: E731
    # the same kernel launched through a ctypes call into libcuda (the alternative launch route)
    os.environ["KERNELC_LAUNCH_IMPL"] = "ctypes"
    K2 = kernelc.jit(K.add_kernel.fn)
    ours_cp = lambda: K2[(1,)](x, y, o, n, BLOCK_SIZE=1024)  # noqa: E731
    ours_cp()
    os.environ.pop("KERNELC_LAUNCH_IMPL")
    r_ours, r_tri, r_add, r_bare = per_launch_us(ours), per_launch_us(tri), per_launch_us(tadd), per_launch_us(bare)
    r_cp = per_launch_us(ours_cp)
    h = hooks.register(enter=lambda rec: None)
    r_hook = per_launch_us(ours)
    hooks.unregister(h)
    rows = []
    for what, r in (("kernelc launch (cached)", r_ours), ("kernelc launch via ctypes libcuda call", r_cp),
                    ("triton launch (cached)", r_tri), ("torch.add(out=)", r_add),
                    ("bare cuda-python cuLaunchKernel", r_bare), ("kernelc launch + 1 no-op hook", r_hook)):
        rows.append({"what": what, "us_per_launch": r, "vs_triton": r / r_tri, "vs_torch_add": r / r_add})
    return rows


def pattern_rows(times, patterns):
    rows = []
    impls = list(times)
    for p in patterns:
        ref = min(times["triton"][p]) if "triton" in times else None
        for impl in impls:
            t = times[impl][p]
            rows.append({"what": f"{impl}: tutorial {p} host pattern", "us_per_launch": min(t),
                         "median_us": statistics.median(t), "vs_triton": min(t) / ref if ref else None})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the pattern measurements (default 5)")
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed run of a pattern (default 2000)")
    ap.add_argument("--patterns", default=",".join(PATTERNS), help=f"comma-separated subset of {','.join(PATTERNS)}")
    ap.add_argument("--label", default="", help="results go to launch_overhead[_LABEL].json")
    ap.add_argument("--no-basic", action="store_true", help="skip the tiny-kernel rows")
    ap.add_argument("--no-triton", action="store_true", help="kernelc only")
    ap.add_argument("--profile", metavar="DIR", help="also write cProfile text of each pattern to DIR")
    ap.add_argument("--kernelc-root", metavar="DIR",
                    help="import kernelc from this checkout (e.g. main's) instead of this one's")
    a = ap.parse_args(argv)
    if a.kernelc_root:
        sys.path.insert(0, os.path.abspath(a.kernelc_root))
    patterns = [p for p in a.patterns.split(",") if p]
    bad = [p for p in patterns if p not in PATTERNS]
    if bad:
        ap.error(f"unknown pattern(s) {bad}; expected some of {list(PATTERNS)}")
    rows = [] if a.no_basic else basic_rows()
    impls = ["kernelc"] + ([] if a.no_triton else ["triton"])
    times = measure_patterns(impls, patterns, a.rounds, a.calls, profile=a.profile)
    rows += pattern_rows(times, patterns)
    name = "launch_overhead" + (f"_{a.label}" if a.label else "")
    import kernelc
    write_results(name, rows, {"targets": "every pattern at or below Triton's host time (vs_triton <= 1)",
                               "rounds": a.rounds, "calls": a.calls, "per_round_us": times,
                               "kernelc_from": os.path.dirname(os.path.dirname(os.path.abspath(kernelc.__file__))),
                               "wrong_results": measure_patterns.wrong})


if __name__ == "__main__":
    main()
