"""The fp8 forward's host path per call on CPU (no GPU): kernelc's prepared launch, its argument packing (the
descriptors' fields and tensor-map cache lookups included) running for real, only ``cuLaunchKernel`` and
``cuTensorMapEncodeTiled`` replaced by no-ops; against the fp16 pointer forward the same way.

    python3 bench/experiments/fp8h28/host_cpu.py [--old-root /work/main] [--calls 20000] [--profile]

The fake entry of a descriptor kernel gets the machine signature a compile would give (``abi.machine_params`` of the
launch key's signature at sm_90a), so the generated launch packs what the GPU's would. CPU tensors [1, 1, 128, D]; CPU
``torch.empty`` stands in for CUDA's caching allocator. Prints us per call, the least of ``--repeats`` rounds with the
variants alternating (the machine is shared). Nothing here is a test.
"""
from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class _AlwaysHit(dict):
    """The launcher's in-memory cache: every key hits (hashed as a real lookup) the one fake entry of its kernel."""

    def __init__(self, fn):
        super().__init__()
        self.fn, self.ents = fn, {}

    def get(self, key, default=None):
        ent = self.ents.get(key)
        if ent is None:
            ent = self.ents[key] = _fake_entry(self.fn, key)
        return ent


def _fake_entry(fn, key):
    from kernelc.compiler.abi import machine_kind, machine_params
    from kernelc.runtime.driver import ArgBuffer
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import Loaded, get_state
    sig, _, _, _, kinds = get_state(fn)["spec"].signature(key[0])

    class Target:
        arch = "sm_90a"

    class C:
        global_scratch_bytes, shared, cache_key, signature, target = 0, 0, "fake", sig, Target()

    class F:
        handle, function, threads, shared, name = 0, 0, 128, 0, fn.__name__
    buf_kinds = kinds
    if any(isinstance(k, tuple) for k in kinds):
        buf_kinds = [machine_kind(str(t)) for _, t, _ in machine_params(sig, "sm_90a")]
    ent = Loaded(C(), F(), ArgBuffer(tuple(buf_kinds)), kinds)
    cmask = [isinstance(p, tuple) and p[0] == "c" for p in key[0]]
    os.environ["KERNELC_LAUNCH_IMPL"] = "ctypes"
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
    from kernelc.runtime.fastpath import make_binder
    from kernelc.runtime.launcher import get_state
    import kernelc.runtime.tensor_map as TM
    # the driver's encode: the address, sizes and box as bytes (no driver here; the result is cached by pointer)
    TM.encode = lambda p: repr((p.global_address, p.global_dim, p.global_strides, p.box_dim)).encode()[:128].ljust(
        128, b"\0")
    st = get_state(fn)
    st["cache"] = _AlwaysHit(fn)
    fn._fast = make_binder(fn)
    if hasattr(fn, "_bound"):
        fn._bound.clear()


def load(root, name, as_name):
    sys.path.insert(0, root)
    try:
        spec = importlib.util.spec_from_file_location(as_name, os.path.join(root, "examples", "kernels", f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(root)
    return mod


def per_call_us(fs, calls, repeats):
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
    ap.add_argument("--old-root", default=None, help="another tree's examples/kernels/attention.py (same kernelc)")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    os.environ.pop("KERNELC_INTERPRET", None)
    import torch
    mods = {"new": load(ROOT, "attention", "new_attention")}
    if args.old_root:
        mods["old"] = load(args.old_root, "attention", "old_attention")
    for m in mods.values():
        arm(m.attn_fwd_lse_kernel)
    Z, H, N = 1, 1, 128
    print(f"torch {torch.__version__}, us per call (CPU; driver launch and map encode no-ops)")
    for D, causal in ((64, True), (128, True), (64, False)):
        q, k, v = (torch.randn(Z, H, N, D, dtype=torch.float16) for _ in range(3))
        q8, k8 = (t.to(torch.float8_e4m3fn) for t in (q, k))
        v8t = v.transpose(-1, -2).contiguous().to(torch.float8_e4m3fn)
        qs, ks, vs = (torch.ones(1) for _ in range(3))
        fs, names = [], []
        for tag, m in mods.items():
            for name, f in (("fp8", lambda m=m: m.attention_fp8(q8, k8, v8t, qs, ks, vs, causal, D ** -0.5,
                                                                key_order=True)),
                            ("fp16_ptr", lambda m=m: m.attention_fwd(q, k, v, causal, D ** -0.5))):
                f()
                plan = [p for p in m._PLANS.values()][-1]
                assert plan.run is not None
                fs.append(f)
                names.append(f"{tag}:{name}")
        fp8_plans = [p for key, p in mods["new"]._PLANS.items() if key[0] == "fp8"]
        print(f"D={D} causal={int(causal)} new fp8 plan: descs={fp8_plans[-1].descs is not None} "
              f"prepared={fp8_plans[-1].prepared}")
        ts = per_call_us(fs, args.calls, args.repeats)
        for n, t in zip(names, ts):
            print(f"  {n:14s} {t:7.2f} us")
        if args.profile and D == 64 and causal:
            pr = cProfile.Profile()
            f = fs[0]
            pr.enable()
            for _ in range(20000):
                f()
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(14)
    return 0


if __name__ == "__main__":
    sys.exit(main())
