"""Attention side by side on one GPU (issue 27): our forward, backward and fp8 forward against SDPA's best
backend (FlashAttention and cuDNN timed separately) and Triton's tutorial 06 backward.

    python3 -m bench attention [--check] [--tutorial06 PATH] [--seq 4096 16384] [--head-dim 128 64]
                               [--dtype fp16 bf16] [--causal 0 1] [--full] [--rep-ms 200] [--sweep]

Default matrix (~4 min on an H100): seq 4096 x head dim {128, 64} x {fp16, bf16} x {causal, not}, and seq
16384 x head dim 128 x fp16 x {causal, not}; batch 4, 32 heads. ``--full`` runs every combination of the
given seqs, head dims, dtypes and causal flags; the other options restrict the matrix. ``--check`` compares
outputs and gradients with torch before timing (a failed check is recorded and makes the exit status 1).
Results: bench/results/attention.json (rows: TFLOP/s and ratios; ``timings``: median/p20/p80 ms of every
variant). ``--sweep`` also times the forward and backward kernels at the other spill-free configs in
SWEEP_* (rows: ``sweep_best_fwd``, ``sweep_best_bwd``; all in ``timings``), the backward's kernels one by one
(``sweep_bwd_part_*``) and under other compile knobs (BWD_VARIANTS, ``sweep_bwd_<variant>_*``). Backward TFLOP/s count 2.5x the forward's FLOPs (5 matmuls against 2), causal half of them.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.common import write_results  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
Z, H = 4, 32
DEVICE = "cuda"
TUTORIAL06 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".ext", "tutorials",
                          "06-fused-attention.py")  # where the lead's GPU runs carry it (not in the repo)


def timeit(fn, rep_ms: float, before=None, min_reps: int = 3, max_reps: int = 200) -> dict:
    """Median and 20/80th percentile ms of ``fn`` with CUDA events, one pair per call (``before`` runs
    untimed ahead of each call); two warm-up calls, then as many calls as ``rep_ms`` allows. On CPU
    (``--device cpu``, the interpreter: a smoke run of this script) the host clock times one call."""
    if DEVICE == "cpu":
        import time
        t = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t) * 1e3
        return {"ms": ms, "p20_ms": ms, "p80_ms": ms, "reps": 1}
    for _ in range(2):
        if before:
            before()
        fn()
    torch.cuda.synchronize()
    times = []
    total = 0.0
    while len(times) < min_reps or (total < rep_ms and len(times) < max_reps):
        if before:
            before()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
        total += times[-1]
    q = torch.tensor(times).quantile(torch.tensor([0.5, 0.2, 0.8])).tolist()
    return {"ms": q[0], "p20_ms": q[1], "p80_ms": q[2], "reps": len(times)}


def sdpa_backends():
    """(name, context factory) for SDPA's FlashAttention and cuDNN backends."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    out = [("sdpa_flash", lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION]))]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        out.append(("sdpa_cudnn", lambda: sdpa_kernel([SDPBackend.CUDNN_ATTENTION])))
    return out


def load_tutorial06(path):
    """Triton's python/tutorials/06-fused-attention.py, imported by path under real Triton.

    Only its backward is timed, so its forward's autotuning (36 configs per shape; minutes on a fresh cache)
    is pinned to the one config the tutorial itself uses under pytest (128x64, 4 warps, 2 stages)."""
    spec = importlib.util.spec_from_file_location("triton_tutorial06_fused_attention", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fwd = getattr(mod, "_attn_fwd", None)
    pinned = [c for c in getattr(fwd, "configs", []) if c.kwargs.get("BLOCK_M") == 128 and
              c.kwargs.get("BLOCK_N") == 64 and c.num_warps == 4 and c.num_stages == 2]
    if pinned:
        fwd.configs = pinned[:1]
    return mod


def _err(a, b):
    """Max |a - b| relative to max |b|."""
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6)).item()


# --sweep: other launch configs (BLOCK_M, BLOCK_N, num_warps, num_stages), each spill-free on sm_90a when listed
SWEEP_FWD = {128: [(128, 64, 4, 2), (128, 64, 8, 3), (64, 64, 4, 3)],
             64: [(128, 128, 8, 2), (128, 64, 8, 3), (64, 64, 4, 3)]}
# D=128 dK/dV with 4 warps (one warpgroup, no producer): 2 programs an SM (233 / 196 registers, 98 / 82 KB) where
# the 8-warp default fits one; 1.5% / 4.5% (non-causal / causal) faster than it on an H100 (call H9b, one run,
# docs/attention.md "Backward against cuDNN"); 4-warp D=128 dQ configs (64, 64, 4, 2), (64, 32, 4, 2) were 5-7%
# slower, D=64 dQ (64, 64, 4, 2) tied the default
# (D=64 at 8 warps, dK/dV (64, 128, 8, 3) / dQ (128, 64, 8, 3) and their pair: 19% / 5% / 26% slower than the
# default on an H200, call H12b: removed)
SWEEP_DKDV = {128: [(32, 128, 8, 3), (64, 64, 4, 2), (32, 64, 4, 3)], 64: [(32, 128, 4, 3), (64, 64, 4, 3)]}
SWEEP_DQ = {128: [(128, 32, 8, 3), (128, 64, 8, 3)], 64: [(128, 32, 4, 3)]}
# dK/dV configs with a producer warp(group) filling the loop's ring (the kernel's WS; setmaxnreg at 8 warps)
SWEEP_DKDV_WS = {128: [(32, 128, 8, 3)], 64: [(32, 128, 4, 3)]}
# the one-kernel (atomic dQ) backward at other dK/dV configs (its default is timed too, as sweep_bwd_atomic_default)
SWEEP_ATOMIC = {128: [(16, 128, 8, 3)], 64: [(64, 64, 4, 3)]}
# dq_mode="ds" (dS^T stored by the dK/dV kernel, dQ = dS K a GEMM) at another (dK/dV, dQ GEMM) config, the GEMM's
# BLOCK_M being the dK/dV kernel's BLOCK_N; spill-free on sm_90a (the default is sweep_bwd_ds_default). On an H100
# (call H9b) it tied the default; (32, 128, 8, 3) / (32, 64, 4, 3) dK/dV configs were slower
SWEEP_DS = {128: [((64, 128, 8, 3), (128, 64, 8, 4))]}
# dq_mode="fused" at other (num_warps, num_stages) than B.FUSED_CONFIGS' (same blocks); spill-free on sm_90a. D=128
# 3 stages: 12% faster than its 2 non-causal, still 16% slower than the separate pass (call H12b); D=64 2 stages
# 7-12% slower: removed
SWEEP_FUSED = {128: [(8, 3)]}
SWEEP_FUSED_DESC = (16, 32, 64)  # head dims whose fused kernel fits with the dQ loop's descriptors
# dq_mode="fused" at other blocks, with or without the async tail and unmasked LSE/delta loads: ((dK/dV BLOCK_M,
# BLOCK_N), (dQ BLOCK_M, BLOCK_N), num_warps, num_stages, TAIL, EVEN_M), dQ loop by descriptors; spill-free on sm_90a.
# D=64 on an H200 (calls C2 and C2b, docs/attention.md "bwd13"): tutorial 06's blocks (32, 128) / (128, 32) 11-17% and
# (64, 64) / (64, 64) 5-10% slower than (32, 64) / (64, 64) (removed); the tail alone and EVEN_M alone mixed, both
# together (B.FUSED_TAIL, B.FUSED_EVEN_M: the default since) faster at both lengths and masks
SWEEP_FUSED_BLOCKS = {64: [((32, 64), (64, 64), 4, 3, False, False), ((32, 64), (64, 64), 4, 3, True, False),
                           ((32, 64), (64, 64), 4, 3, False, True)]}
