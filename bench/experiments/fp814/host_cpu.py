"""The forwards' host path per call on CPU (no GPU): main's wrappers against this tree's, with kernelc's generated
launch fast path (binder, key, argument packing) running for real and only the driver call replaced by a no-op.

    python3 bench/experiments/fp814/host_cpu.py [--old-root /work/main] [--calls 20000]

CPU tensors [1, 1, 128, D] (the host path does not depend on the sizes; CPU allocation of the real sizes would cost
what CUDA's caching allocator does not). What this leaves out: the driver's launch (cuda-python's
cuLaunchKernel, ~10 us on an H200, docs/performance.md "Launches") and torch's CUDA kernel launch inside
``torch.cat`` (the old fp8 wrappers'); CUDA's caching allocator stands in for CPU ``torch.empty``. Prints us per
call, the least of 15 rounds with old and new alternating (the machine is shared). The FA3-order rows' launch is a no-op after the binder (descriptors need a compiled
kernel's machine signature and the driver's tensor maps).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


class _AlwaysHit(dict):
    """The launcher's in-memory cache: every key hits (hashed as a real lookup) the one fake entry of its kernel."""

    def __init__(self, fn):
        super().__init__()
        self.fn, self.ent = fn, None

    def get(self, key, default=None):
        hash(key)
        if self.ent is None:
            self.ent = _fake_entry(self.fn, key)
        return self.ent


def _fake_entry(fn, key):
    """A loaded-kernel entry for ``key`` whose generated launch packs the arguments as a real one and calls a no-op
    in place of cuLaunchKernel."""
    from kernelc.runtime.driver import ArgBuffer
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import Loaded, get_state
    _, _, _, _, kinds = get_state(fn)["spec"].signature(key[0])
    if any(isinstance(k, tuple) for k in kinds):
        # descriptors: the machine signature comes from a compiled kernel, and the tensor maps from the driver;
        # the launch is a no-op here (what the FA3-order rows leave out: packing and the maps' cache lookups)
        def launch(*a):
            return None
        launch.fast = launch

        class E:
            compiled = None
        e = E()
        e.launch = e.fast = launch  # (fast: what the binder and prepared launches call)
        return e

    class F:
        handle, function, threads, shared, name = 0, 0, 128, 0, fn.__name__

    class C:
        global_scratch_bytes, shared, cache_key = 0, 0, "fake"
    ent = Loaded(C(), F(), ArgBuffer(tuple(kinds)), kinds)
    cmask = [isinstance(p, tuple) and p[0] == "c" for p in key[0]]
    os.environ["KERNELC_LAUNCH_IMPL"] = "ctypes"  # (its namespace names _libcuda(); replaced below)
    import kernelc.runtime.driver as drv
    real = drv._libcuda
    drv._libcuda = lambda: (lambda *a: 0)
    try:
        ent.launch = make_launch(ent, fn, cmask)
    finally:
        drv._libcuda = real
    ent.cmask = cmask
    return ent


def arm(fn):
    """Make ``fn[grid](...)`` take kernelc's generated fast path on this CPU-only machine."""
    from kernelc.runtime.fastpath import make_binder
    from kernelc.runtime.launcher import get_state
    st = get_state(fn)
    st["cache"] = _AlwaysHit(fn)
    fn._fast = make_binder(fn)
    fn._bound.clear()


def load(root, name, as_name):
    spec = importlib.util.spec_from_file_location(as_name, os.path.join(root, "examples", "kernels", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def per_call_us(fs, calls, repeats=15):
    """The least us per call of each of ``fs`` over ``repeats`` rounds, the functions alternating within a round
    (on a shared machine the load moves between rounds)."""
    for f in fs:
        for _ in range(200):
            f()
    best = [float("inf")] * len(fs)
    for _ in range(repeats):
        for i, f in enumerate(fs):
            t = time.perf_counter()
            for _ in range(calls):
                f()
            best[i] = min(best[i], (time.perf_counter() - t) / calls * 1e6)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-root", default="/work/main")
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args(argv)
    import torch
    os.environ.pop("KERNELC_INTERPRET", None)
    old = {n: load(args.old_root, n, f"old_{n}") for n in ("attention", "attention_fa3")}
    new = {n: load(ROOT, n, f"new_{n}") for n in ("attention", "attention_fa3")}
    for mods in (old, new):
        arm(mods["attention"].attn_fwd_lse_kernel)
        arm(mods["attention_fa3"].attn_fwd_fa3_kernel)
    Z, H, N = 1, 1, 128  # small: CPU allocation of large outputs (mmap) would swamp the rest
    print(f"torch {torch.__version__}, us per call (CPU; driver launch a no-op)")
    print(f"{'D':>3} {'causal':>6} {'variant':10} {'old':>7} {'new':>7} {'saved':>7}")
    for D in (64, 128):
        q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
        q8, k8 = (t.to(torch.float8_e4m3fn) for t in (q, k))
        v8t = v.transpose(-1, -2).contiguous().to(torch.float8_e4m3fn)
        qs, ks, vs = (torch.ones(1) for _ in range(3))
        for causal in (False, True):
            calls = {
                "fp16_ptr": lambda m: m["attention"].attention_fwd(q, k, v, causal, D ** -0.5),
                "fp8_ptr": lambda m: m["attention"].attention_fp8(q8, k8, v8t, qs, ks, vs, causal, D ** -0.5),
                "fp16_fa3": lambda m: m["attention_fa3"].attention(q, k, v, causal, D ** -0.5),
                "fp8_fa3": lambda m: m["attention_fa3"].attention_fp8(q8, k8, v8t, qs, ks, vs, causal, D ** -0.5),
            }
            for name, call in calls.items():
                t_old, t_new = per_call_us([lambda: call(old), lambda: call(new)], args.calls)
                print(f"{D:>3} {int(causal):>6} {name:10} {t_old:7.2f} {t_new:7.2f} {t_old - t_new:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
