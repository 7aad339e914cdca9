"""Where tutorial 05's layer-norm backward spends its time, under real Triton and under kernelc.

The tutorial's table times ``y.backward(dy)``: three ``torch.zeros``, three ``torch.empty``, the
``_layer_norm_bwd_dx_fused`` kernel (dx, plus partial dW/dB per GROUP_SIZE_M behind a spin lock) and
``_layer_norm_bwd_dwdb``. On CPU both compilers give the dx kernel the same registers (128 at N=6144,
255 at N=10752/15872, no spills) and near-identical SASS, so this splits the measured time on a GPU:

- ``bwd``: the tutorial's backward body (allocations + both kernels), CUDA events with an L2 flush
  before each run, as ``do_bench``;
- ``dx`` / ``dwdb``: each kernel alone, same timing;
- ``dx_nolock``: the dx kernel with GROUP_SIZE_M = M, so no program ever waits on a lock: what the
  kernel costs without the serialised critical sections;
- ``kernel_us``: each kernel's own GPU duration from ``torch.profiler`` (CUPTI), over 20 backward calls;
- ``host_us``: host time of one backward call while the GPU is held busy (``torch.cuda._sleep``), so
  nothing waits on the device.

The kernels are read from the tutorial file (``--tutorials``, Triton's text, not part of this
repository) and run unmodified, under real Triton or under kernelc's ``triton`` alias, each
implementation in its own processes, interleaved rounds, best (lowest time) per point.

    python3 bench/experiments/tutorial_gaps/layernorm_bwd.py [--tutorials DIR] [--rounds 2] [--n 1024,6144]
        # writes results/layernorm_bwd.json (and $OUT/layernorm_bwd.json when OUT is set)
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
M = 4096  # the tutorial's benchmark rows
NS = (1024, 6144, 10752, 15872)  # the table's points in bench/triton_tutorials.py --bench-points 4 (spread)
KERNELS = ("_layer_norm_bwd_dx_fused", "_layer_norm_bwd_dwdb")
# kernelc_ptxas: the standalone (whole-program) ptxas instead of nvJitLink's relocatable one, which puts an extra
# MEMBAR.ALL.CTA before every acq_rel atomic (the lock's CAS and both exchanges)
VARIANTS = {"triton": {}, "kernelc": {}, "kernelc_ptxas": {"KERNELC_ASSEMBLER": "auto"}}


def _kernel_module(tutorial: str):
    """The tutorial's two backward kernels, in a module of their own (jit needs a source file)."""
    src = open(tutorial).read()
    keep = [ast.get_source_segment(src, n) for n in ast.parse(src).body
            if isinstance(n, ast.FunctionDef) and n.name in KERNELS]
    d = tempfile.mkdtemp(prefix="ln_bwd_")
    with open(os.path.join(d, "tutorial_ln_bwd.py"), "w") as f:
        f.write("import triton\nimport triton.language as tl\n\n\n"
                + "\n\n\n".join("@triton.jit\n" + k for k in keep) + "\n")
    sys.path.insert(0, d)
    import tutorial_ln_bwd
    return tutorial_ln_bwd


def group_size_m(n: int) -> int:  # the tutorial's heuristic
    g = 64
    if n <= 8192:
        g = 96
    if n <= 4096:
        g = 128
    if n <= 1024:
        g = 256
    return g