# dq_mode="ds" with its dK/dV kernel's loop knobs: (tag, dkdv_config overrides). TAIL: dK += dS^T Q in flight over the
# back edge. D=128 on an H200 (call C2, docs/attention.md "bwd14"): unmasked LSE/delta loads without the prefetch
# 3% faster at N=16384 than the prefetch (B.DS_EVEN_M since; the prefetch is sweep_bwd_ds_pf), the tail no faster
# with them (1.6% slower causal at 16384) and slower without them at three of four points
SWEEP_DS_KNOBS = {128: [("tail", dict(TAIL=True))]}
# ds's dS^T workspace (GiB) instead of B.DS_WORKSPACE_BYTES: more heads a group, fewer launches and wave tails (N=16384:
# 512 MiB a head; 8 GiB runs 16-head groups, 64 GiB one group of 128). Timed only where it changes the group size.
# D=128 N=16384 on an H200 (call C2): 16 GiB tied the default, 64 GiB 2-3% slower
SWEEP_DS_WORKSPACE = {128: [16, 64]}
# ds with dS^T stored tile by tile (B.DS_TILED): (tag, the dQ GEMM's config or None for B.DS_TILED_DQ_CONFIGS); sm_90a
# D=128, 0 spills: the GEMM (64, 64, 4, 4) 2 programs an SM, (64, 64, 4, 3) 3; the dK/dV kernel as without (240
# registers, 442 SASS a trip). Non-causal on an H200 (call C4): both 4% slower than the default at N=16384, 2-4% at 4096
SWEEP_DS_TILED = {128: [("tiled", None), ("tiled_g3", (64, 64, 4, 3))]}
# the separate pass with the fused default's loop knobs: (tag, dkdv_config, dq_config). D=64 on an H200 (call C2):
# slower than the fused default at three of four points (4096, 16384; causal), tied at 16384 causal
SWEEP_SEP_KNOBS = {64: [("tail_even", dict(TAIL=True, EVEN_M=True), dict(TAIL=True))]}
# causal grids longest first across head groups: (tag, dK/dV kernel's GROUP, dQ kernel's / ds GEMM's GROUP)
SWEEP_GROUP = [("grp0", 0, 0), ("grp8", 8, 8), ("grp8dq", 0, 8)]
# (dK/dV, dQ) configs timed together: the defaults before the H200 sweep of 2026-11-27
SWEEP_BWD_PAIRS = {128: [((32, 128, 8, 3), (128, 32, 8, 3))], 64: [((32, 128, 4, 3), (128, 32, 4, 3))]}
# the backward's dK/dV and dQ kernels compiled again under other compile knobs (A/B), at the default configs:
#   nodefer   every wgmma waited for right after its issue in the loops no producer warp fills (main's code
#             before 2026-11-27's KERNELC_WGMMA_DEFER_RING: dP's wgmma not under the softmax recompute)
#   dqnopin   the dQ kernel only (the dK/dV kernel as compiled by default), its deferred waits unpinned: at
#             D128 its warp-specialised loop then keeps a one-warp producer without setmaxnreg (main's before
#             the example issued dO V^T before P's exp2)
#   tail      the separate pass (both kernels) with the async tail (KERNELC_WGMMA_ASYNC_TAIL=1: dK += dS^T Q and dQ +=
#             dS K in flight across the back edge; the fused kernel asks for it itself, B.FUSED_TAIL)
BWD_VARIANTS = {"nodefer": {"KERNELC_WGMMA_DEFER_RING": "0"}, "dqnopin": {"KERNELC_WGMMA_PIN_WAITS": "0"},
                "tail": {"KERNELC_WGMMA_ASYNC_TAIL": "1"}}
#   aregs_*   the dK/dV loop's K Q^T (and V dO^T) with A read from registers (KERNELC_WGMMA_A_REGS, the kernels'
#             KV_REGS: 1 K, 2 K and V), B only from shared memory (such a kernel is assembled at the register ceiling
#             of its next occupancy step where nothing spills: registers="occupancy_step"). sm_90a D=64, 0 spills: the
#             fused
#             default with KV_REGS=1 (162 registers non-causal, 167 causal, 3 programs an SM; dK/dV loop 219 / 251
#             SASS a trip) and 2 (168, 3 programs an SM, 201 SASS a trip, against the default's 220; causal 222, 2);
#             the separate pass with the fused default's loop knobs, KV_REGS=2 (164 non-causal) and 1. On an H200
#             (call C2): KV_REGS=1 1.6% faster causal at N=16384 (B.FUSED_KV_REGS since), 3.7% slower non-causal;
#             KV_REGS=2 and the separate pass slower (docs/attention.md "bwd14")
_AREGS = {"KERNELC_WGMMA_A_REGS": "1"}
BWD_VARIANTS.update(aregs_fused=_AREGS, aregs_fused2=_AREGS, aregs_sep=_AREGS, aregs_sep1=_AREGS)
#   nostep, ds_nostep  the separate pass / dq_mode="ds" without KERNELC_STEP_DOT_LOOPS (main's builds before
#             2026-11-28 session 15: the causal dK/dV kernel at D=64 unstepped, 137 / 140 registers and 3 programs an
#             SM against 127 / 128 and 4)
BWD_VARIANTS.update(nostep={"KERNELC_STEP_DOT_LOOPS": "0"}, ds_nostep={"KERNELC_STEP_DOT_LOOPS": "0"})
_BWD_VARIANT_KERNELS = {"dqnopin": ("dq",), "aregs_fused": ("fused",), "aregs_fused2": ("fused",)}  # default: dkdv, dq
_BWD_VARIANT_MODE = {"aregs_fused": "fused", "aregs_fused2": "fused", "ds_nostep": "ds"}
# (default: separate) other arguments of attention_bwd a variant runs with (head dim -> kwargs; None: every head dim)
_SEP_KNOBS = dict(TAIL=True, EVEN_M=True)
_BWD_VARIANT_ARGS = {"aregs_fused": {64: dict(dkdv_config=dict(KV_REGS=1))},
                     "aregs_fused2": {64: dict(dkdv_config=dict(KV_REGS=2))},
                     "aregs_sep": {64: dict(dkdv_config=dict(_SEP_KNOBS, KV_REGS=2), dq_config=dict(TAIL=True))},
                     "aregs_sep1": {64: dict(dkdv_config=dict(_SEP_KNOBS, KV_REGS=1), dq_config=dict(TAIL=True))}}


