"""Issue 27 on CPU: every attention kernel compiles to SASS for sm_90a at the configs the bench launches
(head dims 64/128/256, fp16/bf16/fp8, causal), with 0 register spills and tensor-core dots."""
import re

import pytest

from tests.compiler.filecheck import filecheck

import kernelc
from examples.kernels import attention as A
from examples.kernels import attention_bwd as B

P = lambda t: "*" + t  # noqa: E731


def _compile(kernel, sig, constexprs, cfg, ones):
    cfg = dict(cfg)
    w, s = cfg.pop("num_warps"), cfg.pop("num_stages")
    # what the launcher specialises at the bench sizes: 16-divisible ints/pointers, unit inner strides
    return kernelc.compile(kernel, sig, dict(constexprs, **cfg), target="sm_90a", num_warps=w, num_stages=s,
                           divisibility={n: 16 for n in sig}, equal_to_1=ones)


def compile_fwd(D, causal, dt="fp16", fp8=False, **config):
    io = "fp8e4nv" if fp8 else dt
    sig = dict(Q=P(io), K=P(io), V=P(io), Out=P(dt), LSE=P("fp32"), QScale=P("fp32"), KScale=P("fp32"),
               VScale=P("fp32"), sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    ones = ("stride_qk", "stride_kk", "stride_ok") + (("stride_vn",) if fp8 else ("stride_vk",))  # fp8: V^T
    return _compile(A.attn_fwd_lse_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=not fp8, FP8=fp8),
                    A.fwd_config(D, fp8=fp8, **config), ones)


def compile_dkdv(D, causal, dt="fp16", atomic=False, **extra):
    sig = dict(Q=P(dt), K=P(dt), V=P(dt), DO=P(dt), DK=P(dt), DV=P(dt), DQ=P("fp32" if atomic else dt),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
    table = B.ATOMIC_DKDV_CONFIGS if atomic else B.DKDV_CONFIGS
    return _compile(B.attn_bwd_dkdv_kernel, sig,
                    dict(HEAD_DIM=D, CAUSAL=causal, ATOMIC_DQ=atomic, **extra),
                    B._cfg(table, D, None), ("stride_k",))


def compile_dq(D, causal, dt="fp16"):
    sig = dict(Q=P(dt), K=P(dt), V=P(dt), DO=P(dt), DQ=P(dt), LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32",
               stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
    return _compile(B.attn_bwd_dq_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal), B._cfg(B.DQ_CONFIGS, D, None),
                    ("stride_k",))


def compile_preprocess(D, dt="fp16"):
    sig = dict(O=P(dt), DO=P(dt), Delta=P("fp32"), **{f"stride_{a}{b}": "i32" for a in "od" for b in "zhmk"},
               H="i32", N_CTX="i32")
    return _compile(B.attn_bwd_preprocess_kernel, sig, dict(BLOCK_M=B.PRE_BLOCK, HEAD_DIM=D),
                    dict(num_warps=4, num_stages=1), ("stride_ok", "stride_dk"))


def _mma(ck):
    return sorted(set(re.findall(r"\b[HQ]GMMA\.[\w.]+", ck.asm["sass"])))


# causal variants carry both loops (unmasked and diagonal), so they cover the non-causal kernel's code too
@pytest.mark.parametrize("D,causal,dt", [(128, True, "fp16"), (64, False, "bf16"), (256, True, "fp16")])
def test_forward_compiles_without_spills(D, causal, dt):
    ck = compile_fwd(D, causal, dt)
    assert ck.n_spills == 0, ck.n_spills
    assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    assert all(m.startswith("HGMMA") for m in _mma(ck)) and _mma(ck)


def test_fp8_forward_runs_both_dots_on_fp8_wgmma():
    ck = compile_fwd(128, True, fp8=True)
    assert ck.n_spills == 0, ck.n_spills
    dots = ck.reports["dots"]
    assert {(d["engine"], d["a_dtype"], d["b_dtype"], d["fp8_upcast"]) for d in dots} == \
        {("wgmma", "fp8e4nv", "fp8e4nv", None)}
    assert all(d["smem_transpose"] == [] for d in dots)  # V^T gives P V a K-major B: no transposing copy
    assert _mma(ck) and all(m.startswith("QGMMA") and m.endswith("E4M3.E4M3") for m in _mma(ck))


def test_fp8_forward_fits_the_warp_specialised_8_warp_config():
    # 336 spilled registers while P (e4m3) went through shared memory; in registers it fits the 168 a thread
    # that one producer warp leaves (docs/attention.md, fp8): the default until 64x128 at 4 warps (H200 call R1)
    ck = compile_fwd(128, True, fp8=True, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)
    assert ck.n_spills == 0, ck.n_spills
    assert ck.launch_warps == 9 and "STS.U16" not in ck.asm["sass"]


# the defaults of the pointer forward chosen at N 4096 (docs/attention.md, "The forward at N 4096"): their premise is
# how many programs share an SM -- fp16 D=64 64x64 at 2 stages 4 (102 registers, 42 KB; 128x64 at 3 stages ran 2),
# fp8 D=128 64x128 at 2 stages 3 (168 registers, 74 KB)
@pytest.mark.parametrize("D,fp8,causal,cfg,programs", [(64, False, False, (64, 64, 4, 2), 4),
                                                        (64, False, True, (64, 64, 4, 2), 4),
                                                        (128, True, False, (64, 128, 4, 2), 3),
                                                        (128, True, True, (64, 128, 4, 2), 3)])
def test_pointer_forward_defaults_share_an_sm_without_spilling(D, fp8, causal, cfg, programs):
    from analyzer.occupancy import occupancy
    from cubintools.target import parse_target
    bm, bn, w, st = cfg
    assert A.fwd_config(D, fp8=fp8) == dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=st)
    ck = compile_fwd(D, causal, fp8=fp8)
    assert ck.n_spills == 0 and ck.launch_warps == 4
    assert occupancy(ck.launch_warps, ck.n_regs, ck.shared, parse_target("sm_90a").limits).blocks_per_sm >= programs


