"""Which TMA shared -> global copies does the GPU refuse at negative tensor coordinates? (issue 27)

The first GPU runs of ``tests/gpu/test_gpu_bulk_reduce.py`` (H100, 2026-11-27) died with "an illegal instruction
was encountered" in every case whose tile starts at row -8 and in none whose tiles start at row >= 0, past
the tensor's end included; the PTX and SASS of those kernels are the same (the row is a run-time argument).
This script separates the hypotheses, one case a process (an illegal instruction leaves the CUDA context
unusable), several processes at a time:

- the op: ``desc.atomic_add`` (``cp.reduce.async.bulk.tensor``), ``desc.store`` (``cp.async.bulk.tensor``
  shared -> global) and, as a control, ``desc.load`` (global -> shared, which accepts negative coordinates);
- the coordinate: row -8 (box partly outside), row -1 (not on the swizzle's 8-row period), row -BM (box
  wholly above the tensor), column -BN/2, and row +8 as a control; a column of 2 fp32 (an inner coordinate
  that is not a whole 16 bytes, >= 0);
- where: outside loops (one reduction) and in a loop with 1 and 2 staging stages; a descriptor made in the
  kernel and a host ``TensorDescriptor``; 128-, 32- and 16-byte rows (the 128B and 32B swizzles, none).

``--raw`` sets ``KERNELC_TMA_WRITE_GUARD=off`` in the children: the compiler then issues the TMA op whatever
the coordinates (what main did before the guard); ``--guard all`` guards stores too; without either the
default compiler runs (reductions at coordinates not proven >= 0 take the element-wise path where they are
negative). Each case checks its result against torch and reports ``ok`` / ``wrong`` / ``error: ...`` and
whether the kernel's PTX holds the TMA op and the element-wise path.

Measured (H200, lead's call S2, 2026-11-27 15:32, commit 3efb7d4, ``--raw``; results/negative_raw_h200.json): every
``reduce_*`` and ``store_*`` case with a negative coordinate died with "an illegal instruction was encountered"
(row -8, -1, -64, column -16, 32- and 128-byte rows, made and host descriptors, 1 and 2 stages); ``reduce_row+8``,
``store_row+8``, ``load_row-8`` and ``load_col-16`` were correct. compute-sanitizer: "Illegal instruction ... at
write_once+0xa10", reported by every thread of the block.

Run on an sm_90 machine, from the repo root::

    python3 bench/experiments/bulk_reduce/negative_coords.py --raw --json $OUT/negative_raw.json
    python3 bench/experiments/bulk_reduce/negative_coords.py --guard all --json $OUT/negative_guarded.json
    KERNELC_TMA_WRITE_GUARD=off compute-sanitizer --tool memcheck \
        python3 bench/experiments/bulk_reduce/negative_coords.py --case reduce_row-8
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

M, N, BM = 96, 64, 64

# name: (op, row, col, BN, where, stages); op in reduce / store / load; where in once / loop / host
CASES = {
    "reduce_row+8": ("reduce", 8, 0, 32, "once", "2"),
    "reduce_row-8": ("reduce", -8, 0, 32, "once", "2"),
    "reduce_row-1": ("reduce", -1, 0, 32, "once", "2"),
    "reduce_row-64": ("reduce", -64, 0, 32, "once", "2"),
    "reduce_col-16": ("reduce", 0, -16, 32, "once", "2"),
    "reduce_row-8_bn8": ("reduce", -8, 0, 8, "once", "2"),
    "reduce_row-8_bn4": ("reduce", -8, 0, 4, "once", "2"),
    "reduce_row-8_host": ("reduce", -8, 0, 32, "host", "2"),
    "reduce_row-8_loop_s1": ("reduce", -8, 0, 32, "loop", "1"),
    "reduce_row-8_loop_s2": ("reduce", -8, 0, 32, "loop", "2"),
    "store_row+8": ("store", 8, 0, 32, "once", "2"),
    "store_row-8": ("store", -8, 0, 32, "once", "2"),
    "store_row-1": ("store", -1, 0, 32, "once", "2"),
    "store_row-64": ("store", -64, 0, 32, "once", "2"),
    "store_col-16": ("store", 0, -16, 32, "once", "2"),
    "store_row-8_host": ("store", -8, 0, 32, "host", "2"),
    "load_row-8": ("load", -8, 0, 32, "once", "2"),
    "load_col-16": ("load", 0, -16, 32, "once", "2"),
    # round 2: an inner coordinate that is not a whole 16 bytes (2 fp32 = 8 bytes), >= 0
    "reduce_col+2": ("reduce", 0, 2, 32, "once", "2"),
    "store_col+2": ("store", 0, 2, 32, "once", "2"),
    "load_col+2": ("load", 0, 2, 32, "once", "2"),
}


def _kernels():
    import kernelc
    import kernelc.language as kl

    @kernelc.jit
    def write_once(X, OUT, M, N, row, col, BM: kl.constexpr, BN: kl.constexpr, OP: kl.constexpr):
        d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        x = kl.load(X + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
        if OP == 0:
            d.atomic_add([row, col], x)
        else:
            d.store([row, col], x)

    @kernelc.jit
    def write_host(X, desc, row, col, BM: kl.constexpr, BN: kl.constexpr, OP: kl.constexpr):
        x = kl.load(X + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
        if OP == 0:
            desc.atomic_add([row, col], x)
        else:
            desc.store([row, col], x)

    @kernelc.jit
    def reduce_loop(X, OUT, M, N, row, col, BM: kl.constexpr, BN: kl.constexpr, STEPS: kl.constexpr):
        d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        for i in kl.range(0, STEPS):
            x = kl.load(X + i * BM * BN + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
            d.atomic_add([row, col], x)

    @kernelc.jit
    def read_once(IN, Y, M, N, row, col, BM: kl.constexpr, BN: kl.constexpr):
        d = kl.make_tensor_descriptor(IN, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        t = d.load([row, col])
        kl.store(Y + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :], t)

    return write_once, write_host, reduce_loop, read_once


def _window(ref, row, col, bm, bn):
    """The part of ``ref`` a [bm, bn] box at (row, col) covers, and the box's slice of it."""
    r0, r1 = max(row, 0), min(row + bm, ref.shape[0])
    c0, c1 = max(col, 0), min(col + bn, ref.shape[1])
    return (slice(r0, r1), slice(c0, c1)), (slice(r0 - row, r1 - row), slice(c0 - col, c1 - col))