# the sweep's reference and config entries run the separate pass whatever dq_mode=None picks at the head dim
SEP = "separate"
# our backward through autograd: attention(dq_mode=...) for each dQ mode
BWD_MODES = ("separate", "atomic", "ds", "fused")


def _cfg(c):
    return dict(zip(("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"), c))


def _picked(name, only):
    """``name`` is one of the entries ``only`` asks for: contains one of its strings, or ends with one written
    with a trailing ``$``."""
    return any(name.endswith(x[:-1]) if x.endswith("$") else x in name for x in only)


def sweep(N, D, q, k, v, do, causal, scale, record, res, row, check=None, fwd=True, only=None):
    """Time the forward (``fwd``) and the (separate-dQ) backward kernels at other configs; backward called
    directly on the saved O and LSE (no autograd), its default config timed the same way for reference.
    ``check(name, err, tol)``: the pairs' and variants' gradients against the default config's. ``only``:
    substrings (``NAME$``: names ending so); a backward entry matching none is neither compiled nor timed; a
    BWD_VARIANTS entry's launches are also timed alone where ``part_<variant>`` is one of them."""
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    if only:
        timed = record

        def record(name, fn, before=None):
            if name.startswith("sweep_fwd") or _picked(name, only):
                timed(name, fn, before)
    for c in (SWEEP_FWD.get(D, []) if fwd else []):
        if not causal or c[0] % c[1] == 0:
            record(f"sweep_fwd{list(c)}", lambda c=c: A.attention_fwd(q, k, v, causal, scale, **_cfg(c)))
    o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
    record("sweep_bwd_default", lambda: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP))
    for c in SWEEP_DKDV.get(D, []):
        if not causal or c[1] % c[0] == 0:
            record(f"sweep_bwd_dkdv{list(c)}",
                   lambda c=c: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP,
                                               dkdv_config=_cfg(c)))
    for c in SWEEP_DQ.get(D, []):
        if not causal or c[0] % c[1] == 0:
            record(f"sweep_bwd_dq{list(c)}",
                   lambda c=c: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP,
                                               dq_config=_cfg(c)))
    pairs = [(c1, c2) for c1, c2 in SWEEP_BWD_PAIRS.get(D, []) if not causal or (c1[1] % c1[0] == 0
                                                                                   and c2[0] % c2[1] == 0)]
    base = B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP) if check else None
    tol = 2e-2 if q.dtype == torch.float16 else 5e-2

    def check_against_default(name, fn):
        if check and (not only or _picked(name, only)):
            check(name, max(_err(a, b) for a, b in zip(fn(), base)), tol)

    for c1, c2 in pairs:
        name = f"sweep_bwd_pair{list(c1)}{list(c2)}"
        fn = lambda c1=c1, c2=c2: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP,  # noqa: E731
                                                  dkdv_config=_cfg(c1), dq_config=_cfg(c2))
        check_against_default(name, fn)
        record(name, fn)
    if causal:  # the causal dQ grid in launch order (first query block first) instead of longest first
        name = "sweep_bwd_nolpt"
        fn = lambda: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP,  # noqa: E731
                                     dq_config=dict(LPT=False))
        check_against_default(name, fn)
        record(name, fn)
    for c in [c for c in SWEEP_DKDV_WS.get(D, []) if not causal or c[1] % c[0] == 0]:
        name = f"sweep_bwd_dkdv_ws{list(c)}"
        fn = lambda c=c: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP,  # noqa: E731
                                         dkdv_config=dict(_cfg(c), WS=True))
        check_against_default(name, fn)
        record(name, fn)
    for mode, table in (("atomic", SWEEP_ATOMIC),):
        for c in [None] + [c for c in table.get(D, []) if not causal or c[1] % c[0] == 0]:
            name = f"sweep_bwd_{mode}_" + ("default" if c is None else str(list(c)))
            fn = lambda c=c, mode=mode: B.attention_bwd(do, q, k, v, o, lse, causal, scale,  # noqa: E731
                                                        dq_mode=mode, dkdv_config=c and _cfg(c))
            check_against_default(name, fn)
            record(name, fn)
    for c in [None] + SWEEP_DS.get(D, []):
        name = "sweep_bwd_ds_" + ("default" if c is None else str(list(c[0])) + str(list(c[1])))
        fn = lambda c=c: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="ds",  # noqa: E731
                                         dkdv_config=c and _cfg(c[0]), dq_config=c and _cfg(c[1]))
        check_against_default(name, fn)
        record(name, fn)
    for tag, c in SWEEP_DS_KNOBS.get(D, []):
        name = f"sweep_bwd_ds_{tag}"
        fn = lambda c=c: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="ds", dkdv_config=c)  # noqa: E731
        check_against_default(name, fn)
        record(name, fn)
    for tag, c in SWEEP_DS_TILED.get(D, []):
        name = f"sweep_bwd_ds_{tag}"
        fn = lambda c=c: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="ds",  # noqa: E731
                                         dkdv_config=dict(DS_TILED=True), dq_config=c and _cfg(c))
        check_against_default(name, fn)
        record(name, fn)
    ds_heads = B.DS_WORKSPACE_BYTES // (N * N * q.element_size())  # heads a group at the default workspace
    for gib in SWEEP_DS_WORKSPACE.get(D, []):
        if min(gib * (1 << 30) // (N * N * q.element_size()), q.shape[0] * q.shape[1]) <= ds_heads:
            continue  # the same groups as the default
        name = f"sweep_bwd_ds_ws{gib}g"
        fn = lambda gib=gib: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="ds",  # noqa: E731
                                             ds_workspace_bytes=gib << 30)
        check_against_default(name, fn)
        record(name, fn)
        if _picked(f"sweep_bwd_part_ds_ws{gib}g", only or [f"sweep_bwd_part_ds_ws{gib}g"]):
            grads, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, scale, dq_mode="ds",
                                                 ds_workspace_bytes=gib << 30)
            for _, launch in steps:  # once in order: the dQ GEMM reads the dS^T the dK/dV kernel wrote
                launch()
            for step, launch in steps:
                record(f"sweep_bwd_part_ds_ws{gib}g_{step}", launch)
            del grads, steps
        torch.cuda.empty_cache() if DEVICE == "cuda" else None
    for tag, c1, c2 in SWEEP_SEP_KNOBS.get(D, []):
        name = f"sweep_bwd_sep_{tag}"
        fn = lambda c1=c1, c2=c2: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP,  # noqa: E731
                                                  dkdv_config=c1, dq_config=c2)
        check_against_default(name, fn)
        record(name, fn)
    # dq_mode="fused" (the separate pass's kernels as one grid) at its default and other (num_warps, num_stages)
    for c in [None] + SWEEP_FUSED.get(D, []):
        name = "sweep_bwd_fused_" + ("default" if c is None else f"w{c[0]}s{c[1]}")
        fn = lambda c=c: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="fused",  # noqa: E731
                                         dkdv_config=c and dict(num_warps=c[0], num_stages=c[1]))
        check_against_default(name, fn)
        record(name, fn)
    for (b1, b2, w, st, tail, even) in SWEEP_FUSED_BLOCKS.get(D, []):
        name = f"sweep_bwd_fused_{list(b1)}{list(b2)}w{w}s{st}" + ("_tail" if tail else "") + ("_even" if even else "")
        fn = lambda b1=b1, b2=b2, w=w, st=st, tail=tail, even=even: B.attention_bwd(  # noqa: E731
            do, q, k, v, o, lse, causal, scale, dq_mode="fused",
            dkdv_config=dict(BLOCK_M=b1[0], BLOCK_N=b1[1], num_warps=w, num_stages=st, TAIL=tail, EVEN_M=even),
            dq_config=dict(BLOCK_M=b2[0], BLOCK_N=b2[1]))
        check_against_default(name, fn)
        record(name, fn)
    # the fused kernel with K as a register A operand of its dK/dV loop's K Q^T (KV_REGS=1) or not, whichever
    # B.FUSED_KV_REGS does not pick at this head dim and mask
    if D in B.FUSED_CONFIGS:
        kv = 0 if B.FUSED_KV_REGS.get((D, bool(causal)), B.FUSED_KV_REGS.get(D, 0)) else 1
        name = f"sweep_bwd_fused_kv{kv}"
        fn = lambda kv=kv: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="fused",  # noqa: E731
                                           dkdv_config=dict(KV_REGS=kv))
        check_against_default(name, fn)
        record(name, fn)
    # the separate pass's dK/dV loop with its LSE/delta rows loaded without a mask (EVEN_M; N % BLOCK_M == 0 here):
    # at D=64 16 fewer SASS a trip (219 against 235: no predicates, no zero-fill); the fused kernel's default there
    name = "sweep_bwd_sep_even"
    fn = lambda: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=SEP,  # noqa: E731
                                 dkdv_config=dict(EVEN_M=True))
    check_against_default(name, fn)
    record(name, fn)
    if D in SWEEP_FUSED_DESC:  # the fused dQ loop's K and V by descriptors (a TMA ring) or pointers (cp.async)
        on = not B.FUSED_DQ_DESC.get(D, False)
        name = "sweep_bwd_fused_" + ("desc" if on else "nodesc")
        fn = lambda on=on: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="fused",  # noqa: E731
                                           dq_config=dict(DESC=on))
        check_against_default(name, fn)
        record(name, fn)
    # the dK/dV loop with next trip's LSE and delta rows loaded a trip ahead (PREFETCH_LD) or not, whichever the
    # default is not: their latency was the top stall of both dK/dV kernels in Nsight Compute (call H11b); ds's
    # default at D=128 from call H11c to C2 of 2026-11-28 (B.DS_PREFETCH_LD; unmasked loads since, B.DS_EVEN_M), the
    # separate pass's nowhere
    for mode in ("separate", "ds"):
        on = mode == "ds" and B.DS_PREFETCH_LD.get(D, False)
        name = ("sweep_bwd_" if mode == "separate" else "sweep_bwd_ds_") + ("nopf" if on else "pf")
        fn = lambda mode=mode, on=on: B.attention_bwd(do, q, k, v, o, lse, causal, scale,  # noqa: E731
                                                      dq_mode=mode, dkdv_config=dict(PREFETCH_LD=not on))
        check_against_default(name, fn)
        record(name, fn)
    # causal grids ordered longest first across groups of G heads (the kernels' GROUP; B.CAUSAL_GROUP is the
    # default): both kernels, or the dQ kernel (ds: its GEMM) only; grp0 is each head's blocks launched together
    for tag, g1, g2 in (SWEEP_GROUP if causal else ()):
        for mode in ("separate", "ds"):
            name = ("sweep_bwd_" if mode == "separate" else "sweep_bwd_ds_") + tag
            fn = lambda mode=mode, g1=g1, g2=g2: B.attention_bwd(  # noqa: E731
                do, q, k, v, o, lse, causal, scale, dq_mode=mode, dkdv_config=dict(GROUP=g1), dq_config=dict(GROUP=g2))
            check_against_default(name, fn)
            record(name, fn)
    # each kernel of the backward alone (default configs, each dQ mode): where the time goes
    for tag, cfgs in [("default", dict(dq_mode=SEP)), ("atomic", dict(dq_mode="atomic")), ("ds", dict(dq_mode="ds")),
                      ("fused", dict(dq_mode="fused"))]:
        grads, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, scale, **cfgs)
        if only and not any(_picked(f"sweep_bwd_part_{tag}_{n}", only) for n, _ in steps):
            continue
        for _, launch in steps:  # once in order: the later steps read what the earlier ones wrote
            launch()
        for name, launch in steps:
            record(f"sweep_bwd_part_{tag}_{name}", launch)
    for name, env in BWD_VARIANTS.items():
        if only and not _picked(f"sweep_bwd_{name}", only):
            continue
        extra = _BWD_VARIANT_ARGS.get(name, {None: {}})
        extra = extra.get(D, extra.get(None))
        if extra is None:  # not at this head dim
            continue
        kern = bwd_variant_kernels(name)
        mode = _BWD_VARIANT_MODE.get(name, "separate")
        fn = lambda: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=mode, kernels=kern,  # noqa: E731
                                     **extra)
        if mode == "ds":  # the dQ GEMM is the shared kernel: compiled first outside the variant's knobs
            launch = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")
            B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode="ds", dq_config=extra.get("dq_config"),
                            dkdv_config={n: x for n, x in extra.get("dkdv_config", {}).items() if n in launch})
        with _environ(env):  # compiles under the variant's knobs (kept per specialisation afterwards)
            fn()
        check_against_default(f"sweep_bwd_{name}", fn)
        record(f"sweep_bwd_{name}", fn)
        if any(x.rstrip("$") == f"part_{name}" for x in only or ()):  # each launch alone, as sweep_bwd_part_*
            grads, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, scale, dq_mode=mode, kernels=kern,
                                                 **extra)
            for _, launch in steps:
                launch()
            for step, launch in steps:
                record(f"sweep_bwd_part_{name}_{step}", launch)
    # the defaults timed again after every other entry (only when asked by name): later entries of a process ran ~3%
    # faster on an H100 (calls H11, H11b), so a variant is compared with the default on both sides of it
    for name, mode in (("sweep_bwd_default_late", "separate"), ("sweep_bwd_ds_late", "ds"),
                       ("sweep_bwd_fused_late", "fused")):
        if only and _picked(name, only):
            record(name, lambda mode=mode: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=mode))
    fwd = {n: r["ms"] for n, r in res.items() if n.startswith("sweep_fwd") or n == "ours_fwd"}  # with the default
    bwd = {n: r["ms"] for n, r in res.items() if n.startswith("sweep_bwd") and not n.startswith("sweep_bwd_part")}
    if fwd:
        row["sweep_best_fwd"] = min(fwd, key=fwd.get)
    if bwd:
        row["sweep_best_bwd"] = min(bwd, key=bwd.get)