# the pointer forward in 64-row programs of 128 keys (one warpgroup, no producer warp): the premise of the config is
# how many programs share an SM (fp8: 4 at 128 registers; one more register a thread and it is 3)
@pytest.mark.parametrize("fp8,stages,causal,programs", [(True, 3, False, 4), (True, 3, True, 4), (False, 2, True, 3)])
def test_pointer_forward_64x128_shares_an_sm_without_spilling(fp8, stages, causal, programs):
    from analyzer.occupancy import occupancy
    from cubintools.target import parse_target
    ck = compile_fwd(64, causal, fp8=fp8, BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=stages)
    assert ck.n_spills == 0 and ck.launch_warps == 4
    blocks = occupancy(ck.launch_warps, ck.n_regs, ck.shared, parse_target("sm_90a").limits).blocks_per_sm
    assert blocks >= programs, (ck.n_regs, ck.shared)


@pytest.mark.parametrize("D,causal,dt", [(128, True, "fp16"), (64, False, "bf16")])
def test_backward_kernels_compile_without_spills(D, causal, dt):
    for name, ck in (("dkdv", compile_dkdv(D, causal, dt)), ("dq", compile_dq(D, causal, dt))):
        assert ck.n_spills == 0, (name, ck.n_spills)
        assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}, name


def _first_loop(sass):
    """SASS mnemonics of the first loop (a backward branch) that issues HGMMAs: the kernel's inner loop."""
    loops = _mma_loops(sass)
    if not loops:
        raise AssertionError("no loop with HGMMA")
    return loops[0]


@pytest.mark.parametrize("D", [128, 64])
def test_backward_inner_loops_stage_nothing_through_shared_memory(D):
    # 2026-11-27 (docs/attention.md): Q (dK/dV) and K (dQ) are TMA-ringed once and read in place by both of
    # their dots; LSE/delta are loaded in the MMA layout. Before: 6 STS, 22 LDS, 12 BAR.SYNC a trip (dK/dV,
    # D=128), the dK/dV loop was not pipelined at all
    for name, ck in (("dkdv", compile_dkdv(D, False)), ("dq", compile_dq(D, False))):
        body = _first_loop(ck.asm["sass"])
        count = lambda p: sum(o.startswith(p) for o in body)  # noqa: E731
        assert count("STS") == 0 and count("LDS") == 0, (name, count("STS"), count("LDS"))
        assert count("BAR.SYNC") <= 1, (name, count("BAR.SYNC"))  # the TMA ring's refill, or none
        assert count("SYNCS.PHASECHK") >= 1, name  # waits on the ring's mbarrier: a pipelined loop
        assert ck.n_spills == 0, name


def test_atomic_dq_variant_and_preprocess_compile_without_spills():
    ck = compile_dkdv(128, True, atomic=True)
    assert ck.n_spills == 0, ck.n_spills
    assert re.search(r"\b(RED|ATOM)G?\.E\.ADD\.F32", ck.asm["sass"])
    assert compile_preprocess(128).n_spills == 0