def run_case(name):
    """One case in this process: prints a JSON line {case, result, tma_in_ptx}."""
    import torch
    from kernelc import TensorDescriptor
    write_once, write_host, reduce_loop, read_once = _kernels()
    op, row, col, bn, where, _ = CASES[name]
    steps = 3 if where == "loop" else 1
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(steps, BM, bn, device="cuda", generator=g)
    out = torch.full((M, N), 3.0, device="cuda")
    ref = out.clone()
    dst, src = _window(ref, row, col, BM, bn)
    if op == "load":
        y = torch.full((BM, bn), -1.0, device="cuda")
        inp = torch.randn(M, N, device="cuda", generator=g)
        args = (inp, y, M, N, row, col)
        kern, kw, grid_args = read_once, dict(BM=BM, BN=bn), args
        want = torch.zeros(BM, bn, device="cuda")
        want[src] = inp[dst]
        got = y
        marker = "cp.async.bulk.tensor.2d.shared::cluster.global"
    else:
        OP = 0 if op == "reduce" else 1
        if where == "host":
            kern, kw = write_host, dict(BM=BM, BN=bn, OP=OP)
            grid_args = (x, TensorDescriptor.from_tensor(out, [BM, bn]), row, col)
        elif where == "loop":
            kern, kw = reduce_loop, dict(BM=BM, BN=bn, STEPS=steps)
            grid_args = (x, out, M, N, row, col)
        else:
            kern, kw = write_once, dict(BM=BM, BN=bn, OP=OP)
            grid_args = (x, out, M, N, row, col)
        total = x.sum(0) if op == "reduce" else x[0]
        if op == "reduce":
            ref[dst] += total[src]
        else:
            ref[dst] = total[src]
        want, got = ref, out
        marker = ("cp.reduce.async.bulk.tensor" if op == "reduce"
                  else "cp.async.bulk.tensor.2d.global.shared::cta")
    ck = kern.warmup(*grid_args, grid=(1,), **kw)
    ptx = ck.asm["ptx"]
    # the guard's element-wise path: relaxed atomics (reduce) or plain stores (store)
    fallback = r"\b(red|atom)\.[a-z0-9.]*global\.add" if op == "reduce" else r"\bst\.global"
    rec = {"case": name, "tma_in_ptx": marker in ptx,
           "fallback_in_ptx": op != "load" and bool(re.search(fallback, ptx))}
    try:
        kern[(1,)](*grid_args, **kw)
        torch.cuda.synchronize()
        ok = torch.allclose(got.double(), want.double(), rtol=1e-5, atol=1e-5)
        rec["result"] = "ok" if ok else "wrong"
        if not ok:
            rec["max_err"] = float((got.double() - want.double()).abs().max())
    except Exception as e:  # the illegal instruction surfaces at the synchronize
        rec["result"] = "error: " + str(e).splitlines()[0][:200]
    print("RESULT " + json.dumps(rec), flush=True)


def _child(name, raw, guard=None):
    env = dict(os.environ, KERNELC_BULK_REDUCE_STAGES=CASES[name][5],
               PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    if raw or guard:
        env["KERNELC_TMA_WRITE_GUARD"] = "off" if raw else guard
    t0 = time.time()
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", name], env=env,
                           capture_output=True, text=True, timeout=120)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        rec = json.loads(lines[-1][7:]) if lines else {"case": name, "result": f"exit {r.returncode}: "
                                                       + (r.stderr.strip().splitlines() or [""])[-1][:300]}
    except subprocess.TimeoutExpired:
        rec = {"case": name, "result": "timeout (120 s)"}
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", help="run one case in this process (what the driver's children do)")
    ap.add_argument("--raw", action="store_true", help="KERNELC_TMA_WRITE_GUARD=off in the children")
    ap.add_argument("--guard", help="KERNELC_TMA_WRITE_GUARD in the children (reduce, all, off)")
    ap.add_argument("--only", default="", help="comma-separated case-name prefixes")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    if a.case:
        run_case(a.case)
        return 0
    names = [n for n in CASES if not a.only or any(n.startswith(p) for p in a.only.split(","))]
    with ThreadPoolExecutor(a.jobs) as pool:
        recs = list(pool.map(lambda n: _child(n, a.raw, a.guard), names))
    for r in recs:
        print(f"{r['case']:24s} {r['result']:60s} tma_in_ptx={r.get('tma_in_ptx')} "
              f"fallback_in_ptx={r.get('fallback_in_ptx')} {r['seconds']} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"raw": a.raw, "guard": a.guard, "cases": recs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
