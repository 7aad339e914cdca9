"""Host time of Triton tutorial 02's ``softmax(x)``, step by step, and of a plain ``kernel[grid](args)`` launch.

Tutorial 02 (fused softmax) calls, for every ``softmax(x)``: ``torch.empty_like``, ``softmax_kernel.warmup(...)``
(the same arguments each call: a memo hit after the first), ``_init_handles()`` and
``kernel[(programs, 1, 1)](...)`` on what warmup returned. At 256 columns that host work, not the GPU, sets the
tutorial's time (docs/triton-tutorials.md). This times each step, plus the launch most user code pays: a
``@jit`` kernel of six parameters called as ``add_kernel[grid](...)`` (no warmup), and the same bound once.

``--stub`` (the default without a GPU): kernelc's CUDA path on this CPU machine with the driver stubbed as
tests/test_bench_memory_bound.py does (it compiles for sm_90a; ``make_launch`` returns a no-op, so a "launch" is
everything up to cuLaunchKernel). ``--real``: real launches on the GPU (the kernels are a few microseconds of GPU
work on tiny tensors, and the queue is drained between rounds). ``--impl triton`` times the same steps under
Triton (GPU only).

Every step runs ``--rounds`` rounds of ``--calls`` calls, the steps interleaved round by round; the table gives
the median microseconds a call and the spread (min-max over rounds).

    python3 bench/experiments/host_launch/host_path.py [--stub|--real] [--impl kernelc|triton] [--rounds 7] [--calls 3000] [--json PATH]
    python3 bench/experiments/host_launch/host_path.py --stub --rounds 5 --calls 2000 --compare main=/work/main br=. --times 4
    python3 bench/experiments/host_launch/host_path.py --stub --binder-from /work/main/kernelc/runtime/fastpath.py
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

# kernelc comes from PYTHONPATH (no sys.path insert): the same script times main's tree and a branch's

# the tutorial's kernel and host function, and a six-parameter kernel launched the plain way; {triton} is the
# module name of the compiler under test
_SRC = '''
import torch
import {triton} as triton
import {triton}.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        mask = col_offsets < n_cols
        row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float('inf'))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        tl.store(output_ptr + row_idx * output_row_stride + col_offsets, numerator / denominator, mask=mask)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha + tl.load(y_ptr + offs, mask=m), mask=m)


NUM_SM, NUM_REGS, SIZE_SMEM, WARP_SIZE = 132, 65536, 232448, 32


def softmax(x):
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8
    num_stages = 4 if SIZE_SMEM > 200000 else 2
    y = torch.empty_like(x)
    kernel = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                   num_stages=num_stages, num_warps=num_warps, grid=(1, ))
    kernel._init_handles()
    n_regs = kernel.n_regs
    size_smem = kernel.metadata.shared
    occupancy = NUM_REGS // (n_regs * WARP_SIZE * num_warps)
    occupancy = min(occupancy, SIZE_SMEM // max(size_smem, 1))
    num_programs = min(NUM_SM * occupancy, n_rows)
    kernel[(num_programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE, num_stages)
    return y
'''


def stub_cuda_driver():
    """kernelc's CUDA launch path without a GPU: compiles for sm_90a, loads nothing, launches a no-op (as
    tests/test_bench_memory_bound.py stubs it)."""
    import torch
    import kernelc.runtime.device as dev
    import kernelc.runtime.driver as drv
    import kernelc.runtime.fastpath as fp
    import kernelc.runtime.jit as jit
    torch._C._cuda_getDevice = lambda: 0
    torch._C._cuda_getCurrentRawStream = lambda d: 0
    dev.cuda_available = lambda: True
    drv.device_properties = lambda device=0: {"major": 9, "minor": 0, "max_shared_optin": 232448,
                                              "max_regs_per_block": 65536}

    class Loaded:
        def __init__(self, cubin, name, shared, num_warps, n_regs, device=0, total_shared=None):
            self.name, self.threads, self.shared, self.handle, self.function = name, 32 * num_warps, shared, 0, None
    drv.LoadedFunction = Loaded
    fp.make_launch = lambda ent, fn, cmask: (lambda *a: None)
    jit.JITFunction._use_interpreter = lambda self, values: False
    jit._fast_enabled = None
    dev._cuda_device = lambda: 0  # as on a GPU host once torch has initialised CUDA (the first cuda tensor)


def build(impl: str):
    d = tempfile.mkdtemp(prefix="host_path_")
    p = os.path.join(d, f"host_path_{impl}.py")
    with open(p, "w") as f:
        f.write(_SRC.format(triton=impl))
    spec = importlib.util.spec_from_file_location(f"host_path_{impl}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def steps(mod, dev: str):
    """name -> zero-argument callable, one per step timed."""
    import torch
    x = torch.randn(4096, 256, device=dev)
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK = 256
    w = mod.softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK,
                                  num_stages=4, num_warps=8, grid=(1, ))
    mod.softmax(x)
    grid = (132, 1, 1)
    bound = w[grid]
    a, b, out = (torch.randn(4096, device=dev) for _ in range(3))
    add = mod.add_kernel
    add[(4,)](a, b, out, 4096, 0.5, BLOCK=1024)
    add_bound = add[(4,)]
    sk = mod.softmax_kernel
    return {
        "softmax(x)": lambda: mod.softmax(x),
        "empty_like": lambda: torch.empty_like(x),
        "warmup (memo hit)": lambda: sk.warmup(y, x, 256, 256, n_rows, n_cols, BLOCK_SIZE=BLOCK, num_stages=4,
                                               num_warps=8, grid=(1, )),
        "warmed[grid](...)": lambda: w[grid](y, x, 256, 256, n_rows, n_cols, BLOCK, 4),
        "warmed launch, bound once": lambda: bound(y, x, 256, 256, n_rows, n_cols, BLOCK, 4),
        "add[grid](6 args)": lambda: add[(4,)](a, b, out, 4096, 0.5, BLOCK=1024),
        "add launch, bound once": lambda: add_bound(a, b, out, 4096, 0.5, BLOCK=1024),
    }


def measure(fns, rounds: int, calls: int, sync, clock=time.perf_counter):
    times = {k: [] for k in fns}
    for f in fns.values():
        for _ in range(200):
            f()
    sync()
    for _ in range(rounds):
        for name, f in fns.items():  # interleaved: a drift in the machine touches every step alike
            t0 = clock()
            for _ in range(calls):
                f()
            t1 = clock()
            sync()
            times[name].append((t1 - t0) / calls * 1e6)
    return times


def binder_ab(mod, fastpath_file: str, dev: str, rounds: int, calls: int, sync, clock):
    """The launch binder of another tree (its ``kernelc/runtime/fastpath.py``, loaded into this process against this
    tree's runtime) against this tree's, same kernels and arguments, interleaved round by round: a binder A/B that a
    machine's speed between processes does not touch."""
    import functools
    import importlib.util
    import torch
    spec = importlib.util.spec_from_file_location("kernelc.runtime._fastpath_other", fastpath_file)
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    a, b, out = (torch.randn(4096, device=dev) for _ in range(3))
    x = torch.randn(4096, 256, device=dev)
    y = torch.empty_like(x)
    add, sk = mod.add_kernel, mod.softmax_kernel

    def bound(fn, grid, this):
        fast = fn._fast if this else other.make_binder(fn)
        f3 = getattr(fast, "fast3", None)
        return functools.partial(f3, *grid) if f3 is not None else functools.partial(fast, grid)
    fns = {}
    for label, this in (("other", False), ("this", True)):
        ab, sb = bound(add, (4, 1, 1), this), bound(sk, (132, 1, 1), this)
        fns[f"add launch, bound once [{label}]"] = lambda ab=ab: ab(a, b, out, 4096, 0.5, BLOCK=1024)
        fns[f"softmax launch, bound once [{label}]"] = lambda sb=sb: sb(y, x, 256, 256, 4096, 256, 256, 4, num_warps=8)
    return measure(fns, rounds, calls, sync, clock)


def compare(trees, times: int, passthrough):
    """Alternate processes over kernelc trees (``LABEL=PATH``) ``times`` times; per step and tree, the median of
    the quietest process and the median of the processes' medians."""
    import subprocess
    runs = {}
    for i in range(times):
        for spec in trees:
            label, tree = spec.split("=", 1)
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
                out = f.name
            env = dict(os.environ, PYTHONPATH=tree)
            subprocess.run([sys.executable, os.path.abspath(__file__), *passthrough, "--label", label, "--json", out],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                runs.setdefault(label, []).append(json.load(f))
            os.unlink(out)
    first = next(iter(runs.values()))[0]
    # a shared machine runs a whole process ~1.5-2x slower at times; torch.empty_like, the same code under every
    # tree, says how fast each process ran: the quietest process of each tree is the one compared
    quiet = {label: min(rs, key=lambda r: r["steps"]["empty_like"]["median_us"]) for label, rs in runs.items()}
    print(f"{first['mode']}: {times} processes a tree, alternated, each {first['rounds']} rounds x "
          f"{first['calls']} calls; us a call, median over rounds: the quietest process (lowest empty_like) / "
          f"the median process")
    print(f"  {'step':28s}" + "".join(f"{label:>22s}" for label in runs))
    for step in first["steps"]:
        cells = []
        for label, rs in runs.items():
            med = statistics.median(r["steps"][step]["median_us"] for r in rs)
            cells.append(f"{quiet[label]['steps'][step]['median_us']:9.2f} / {med:7.2f}   ")
        print(f"  {step:28s}" + "".join(f"{c:>22s}" for c in cells))
    return runs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--stub", action="store_true", help="stub the CUDA driver (default without a GPU)")
    g.add_argument("--real", action="store_true", help="real launches on the GPU")
    ap.add_argument("--impl", default="kernelc", choices=("kernelc", "triton"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--json", help="write the per-round times here")
    ap.add_argument("--clock", choices=("wall", "cpu"),
                    help="wall: perf_counter (default with --real); cpu: this process's CPU time (default stubbed: "
                         "on a shared machine it leaves out the time other processes hold the core)")
    ap.add_argument("--label", default="", help="a name for this run in the table and the JSON (e.g. main)")
    ap.add_argument("--compare", nargs="+", metavar="LABEL=TREE",
                    help="alternate processes over these kernelc trees (e.g. main=/work/main br=.) and summarise")
    ap.add_argument("--binder-from", metavar="FASTPATH_PY",
                    help="also time another tree's launch binder (its kernelc/runtime/fastpath.py) against this "
                         "tree's in this process, interleaved")
    ap.add_argument("--times", type=int, default=3, help="processes a tree for --compare (default 3)")
    args = ap.parse_args(argv)
    if args.compare:
        argv = list(sys.argv[1:] if argv is None else argv)
        keep, skip = [], False
        for a in argv:  # everything but --compare/--times/--json/--label goes to each process
            if skip and not a.startswith("--"):
                continue
            skip = a in ("--compare", "--times", "--json", "--label")
            if not skip:
                keep.append(a)
        return compare(args.compare, args.times, keep)
    import torch
    real = args.real or (not args.stub and torch.cuda.is_available())
    if args.impl == "triton" and not real:
        ap.error("--impl triton needs a GPU (--real)")
    if not real:
        stub_cuda_driver()
    mod = build(args.impl)
    sync = torch.cuda.synchronize if real else (lambda: None)
    clock = time.process_time if (args.clock or ("wall" if real else "cpu")) == "cpu" else time.perf_counter
    times = measure(steps(mod, "cuda" if real else "cpu"), args.rounds, args.calls, sync, clock)
    if args.binder_from:
        times.update(binder_ab(mod, args.binder_from, "cuda" if real else "cpu", args.rounds, args.calls, sync, clock))
    mode = "real launches on " + torch.cuda.get_device_name() if real else "CUDA driver stubbed"
    import kernelc
    where = os.path.dirname(os.path.dirname(os.path.abspath(kernelc.__file__)))
    print(f"{args.label or args.impl} ({args.impl} from {where if args.impl == 'kernelc' else 'site'}), {mode}: {args.rounds} rounds x {args.calls} calls, us a call (median, min-max)")
    rows = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        rows[name] = {"median_us": med, "min_us": min(ts), "max_us": max(ts), "rounds_us": ts}
        print(f"  {name:36s} {med:7.2f}  ({min(ts):.2f}-{max(ts):.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "impl": args.impl, "mode": mode, "rounds": args.rounds, "calls": args.calls,
                       "steps": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