@pytest.mark.parametrize("D", [128, 64])
def test_atomic_dq_loop_is_pipelined_with_every_dot_on_wgmma(D):
    # 2026-11-27 (docs/attention.md): dQ^T = K^T dS^T (HEAD_DIM rows, a warpgroup's 64 each) instead of
    # dS K (BLOCK_M rows: mma.sync through ldmatrix), Q and dO through descriptors (pointer loads after the
    # loop's atomics were not copied by TMA: 10 BAR.SYNC, 16 LDS a trip, no ring)
    ck = compile_dkdv(D, False, atomic=True)
    assert ck.n_spills == 0, ck.n_spills
    assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    body = _first_loop(ck.asm["sass"])
    count = lambda p: sum(o.startswith(p) for o in body)  # noqa: E731
    assert count("SYNCS.PHASECHK") >= 1  # the TMA ring's wait: pipelined
    assert count("BAR.SYNC") <= 3 and count("LDSM") == 0 and count("HMMA") == 0, body
    assert count("REDG.E.ADD.F32x2") >= 4  # vector reductions straight from the accumulator


def compile_dkdv_ds(D, causal, dt="fp16", **extra):
    sig = dict(Q=P(dt), K=P(dt), V=P(dt), DO=P(dt), DK=P(dt), DV=P(dt), DQ=P(dt), LSE=P("fp32"), Delta=P("fp32"),
               sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32", dq_stride_z="i32",
               dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
    return _compile(B.attn_bwd_dkdv_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, ATOMIC_DQ=False, STORE_DS=True,
                                                      PREFETCH_LD=B.DS_PREFETCH_LD.get(D, False), **extra),
                    B._cfg(B.DS_DKDV_CONFIGS, D, None), ("stride_k",))


@pytest.mark.parametrize("D,causal", [(128, True), (64, False)])
def test_ds_mode_stores_ds_with_tma_and_its_gemm_is_pipelined_wgmma(D, causal):
    # dq_mode="ds" (docs/attention.md, "Backward against cuDNN"): the dK/dV loop adds one TMA store of dS^T a
    # trip and reads Q and dO by TMA (descriptors: after the stores, pointer loads would be a cp.async ring, and
    # at D=128 that spilled 188 registers), spill-free at the default configs; the dQ GEMM reads dS^T through the
    # TMA ring, every dot a wgmma with dS^T transposed as A
    ck = compile_dkdv_ds(D, causal)
    assert ck.n_spills == 0, ck.n_spills
    assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    body = _first_loop(ck.asm["sass"])
    count = lambda p: sum(o.startswith(p) for o in body)  # noqa: E731
    assert count("UTMASTG.2D") == 1 and count("SYNCS.PHASECHK") >= 1, body
    assert count("HMMA") == 0 and count("LDGSTS") == 0, body
    if B.DS_PREFETCH_LD.get(D):  # the next trip's LSE and delta rows, one element a thread each (PREFETCH_LD)
        assert count("LDG") == 2, body
    sig = dict(DST=P("fp16"), K=P("fp16"), DQ=P("fp16"), sm_scale="fp32", stride_z="i32", stride_h="i32",
               stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
    g = _compile(B.attn_bwd_dq_from_ds_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal),
                 B._cfg(B.DQ_FROM_DS_CONFIGS, D, None), ("stride_k",))
    assert g.n_spills == 0
    body = _first_loop(g.asm["sass"])
    assert sum(o.startswith("SYNCS.PHASECHK") for o in body) >= 1, body  # the ring's wait
    assert sum(o.startswith("UTMALDG") for o in body) >= 2, body  # the next stage's dS^T and K boxes
    hgmma = re.findall(r"HGMMA\.\S+ [^;]*", g.asm["sass"])
    assert hgmma and all("tnspA" in h for h in hgmma), hgmma


def test_the_same_kernel_compiles_to_the_same_code_whatever_came_before(monkeypatch):
    # the auto-TMA address arithmetic was ordered by process-wide value ids (as strings): a compile whose ids
    # crossed a digit boundary emitted other ops, and ptxas spilled 36 registers in one order and 0 in the other
    import itertools

    from kernelc.compiler.ir import core
    asm = []
    for start in (10 ** 6 - 20, 10 ** 7):  # 10**6 - 20: the Q load's leaves straddle 999999 | 1000000
        monkeypatch.setattr(core, "_ids", itertools.count(start))
        asm.append(str(compile_fwd(64, True).asm["tir_initial"]))
    assert asm[0] == asm[1]


