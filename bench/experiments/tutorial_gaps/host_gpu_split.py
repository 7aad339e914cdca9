"""Host or GPU? Tutorial points timed three ways in one process, under one runtime (a GPU is needed; run once per
runtime, each in its own process, in the order A B B A).

    python3 bench/experiments/tutorial_gaps/host_gpu_split.py --impl kernelc --tutorials DIR --cases a06 ... --out k.json

Every case is a call the tutorial's benchmark makes, with its inputs built as the benchmark builds them:

- ``a06:D:causal:fp8:N:BMxBNxSxW`` -- 06's ``attention`` forward (batch 4, 32 heads, no warp specialisation),
  ``_attn_fwd``'s autotuner restricted to that one config (``tuned``: its whole list, as the tutorial);
- ``b06:D:causal:N:BMxBNxSxW`` -- 06's backward as the benchmark times it (``o.backward(do, retain_graph=True)``),
  the forward before it restricted to the config;
- ``sdpa:D:causal:N`` -- the control for 06: torch's fp16 attention at the same shape, the same torch code under both
  runtimes, timed by the runtime's ``do_bench`` as the tutorial times its own columns;
- ``v01:N:provider`` -- 01's table at N elements, provider ``triton`` (its ``add``) or ``torch`` (the control);
- ``g08:N:provider`` -- 08's small table (``benchmark_square_matrices``: 4 square fp16 GEMMs of size N), provider
  ``cublas`` (its control column: torch code), ``triton`` or ``triton-tma``, the tutorial's autotuners as they are;
- ``s02:N:provider`` -- 02's table at 4096 x N fp32, provider ``triton`` (its ``softmax``: ``warmup`` and the launch
  every call), ``torch`` or ``naive_softmax`` (its two control columns), on a stream of its own as the benchmark sets
  one for each point; the mean of ``do_bench``, as the tutorial reads it;
- ``p09:KERNEL:M:N:K:SPEC`` -- 09's fp16 wrapper ``matmul`` (KERNEL ``naive``), ``matmul_persistent``
  (``persistent``) or ``matmul_descriptor_persistent`` without warp specialisation (``descriptor``, flattened), with
  the inputs its ``bench`` makes (a: M x K, b: K x N made (N, K)-contiguous; the pointer kernels get ``b.T``), the
  kernel's autotuner held to the config SPEC names (``k=v/...``, ``w``, ``s``; as ``m03`` and ``g08``).

Per case and repeat (the cases are visited round-robin, ``--repeats`` times):

- ``ms``: the runtime's ``do_bench`` as the tutorial calls it (02, 06: the mean; 01, 08: the median of quantiles),
  computed from its samples (``return_mode="all"``); ``ms_mean``, ``ms_median``, ``ms_max``, ``n`` and ``n_slow``
  (samples above twice the median) say whether a few slow samples made the reading; ``gc`` counts the collections
  the garbage collector ran during that ``do_bench`` (per generation, their seconds, the longest), and ``ms_gc_off``
  is a second ``do_bench`` reading with the collector disabled;
- ``busy_ms``: the same pattern as ``do_bench`` (L2 flush, then events around one call), ``--calls`` times, issued
  while the GPU is held by ``torch.cuda._sleep``: every call queues behind the one before, so the events see only the
  GPU's time (``covered`` says the host finished issuing before the GPU started them; if it is false the host was the
  slower side even so and ``busy_ms`` is not clean);
- ``host_us``: the host's time to issue one call (``fn`` alone, summed over the same calls, so it has no back-pressure).

A point whose ``ms`` is above its ``busy_ms`` is host-bound in the tutorial's timing; the ratio of ``busy_ms`` says
what the kernels do, the ratio of ``host_us`` what the launch path does. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SM_SCALE = 1.3


def _load(path, name, stop_at=None, skip=None):
    """The tutorial as a module; ``stop_at``: run its text only up to the first line starting with that (01 runs its
    whole benchmark at the top level after its kernel and wrapper are defined); ``skip``: (first, until), leave out
    the lines from the first one starting with ``first`` up to the first after it starting with ``until``."""
    if stop_at is None and skip is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    import types
    lines = open(path).read().splitlines(keepends=True)
    cut = next((i for i, ln in enumerate(lines) if stop_at and ln.startswith(stop_at)), len(lines))
    if skip:
        a = next(i for i, ln in enumerate(lines) if ln.startswith(skip[0]))
        b = next(i for i, ln in enumerate(lines) if i > a and ln.startswith(skip[1]))
        lines = lines[:a] + ["\n"] * (b - a) + lines[b:]  # blank lines keep the line numbers
    mod = types.ModuleType(name)
    mod.__file__ = path
    sys.modules[name] = mod  # @jit reads its function's module
    exec(compile("".join(lines[:cut]), path, "exec"), mod.__dict__)
    return mod


def _restrict(tuner, config):
    """Limit an autotuner to one of its configs (BMxBNxSxW); returns the config or None. ``tuned``: the
    tutorial's whole list (its autotuner as it is; the first call then tunes the key)."""
    pool = getattr(tuner, "_t06s20_pool", None) or list(tuner.configs)
    tuner._t06s20_pool = pool
    if config == "tuned":
        if tuner.configs != pool:
            tuner.configs = list(pool)
            tuner.cache.clear()
        return pool
    bm, bn, s, w = (int(x) for x in config.split("x"))
    cfg = next((c for c in pool if c.kwargs.get("BLOCK_M") == bm and c.kwargs.get("BLOCK_N") == bn
                and c.num_stages == s and c.num_warps == w), None)
    if cfg is not None:
        tuner.configs = [cfg]
        tuner.cache.clear()
    return cfg