# --fwd-variants: the descriptor forwards compiled again under other compile knobs, each as its own
# ``kernelc.jit`` of the same function (a JIT object keeps one compiled kernel per specialisation, whatever
# the environment says later), compiled on its first call inside the environment below:
#   tma_noftz   the descriptor forward with exp2 keeping subnormals (main's code: KERNELC_EXP2_FTZ=0)
#   fa3_nopin   FA3's order with the deferred waits unpinned but setmaxnreg forced (ptxas serialises it)
#   fa3_pingpong  FA3's order with the two consumer warpgroups taking turns on the first dot
#   fa3_s3, fa3_bn64_s3, tma_s3  FA3's order (the FA2-order descriptor kernel) at other launch configs: 3 TMA
#                 stages (fa3_s3 at D=128 in fp16 needs more shared memory than there is); 64-key blocks
#                 (non-causal only: the diagonal is one block); spill-free on sm_90a at head dims 64 and 128
FWD_VARIANTS = {
    "tma_noftz": ("attention_tma", "attn_fwd_tma_kernel", {"KERNELC_EXP2_FTZ": "0"}),
    "fa3_nopin": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_WGMMA_PIN_WAITS": "0",
                                                           "KERNELC_WS_SETMAXNREG": "1"}),
    "fa3_pingpong": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_WS_PINGPONG": "1"}),
    "fa3_s3": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(num_stages=3)),
    "tma_s3": ("attention_tma", "attn_fwd_tma_kernel", {}, dict(num_stages=3)),
    "fa3_bn64_s3": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(BLOCK_N=64, num_stages=3)),
    # fp8 (attention_fa3.attention_fp8): the softmax is a larger share of a key block than in fp16
    "fp8_fa3_pingpong": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_WS_PINGPONG": "1"}, {}, "attention_fp8"),
    "fp8_fa3_s3": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(num_stages=3), "attention_fp8"),
    "fp8_fa3_s4": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(num_stages=4), "attention_fp8"),
    "fp8_fa3_pingpong_s3": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_WS_PINGPONG": "1"},
                            dict(num_stages=3), "attention_fp8"),
    # more TMA stages (is the ring's one trip of slack the floor?) and 256-key blocks (half the trips); these
    # fit shared memory and are spill-free only where FWD_VARIANT_WHEN says
    "fa3_s4": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(num_stages=4)),
    "fp8_fa3_bn256": ("attention_fa3", "attn_fwd_fa3_kernel", {},
                      dict(BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=2), "attention_fp8"),
    "fp8_fa3_bn256_s3": ("attention_fa3", "attn_fwd_fa3_kernel", {},
                         dict(BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3), "attention_fp8"),
    # one consumer warpgroup of 64 rows, 4 warps, no producer warp: 2-4 programs share an SM (registers 98-191 a
    # thread on sm_90a), so one program's prologue, epilogue and softmax run under another's wgmmas -- the
    # fixed per-program costs weigh ~4 key blocks a program (fa3 at N 4096 against 16384) and twice as much
    # causal. _n128: 128-key blocks (non-causal)
    "fa3_m64": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(BLOCK_M=64, BLOCK_N=64, num_warps=4)),
    "fa3_m64_n128": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(BLOCK_M=64, BLOCK_N=128, num_warps=4)),
    "fp8_fa3_m64": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(BLOCK_M=64, BLOCK_N=64, num_warps=4),
                    "attention_fp8"),
    "fp8_fa3_m64_n128": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(BLOCK_M=64, BLOCK_N=128, num_warps=4),
                         "attention_fp8"),
    # the last V block loaded after the loop (EARLY_V off) at the 8-warp configs; and fp8 at the configs before
    # FP8_CONFIGS (128x128, 8 warps, 2 stages everywhere)
    "fa3_latev": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(early_v=False)),
    "fp8_fa3_latev": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(early_v=False), "attention_fp8"),
    "fp8_fa3_old": ("attention_fa3", "attn_fwd_fa3_kernel", {},
                    dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2), "attention_fp8"),
    # a fraction of P's exponentials as a polynomial on the FMA pipe instead of MUFU.EX2 (KERNELC_EXP2_POLY, degree
    # 3 unless _d2; passes/exp2_poly.py, docs/attention.md "fp8: exponentials on two pipes")
    **{f"fp8_fa3_poly{a}{b}": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_EXP2_POLY": f"{a}/{b}"}, {},
                               "attention_fp8") for a, b in ((1, 8), (1, 4), (3, 8), (1, 2))},
    # all of P's exponentials on MUFU (KERNELC_EXP2_POLY=0, the default before 2026-11-27 evening), the FA3-order and
    # the pointer fp8 forwards
    "fp8_fa3_poly0": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_EXP2_POLY": "0"}, {}, "attention_fp8"),
    "fp8_ptr_poly0": ("attention", "attn_fwd_lse_kernel", {"KERNELC_EXP2_POLY": "0"}, {}, "attention_fp8"),
    # P V over keys in attention.fp8_key_order's order (V^T stored so): no shuffle of P between lanes (fwd17)
    "fp8_ptr_keyorder": ("attention", "attn_fwd_lse_kernel", {}, dict(key_order=True), "attention_fp8"),
    "fp8_fa3_keyorder": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(key_order=True), "attention_fp8"),
    # and in natural order (P shuffled between lanes), the headline rows before fwd17
    "fp8_ptr_natural": ("attention", "attn_fwd_lse_kernel", {}, dict(key_order=False), "attention_fp8"),
    "fp8_fa3_natural": ("attention_fa3", "attn_fwd_fa3_kernel", {}, dict(key_order=False), "attention_fp8"),
    # P carried across the back edge in register order, as before KERNELC_FP8_CARRY_WORDS (main's code until then)
    "fp8_fa3_regwords": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_FP8_CARRY_WORDS": "0"}, {}, "attention_fp8"),
    # the pointer fp8 forward's P (a cast, not carried) in register order: main's code before the cast-fed A words
    "fp8_ptr_regwords": ("attention", "attn_fwd_lse_kernel", {"KERNELC_FP8_CARRY_WORDS": "0"}, {}, "attention_fp8"),
    # all three off: main's code before this session's work, byte for byte
    "fp8_fa3_main": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_FP8_CARRY_WORDS": "0", "KERNELC_EXP2_POLY": "0",
                                                              "KERNELC_REDUCE_TREE": "0"}, {}, "attention_fp8"),
    # the row max as a chain of dependent FMNMX, as before KERNELC_REDUCE_TREE (fp16 and fp8 FA3 order)
    "fa3_chainmax": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_REDUCE_TREE": "0"}),
    "fp8_fa3_chainmax": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_REDUCE_TREE": "0"}, {}, "attention_fp8"),
    "fp8_fa3_poly14_d2": ("attention_fa3", "attn_fwd_fa3_kernel", {"KERNELC_EXP2_POLY": "1/4",
                                                                   "KERNELC_EXP2_POLY_DEGREE": "2"}, {}, "attention_fp8"),
    # the descriptor forward's causal diagonal in a second loop after the key loop (before DIAG_FIRST became its
    # default, 2026-11-28; docs/attention.md "Head dim 64 and short-sequence fp8")
    "tma_twoloops": ("attention_tma", "attn_fwd_tma_kernel", {}, dict(diag_first=False)),
    # the pointer forwards with the scale folded into the exponent's multiply-add (FOLD_SCALE: one FMUL a score
    # fewer in the unmasked blocks; the default since 2026-11-28 but for fp8 D=64 causal) and without. Measured and
    # removed (calls H11, H11b; docs/attention.md, "fp8 against our fp16"): P V left in flight on top, FA3's rescale
    # under the next QK^T (LATE_RESCALE), rescales skipped where alpha is 1 (KERNELC_RESCALE_SKIP, with and without a
    # lazily moved max), each dot's TMA tiles on their own barriers (KERNELC_TMA_SPLIT_WAITS)
    "ptr_fold": ("attention", "attn_fwd_lse_kernel", {}, dict(fold_scale=True), "attention_fwd"),
    "ptr_nofold": ("attention", "attn_fwd_lse_kernel", {}, dict(fold_scale=False), "attention_fwd"),
    "fp8_ptr_fold": ("attention", "attn_fwd_lse_kernel", {}, dict(fold_scale=True), "attention_fp8"),
    "fp8_ptr_nofold": ("attention", "attn_fwd_lse_kernel", {}, dict(fold_scale=False), "attention_fp8"),
    # the pointer forwards in 64-row programs of 128 keys (one warpgroup, 4 programs an SM in fp8 at 128 registers;
    # causal with its one masked block starting left of the row block; docs/attention.md "fp8 at head dim 64")
    "ptr_m64_n128": ("attention", "attn_fwd_lse_kernel", {}, dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2),
                     "attention_fwd"),
    "fp8_ptr_m64_n128": ("attention", "attn_fwd_lse_kernel", {},
                         dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=3, fold_scale=True), "attention_fp8"),
    # the fp8 pointer forward's D=64 config before fp813 (128x64, 3 programs an SM), folded
    "fp8_ptr_m128_n64": ("attention", "attn_fwd_lse_kernel", {},
                         dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3, fold_scale=True), "attention_fp8"),
}
# (head_dim, causal) -> whether the variant runs (sm_90a, CPU compile 2026-11-27: fp16 D=128 has no room for a
# third stage; fp8 256-key blocks spill 416 registers at D=128 and causal needs BLOCK_M == BLOCK_N)
FWD_VARIANT_WHEN = {
    "fa3_s3": lambda D, causal: D <= 64,
    "fa3_s4": lambda D, causal: D <= 64,
    "fa3_bn64_s3": lambda D, causal: not causal,
    "fp8_fa3_bn256": lambda D, causal: D <= 64 and not causal,
    "fp8_fa3_bn256_s3": lambda D, causal: D <= 64 and not causal,
    "fa3_m64_n128": lambda D, causal: D <= 64 and not causal,  # D=128: 181 KB of shared memory, one program an SM
    "fp8_fa3_m64_n128": lambda D, causal: not causal,
    "fp8_fa3_latev": lambda D, causal: (D, causal) != (64, False),  # there the default has 4 warps
    "fp8_fa3_old": lambda D, causal: (D, causal) in ((128, True), (128, False), (64, False)),  # where FP8_CONFIGS differs
    "tma_twoloops": lambda D, causal: causal,
    "ptr_m64_n128": lambda D, causal: D <= 64,  # D=128: not timed (the 8-warp 128x128 default is the config there)
    "fp8_ptr_m64_n128": lambda D, causal: D <= 64,
    "fp8_ptr_m128_n64": lambda D, causal: D <= 64,
}