@pytest.mark.parametrize("D", [128, 64])
def test_causal_grids_grouped_longest_first_compile_without_spills(D, monkeypatch):
    # GROUP (the causal grids longest first across head groups): spill-free at the default configs, every dot on
    # wgmma; the separate pass's dK/dV loop is the same SASS as without GROUP (rank and head from program ids
    # divided by the constexpr GROUP). Compared on the unstepped builds: KERNELC_STEP_DOT_LOOPS puts both D=64
    # kernels at the 128-register step (137 / 138 unbounded), where ptxas allocates the loop a little differently
    monkeypatch.setenv("KERNELC_STEP_DOT_LOOPS", "0")
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")

    def dkdv(group, ds=False):
        return _compile(B.attn_bwd_dkdv_kernel, sig, dict(HEAD_DIM=D, CAUSAL=True, ATOMIC_DQ=False, STORE_DS=ds,
                                                          PREFETCH_LD=ds and B.DS_PREFETCH_LD.get(D, False),
                                                          GROUP=group),
                        B._cfg(B.DS_DKDV_CONFIGS if ds else B.DKDV_CONFIGS, D, None), ("stride_k",))
    dsig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DQ=P("fp16"), LSE=P("fp32"), Delta=P("fp32"),
                sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
    dq = _compile(B.attn_bwd_dq_kernel, dsig, dict(HEAD_DIM=D, CAUSAL=True, GROUP=8), B._cfg(B.DQ_CONFIGS, D, None),
                  ("stride_k",))
    grouped = dkdv(8)
    for ck in (grouped, dq) + ((dkdv(8, ds=True),) if D == 128 else ()):
        assert ck.n_spills == 0
        assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    # the unmasked loop (the kernel's last MMA loop; the diagonal one before it may differ by an instruction)
    assert _mma_loops(grouped.asm["sass"])[-1] == _mma_loops(dkdv(0).asm["sass"])[-1]


def _mma_loops(sass, innermost=False, mma="HGMMA"):
    """SASS mnemonics of every loop (a backward branch) that issues ``mma`` (HGMMA; QGMMA: fp8), in program order;
    innermost: only the loops whose span holds no other loop's backward branch (not the retry paths of waits around
    them)."""
    ins, labels, out, spans = [], {}, [], []
    for line in sass.splitlines():
        m = re.match(r"^\s*(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)(.*)$", line)
        if m:
            ins.append((m.group(1), m.group(2)))
    for i, (op, rest) in enumerate(ins):
        m = re.search(r"`\((\.L_x_\d+)\)", rest) if op == "BRA" else None
        if m and labels.get(m.group(1), i + 1) <= i:
            body = [o for o, _ in ins[labels[m.group(1)]:i + 1]]
            if any(o.startswith(mma) for o in body):
                out.append(body)
                spans.append((labels[m.group(1)], i))
    if innermost:
        out = [b for b, (lo, hi) in zip(out, spans) if not any(s != (lo, hi) and lo <= s[1] < hi for s in spans)]
    return out


@pytest.mark.parametrize("D,causal,desc", [(128, True, False), (64, True, False), (64, True, True)])
def test_fused_mode_compiles_without_spills(D, causal, desc):
    # dq_mode="fused" (both loops of the separate pass in one program) at FUSED_CONFIGS: spill-free, wgmma dots
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", H="i32", N_CTX="i32")
    (bm1, bn1), (bm2, bn2), w, s = B.FUSED_CONFIGS[D]
    ck = _compile(B.attn_bwd_fused_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, BLOCK_M1=bm1, BLOCK_N1=bn1,
                                                     BLOCK_M2=bm2, BLOCK_N2=bn2, DQ_DESC=desc,
                                                     TAIL=B.FUSED_TAIL.get(D), EVEN_M=B.FUSED_EVEN_M.get(D, False)),
                  dict(num_warps=w, num_stages=s), ("stride_k",))
    assert ck.n_spills == 0
    assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    assert len(_mma_loops(ck.asm["sass"])) >= 4  # causal: dK/dV's two loops, then dQ's two
    # the dQ loop's K, V: cp.async after the program's dK/dV stores, or a TMA ring through descriptors
    assert ("LDGSTS" in ck.asm["sass"]) != desc


@pytest.mark.parametrize("causal", [False, True])
def test_d128_dkdv_with_a_producer_warpgroup_gives_its_consumers_240_registers(causal):
    # WS=1 at (64, 128, 8, 3): dK and dV carried in fp32 are 128 registers a consumer thread, so
    # KERNELC_WS_CONSUMER_REGS=auto gives the consumers 240 (the producer warpgroup 24): spill-free at both masks
    # (232 spilled 40 bytes causal); the dQ kernel (one [128, 128] accumulator, 64 a thread) keeps 232
    ck = compile_dkdv(128, causal, WS=1, EVEN_M=True)
    assert ck.n_spills == 0, ck.n_spills
    assert ck.launch_warps == 12 and "consumer_regs=240" in ck.asm["tir"]
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ck.asm["ptx"] and "setmaxnreg.inc.sync.aligned.u32 240;" in \
        ck.asm["ptx"]
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in compile_dq(128, causal).asm["ptx"]