def _spec_matches(c, spec):
    want = dict(kv.split("=") for kv in spec.split("/"))
    have = {k: str(v) for k, v in c.kwargs.items()}
    have.update(w=str(c.num_warps), s=str(c.num_stages))
    return all(have.get(k) == v for k, v in want.items())


def _restrict_spec(tuner, spec):
    """Hold an autotuner to the config ``spec`` names (``tuned``: its whole list); returns the configs it keeps."""
    pool = getattr(tuner, "_t06s20_pool", None) or list(tuner.configs)
    tuner._t06s20_pool = pool
    keep = pool if spec == "tuned" else [c for c in pool if _spec_matches(c, spec)]
    if len(keep) != (len(pool) if spec == "tuned" else 1):
        raise ValueError(f"{spec} names {len(keep)} of the tutorial's {len(pool)} configs")
    if list(tuner.configs) != keep:
        tuner.configs = list(keep)
        # each spec keeps its own picks: the tuned case tunes once per process, not again after every held case
        caches = tuner.__dict__.setdefault("_t06s24_caches", {})
        tuner.cache = caches.setdefault(spec, {})
    return keep


def config_spec(c) -> str:
    return "/".join([f"{k}={v}" for k, v in c.kwargs.items()] + [f"w={c.num_warps}", f"s={c.num_stages}"])