def variant_runs(name, D, causal):
    return FWD_VARIANT_WHEN.get(name, lambda D, causal: True)(D, causal)
_variant_kernels = {}


class _environ:
    """The process environment with ``env`` set, restored on exit (compile knobs are read at compile time)."""

    def __init__(self, env):
        self.env = env

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def bwd_variant_kernels(name):
    """{"dkdv": ..., "dq": ...}: fresh ``kernelc.jit`` copies of the backward's kernels for BWD_VARIANTS[name]
    (each compiles on its first launch, which the caller makes inside the variant's environment)."""
    import kernelc
    from examples.kernels import attention_bwd as B
    key = "bwd_" + name
    if key not in _variant_kernels:
        fns = dict(dkdv=B.attn_bwd_dkdv_kernel, dq=B.attn_bwd_dq_kernel, fused=B.attn_bwd_fused_kernel)
        _variant_kernels[key] = {k: kernelc.jit(fns[k].fn) for k in _BWD_VARIANT_KERNELS.get(name, ("dkdv", "dq"))}
    return _variant_kernels[key]


def variant_forward(name):
    """(forward(q, k, v, causal, scale), first call) of FWD_VARIANTS[name] (``fp8_*``: the arguments of
    ``attention_fp8``): the first call compiles under the variant's environment."""
    import kernelc
    modname, kname, env, *rest = FWD_VARIANTS[name]
    cfg, entry = (rest + [{}, "attention"][len(rest):])[:2]
    mod = importlib.import_module(f"examples.kernels.{modname}")
    if name not in _variant_kernels:
        _variant_kernels[name] = kernelc.jit(getattr(mod, kname).fn) if env else getattr(mod, kname)
    kern = _variant_kernels[name]

    def forward(*a):
        return getattr(mod, entry)(*a, kernel=kern, **cfg)

    def first(*a):
        with _environ(env):
            return forward(*a)
    return forward, first