def test_d128_ds_causal_in_one_loop_gives_the_producer_warpgroup_every_trip():
    # (att26) the compiler gives a producer to one loop a kernel: ds causal with WS=1 and its two loops specialises
    # the diagonal's (two trips a program) and the unmasked loop's consumers issue its copies themselves; ONE_LOOP
    # makes it one loop, masked every trip, whose copies all come from the producer warpgroup (240/24), spill-free
    two = _mma_loops(compile_dkdv_ds(128, True, WS=1, EVEN_M=True, GROUP=8).asm["sass"], innermost=True)
    assert len(two) == 2
    assert [sum(o.startswith("UTMALDG") for o in lp) for lp in two] == [0, 4], two
    ck = compile_dkdv_ds(128, True, WS=1, EVEN_M=True, GROUP=8, ONE_LOOP=True)
    assert ck.n_spills == 0, ck.n_spills
    assert "consumer_regs=240" in ck.asm["tir"]
    (loop,) = _mma_loops(ck.asm["sass"], innermost=True)
    assert not any(o.startswith("UTMALDG") for o in loop), loop
    assert sum(o.startswith("FSEL") for o in loop) >= 32, loop  # the causal mask, every trip


def _default_ds_dkdv_launch(D, causal, N, dkdv_config=None):
    """The keyword arguments (constexprs, num_warps, num_stages) of ds's dK/dV launch as attention_bwd's defaults make
    them for [1, 8, N, D] fp16 inputs: meta tensors and a spy kernel, nothing runs."""
    torch = pytest.importorskip("torch")
    seen = {}

    class Spy:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.update(kw)

    q = torch.empty(1, 8, N, D, device="meta", dtype=torch.float16)
    lse = torch.empty(1, 8, N, device="meta", dtype=torch.float32)
    # one head group (a large bound): the dK/dV launch is a step of its own
    _, steps = B.attention_bwd_steps(q, q, q, q, q, lse, causal, D ** -0.5, dq_mode="ds", dkdv_config=dkdv_config,
                                     kernels=dict(dkdv=Spy()), ds_workspace_bytes=1 << 40)
    dict(steps)["dkdv"]()
    return seen