def _time_ms(fn, flush, reps=40):
    """Median of ``reps`` runs, each timed with CUDA events after an L2 flush (as ``do_bench``)."""
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        ts.append((s, e))
    torch.cuda.synchronize()
    v = sorted(s.elapsed_time(e) for s, e in ts)
    return v[len(v) // 2]


def _host_us(fn, n=30):
    """Host time of one ``fn()`` while the GPU is busy (nothing in ``fn`` waits on the device)."""
    import torch
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000 // 1000 * 200)  # a long sleep: the queue never drains while we enqueue
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def child(tutorial: str, impl: str, ns) -> dict:
    if impl.startswith("kernelc"):
        sys.path.insert(0, os.environ.get("LN_BWD_KERNELC_TREE") or ROOT)   # kernelc_other: --other-tree's kernelc
        import kernelc.compat
        kernelc.compat.install()
    import torch
    import triton
    mod = _kernel_module(tutorial)
    dx_k, dwdb_k = mod._layer_norm_bwd_dx_fused, mod._layer_norm_bwd_dwdb
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = {"impl": impl, "points": {}}
    if impl.startswith("kernelc"):
        out["kernelc"] = os.path.dirname(sys.modules["kernelc"].__file__)
    for n in ns:
        try:
            out["points"][str(n)] = _point(torch, triton, dx_k, dwdb_k, flush, n)
        except Exception:  # one point failing keeps the others
            import traceback
            out["points"][str(n)] = {"error": traceback.format_exc()[-2000:]}
        print(impl, n, json.dumps(out["points"][str(n)]), flush=True)
        torch.cuda.empty_cache()
    return out


def _point(torch, triton, dx_k, dwdb_k, flush, n) -> dict:
    torch.manual_seed(0)
    dt = torch.float16
    x = -2.3 + 0.5 * torch.randn(M, n, dtype=dt, device="cuda")
    w = torch.rand(n, dtype=dt, device="cuda")
    dy = .1 * torch.randn_like(x)
    xf = x.float()
    mean = xf.mean(1)
    rstd = 1.0 / torch.sqrt(xf.var(1, unbiased=False) + 1e-5)
    block = min(65536 // x.element_size(), triton.next_power_of_2(n))
    warps = min(max(block // 256, 1), 8)
    g = group_size_m(n)

    def bwd(g=g):  # LayerNorm.backward of the tutorial, verbatim in what it allocates and launches
        locks = torch.zeros(2 * g, dtype=torch.int32, device=w.device)
        _dw = torch.zeros((g, n), dtype=x.dtype, device=w.device)
        _db = torch.zeros((g, n), dtype=x.dtype, device=w.device)
        dw = torch.empty((n,), dtype=w.dtype, device=w.device)
        db = torch.empty((n,), dtype=w.dtype, device=w.device)
        dx = torch.empty_like(dy)
        dx_k[(M,)](dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), n,
                   BLOCK_SIZE_N=block, GROUP_SIZE_M=g, num_warps=warps)
        dwdb_k[lambda meta: (triton.cdiv(n, meta['BLOCK_SIZE_N']),)](
            _dw, _db, dw, db, min(g, M), n, BLOCK_SIZE_M=32, BLOCK_SIZE_N=128, num_ctas=1)
        return dx, dw, db

    # correctness against torch (fp32 math of the same formula)
    dx, dw, db = bwd()
    torch.cuda.synchronize()
    xhat = (xf - mean[:, None]) * rstd[:, None]
    wdy = w.float() * dy.float()
    c1 = (xhat * wdy).sum(1, keepdim=True) / n
    c2 = wdy.sum(1, keepdim=True) / n
    ref_dx = (wdy - (xhat * c1 + c2)) * rstd[:, None]
    ok = {"dx": bool(torch.allclose(dx.float(), ref_dx, atol=1e-2, rtol=0)),
          "dw": bool(torch.allclose(dw.float(), (dy.float() * xhat).sum(0), atol=0.5, rtol=1e-2)),
          "db": bool(torch.allclose(db.float(), dy.float().sum(0), atol=0.5, rtol=1e-2))}

    bufs = {}
    for gg in (g, M):
        bufs[gg] = (torch.zeros(2 * gg, dtype=torch.int32, device="cuda"),
                    torch.zeros((gg, n), dtype=dt, device="cuda"), torch.zeros((gg, n), dtype=dt, device="cuda"))
    dxo = torch.empty_like(dy)
    dwo, dbo = torch.empty(n, dtype=dt, device="cuda"), torch.empty(n, dtype=dt, device="cuda")

    def dx_only(gg=g):
        lk, pdw, pdb = bufs[gg]
        dx_k[(M,)](dxo, dy, pdw, pdb, x, w, mean, rstd, lk, x.stride(0), n,
                   BLOCK_SIZE_N=block, GROUP_SIZE_M=gg, num_warps=warps)

    def dwdb_only():
        _, pdw, pdb = bufs[g]
        dwdb_k[(triton.cdiv(n, 128),)](pdw, pdb, dwo, dbo, min(g, M), n, BLOCK_SIZE_M=32, BLOCK_SIZE_N=128,
                                       num_ctas=1)

    row = {"block": block, "num_warps": warps, "group_size_m": g, "correct": ok,
           "bwd_ms": _time_ms(bwd, flush), "dx_ms": _time_ms(dx_only, flush),
           "dx_nolock_ms": _time_ms(lambda: dx_only(M), flush), "dwdb_ms": _time_ms(dwdb_only, flush),
           "host_us": _host_us(bwd)}
    row["bwd_gbps"] = 3 * x.numel() * x.element_size() * 1e-9 / (row["bwd_ms"] * 1e-3)
    k = dx_k.warmup(dxo, dy, bufs[g][1], bufs[g][2], x, w, mean, rstd, bufs[g][0], x.stride(0), n,
                    BLOCK_SIZE_N=block, GROUP_SIZE_M=g, num_warps=warps, grid=(1,))
    k._init_handles()
    row["dx_regs"], row["dx_spills"] = k.n_regs, k.n_spills
    row["kernel_us"] = _kernel_us(torch, bwd)
    return row


def _kernel_us(torch, bwd) -> dict:
    """Mean GPU time of each tutorial kernel over 20 backward calls (torch.profiler / CUPTI), in us."""
    from torch.profiler import ProfilerActivity, profile
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                bwd()
            torch.cuda.synchronize()
    except Exception as e:  # the rest of the point stands without it
        return {"error": f"{type(e).__name__}: {e}"}
    ku = {}
    for ev in prof.key_averages():
        for kn in KERNELS:
            if kn in ev.key:
                ku[kn] = ev.device_time
    return ku


LOWER_BETTER = ("bwd_ms", "dx_ms", "dx_nolock_ms", "dwdb_ms", "host_us")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"),
                    help="directory with Triton 3.6's 05-layer-norm.py (default: .ext/tutorials)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", default=",".join(map(str, NS)))
    ap.add_argument("--impls", default=",".join(VARIANTS))
    ap.add_argument("--triton-site", help="directory to prepend to PYTHONPATH for the real-Triton runs")
    ap.add_argument("--other-tree", help="another checkout's kernelc as one more implementation, kernelc_other "
                                         "(e.g. main's tree: an A/B in the same rounds)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    tut = os.path.join(os.path.abspath(a.tutorials), "05-layer-norm.py")
    ns = [int(v) for v in a.n.split(",")]
    if a.child:
        print("RESULT " + json.dumps(child(tut, a.child, ns)))
        return 0
    impls = [i for i in a.impls.split(",") if i in VARIANTS]
    if a.other_tree:
        impls.append("kernelc_other")
    best: dict = {}
    raw: list = []  # every child's result, for the spread between rounds
    for rnd in range(a.rounds):
        for impl in (impls if rnd % 2 == 0 else list(reversed(impls))):
            env = dict(os.environ, **VARIANTS.get(impl, {}))
            if impl == "kernelc_other":
                env["LN_BWD_KERNELC_TREE"] = os.path.abspath(a.other_tree)
            env["KERNELC_CACHE_DIR"] = tempfile.mkdtemp(prefix="kc_cache_")
            if impl == "triton" and a.triton_site:
                env["PYTHONPATH"] = a.triton_site + os.pathsep + env.get("PYTHONPATH", "")
            try:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--tutorials", a.tutorials,
                                    "--n", a.n, "--child", impl], env=env, capture_output=True, text=True, timeout=150)
            except subprocess.TimeoutExpired as e:
                tail = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                print(f"{impl}: timed out\n{tail[-2000:]}", flush=True)
                continue
            print("\n".join(l for l in p.stdout.splitlines() if not l.startswith("RESULT "))[-6000:], flush=True)
            lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            if p.returncode or not lines:
                print(f"{impl}: failed\n{p.stderr[-3000:]}", flush=True)
                best.setdefault(impl, {"error": p.stderr[-3000:]})
                continue
            res = json.loads(lines[-1][7:])
            raw.append(json.loads(lines[-1][7:]))
            _write(best, raw)  # after each child: a run cut short by a timeout keeps what it measured
            res["rounds"] = 1
            cur = best.get(impl)
            if cur is None or "points" not in cur:
                best[impl] = res
                continue
            cur["rounds"] += 1
            for n, row in res["points"].items():
                if "error" in row:
                    continue
                if "error" in cur["points"].get(n, {"error": 1}):
                    cur["points"][n] = row
                    continue
                for key in LOWER_BETTER:
                    cur["points"][n][key] = min(cur["points"][n][key], row[key])
                cur["points"][n]["bwd_gbps"] = max(cur["points"][n]["bwd_gbps"], row["bwd_gbps"])
                for kn, us in row["kernel_us"].items():
                    if kn in KERNELS:
                        cur["points"][n]["kernel_us"][kn] = min(cur["points"][n]["kernel_us"].get(kn, us), us)
                for c, v in row["correct"].items():
                    cur["points"][n]["correct"][c] = cur["points"][n]["correct"][c] and v
    cols = ("bwd_gbps", "bwd_ms", "dx_ms", "dx_nolock_ms", "dwdb_ms", "host_us", "dx_regs")
    print(f"{'N':>6s} {'impl':13s} " + " ".join(f"{c:>12s}" for c in cols) + "  kernel_us (profiler)  correct")
    for n in ns:
        for impl in impls:
            r = best.get(impl, {}).get("points", {}).get(str(n))
            if not r or "error" in r:
                print(f"{n:6d} {impl:13s} {(r or {}).get('error', 'no result')[-300:]}")
                continue
            print(f"{n:6d} {impl:13s} " + " ".join(f"{r[c]:12.4g}" for c in cols)
                  + f"  {json.dumps({k.split('_')[-1]: round(v, 1) if isinstance(v, float) else v for k, v in r['kernel_us'].items()})}  {r['correct']}")
    _write(best, raw)
    return 0


def _write(best, raw) -> None:
    for d in (os.path.join(HERE, "results"), os.environ.get("OUT")):
        if d:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "layernorm_bwd.json"), "w") as f:
                json.dump({"best": best, "runs": raw}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