class Cases:
    def __init__(self, tutorials):
        self.dir = tutorials
        self._m01 = self._m02 = self._m06 = self._m08 = self._m03 = self._m05 = None
        self.streams = {}

    def m01(self):
        if self._m01 is None:
            # its kernel and ``add``, not its check and benchmark (which the tutorial runs at the top level)
            self._m01 = _load(os.path.join(self.dir, "01-vector-add.py"), "t06s20_tut01", stop_at="size = ")
        return self._m01

    def m02(self):
        if self._m02 is None:  # its kernel, ``softmax``, ``naive_softmax`` and its check, not its benchmark
            self._m02 = _load(os.path.join(self.dir, "02-fused-softmax.py"), "t06s22_tut02",
                              stop_at="@triton.testing.perf_report")
        return self._m02

    def m06(self):
        if self._m06 is None:
            self._m06 = _load(os.path.join(self.dir, "06-fused-attention.py"), "t06s20_tut06")
        return self._m06

    def m08(self):
        if self._m08 is None:  # its check runs (both autotuners tune there, key group_size: the tables' pick), its
            # two tables do not (12 s a process)
            self._m08 = _load(os.path.join(self.dir, "08-grouped-gemm.py"), "t06s20_tut08",
                              stop_at="benchmark_square_matrices.run(")
        return self._m08

    def m03(self):
        if self._m03 is None:  # its kernel and ``matmul``; its checks (which tune the 512 keys) and table do not run
            self._m03 = _load(os.path.join(self.dir, "03-matrix-multiplication.py"), "t06s24_tut03",
                              stop_at="torch.manual_seed(0)")
        return self._m03

    def m05(self):
        if self._m05 is None:  # its kernels and ``layer_norm``; its check and table do not run
            self._m05 = _load(os.path.join(self.dir, "05-layer-norm.py"), "t06s24_tut05",
                              stop_at="test_layer_norm(1151")
        return self._m05

    def m09(self):
        if getattr(self, "_m09", None) is None:  # its kernels and wrappers; its checks and benchmark run under main
            self._m09 = _load(os.path.join(self.dir, "09-persistent-matmul.py"), "ab26_tut09")
        return self._m09

    def m08_bare(self):
        """08 without its check (which tunes both autotuners, ~12 s a process): for cases held to one config."""
        if getattr(self, "_m08b", None) is None:
            self._m08b = _load(os.path.join(self.dir, "08-grouped-gemm.py"), "t06s24_tut08",
                               stop_at="benchmark_square_matrices.run(", skip=("group_m = [", "def triton_perf_fn"))
        return self._m08b

    def m03_inputs(self, size, dtype):
        import torch
        torch.manual_seed(0)
        a = torch.randn((size, size), device="cuda", dtype=torch.float16)
        b = torch.randn((size, size), device="cuda", dtype=torch.float16)
        if dtype == "fp8":  # as the benchmark prepares them
            a = a.to(torch.float8_e5m2)
            b = b.T
            b = b.to(torch.float8_e5m2)
        return a, b

    def pick(self, case):
        """The config the tutorial's autotuner ran at the case's first call (08's kernels tune each point afresh:
        their key holds the point's pointer tensors), or None."""
        kind, *a = case.split(":")
        if kind == "m03" and a[-1] == "tuned":
            return str(getattr(self.m03().matmul_kernel, "best_config", None))
        if kind == "a06" and a[-1] == "tuned":  # the tutorial's own autotuner: what it took for this key
            return str(getattr(self.m06()._attn_fwd, "best_config", None))
        if kind != "g08" or a[1] not in ("triton", "triton-tma") or len(a) > 2:
            return None
        tuner = self.m08().grouped_matmul_kernel if a[1] == "triton" else self.m08().grouped_matmul_tma_kernel
        return str(getattr(tuner, "best_config", None))

    def build(self, case):
        """(fn, prepare, quantiles): prepare() re-applies the case's state before each visit (the config)."""
        import torch
        kind, *a = case.split(":")
        if kind in ("a06", "b06"):
            mod = self.m06()
            if kind == "a06":
                d, causal, fp8, n, config = int(a[0]), bool(int(a[1])), bool(int(a[2])), int(a[3]), a[4]
            else:
                d, causal, fp8, n, config = int(a[0]), bool(int(a[1])), False, int(a[2]), a[3]
            torch.manual_seed(0)
            q, k, v = (torch.randn((4, 32, n, d), dtype=torch.float16, device="cuda", requires_grad=True)
                       for _ in range(3))
            if fp8:  # as the benchmark's fp8 provider prepares them
                q, k = q.to(torch.float8_e5m2), k.to(torch.float8_e5m2)
                v = v.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)

            def prepare():
                if _restrict(mod._attn_fwd, config) is None:
                    raise ValueError(f"{config} is not in the tutorial's config list")
            prepare()
            fn = lambda: mod.attention(q, k, v, causal, SM_SCALE, False)  # noqa: E731
            if kind == "b06":
                o = fn()
                do = torch.randn_like(o)
                fn = lambda: o.backward(do, retain_graph=True)  # noqa: E731
            return fn, prepare, None
        if kind == "sdpa":
            d, causal, n = int(a[0]), bool(int(a[1])), int(a[2])
            torch.manual_seed(0)
            q, k, v = (torch.randn((4, 32, n, d), dtype=torch.float16, device="cuda") for _ in range(3))
            sdpa = torch.nn.functional.scaled_dot_product_attention
            return (lambda: sdpa(q, k, v, is_causal=causal, scale=SM_SCALE)), (lambda: None), None
        if kind == "v01":  # 01's benchmark: fp32 vectors of N elements, the median of quantiles as it reads them
            n, provider = int(a[0]), a[1]
            x, y = torch.rand(n, device="cuda", dtype=torch.float32), torch.rand(n, device="cuda", dtype=torch.float32)
            if provider == "torch":
                return (lambda: x + y), (lambda: None), [0.5, 0.2, 0.8]
            mod = self.m01()
            return (lambda: mod.add(x, y)), (lambda: None), [0.5, 0.2, 0.8]
        if kind == "s02":  # 02's benchmark: x = randn(4096, N), a new stream made current, do_bench's mean
            n, provider = int(a[0]), a[1]
            mod = self.m02()
            x = torch.randn(4096, n, device="cuda", dtype=torch.float32)
            stream = self.streams.setdefault(case, torch.cuda.Stream())

            def prepare():
                torch.cuda.set_stream(stream)
            prepare()
            fns = {"triton": lambda: mod.softmax(x), "torch": lambda: torch.softmax(x, axis=-1),
                   "naive_softmax": lambda: mod.naive_softmax(x)}
            return fns[provider], prepare, None
        if kind == "g08":
            n, provider = int(a[0]), a[1]
            spec = a[2] if len(a) > 2 else None
            # the control needs no tuning: 08 without its check (as the held cases), so no process pays its ~12 s
            mod = self.m08_bare() if spec or provider == "cublas" else self.m08()
            prepare08 = lambda: None  # noqa: E731
            if spec:
                tuner = mod.grouped_matmul_kernel if provider == "triton" else mod.grouped_matmul_tma_kernel

                def prepare08():
                    _restrict_spec(tuner, spec)
            group_a, group_b, group_bt, cs = [], [], [], []
            for _ in range(4):
                A = torch.rand((n, n), device="cuda", dtype=torch.float16)
                B = torch.rand((n, n), device="cuda", dtype=torch.float16)
                group_a.append(A)
                group_b.append(B)
                group_bt.append(B.T.contiguous())
                cs.append(torch.empty((n, n), device="cuda", dtype=torch.float16))
            ptrs = lambda ts: torch.tensor([t.data_ptr() for t in ts], device="cuda")  # noqa: E731
            da, db, dbt, dc = ptrs(group_a), ptrs(group_b), ptrs(group_bt), ptrs(cs)
            sizes = torch.tensor([n] * 12, dtype=torch.int32, device="cuda")
            lds = torch.tensor([n] * 12, dtype=torch.int32, device="cuda")
            q3 = [0.5, 0.2, 0.8]
            # the kernels reach A, B, B^T and C only through the pointer arrays: the case keeps the tensors alive
            # (the tutorial's benchmark holds them in its frame; until session 22 the triton/triton-tma cases let
            # them go, so their kernels read and wrote freed memory that the allocator handed out again)
            keep = (group_a, group_b, group_bt, cs)
            if provider == "cublas":
                fn = lambda: mod.torch_perf_fn(group_a, group_b)  # noqa: E731
            elif provider == "triton":
                fn = lambda: mod.triton_perf_fn(da, db, dc, sizes, lds, 4)  # noqa: E731
            elif provider == "triton-tma":
                fn = lambda: mod.triton_tma_perf_fn(da, dbt, dc, sizes, lds, 4, dtype=torch.float16)  # noqa: E731
            else:
                raise ValueError(provider)
            fn.keep = keep
            prepare08()
            return fn, prepare08, q3
        if kind == "m03":
            size, dtype, spec = int(a[0]), a[1], a[2]
            x, y = self.m03_inputs(size, dtype)
            q3 = [0.5, 0.2, 0.8]
            if spec == "cublas":
                return (lambda: torch.matmul(x, y)), (lambda: None), q3
            mod = self.m03()

            def prepare():
                _restrict_spec(mod.matmul_kernel, spec)
            prepare()
            return (lambda: mod.matmul(x, y)), prepare, q3
        if kind == "p09":
            which, m, n, k, spec = a[0], int(a[1]), int(a[2]), int(a[3]), a[4]
            mod = self.m09()
            torch.manual_seed(0)
            x = torch.randn((m, k), device="cuda", dtype=torch.float16)
            y = torch.randn((k, n), device="cuda", dtype=torch.float16).T.contiguous()
            tuner, fn = {
                "naive": (mod.matmul_kernel, lambda: mod.matmul(x, y.T)),
                "persistent": (mod.matmul_kernel_persistent, lambda: mod.matmul_persistent(x, y.T)),
                "descriptor": (mod.matmul_kernel_descriptor_persistent,
                               lambda: mod.matmul_descriptor_persistent(x, y, False)),
            }[which]

            def prepare():
                _restrict_spec(tuner, spec)
            prepare()
            return fn, prepare, [0.5, 0.2, 0.8]
        if kind == "l05":
            n, provider = int(a[0]), a[1]
            mod = self.m05()
            dtype, eps = torch.float16, 1e-5
            w_shape = (n,)
            torch.manual_seed(0)
            weight = torch.rand(w_shape, dtype=dtype, device="cuda", requires_grad=True)
            bias = torch.rand(w_shape, dtype=dtype, device="cuda", requires_grad=True)
            x = -2.3 + 0.5 * torch.randn((4096, n), dtype=dtype, device="cuda")
            dy = .1 * torch.randn_like(x)
            x.requires_grad_(True)
            if provider == "triton":
                y = mod.layer_norm(x, w_shape, weight, bias, eps)
            else:
                y = torch.nn.functional.layer_norm(x, w_shape, weight, bias, eps)

            def fn():
                x.grad = None  # the benchmark's grad_to_none=[x], here inside the call so busy() does it too
                y.backward(dy, retain_graph=True)
            fn.bench_kwargs = {"rep": 500}
            return fn, (lambda: None), [0.5, 0.2, 0.8]
        raise ValueError(f"unknown case {case!r}")