def test_d128_ds_causal_default_is_one_loop_with_its_producer_and_ringed_rows():
    # (att27) ds's D=128 causal default: one loop from the diagonal on (DS_ONE_LOOP), its ring filled by a producer
    # warpgroup (DS_WS) with the LSE/delta rows in it (DS_ROWS_TMA) at every N the bench runs; ONE_LOOP=False gives
    # the two-loop kernel without either (the default before). Compiled as launched: 240 consumer registers, 16 bytes
    # of spills (cau26's table: the mask's compares; the non-causal default spills none), one MMA loop that issues
    # no copy (the producer's) and no row load (the rows come from the stage), the mask's FSELs every trip
    for N in (1024, 2048, 4096, 16384):
        kw = _default_ds_dkdv_launch(128, True, N)
        assert (kw["ONE_LOOP"], kw["WS"], kw["ROWS_TMA"], kw["EVEN_M"]) == (True, 1, True, True), (N, kw)
    assert "ONE_LOOP" not in _default_ds_dkdv_launch(128, False, 4096)  # non-causal: its compile key as before
    old = _default_ds_dkdv_launch(128, True, 4096, dkdv_config=dict(ONE_LOOP=False))
    assert (old["ONE_LOOP"], old.get("WS"), old.get("ROWS_TMA")) == (False, None, None), old
    cfg = {k: v for k, v in kw.items() if v is not None}
    ck = _compile(B.attn_bwd_dkdv_kernel, dict(
        Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"), LSE=P("fp32"),
        Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32",
        dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32"), {}, cfg, ("stride_k",))
    assert ck.n_spills <= 16, ck.n_spills
    assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    assert "consumer_regs=240" in ck.asm["tir"]
    (loop,) = _mma_loops(ck.asm["sass"], innermost=True)
    count = lambda p: sum(o.startswith(p) for o in loop)  # noqa: E731
    assert count("UTMALDG") == 0 and count("LDG") == 0, loop
    assert count("UTMASTG") == 1 and count("FSEL") >= 32, loop


@pytest.mark.parametrize("causal", [False, True])
def test_flat_dq_at_d128_adds_dqt_from_the_producer_warpgroup(causal):
    # dq_mode="flat" at D=128 (FLAT_DKDV_CONFIGS, FLAT_KNOBS: 32-query steps, a producer warpgroup, dQ^T's product
    # first): spill-free, every dot on wgmma, dQ^T's tile handed to the producer, which issues one 1-D bulk reduction
    # (UBLKRED) a trip; the consumers' loop issues none (KERNELC_WS_BULK_ISSUE=producer)
    ck = compile_dkdv(128, causal, atomic=True, FLAT_DQ=True, **B.FLAT_KNOBS[128])
    assert ck.n_spills == 0, ck.n_spills
    assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    assert "consumer_regs=240" in ck.asm["tir"]
    sass = ck.asm["sass"]
    assert "UBLKRED.G.S.ADD.F32" in sass and not re.search(r"\bREDG|ATOMG\.E\.ADD", sass)  # no per-element atomics
    assert not any(o.startswith("UBLKRED") for o in _first_loop(sass))


def test_d64_dkdv_with_a_producer_warpgroup_keeps_its_setmaxnreg():
    # (d64b27) the separate pass's D=64 dK/dV kernel in D=128's form (64 x 128, 8 warps, WS=1, rows by TMA): ptxas
    # could not tell its register count at entry and ignored both setmaxnreg (C7508), so the consumers kept 168
    # registers and spilled 72 bytes (768 without the rows); the backend assembles such a kernel again with
    # .minnctapersm 1 (backend/ptxas.py, _standalone), and the SASS then holds USETMAXREG and spills nothing
    ck = kernelc.compile(B.attn_bwd_dkdv_kernel, dict(
        Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
        LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
        stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32"),
        dict(HEAD_DIM=64, CAUSAL=False, ATOMIC_DQ=False, BLOCK_M=64, BLOCK_N=128, WS=1, EVEN_M=True, ROWS_TMA=True),
        target="sm_90a", num_warps=8, num_stages=3, divisibility={"N_CTX": 16, "stride_z": 16, "stride_h": 16,
                                                                  "stride_m": 16}, equal_to_1=("stride_k",))
    assert ck.launch_warps == 12 and "setmaxnreg.inc.sync.aligned.u32" in ck.asm["ptx"]
    assert "USETMAXREG" in ck.asm["sass"], "ptxas ignored setmaxnreg"
    assert ck.n_spills == 0, ck.n_spills


from kernelc.compiler.backend.sass_fragments import overwritten_a_fragments as _overwritten_a_fragments  # noqa: E402


def _dkdv_d64(causal=False, cfg=(64, 128, 8, 3), **extra):
    bm, bn, w, s = cfg
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
    return _compile(B.attn_bwd_dkdv_kernel, sig, dict(HEAD_DIM=64, CAUSAL=causal, ATOMIC_DQ=False, EVEN_M=True,
                                                      **extra), dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w,
                                                                     num_stages=s), ("stride_k",))


@pytest.mark.parametrize("kv_regs", [1, 2])
def test_no_register_a_fragment_across_a_warp_specialised_loop(kv_regs, monkeypatch):
    # (kvr26) KV_REGS under a producer warpgroup: ptxas (CUDA 13.0) gave the registers of K's A fragment, held across
    # the specialised loop, to P^T inside it, so from the second trip K Q^T read the last trip's dS^T: dK wrong on an
    # H200 (session 26's R2). In a kernel with a producer the loop-invariant A operand is staged to shared memory
    # (passes/stage_operands.py); without one it stays in registers
    ck = _dkdv_d64(WS=1, ROWS_TMA=True, KV_REGS=kv_regs)
    tir = ck.asm["tir"]
    assert (tir.count("a_regs=True"), tir.count("stage_operand")) == (0, kv_regs)
    assert "USETMAXREG" in ck.asm["sass"] and ck.n_spills == 0
    bad, loops = _overwritten_a_fragments(ck.asm["sass"])
    assert loops == 1 and not bad, bad
    # without a producer and with the pinned wait made plain it stays in registers (kvr27: with the pin it is staged)
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS_PINNED", "unpin")
    assert _dkdv_d64(WS=0, ROWS_TMA=True, KV_REGS=kv_regs).asm["tir"].count("a_regs=True") == kv_regs


def _standalone_ptxas_13_0():
    from kernelc.compiler.backend.ptxas import ptxas_binary, ptxas_max_ptx
    exe = ptxas_binary()
    return exe is not None and ptxas_max_ptx(exe) == 90


@pytest.mark.parametrize("rows", [False, True])
@pytest.mark.parametrize("kv_regs", [1, 2])
def test_no_register_a_fragment_across_a_loop_with_a_pinned_wait(kv_regs, rows, monkeypatch):
    # (kvr27) KV_REGS without a producer, 64 x 128 at 8 warps: the GPU hosts' nvJitLink 13.0.88 gave K's fragment
    # registers to P^T after the loop's pinned wgmma wait (lead's call A27: dK / dV relative error 1.06 / 0.92; the
    # nvJitLink 13.5 here keeps them). KERNELC_WGMMA_A_REGS_PINNED=auto (the default) reads the SASS and compiles such a
    # kernel again with K (and V) staged; the standalone ptxas 13.0 overwrites the fragment as nvJitLink 13.0.88 does
    ck = _dkdv_d64(ROWS_TMA=rows, KV_REGS=kv_regs)  # this host's nvJitLink: whatever it keeps, nothing overwritten
    bad, loops = _overwritten_a_fragments(ck.asm["sass"])
    assert loops == 1 and not bad and ck.n_spills == 0, bad
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS_PINNED", "stage")
    tir = _dkdv_d64(ROWS_TMA=rows, KV_REGS=kv_regs).asm["tir"]
    assert (tir.count("a_regs=True"), tir.count("stage_operand"), tir.count("pin=True")) == (0, kv_regs, 1)
    if not _standalone_ptxas_13_0():
        pytest.skip("no standalone ptxas of CUDA 13.0")
    monkeypatch.setenv("KERNELC_ASSEMBLER", "ptxas")
    # not vacuous: as before kvr27 (keep) ptxas 13.0 overwrites the fragment's four k-steps; with the wait made plain
    # (unpin) it keeps it in registers; auto finds the overwrite and compiles again as stage
    for mode, a_regs, n in (("keep", kv_regs, 4), ("unpin", kv_regs, 0), ("auto", 0, 0), ("stage", 0, 0)):
        monkeypatch.setenv("KERNELC_WGMMA_A_REGS_PINNED", mode)
        ck = _dkdv_d64(ROWS_TMA=rows, KV_REGS=kv_regs)
        assert ck.asm["tir"].count("a_regs=True") == a_regs, mode
        bad, loops = _overwritten_a_fragments(ck.asm["sass"])
        assert (loops, len(bad), ck.n_spills) == (1, n, 0), (mode, bad)
        assert any("compiled again with those operands staged" in x for x in ck.compile_log) == (mode == "auto")


def test_the_rule_is_what_keeps_the_fragment(monkeypatch):
    # the check below is not vacuous: without the rule ptxas 13.0 overwrites K's fragment in the WS kernel (the
    # defect R2 hit). With KERNELC_WGMMA_PIN_WAITS=0 as well it does not (the pinned wait's branch is the trigger,
    # docs/attention.md "kvr26"); if a newer ptxas keeps the fragment here, the rule can be revisited
    from kernelc.compiler.passes import stage_operands
    monkeypatch.setattr(stage_operands, "_warp_specialised", lambda op: False)
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS_PINNED", "keep")  # (kvr27's rule would stage it too: the loop pins)
    ck = _dkdv_d64(WS=1, ROWS_TMA=True, KV_REGS=1)
    assert ck.asm["tir"].count("a_regs=True") == 1
    bad, loops = _overwritten_a_fragments(ck.asm["sass"])
    assert loops == 1 and len(bad) == 4, bad  # the four k-steps of K Q^T


@pytest.mark.parametrize("mode", ["auto", "stage", "unpin"])
@pytest.mark.parametrize("name", ["fused_causal_default", "sep_kv2", "sep_kv2_causal", "d128form_kv2"])
def test_register_a_fragments_outlive_their_loop(name, mode, monkeypatch):
    # the kernels with a loop-invariant A operand in a register fragment's layout (no producer): the fused D=64 causal
    # default (FUSED_KV_REGS), the separate dK/dV kernel with KV_REGS=2 (both correct on an H200), 64 x 128 at 8 warps
    # (wrong on an H200 with its fragment: kvr27). Their loops have pinned waits: kept where the SASS keeps them
    # (auto), staged (stage) or kept with plain waits (unpin), no build may overwrite a fragment inside a loop
    monkeypatch.setenv("KERNELC_WGMMA_A_REGS_PINNED", mode)
    for assembler in ("nvjitlink", "ptxas") if _standalone_ptxas_13_0() else ("nvjitlink",):
        # nvJitLink (this host's; the GPU hosts' 13.0.88 allocates as the standalone ptxas 13.0 does, kvr27)
        monkeypatch.setenv("KERNELC_ASSEMBLER", assembler)
        _fragments_kept(name, mode)


def _fragments_kept(name, mode):
    if name == "fused_causal_default":
        c1, c2, cx, opts = B._fused_config(4096, 64, True, None, None)
        sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
                   LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32",
                   stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
        ck = kernelc.compile(B.attn_bwd_fused_kernel, sig, cx, target="sm_90a", divisibility={n: 16 for n in sig},
                             equal_to_1=("stride_k",), **opts)
    elif name == "d128form_kv2":
        ck = _dkdv_d64(ROWS_TMA=True, KV_REGS=2)
    else:
        ck = _dkdv_d64(causal=name.endswith("causal"), cfg=(32, 64, 4, 3), TAIL=True, KV_REGS=2)
    tir = ck.asm["tir"]
    if mode != "auto":
        assert (tir.count("a_regs=True") >= 1) == (mode == "unpin")
    elif name != "d128form_kv2":  # the kernels correct on an H200 with their fragments keep them
        assert tir.count("a_regs=True") >= 1
    if mode == "unpin":  # the loops that hold a fragment wait plainly
        assert not any("a_regs=True" in blk and "pin=True" in blk for blk in tir.split("scf.for")[1:])
    bad, loops = _overwritten_a_fragments(ck.asm["sass"])
    assert loops >= 1 and not bad and ck.n_spills == 0, bad


def _qgmma_loops(sass):
    """Innermost loops that issue a QGMMA (fp8 wgmma); the retry paths of waits, which branch back into a loop from the
    kernel's end, hold the loops' own branches."""
    return len(_mma_loops(sass, innermost=True, mma="QGMMA"))


# ONE_LOOP (fp828): a causal fp8 program's key blocks in one loop, the mask behind a uniform branch -- one key loop
# where the split diagonal has three, spill-free, and as many programs an SM as the default (D=128: 160 registers
# against 167; D=64 at 64x128, 3 stages: 124, 4 an SM)
@pytest.mark.parametrize("D,stages,programs", [(128, 2, 3), (64, 3, 4)])
def test_one_loop_causal_fp8_forward_has_one_key_loop(D, stages, programs):
    from analyzer.occupancy import occupancy
    from cubintools.target import parse_target
    sig = dict(Q=P("fp8e4nv"), K=P("fp8e4nv"), V=P("fp8e4nv"), Out=P("fp16"), LSE=P("fp32"), QScale=P("fp32"),
               KScale=P("fp32"), VScale=P("fp32"), sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    cfg = dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=stages)
    cx = dict(HEAD_DIM=D, CAUSAL=True, STORE_LSE=False, FP8=True, FOLD_SCALE=True, KEY_ORDER=True, MASK_FOLD=True,
              EVEN_N=True)
    ones = ("stride_qk", "stride_kk", "stride_ok", "stride_vn")
    split = _compile(A.attn_fwd_lse_kernel, sig, dict(cx, DIAG_SPLIT=True), cfg, ones)
    one = _compile(A.attn_fwd_lse_kernel, sig, dict(cx, ONE_LOOP=True), cfg, ones)
    assert (_qgmma_loops(split.asm["sass"]), _qgmma_loops(one.asm["sass"])) == (3, 1)
    # and with the ring's copies at the top of the trip (REFILL_TOP, the fp8 D=128 causal default): the same shape
    top = _compile(A.attn_fwd_lse_kernel, sig, dict(cx, ONE_LOOP=True, REFILL_TOP=True), cfg, ones)
    assert _qgmma_loops(top.asm["sass"]) == 1 and "refill='top'" in top.asm["tir"]
    for ck in (one, top):
        assert ck.n_spills == 0 and ck.launch_warps == 4
        blocks = occupancy(ck.launch_warps, ck.n_regs, ck.shared, parse_target("sm_90a").limits).blocks_per_sm
        assert blocks >= programs, (ck.n_regs, ck.shared)


def _loop_copies_before_wait(sass):
    """In the key loop (the innermost loop with a QGMMA): whether its UTMALDGs come before its SYNCS wait."""
    body = [ln for ln in sass.splitlines() if re.match(r"^\s*/\*[0-9a-f]{4,}\*/", ln)]
    waits = [i for i, ln in enumerate(body) if "SYNCS.PHASECHK" in ln]
    qg = next(i for i, ln in enumerate(body) if "QGMMA" in ln and "RZ" in ln)  # the loop's first logit QGMMA
    wait = max(i for i in waits if i < qg)
    copies = [i for i, ln in enumerate(body) if "UTMALDG" in ln]
    before = [i for i in copies if i < wait and i > wait - 40]
    return bool(before)


# REFILL_TOP (fp828, tl.range's refill_top): the fp8 D=128 forward's key loop issues the next key block's copies at
# the top of the trip, before its wait, where the default issues them after the trip's dots
def test_refill_top_issues_the_key_loops_copies_before_its_wait():
    sig = dict(Q=P("fp8e4nv"), K=P("fp8e4nv"), V=P("fp8e4nv"), Out=P("fp16"), LSE=P("fp32"), QScale=P("fp32"),
               KScale=P("fp32"), VScale=P("fp32"), sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    cfg = dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2)
    cx = dict(HEAD_DIM=128, CAUSAL=False, STORE_LSE=False, FP8=True, FOLD_SCALE=True, KEY_ORDER=True, EVEN_N=True)
    ones = ("stride_qk", "stride_kk", "stride_ok", "stride_vn")
    late = _compile(A.attn_fwd_lse_kernel, sig, cx, cfg, ones)
    top = _compile(A.attn_fwd_lse_kernel, sig, dict(cx, REFILL_TOP=True), cfg, ones)
    assert not _loop_copies_before_wait(late.asm["sass"]) and _loop_copies_before_wait(top.asm["sass"])
    assert top.n_spills == 0 and top.n_regs <= 168
