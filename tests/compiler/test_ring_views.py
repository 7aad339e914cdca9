"""A tile that several dots of a pipelined loop read, directly and through a transpose, joins the loop's ring
once (``KERNELC_RING_VIEWS``, docs/triton-tutorials.md "06 backward"): ``simplify`` folds
``trans(trans(x))`` to ``x`` (tutorial 06's q^T, read as the B of k q^T and, transposed back, of dS^T q, then
joins the TMA ring as dO does), and ``schedule_pipelines`` rings a pointer load read that way through cp.async
(tutorial 06's k^T in the dQ loop), one stage serving both views. Golden IR before -> after, the verifier,
the lowering (wgmma transpose bits, no register staging left in the loop), and the tutorial-shaped backward."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from tests.compiler import fused_bwd_kernels as FB
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes


@kernelc.jit
def k_t_twice(Q, K, Out, stride, steps, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    # the dQ loop's shape: K^T [D, BN] is the B of Q K^T and, transposed, of S K
    rows = kl.arange(0, BM)
    cols = kl.arange(0, D)
    q = kl.load(Q + rows[:, None] * D + cols[None, :])
    acc = kl.zeros([BM, D], dtype=kl.float32)
    k_t_at = K + cols[:, None] + kl.arange(0, BN)[None, :] * stride
    for _ in range(steps):
        k_t = kl.load(k_t_at)
        s = kl.dot(q, k_t)
        acc += kl.dot(s.to(kl.float16), kl.trans(k_t))
        k_t_at += BN * stride
    kl.store(Out + rows[:, None] * D + cols[None, :], acc)


@kernelc.jit
def q_t_twice(Q, K, Out, stride, steps, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    # the dK/dV loop's shape: q^T [D, BM] (a transposed tile access: a TMA box and a trans) is the B of
    # k q^T and, transposed back, of P^T q
    keys = kl.arange(0, BN)
    cols = kl.arange(0, D)
    k = kl.load(K + keys[:, None] * D + cols[None, :])
    acc = kl.zeros([BN, D], dtype=kl.float32)
    q_t_at = Q + cols[:, None] + kl.arange(0, BM)[None, :] * stride
    for _ in range(steps):
        q_t = kl.load(q_t_at)
        p_t = kl.dot(k, q_t)
        acc += kl.dot(p_t.to(kl.float16), kl.trans(q_t))
        q_t_at += BM * stride
    kl.store(Out + keys[:, None] * D + cols[None, :], acc)


SIG = {"Q": "*fp16", "K": "*fp16", "Out": "*fp32", "stride": "i32", "steps": "i32"}
DIV = {"stride": 16}
KCX = dict(BM=64, BN=32, D=64)
QCX = dict(BM=32, BN=128, D=64)


@pytest.fixture
def views(monkeypatch):
    monkeypatch.setenv("KERNELC_RING_VIEWS", "1")


@pytest.fixture
def pointer_loads(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")  # keep K^T a pointer load: the cp.async ring


def _loop_sass(sass: str):
    """SASS opcodes of each innermost loop holding an HGMMA (label .. backward branch), in program order. A
    loop whose span holds another loop's backward branch is dropped: an enclosing loop, or a wait's retry
    path placed after the loop that branches back into its body."""
    ops, labels, pending = [], {}, []
    for ln in sass.splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", ln)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;?\s*(/\*.*)?$", ln)
        if m:
            for lb in pending:
                labels[lb] = len(ops)
            pending = []
            ops.append(re.sub(r"^@!?U?P\w+\s+", "", m.group(1).rstrip(" ;")))
    spans = []
    for i, o in enumerate(ops):
        m = re.match(r"BRA\s+.*`\((\.L_x_\d+)\)", o)
        if m and labels.get(m.group(1), i + 1) <= i and any(x.startswith("HGMMA") for x in ops[labels[m.group(1)]:i]):
            spans.append((labels[m.group(1)], i))
    return [ops[lo:hi + 1] for lo, hi in spans if not any((a, b) != (lo, hi) and lo <= b < hi for a, b in spans)]


def _count(loop, prefix):
    return sum(1 for o in loop if o.split()[0] == prefix or o.startswith(prefix + "."))


def test_a_cp_async_load_read_twice_joins_the_ring_once(views, pointer_loads):
    ir, fn, _ = _passes(k_t_twice, SIG, KCX, div=DIV)
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}}
        CHECK: [[KT:%\\d+]] = load {{%\\d+}} {pipeline={ring='cp.async', vec=8}} : <64x32xfp16>
        CHECK: = dot {{%\\d+}}, [[KT]],
        CHECK: = trans [[KT]] {perm=[1, 0], pipeline={ring='cp.async'}} : <32x64xfp16>
    """)
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: [[R:%\\d+]] = ring_alloc {stages=3, operand='b'} : <64x32xfp16>
        CHECK-NOT: ring_alloc
        CHECK: async_copy [[R]],
        CHECK-NEXT: async_commit_group
        CHECK: async_copy [[R]],
        CHECK-NEXT: async_commit_group
        CHECK: = scf.for
        CHECK: async_wait_group {pending=1}
        CHECK-NEXT: barrier
        CHECK: async_copy [[R]], {{.*}}source=
        CHECK-NEXT: async_commit_group
        CHECK-NEXT: [[T:%\\d+]] = ring_read [[R]], [[RD:%\\d+]] : <64x32xfp16>
        CHECK-NEXT: [[TT:%\\d+]] = ring_read [[R]], [[RD]] {operand='b', transposed=True} : <32x64xfp16>
        CHECK-NOT: = load
        CHECK-NOT: = trans
        CHECK: = dot {{%\\d+}}, [[T]],
        CHECK: = dot {{%\\d+}}, [[TT]],
        CHECK: scf.yield
        CHECK-NEXT: async_wait_all
    """)
    verify(fn)


def test_without_the_knob_the_load_keeps_its_register_path(monkeypatch, pointer_loads):
    monkeypatch.setenv("KERNELC_RING_VIEWS", "0")
    ir, _, _ = _passes(k_t_twice, SIG, KCX, div=DIV, upto="schedule_pipelines")
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for
        CHECK-NOT: pipeline=
        CHECK: = load
        CHECK-NOT: pipeline=
        CHECK: scf.yield
    """)