def round_robin(cases, repeats, over_budget, visit, rows, after_each=lambda: None):
    """Visit every case once per repeat, in order, until ``over_budget()``; append ``visit(case, repeat)``'s rows.
    Returns why it stopped early ("" when it did not)."""
    for rep in range(repeats):
        for case in cases:
            if over_budget():
                return f"budget reached before repeat {rep} of {case}"
            rows.append(visit(case, rep))
            after_each()
    return ""


def reading(times, quantiles):
    """The tutorial's reading from ``do_bench``'s samples (ms): the median where it passes quantiles, else the mean;
    with the mean, median, largest sample, count, and how many samples are above twice the median."""
    times = list(times)
    med = statistics.median(times)
    mean = statistics.fmean(times)
    return {"ms": med if quantiles else mean, "ms_mean": mean, "ms_median": med, "ms_max": max(times),
            "n": len(times), "n_slow": sum(t > 2 * med for t in times)}


class GcWatch:
    """The garbage collector's runs while in the block: per generation, how many and their seconds, the longest."""

    def __enter__(self):
        self.runs, self._t0 = [], None
        gc.callbacks.append(self._cb)
        return self

    def _cb(self, phase, info):
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self._t0 is not None:
            self.runs.append((info.get("generation"), time.perf_counter() - self._t0))
            self._t0 = None

    def __exit__(self, *exc):
        gc.callbacks.remove(self._cb)
        return False

    def summary(self):
        per = {}
        for g, dt in self.runs:
            n, s = per.get(str(g), (0, 0.0))
            per[str(g)] = (n + 1, s + dt)
        return {"runs": {g: {"n": n, "s": round(s, 6)} for g, (n, s) in per.items()},
                "max_s": round(max((dt for _, dt in self.runs), default=0.0), 6)}


