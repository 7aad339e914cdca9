"""Why Triton tutorial 02's persistent softmax is slower under kernelc: grid sizing vs the kernel itself.

The tutorial sizes its grid as ``NUM_SM * min(NUM_REGS // (n_regs * WARP_SIZE * num_warps), SIZE_SMEM //
shared)``. That ignores the SM's warp limit (64 warps: 8 programs of 8 warps): a kernel of < 32
registers gets 9+ programs per SM, and the ones that do not fit run as a second wave. kernelc and Triton
get different ``n_regs`` for the same kernel, so they get different grids. This measures, per width and
implementation, ``n_regs``, ``shared``, the tutorial's grid, and GB/s at that grid and at the grid capped
to what fits (``min(occupancy, 64 // num_warps)`` programs per SM), so the kernel's own speed is
compared apart from the sizing. The kernel is read from the tutorial file (``--tutorials``, Triton's
text, not part of this repository) and run unmodified, under real Triton or under kernelc's alias.

    python3 bench/experiments/tutorial_gaps/softmax_grid.py [--tutorials DIR] [--rounds 2]
        # each implementation (and kernelc with KERNELC_PIPELINE_LOADS=0) in its own processes,
        # interleaved rounds, best per point; writes results/softmax_grid.json (and to $OUT)
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
WIDTHS = (256, 384, 512, 640, 1024, 2048, 4096, 8192)
ROWS = 4096  # the tutorial's benchmark
VARIANTS = {"triton": {}, "kernelc": {}, "kernelc_no_prefetch": {"KERNELC_PIPELINE_LOADS": "0"}}


def _kernel_module(tutorial: str):
    """The tutorial's ``softmax_kernel`` alone, in a module of its own (jit needs a source file)."""
    src = open(tutorial).read()
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "softmax_kernel")
    d = tempfile.mkdtemp(prefix="softmax_kernel_")
    path = os.path.join(d, "tutorial_softmax_kernel.py")
    with open(path, "w") as f:  # (the def's segment starts at ``def``: decorators are not part of it)
        f.write("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                + ast.get_source_segment(src, fn) + "\n")
    sys.path.insert(0, d)
    import tutorial_softmax_kernel
    return tutorial_softmax_kernel


def child(tutorial: str, impl: str, widths=WIDTHS) -> dict:
    if impl.startswith("kernelc"):
        sys.path.insert(0, ROOT)
        import kernelc.compat
        kernelc.compat.install()
    import torch
    import triton
    from triton.runtime import driver
    mod = _kernel_module(tutorial)
    dev = torch.cuda.current_device()
    props = driver.active.utils.get_device_properties(dev)
    nsm, nregs, smem, ws = (props["multiprocessor_count"], props["max_num_regs"], props["max_shared_mem"],
                            props["warpSize"])
    num_warps, num_stages = 8, (4 if smem > 200000 else 2)
    max_per_sm = 64 // num_warps  # sm_80/sm_90: 64 resident warps per SM
    out = {"impl": impl, "props": {k: props[k] for k in ("multiprocessor_count", "max_num_regs", "max_shared_mem")},
           "widths": {}}
    for n_cols in widths:
        x = torch.randn(ROWS, n_cols, device="cuda", dtype=torch.float32)
        y = torch.empty_like(x)
        bs = triton.next_power_of_2(n_cols)
        k = mod.softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), ROWS, n_cols, BLOCK_SIZE=bs,
                                      num_stages=num_stages, num_warps=num_warps, grid=(1,))
        k._init_handles()
        occ = nregs // (k.n_regs * ws * num_warps)
        if k.metadata.shared:
            occ = min(occ, smem // k.metadata.shared)
        row = {"n_regs": k.n_regs, "shared": k.metadata.shared, "occupancy": occ}
        ref = torch.softmax(x, dim=1)
        for label, per_sm in (("tutorial_grid", occ), ("capped_grid", min(occ, max_per_sm))):
            grid = (nsm * per_sm, 1, 1)

            def run():
                k[grid](y, x, x.stride(0), y.stride(0), ROWS, n_cols, bs, num_stages)
            run()
            torch.cuda.synchronize()
            assert torch.allclose(y, ref, atol=1e-5, rtol=1e-4), f"{impl} n_cols={n_cols} {label}: wrong result"
            ms = triton.testing.do_bench(run)
            row[label] = {"programs": grid[0], "gbps": 2 * x.numel() * x.element_size() / ms * 1e-6}
        out["widths"][str(n_cols)] = row
        print(impl, n_cols, row, flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"),
                    help="directory with Triton 3.6's 02-fused-softmax.py (default: .ext/tutorials)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--triton-site", help="directory to prepend to PYTHONPATH for the real-Triton runs")
    ap.add_argument("--widths", help="comma-separated column counts (default: %s)" % ",".join(map(str, WIDTHS)))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    tut = os.path.join(os.path.abspath(a.tutorials), "02-fused-softmax.py")
    widths = tuple(int(w) for w in a.widths.split(",")) if a.widths else WIDTHS
    wargs = ["--widths", a.widths] if a.widths else []
    if a.child:
        print("RESULT " + json.dumps(child(tut, a.child, widths)))
        return 0
    best: dict = {}
    for rnd in range(a.rounds):
        order = list(VARIANTS) if rnd % 2 == 0 else list(reversed(VARIANTS))
        for impl in order:
            env = dict(os.environ, **VARIANTS[impl])
            env["KERNELC_CACHE_DIR"] = tempfile.mkdtemp(prefix="kc_cache_")
            if impl == "triton" and a.triton_site:
                env["PYTHONPATH"] = a.triton_site + os.pathsep + env.get("PYTHONPATH", "")
            try:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--tutorials", a.tutorials,
                                    "--child", impl, *wargs], env=env, capture_output=True, text=True, timeout=240)
            except subprocess.TimeoutExpired as e:
                tail = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                print(f"{impl}: timed out\n{tail[-2000:]}", flush=True)
                continue
            lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            if p.returncode or not lines:
                print(f"{impl}: failed\n{p.stderr[-3000:]}", flush=True)
                best.setdefault(impl, {"error": p.stderr[-3000:]})
                continue
            res = json.loads(lines[-1][7:])
            cur = best.get(impl)
            if cur is None or "widths" not in cur:  # first success (an earlier round may have failed)
                best[impl] = res
                continue
            for w, row in res["widths"].items():
                for g in ("tutorial_grid", "capped_grid"):
                    if row[g]["gbps"] > cur["widths"][w][g]["gbps"]:
                        cur["widths"][w][g] = row[g]
    print(f"{'n_cols':>6s} " + " ".join(f"{v:>36s}" for v in VARIANTS))
    for w in map(str, widths):
        cells = []
        for v in VARIANTS:
            r = best.get(v, {}).get("widths", {}).get(w)
            cells.append(f"regs {r['n_regs']:3d} occ {r['occupancy']:2d} {r['tutorial_grid']['gbps']:7.0f}/"
                         f"{r['capped_grid']['gbps']:7.0f} GB/s" if r else f"{'-':>36s}")
        print(f"{w:>6s} " + " ".join(f"{c:>36s}" for c in cells))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    for d in (os.path.join(HERE, "results"), os.environ.get("OUT")):
        if d:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "softmax_grid.json"), "w") as f:
                json.dump(best, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
