"""Where the attention backward's autograd path loses time against the same kernels called directly
(docs/attention.md, "Open: through autograd our backward took 0.24-0.75 ms more").

GPU (``--device cuda``), per shape and per path -- ``direct``: ``attention_bwd(do, q, k, v, o, lse, ...)``;
``autograd``: ``o.backward(do, retain_graph=True)`` with the leaves' grads cleared (host only) before each call:

- ``idle_ms``: CUDA events around one call that starts from an idle GPU (a synchronize before each), what
  ``python3 -m bench attention`` times; ``host_ms``: the host time of that call (until it returns);
- ``busy_ms``: ``--busy`` calls back to back between one event pair, per call: the GPU never waits for the
  host, so host latency before and between launches is hidden;
- ``kernels``: every GPU kernel one call runs (torch.profiler), name and duration, and ``first_kernel_us``:
  from the call's start on the host to its first kernel's start on the GPU.

CPU (``--device cpu``): the host path alone, kernels not launched (each launch replaced by a no-op that
records its name): ``host_us`` per call of both paths at the same shapes (allocations, contiguity checks,
the autograd engine), ``launches`` the launches one call makes.

    PYTHONPATH=$PWD python3 bench/experiments/attention_autograd/autograd_overhead.py --out $OUT/autograd.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _shapes(args):
    return [(args.seq, d, c) for d in args.head_dim for c in args.causal]


class _Stub:
    """A kernel whose launches do nothing but count (the host path up to the launch)."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __getitem__(self, grid):
        def launch(*a, **k):
            self.log.append(self.name)
        return launch


def cpu(args):
    import torch
    from examples.kernels import attention_bwd as B
    out = []
    for N, D, causal in _shapes(args):
        Z, H = args.batch, args.heads
        g = torch.Generator().manual_seed(0)
        q, k, v, do, o = (torch.randn(Z, H, N, D, generator=g).half() for _ in range(5))
        lse = torch.zeros(Z, H, N)
        log = []
        saved = {n: getattr(B, n) for n in ("attn_bwd_preprocess_kernel", "attn_bwd_dkdv_kernel", "attn_bwd_dq_kernel")}
        for n in saved:
            setattr(B, n, _Stub(n, log))
        try:
            row = dict(seq=N, head_dim=D, causal=causal)
            for mode in args.modes:  # (a one-kernel mode's dQ cast is a torch op: real work on the CPU)
                # direct: the function autograd's backward calls
                def direct():
                    return B.attention_bwd(do, q, k, v, o, lse, causal, D ** -0.5, dq_mode=mode)
                leaves = [t.clone().requires_grad_() for t in (q, k, v)]

                class Fwd(torch.autograd.Function):  # AttentionFunction's backward on saved tensors, no forward kernel
                    @staticmethod
                    def forward(ctx, a, b, c):
                        ctx.save_for_backward(a, b, c, o, lse)
                        return o.clone()

                    @staticmethod
                    def backward(ctx, d):
                        a, b, c, oo, ll = ctx.saved_tensors
                        return B.attention_bwd(d, a, b, c, oo, ll, causal, D ** -0.5, dq_mode=mode)

                out_t = Fwd.apply(*leaves)

                def through_autograd():
                    for t in leaves:
                        t.grad = None
                    out_t.backward(do, retain_graph=True)
                for name, fn in (("direct", direct), ("autograd", through_autograd)):
                    for _ in range(5):
                        fn()
                    times = []
                    for _ in range(args.reps):
                        t0 = time.perf_counter()
                        fn()
                        times.append((time.perf_counter() - t0) * 1e6)
                    log.clear()
                    fn()
                    row[f"{mode}_{name}_host_us"] = statistics.median(times)
                    row[f"{mode}_{name}_launches"] = list(log)
            out.append(row)
            print(row, flush=True)
        finally:
            for n, f in saved.items():
                setattr(B, n, f)
    return out


def gpu(args):
    import torch
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    out = []
    for N, D, causal in _shapes(args):
        Z, H = args.batch, args.heads
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v, do = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(4))
        scale = D ** -0.5
        for mode in args.modes:
            row = dict(seq=N, head_dim=D, causal=causal, dq_mode=mode)
            o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            o_ag = B.attention(*leaves, causal=causal, sm_scale=scale, dq_mode=mode)

            def clear():
                for t in leaves:
                    t.grad = None

            paths = {"direct": (lambda: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=mode), None),
                     "autograd": (lambda: o_ag.backward(do, retain_graph=True), clear)}
            for name, (fn, before) in paths.items():
                for _ in range(3):
                    if before:
                        before()
                    fn()
                torch.cuda.synchronize()
                idle, host = [], []
                for _ in range(args.reps):
                    if before:
                        before()
                    torch.cuda.synchronize()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    t0 = time.perf_counter()
                    s.record()
                    fn()
                    e.record()
                    host.append((time.perf_counter() - t0) * 1e3)
                    torch.cuda.synchronize()
                    idle.append(s.elapsed_time(e))
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(args.busy):
                    if before:
                        before()
                    fn()
                e.record()
                torch.cuda.synchronize()
                row[f"{name}_idle_ms"] = statistics.median(idle)
                row[f"{name}_host_ms"] = statistics.median(host)
                row[f"{name}_busy_ms"] = s.elapsed_time(e) / args.busy
                row[f"{name}_kernels"], row[f"{name}_first_kernel_us"] = _profile(fn, before)
            out.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("_kernels")}), flush=True)
            for name in paths:
                print("  ", name, [(k, round(us, 1)) for k, us in row[f"{name}_kernels"]], flush=True)
            del o_ag
    return out


def _profile(fn, before):
    """[(kernel name, µs)] of one call and µs from the call's start to its first kernel (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    if before:
        before()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("kc_call"):
            fn()
        torch.cuda.synchronize()
    events = prof.events()
    call = next(ev for ev in events if ev.name == "kc_call")
    kernels = sorted((ev for ev in events if ev.device_type == torch.autograd.DeviceType.CUDA and ev.name != "kc_call"),
                     key=lambda ev: ev.time_range.start)
    first = (kernels[0].time_range.start - call.time_range.start) if kernels else None
    return [(ev.name[:60], ev.time_range.elapsed_us()) for ev in kernels], first


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--head-dim", type=int, nargs="+", default=[128, 64])
    p.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--modes", nargs="+", default=["separate", "ds"])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--busy", type=int, default=10)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.causal = [bool(c) for c in args.causal]
    rows = gpu(args) if args.device == "cuda" else cpu(args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=args.device, argv=sys.argv[1:], rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