def test_trans_of_trans_folds_and_the_tile_joins_the_tma_ring(views):
    ir, fn, _ = _passes(q_t_twice, SIG, QCX, num_stages=4, div=DIV)
    # pointer_tiles_to_descriptors reads the transposed access as a box and a trans; the dot of P^T q
    # transposes that trans back
    filecheck(ir["pointer_tiles_to_descriptors"], """
        CHECK: [[B:%\\d+]] = descriptor_load {{.*}} : <32x64xfp16>
        CHECK-NEXT: [[T:%\\d+]] = trans [[B]] {perm=[1, 0]} : <64x32xfp16>
        CHECK: = trans [[T]] {perm=[1, 0]} : <32x64xfp16>
    """)
    filecheck(ir["simplify"], """
        CHECK: [[B:%\\d+]] = descriptor_load {{.*}} : <32x64xfp16>
        CHECK-NEXT: [[T:%\\d+]] = trans [[B]] {perm=[1, 0]} : <64x32xfp16>
        CHECK: = dot {{%\\d+}}, [[T]],
        CHECK-NOT: = trans
        CHECK: = dot {{%\\d+}}, [[B]],
    """)
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=4, lookahead=3}}
        CHECK: [[B:%\\d+]] = descriptor_load {{.*}}pipeline={ring='tma'}{{.*}} : <32x64xfp16>
        CHECK-NEXT: = trans [[B]] {perm=[1, 0], pipeline={ring='tma'}} : <64x32xfp16>
    """)
    filecheck(ir["expand_tma_rings"], """
        CHECK: [[R:%\\d+]] = tma_ring_alloc {{%\\d+}} {stages=4, operand='b', transposed=True} : <64x32xfp16>
        CHECK-NOT: tma_ring_alloc
        CHECK: = scf.for
        CHECK: mbarrier_wait
        CHECK: = ring_read [[R]], [[RD:%\\d+]] : <64x32xfp16>
        CHECK-NEXT: = ring_read [[R]], [[RD]] {operand='b'} : <32x64xfp16>
        CHECK-NOT: descriptor_load
    """)
    verify(fn)


def test_trans_of_trans_stays_without_the_knob(monkeypatch):
    monkeypatch.setenv("KERNELC_RING_VIEWS", "0")
    ir, _, _ = _passes(q_t_twice, SIG, QCX, num_stages=4, div=DIV, upto="schedule_pipelines")
    filecheck(ir["simplify"], """
        CHECK: [[B:%\\d+]] = descriptor_load {{.*}} : <32x64xfp16>
        CHECK-NEXT: [[T:%\\d+]] = trans [[B]] {perm=[1, 0]} : <64x32xfp16>
        CHECK: = trans [[T]] {perm=[1, 0]} : <32x64xfp16>
    """)
    assert "ring='tma'" not in ir["schedule_pipelines"].split("scf.for", 1)[1]


def test_a_trans_joins_only_the_ring_of_its_tile(views, pointer_loads):
    _, fn, _ = _passes(k_t_twice, SIG, KCX, div=DIV, upto="schedule_wgmma")
    ld = next(o for o in fn.walk() if o.name == "load" and o.attrs.get("pipeline"))
    tr = next(o for o in fn.walk() if o.name == "trans")
    verify(fn)
    tr.attrs["pipeline"] = {"ring": "tma"}
    with pytest.raises(VerificationError, match="joins the 'tma' ring of the tile it views"):
        verify(fn)
    tr.attrs["pipeline"] = {"ring": "cp.async"}
    old = ld.attrs.pop("pipeline")
    with pytest.raises(VerificationError, match="joins the 'cp.async' ring of the tile it views"):
        verify(fn)
    ld.attrs["pipeline"] = old
    verify(fn)


def test_the_views_lower_to_wgmma_transpose_bits_and_no_register_staging(monkeypatch, pointer_loads):
    """Q K^T reads the stage K-major (tnspB 0), S K reads the same stage N-major (tnspB 1), as Triton 3.6
    compiles tutorial 06's dQ loop; without the knob the loop loads K^T into registers and stores it to
    shared memory for each dot (STS in the loop), with it only cp.async (LDGSTS) writes the stage."""
    got = {}
    for knob in ("0", "1"):
        monkeypatch.setenv("KERNELC_RING_VIEWS", knob)
        ck = kcompile(k_t_twice, SIG, KCX, "sm_90a", 4, 3, divisibility=DIV)
        loops = _loop_sass(ck.asm["sass"])
        assert len(loops) == 1
        got[knob] = (ck, loops[0])
    ck, loop = got["1"]
    wg = [(m.group(1), m.group(2)) for m in re.finditer(
        r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.f16\.f16 [^;]*?p((?:, \d)+);", ck.asm["ptx"])]
    # Q K^T: A and B from shared memory (scale-a, scale-b, tnspA, tnspB = 1, 1, 0, 0); S K: A from registers,
    # B the same stage transposed (scale-a, scale-b, tnspB = 1, 1, 1)
    assert sorted(set(wg)) == [("m64n32k16", ", 1, 1, 0, 0"), ("m64n64k16", ", 1, 1, 1")]
    assert _count(loop, "LDGSTS") > 0 and _count(loop, "STS") == 0 and _count(loop, "LDG") == 0
    _, before = got["0"]
    assert _count(before, "STS") > 0 and _count(before, "LDG") > 0


@pytest.mark.parametrize("causal", [False, True])
def test_tutorial_shaped_backward_rings_q_t_and_k_t(views, causal):
    """tests/compiler/fused_bwd_kernels.py (tutorial 06's ``_attn_bwd`` in our text) at HEAD_DIM 64, its
    configuration: every dK/dV loop copies q^T and dO by TMA into its ring (two UTMALDG an iteration), every
    dQ loop k^T and v^T by cp.async; no loop loads a dot operand into registers or stores one to shared
    memory (before: q^T by a TMA copy waited for in the iteration and staged, k^T loaded and staged)."""
    div = dict(stride_bh=16, stride_tok=16, N_CTX=16)
    ck = kcompile(FB.fused_attn_bwd, FB.SIG, dict(FB.CONFIG, D=64, CAUSAL=causal), "sm_90a", 4, 5, divisibility=div)
    loops = _loop_sass(ck.asm["sass"])
    assert len(loops) == (4 if causal else 2)
    dkdv, dq = loops[:len(loops) // 2], loops[len(loops) // 2:]
    for lp in dkdv:
        assert _count(lp, "UTMALDG") == 2 and _count(lp, "STS") == 0 and _count(lp, "LDS") == 0
        assert _count(lp, "BAR.SYNC") == 1
    for lp in dq:
        assert _count(lp, "LDGSTS") > 0 and _count(lp, "STS") == 0 and _count(lp, "LDG") == 0
        assert _count(lp, "BAR.SYNC") == 1
    assert ck.shared <= 232448 // 2 - 1024   # two blocks an SM still fit


@pytest.mark.gpu
@pytest.mark.parametrize("causal,D", [(False, 64), (True, 64), (False, 128), (True, 128)])
def test_gpu_tutorial_shaped_backward_with_ring_views(views, causal, D):
    """On a Hopper GPU: the tutorial-shaped backward (q^T and k^T ringed, one stage read in two orientations)
    against torch autograd."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU")
    from kernelc.runtime.launcher import get_state
    get_state(FB.fused_attn_bwd)["cache"].clear()  # the knob is read at compile time
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(1, 2, 1024, D, device="cuda", dtype=torch.float16) * 0.5 for _ in range(4))
    sm_scale = D ** -0.5
    got = FB.run(q, k, v, do, causal, sm_scale)
    torch.cuda.synchronize()
    ref = FB.reference(q, k, v, do, causal, sm_scale)
    get_state(FB.fused_attn_bwd)["cache"].clear()
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.float(), r, atol=2e-2, rtol=2e-2)