def run_config(N, D, dtype_name, causal, args, tut06, timings, failures):
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    from examples.kernels import attention_fa3 as AF
    from examples.kernels import attention_tma as AT
    SDPA = torch.nn.functional.scaled_dot_product_attention
    dtype = DTYPES[dtype_name]
    scale = D ** -0.5
    fwd_flop = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
    tf = lambda ms, flop: flop / ms / 1e9  # noqa: E731
    g = torch.Generator(device=DEVICE).manual_seed(0)
    q, k, v, do = (torch.randn(Z, H, N, D, device=DEVICE, dtype=dtype, generator=g) for _ in range(4))
    tag = dict(seq=N, head_dim=D, dtype=dtype_name, causal=causal)
    row = dict(tag)
    res = {}

    def record(name, fn, before=None):
        try:
            res[name] = timeit(fn, args.rep_ms, before)
            timings.append(dict(tag, variant=name, **res[name]))
        except Exception as e:  # one failing variant must not hide the others
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            timings.append(dict(tag, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}"))

    def check(name, err, tol):
        row[f"check_{name}"] = err
        if err > tol:
            failures.append(f"{tag} {name}: relative max error {err:.3g} > {tol}")

    tol = 2e-2 if dtype == torch.float16 else 5e-2
    # forward
    if args.check:
        want = SDPA(q, k, v, is_causal=causal, scale=scale)
        check("fwd", _err(A.attention_fwd(q, k, v, causal, scale), want), tol)
        if N % 128 == 0:
            check("fwd_tma", _err(AT.attention(q, k, v, causal, scale), want), tol)
    fa3_ok = N % 128 == 0 and DEVICE == "cuda"  # FA3's order: descriptor loads, fp16/bf16
    if args.check and fa3_ok:
        check("fwd_fa3", _err(AF.attention(q, k, v, causal, scale), want), tol)
    record("ours_fwd", lambda: A.attention_fwd(q, k, v, causal, scale))
    if N % 128 == 0:  # the descriptor kernel needs whole row blocks
        record("ours_fwd_tma", lambda: AT.attention(q, k, v, causal, scale))
    if fa3_ok:
        record("ours_fwd_fa3", lambda: AF.attention(q, k, v, causal, scale))
    for name in (args.fwd_variants or FWD_VARIANTS) if args.fwd_variants is not None and fa3_ok else ():
        if name.startswith("fp8") or not variant_runs(name, D, causal):  # attention_tma: fp16 and bf16 since E1
            continue
        fwd, first = variant_forward(name)
        try:
            got = first(q, k, v, causal, scale)
            if args.check:
                check(f"fwd_{name}", _err(got, SDPA(q, k, v, is_causal=causal, scale=scale)), tol)
        except Exception as e:
            print(f"ours_fwd_{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        record(f"ours_fwd_{name}", lambda fwd=fwd: fwd(q, k, v, causal, scale))
    for name, ctx in sdpa_backends():
        # the backend's context around the timing, not inside each timed call: picking the backend is not the
        # forward's cost (inside, it added 25-30 us of host time to a cuDNN call, docs/attention.md "The forwards'
        # host path")
        with ctx():
            record(name + "_fwd", lambda: SDPA(q, k, v, is_causal=causal, scale=scale))
    ours = [res[n]["ms"] for n in ("ours_fwd", "ours_fwd_tma", "ours_fwd_fa3") if n in res]
    for n in ("ours_fwd", "ours_fwd_tma", "ours_fwd_fa3", *(f"ours_fwd_{v}" for v in FWD_VARIANTS)):
        if n in res:
            row[f"{n}_tflops"] = tf(res[n]["ms"], fwd_flop)
    sdpa = {n: res[n + "_fwd"]["ms"] for n, _ in sdpa_backends() if n + "_fwd" in res}
    if ours:
        row["fwd_tflops"] = tf(min(ours), fwd_flop)
    if sdpa:
        best = min(sdpa, key=sdpa.get)
        row["fwd_sdpa_best"], row["fwd_sdpa_tflops"] = best, tf(sdpa[best], fwd_flop)
        if ours:
            row["fwd_vs_sdpa"] = sdpa[best] / min(ours)
    # fp8 forward (vs our fp16 forward of the same shape)
    if dtype == torch.float16 and not args.no_fp8:
        (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
        v8t = v8.transpose(-1, -2).contiguous()
        # V^T with its keys in attention.fp8_key_order's order (P V without P's shuffle), made here like v8t (a
        # producer of fp8 V writes it so); the headline rows use it unless --fp8-natural
        ko = not args.fp8_natural and N % 32 == 0
        v8k = A.fp8_v_key_order(v8t) if N % 32 == 0 else v8t
        vko = v8k if ko else v8t
        # the fp32 reference on the dequantised inputs of the first two heads (fp32 SDPA of the whole tensor
        # is slow, and may not fit at N 16384); our outputs are compared there
        want = SDPA(*(t[:1, :2].float() * s for t, s in ((q8, qs), (k8, ks), (v8, vs))), is_causal=causal,
                    scale=scale) if args.check else None
        fp8_err = lambda o: _err(o[:1, :2], want)  # noqa: E731
        if args.check:
            check("fp8_fwd", fp8_err(A.attention_fp8(q8, k8, vko, qs, ks, vs, causal, scale, key_order=ko)), 0.1)
        record("ours_fp8_fwd", lambda: A.attention_fp8(q8, k8, vko, qs, ks, vs, causal, scale, key_order=ko))
        if fa3_ok:  # FA3's order on descriptors, P fed to the second fp8 wgmma from registers
            if args.check:
                check("fp8_fwd_fa3", fp8_err(AF.attention_fp8(q8, k8, vko, qs, ks, vs, causal, scale, key_order=ko)),
                      0.1)
            record("ours_fp8_fwd_fa3", lambda: AF.attention_fp8(q8, k8, vko, qs, ks, vs, causal, scale,
                                                                key_order=ko))
            for name in [n for n in (args.fwd_variants or FWD_VARIANTS) if n.startswith("fp8")
                         and variant_runs(n, D, causal)] if args.fwd_variants is not None else ():
                fwd, first = variant_forward(name)
                # a variant with key_order in its launch options reads V^T in that order
                vt = v8k if (FWD_VARIANTS[name][3:4] or [{}])[0].get("key_order") else v8t
                try:
                    got = first(q8, k8, vt, qs, ks, vs, causal, scale)
                    if args.check:
                        check(f"{name}_fwd", fp8_err(got), 0.1)
                except Exception as e:
                    print(f"ours_{name}_fwd {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                    continue
                record(f"ours_{name}_fwd", lambda fwd=fwd, vt=vt: fwd(q8, k8, vt, qs, ks, vs, causal, scale))
        fp8 = {n: res[n]["ms"] for n in ("ours_fp8_fwd", "ours_fp8_fwd_fa3",
                                         *(f"ours_{v}_fwd" for v in FWD_VARIANTS if v.startswith("fp8"))) if n in res}
        for n in fp8:
            row[f"{n}_tflops"] = tf(fp8[n], fwd_flop)
        if fp8:
            row["fp8_fwd_tflops"] = tf(min(fp8.values()), fwd_flop)
            if ours:
                row["fp8_vs_our_fp16"] = min(ours) / min(fp8.values())
        del q8, k8, v8, v8t, v8k, vko, want
    if args.sweep:
        sweep(N, D, q, k, v, do, causal, scale, record, res, row, check if args.check else None,
              fwd=not args.no_fwd_sweep, only=args.sweep_filter)
    if args.no_bwd:
        return row
    # backward: every variant through autograd, o.backward(do) with the grads cleared (untimed) before each call
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def clear():
        for t in leaves:
            t.grad = None

    def bwd_of(forward):
        clear()
        o = forward(*leaves)
        return o, lambda: o.backward(do, retain_graph=True)

    variants = [(f"ours_bwd_{m}", lambda a, b, c, m=m: B.attention(a, b, c, causal, scale, dq_mode=m))
                for m in BWD_MODES if m in args.bwd_modes]
    for name, ctx in sdpa_backends():
        def f(a, b, c, ctx=ctx):
            with ctx():
                return SDPA(a, b, c, is_causal=causal, scale=scale)
        variants.append((name + "_bwd", f))
    if tut06 is not None and dtype == torch.float16:  # tutorial 06's backward casts to fp16 internally
        variants.append(("tutorial06_bwd", lambda a, b, c: tut06.attention(a, b, c, causal, scale, False)))
    grads = {}
    for name, forward in variants:
        try:
            o, step = bwd_of(forward)
            if args.check:
                step()
                grads[name] = [o.detach()] + [t.grad.clone() for t in leaves]
        except Exception as e:  # e.g. a backend without this backward
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            timings.append(dict(tag, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        record(name, step, before=clear)
        del o
    if args.check and grads:
        ref = next((grads[n] for n in ("sdpa_flash_bwd", "sdpa_cudnn_bwd") if n in grads), None)
        for name in [f"ours_bwd_{m}" for m in BWD_MODES]:
            if ref is not None and name in grads:
                check(name, max(_err(a, b) for a, b in zip(grads[name], ref)), tol)
    fl = 2.5 * fwd_flop
    ours_b = {n: res[n]["ms"] for n in [f"ours_bwd_{m}" for m in BWD_MODES] if n in res}
    if ours_b:
        best_o = min(ours_b, key=ours_b.get)
        row["bwd_best_mode"], row["bwd_tflops"] = best_o.replace("ours_bwd_", ""), tf(ours_b[best_o], fl)
        for n in ours_b:
            row[f"bwd_{n.replace('ours_bwd_', '')}_tflops"] = tf(ours_b[n], fl)
    sdpa_b = {n: res[n + "_bwd"]["ms"] for n, _ in sdpa_backends() if n + "_bwd" in res}
    if sdpa_b:
        best = min(sdpa_b, key=sdpa_b.get)
        row["bwd_sdpa_best"], row["bwd_sdpa_tflops"] = best, tf(sdpa_b[best], fl)
        if ours_b:
            row["bwd_vs_sdpa"] = sdpa_b[best] / min(ours_b.values())
    if "tutorial06_bwd" in res:
        row["bwd_tutorial06_tflops"] = tf(res["tutorial06_bwd"]["ms"], fl)
        if ours_b:
            row["bwd_vs_tutorial06"] = res["tutorial06_bwd"]["ms"] / min(ours_b.values())
    return row


def matrix(args):
    seqs, dims, dts, causals = args.seq, args.head_dim, args.dtype, [bool(c) for c in args.causal]
    if args.full:
        return [(n, d, t, c) for n in seqs for d in dims for t in dts for c in causals]
    default = [(4096, d, t, c) for d in (128, 64) for t in ("fp16", "bf16") for c in (False, True)]
    default += [(16384, 128, "fp16", c) for c in (False, True)]
    return [m for m in default if m[0] in seqs and m[1] in dims and m[2] in dts and m[3] in causals]


def _write_partial(results_dir, rows, timings):
    """With ``--results-dir``: the rows so far (attention.partial.json there), so a run cut short by a time
    limit still leaves its numbers."""
    import json
    if not results_dir:
        return
    os.makedirs(results_dir, exist_ok=True)
    with open(os.path.join(results_dir, "attention.partial.json"), "w") as f:
        json.dump({"rows": rows, "timings": timings}, f, indent=1)


def main(argv=None):
    global Z, H, DEVICE
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seq", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--head-dim", type=int, nargs="+", default=[128, 64])
    p.add_argument("--dtype", nargs="+", choices=sorted(DTYPES), default=["fp16", "bf16"])
    p.add_argument("--causal", type=int, nargs="+", choices=[0, 1], default=[0, 1])
    p.add_argument("--full", action="store_true", help="every combination of the options (default: a subset)")
    p.add_argument("--check", action="store_true", help="compare outputs and gradients with torch first")
    p.add_argument("--tutorial06", metavar="PATH", default=TUTORIAL06 if os.path.isfile(TUTORIAL06) else None,
                   help="Triton 3.6's python/tutorials/06-fused-attention.py (default: .ext/tutorials/ when there)")
    p.add_argument("--no-tutorial06", action="store_true", help="do not time tutorial 06 even if it is there")
    p.add_argument("--rep-ms", type=float, default=200.0, help="GPU time to spend per variant (>= 3 calls)")
    p.add_argument("--no-bwd", action="store_true")
    p.add_argument("--bwd-modes", nargs="+", default=list(BWD_MODES), choices=BWD_MODES,
                   help="our backward's modes timed through autograd (default: all)")
    p.add_argument("--no-fp8", action="store_true")
    p.add_argument("--fp8-natural", action="store_true",
                   help="the fp8 forwards' headline rows with V^T in natural key order (key_order=False), as "
                        "before fwd17")
    p.add_argument("--fwd-variants", nargs="*", default=None, choices=sorted(FWD_VARIANTS), metavar="NAME",
                   help="also time the descriptor forwards under other compile knobs or configs (FWD_VARIANTS: A/B "
                        "of the exp2 flush, the pinned waits, ping-pong, FA3 configs); no NAME: all of them")
    p.add_argument("--sweep", action="store_true", help="also time other forward/backward launch configs")
    p.add_argument("--no-fwd-sweep", action="store_true", help="with --sweep: the backward's configs only")
    p.add_argument("--sweep-filter", nargs="+", default=None, metavar="SUBSTR",
                   help="with --sweep: only the backward entries whose name contains one of these (or ends with "
                        "one written NAME$)")
    p.add_argument("--batch", type=int, default=Z)
    p.add_argument("--heads", type=int, default=H)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: the interpreter at tiny sizes, a smoke run of this script (no meaningful times)")
    p.add_argument("--results-dir", default=None, help="where attention.json goes (default bench/results)")
    args = p.parse_args(argv)
    Z, H, DEVICE = args.batch, args.heads, args.device
    if DEVICE == "cpu":
        os.environ["KERNELC_INTERPRET"] = "1"
    elif not torch.cuda.is_available():
        print("bench attention: needs a CUDA GPU", file=sys.stderr)
        return 2
    tut06, tut06_error = None, None
    if args.no_tutorial06 or DEVICE == "cpu":
        args.tutorial06 = None
    if args.tutorial06:
        if not os.path.isfile(args.tutorial06):
            print(f"bench attention: --tutorial06 {args.tutorial06}: no such file", file=sys.stderr)
            return 2
        try:
            tut06 = load_tutorial06(args.tutorial06)
        except Exception as e:  # e.g. no Triton here: time everything else, say why in the results
            tut06_error = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"bench attention: tutorial 06 not timed: {tut06_error}", file=sys.stderr)
    rows, timings, failures = [], [], []
    for n, d, t, c in matrix(args):
        try:
            rows.append(run_config(n, d, t, c, args, tut06, timings, failures))
        except Exception as e:  # one failing configuration must not hide the others
            import traceback
            traceback.print_exc()
            rows.append(dict(seq=n, head_dim=d, dtype=t, causal=c, error=f"{type(e).__name__}: {str(e)[:300]}"))
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
        print(rows[-1], flush=True)
        _write_partial(args.results_dir, rows, timings)
    from bench.common import RESULTS
    write_results("attention", rows, extra={"batch": Z, "heads": H, "device_kind": DEVICE, "timings": timings,
                                            "check_failures": failures, "tutorial06": args.tutorial06,
                                            "tutorial06_error": tut06_error},
                  results_dir=args.results_dir or RESULTS)
    for f in failures:
        print("CHECK FAILED:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