def busy(fn, calls, flush):
    """do_bench's pattern (flush, event, call, event) issued behind a GPU sleep; returns (ms per call, host us per
    call of fn alone, covered)."""
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    one_host = time.perf_counter() - t0
    torch.cuda.synchronize()
    # hold the GPU for 3x the host's estimate (plus 5 ms), at ~2 GHz
    hold_s = 3 * calls * max(one_host, 50e-6) + 5e-3
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    first = torch.cuda.Event()
    torch.cuda._sleep(int(hold_s * 2e9))
    first.record()
    host = 0.0
    for i in range(calls):
        flush.zero_()
        starts[i].record()
        t = time.perf_counter()
        fn()
        host += time.perf_counter() - t
        ends[i].record()
    covered = not first.query()  # the GPU was still asleep when the last call had been issued
    torch.cuda.synchronize()
    ms = statistics.fmean(s.elapsed_time(e) for s, e in zip(starts, ends))
    return ms, host / calls * 1e6, covered


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("kernelc", "triton"), required=True)
    ap.add_argument("--tutorials", required=True, help="the folder of Triton 3.6's tutorial texts")
    ap.add_argument("--cases", nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting new visits after this many seconds")
    ap.add_argument("--profile-case", nargs="*", default=[], help="after the repeats, where this case's host time goes: "
                    "cProfile over --profile-calls calls, written to OUT.prof.txt")
    ap.add_argument("--profile-calls", type=int, default=300)
    ap.add_argument("--warm-only", action="store_true",
                    help="build every case and call it once (compile caches filled, nothing timed), then exit")
    ap.add_argument("--sweep", nargs="*", default=[], metavar="m03:S:dtype",
                    help="after the repeats, every config of 03's list at that point: do_bench's median (the "
                         "autotuner's view), busy_ms and host_us")
    ap.add_argument("--sweep-s", type=float, default=15.0, help="a sweep starts up to this long after --budget-s")
    ap.add_argument("--no-gc-off", action="store_true", help="leave out the second do_bench with the collector off")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    if args.impl == "kernelc":
        sys.path.insert(0, ROOT)
        from kernelc.compat import install
        install()
    import torch
    import triton
    import triton.testing  # noqa: F401 -- do_bench below
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    cases = Cases(args.tutorials)
    built, rows = {}, []
    out = {"impl": args.impl, "tag": args.tag, "triton_version": getattr(triton, "__version__", None),
           "import_s": time.perf_counter() - t_start, "rows": rows, "setup": {}}
    out["gc_threshold"] = list(gc.get_threshold())

    def dump():
        out["seconds"] = time.perf_counter() - t_start
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)

    if args.warm_only:
        # setup: building the case (for the first case of a tutorial, loading it: 01 and 08 run their whole benchmark
        # there), first_call: the case's first call alone (compile, and autotune where the config is ``tuned``)
        out["first_call"] = {}
        for case in args.cases:
            t0 = time.perf_counter()
            try:
                built[case] = cases.build(case)
                fn = built[case][0]
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                out["setup"][case] = t1 - t0
                fn()
                torch.cuda.synchronize()
                out["first_call"][case] = time.perf_counter() - t1
            except Exception as e:  # noqa: BLE001
                out["setup"][case] = f"{type(e).__name__}: {e}"[:400]
            print(json.dumps({"case": case, "setup_s": out["setup"][case],
                              "first_call_s": out["first_call"].get(case)}), flush=True)
            dump()
        _profiles(args, built)
        dump()
        return 0
    def visit(case, rep):
        row = {"case": case, "repeat": rep}
        try:
            if case not in built:
                t0 = time.perf_counter()
                built[case] = cases.build(case)
                fn, prepare, _ = built[case]
                with GcWatch() as gcw:
                    fn()  # the first call: compile (and autotune for g08 and the tuned a06)
                    torch.cuda.synchronize()
                out["setup"][case] = time.perf_counter() - t0
                # the collector's runs inside the first call, and its generation counts after it (how near the next
                # full collection is)
                out.setdefault("first_call_gc", {})[case] = dict(gcw.summary(), counts_after=list(gc.get_count()))
                pick = cases.pick(case)
                if pick:
                    out.setdefault("picks", {})[case] = pick
                if case.startswith("m03:") and case.endswith(":tuned"):  # the tuning's own ranking, per config
                    tm = getattr(cases.m03().matmul_kernel, "configs_timings", None) or {}
                    out.setdefault("tunings", {})[case] = {
                        config_spec(c): (list(t) if isinstance(t, (list, tuple)) else t) for c, t in tm.items()}
            fn, prepare, quantiles = built[case]
            torch.cuda.set_stream(torch.cuda.default_stream())  # s02 cases set their own
            prepare()
            with GcWatch() as gcw:
                times = triton.testing.do_bench(fn, return_mode="all", **getattr(fn, "bench_kwargs", {}))
            row.update(reading(times, quantiles))
            row["gc"] = gcw.summary()
            if args.no_gc_off:
                row["busy_ms"], row["host_us"], row["covered"] = busy(fn, args.calls, flush)
                print(json.dumps(row), flush=True)
                return row
            gc.disable()
            try:
                row["ms_gc_off"] = reading(triton.testing.do_bench(fn, return_mode="all"), quantiles)["ms"]  # rep 100
            finally:
                gc.enable()
            row["busy_ms"], row["host_us"], row["covered"] = busy(fn, args.calls, flush)
        except Exception as e:  # noqa: BLE001 -- a failure is a result too
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        print(json.dumps(row), flush=True)
        return row

    def after_each():
        out["gc_objects"] = len(gc.get_objects())  # what a full collection walks, in this process
        dump()

    stopped = round_robin(args.cases, args.repeats, lambda: time.perf_counter() - t_start > args.budget_s, visit,
                          rows, after_each)
    if stopped:
        out["stopped"] = stopped
    _profiles(args, built)  # also after a budget stop: it takes well under a second
    for point in args.sweep:
        if time.perf_counter() - t_start > args.budget_s + args.sweep_s:
            out.setdefault("sweep_skipped", []).append(point)
            continue
        out.setdefault("sweep", {})[point] = sweep03(cases, point, flush, triton.testing.do_bench)
        dump()
    # what one full collection costs in this process now (the compiler's objects included): the length of the pause
    # a generation-2 collection puts into whichever timed loop it falls in
    out["gc_objects"] = len(gc.get_objects())
    t0 = time.perf_counter()
    gc.collect()
    out["full_collect_s"] = time.perf_counter() - t0
    dump()
    return 0


def sweep03(cases, point, flush, do_bench):
    """Every config of 03's list at one point, held in turn: {spec: {ms (do_bench median, as the autotuner reads it),
    busy_ms, host_us, covered} or {error}}."""
    import torch
    _, size, dtype = point.split(":")
    mod = cases.m03()
    x, y = cases.m03_inputs(int(size), dtype)
    pool = getattr(mod.matmul_kernel, "_t06s20_pool", None) or list(mod.matmul_kernel.configs)
    res = {}
    for c in pool:
        spec = config_spec(c)
        try:
            _restrict_spec(mod.matmul_kernel, spec)
            fn = lambda: mod.matmul(x, y)  # noqa: E731
            fn()
            torch.cuda.synchronize()
            ms = do_bench(fn, quantiles=[0.5, 0.2, 0.8])[0]
            b, h, cov = busy(fn, 30, flush)
            res[spec] = {"ms": ms, "busy_ms": b, "host_us": h, "covered": cov}
        except Exception as e:  # noqa: BLE001 -- a config that does not compile (shared memory) is a result too
            res[spec] = {"error": f"{type(e).__name__}: {e}"[:200]}
        print(json.dumps({"sweep": point, "config": spec, **res[spec]}), flush=True)
    return res


def _profiles(args, built):
    for i, case in enumerate(args.profile_case):
        if case in built:
            fn, prepare, _ = built[case]
            prepare()
            fn()
            _profile(fn, args.profile_calls, f"{args.out}.prof{i}.txt", case)


def _profile(fn, n, path, case=""):
    """cProfile over n calls issued behind a GPU sleep (no back-pressure), by own time and by cumulative time."""
    import cProfile
    import io
    import pstats
    import torch
    torch.cuda.synchronize()
    torch.cuda._sleep(int(n * 2e-3 * 2e9))  # ~2 ms of GPU sleep per call is more than any call here takes to issue
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    wall = time.perf_counter() - t0
    torch.cuda.synchronize()
    buf = io.StringIO()
    buf.write(f"{case}: {n} calls, {wall / n * 1e6:.1f} us a call under cProfile\n")
    buf.write(per_call_table(pstats.Stats(prof), n))
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(40)
    with open(path, "w") as f:
        f.write(buf.getvalue())


def per_call_table(st, n, top=45) -> str:
    """pstats' rows in microseconds per profiled call (pstats prints seconds to 3 decimals, too coarse here)."""
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][3])[:top]
    lines = [f"{'cum us/call':>11s} {'own us/call':>11s} {'calls/call':>10s}  function"]
    for (fn, line, name), (cc, nc, tt, ct, _) in rows:
        lines.append(f"{ct / n * 1e6:11.2f} {tt / n * 1e6:11.2f} {nc / n:10.1f}  {os.path.basename(fn)}:{line}({name})")
    return "\n".join(lines) + "\n\n"


if __name__ == "__main__":
    sys.exit(main())
