"""num_ctas=2 and ``plan_multicast`` (passes/multicast.py): the TMA ring of a loop both programs of a cluster run
alike is multicast (golden IR before -> after), a ring whose bounds or coordinates depend on program_id(0) is not (and
the loop says why), the verifier rejects a multicast tag it cannot prove, the PTX/SASS (.reqnctapercluster,
UTMALDG.MULTICAST, cluster barriers, registers), the option's checks and its cache key."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.backend import parse_target
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck


@kernelc.jit
def kv_loop(q_desc, k_desc, v_desc, out, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr,
            VARY: kl.constexpr):
    """An attention-shaped loop: a head's K and V blocks into two dots. VARY 1: the loop starts at the row block
    (causal-like bounds); VARY 2: the K/V rows move with the row block."""
    pid_m = kl.program_id(0)
    hz = kl.program_id(1)
    q = q_desc.load([hz * N + pid_m * BM, 0])
    acc = kl.zeros([BM, D], dtype=kl.float32)
    lo = pid_m * BM if VARY == 1 else 0
    shift = pid_m if VARY == 2 else 0
    for n in kl.range(lo, N, BN):
        k = k_desc.load([hz * N + n + shift, 0])
        s = kl.dot(q, k.T)
        v = v_desc.load([hz * N + n + shift, 0])
        acc = kl.dot(s.to(kl.float16), v, acc)
    rows = hz * N + pid_m * BM + kl.arange(0, BM)
    kl.store(out + rows[:, None] * D + kl.arange(0, D)[None, :], acc)


SIG = {"q_desc": "tensordesc<fp16[64, 64]>", "k_desc": "tensordesc<fp16[64, 64]>",
       "v_desc": "tensordesc<fp16[64, 64]>", "out": "*fp32", "N": "i32"}
DIV = {"q_desc": 16, "k_desc": 16, "v_desc": 16, "out": 16, "N": 16}


def _cx(vary=0):
    return dict(BM=64, BN=64, D=64, VARY=vary)


def _passes(cx, num_ctas=2, num_stages=2):
    """{pass name: IR text after it} through the tile pipeline, as kernelc.compile runs it with ``num_ctas``."""
    tgt = parse_target("sm_90a")
    fn, _ = generate_ir(C._base_function(kv_loop), SIG, cx, DIV, (), arch=tgt.arch, num_warps=4)
    if num_ctas != 1:
        fn.attrs["num_ctas"] = num_ctas
    verify(fn)
    ctx = PassContext(tgt.arch, tuple(tgt.capability), 4, num_stages=num_stages, num_ctas=num_ctas)
    out = {}
    fn = run_passes(fn, C.FRONTEND_PASSES, ctx, verify_each=False, dump=lambda n, t: out.__setitem__(n, t))
    fn = run_passes(fn, C.TILE_PASSES, ctx, dump=lambda n, t: out.__setitem__(n, t))
    return out, fn, ctx


def _compile(cx, num_ctas, num_stages=2):
    return kernelc.compile(kv_loop, SIG, cx, target="sm_90a", num_warps=4, num_stages=num_stages, divisibility=DIV,
                           num_ctas=num_ctas)


def test_plan_multicast_runs_before_the_tma_rings_only_for_clusters():
    names = [p.name for p in C.TILE_PASSES]
    assert names.index("plan_multicast") + 1 == names.index("expand_tma_rings")
    p = C.TILE_PASSES[names.index("plan_multicast")]
    tgt = parse_target("sm_90a")
    assert not p.enabled(PassContext(tgt.arch, tuple(tgt.capability), 4))
    assert p.enabled(PassContext(tgt.arch, tuple(tgt.capability), 4, num_ctas=2))


def test_a_ring_both_programs_fill_alike_is_multicast():
    ir, fn, ctx = _passes(_cx())
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=2, lookahead=1}}
    """)
    filecheck(ir["plan_multicast"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=2, lookahead=1, multicast=2, multicast_sync='cluster'}}
    """)
    filecheck(ir["expand_tma_rings"], """
        CHECK: mbarrier_init
        CHECK: mbarrier_init
        CHECK-NEXT: fence_mbarrier_init
        CHECK-NEXT: cluster_barrier
        CHECK: mbarrier_expect_tx {{%\\d+}}, {{%\\d+}} {bytes=16384}
        CHECK-NEXT: tma_copy_to_ring {{.*}} {multicast=2}
        CHECK-NEXT: tma_copy_to_ring {{.*}} {multicast=2}
        CHECK: = scf.for {{.*}} {pipeline={stages=2, lookahead=1, multicast=2{{.*}}}}
        CHECK: cluster_barrier
        CHECK-NEXT: [[E:%\\d+]] = elect_one : i1
        CHECK: mbarrier_expect_tx {{%\\d+}}, {{%\\d+}} {bytes=16384}
        CHECK-NEXT: tma_copy_to_ring {{.*}} {source={{.*}}, multicast=2}
        CHECK-NEXT: tma_copy_to_ring {{.*}} {source={{.*}}, multicast=2}
        CHECK: scf.yield
        CHECK: cluster_barrier
        CHECK-NEXT: elect_one
        CHECK-NEXT: constant
        CHECK-NEXT: mbarrier_at
        CHECK-NEXT: mbarrier_inval
    """)
    # the barrier before a refill and after the loop is the cluster's; other barriers stay the CTA's
    text = ir["expand_tma_rings"]
    assert text.count("cluster_barrier") == 3
    assert not ctx.notes or not any("multicast" in n for n in ctx.notes)


@pytest.mark.parametrize("vary, why", [
    (1, "its bounds or step depend on program_id(0)"),
    (2, "depend on program_id(0)"),
])
def test_a_ring_that_depends_on_the_row_block_is_not_multicast(vary, why):
    ir, fn, ctx = _passes(_cx(vary))
    filecheck(ir["plan_multicast"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=2, lookahead=1, multicast_refused=
    """)
    assert "multicast=2" not in ir["expand_tma_rings"] and "cluster_barrier" not in ir["expand_tma_rings"]
    assert any(why in n and "not multicast" in n for n in ctx.notes)
    # otherwise the ring is the one a num_ctas=1 build gets
    one, _, _ = _passes(_cx(vary), num_ctas=1)
    strip = lambda t: re.sub(r", multicast_refused=(\"[^\"]*\"|'[^']*')| attributes \{num_ctas=2\}", "", t)  # noqa: E731
    assert strip(ir["expand_tma_rings"]) == one["expand_tma_rings"]


def test_an_odd_number_of_stages_is_not_multicast():
    ir, _, ctx = _passes(_cx(), num_stages=3)
    assert "multicast_refused=\"3 stages" in ir["plan_multicast"]
    assert "cluster_barrier" not in ir["expand_tma_rings"]


def test_without_clusters_nothing_changes():
    ir, fn, _ = _passes(_cx(), num_ctas=1)
    assert "plan_multicast" not in ir
    assert "multicast=" not in ir["expand_tma_rings"] and "multicast_refused" not in ir["expand_tma_rings"]
    assert "cluster_barrier" not in ir["expand_tma_rings"] and "num_ctas" not in fn.attrs


def _multicast_fn(cx):
    _, fn, _ = _passes(cx, num_ctas=2)
    return fn


def test_the_verifier_rejects_a_multicast_ring_it_cannot_prove():
    # the refused case, tagged by hand: its copies' rows move with program_id(0)
    _, fn, _ = _passes(_cx(2))
    copies = [o for o in fn.walk() if o.name == "tma_copy_to_ring"]
    assert copies
    copies[0].attrs["multicast"] = 2
    with pytest.raises(VerificationError, match="coordinates .*depend on program_id\\(0\\)"):
        verify(fn)
    # the proven case verifies, and not without clusters
    fn = _multicast_fn(_cx())
    verify(fn)
    fn.attrs.pop("num_ctas")
    with pytest.raises(VerificationError, match="num_ctas=2"):
        verify(fn)


def test_the_verifier_rejects_a_multicast_loop_whose_bounds_vary():
    _, fn, _ = _passes(_cx(1))
    loop = next(o for o in fn.walk() if o.name == "scf.for" and o.attrs.get("pipeline"))
    loop.attrs["pipeline"]["multicast"] = 2
    with pytest.raises(VerificationError, match="same trips"):
        verify(fn)


def test_cluster_ptx_and_sass():
    one, two = _compile(_cx(), 1), _compile(_cx(), 2)
    assert ".reqnctapercluster 2, 1, 1" in two.asm["ptx"] and ".explicitcluster" in two.asm["ptx"]
    assert ".reqnctapercluster" not in one.asm["ptx"]
    assert two.asm["ptx"].count("multicast::cluster") == 4  # K and V in the prologue and in the loop
    assert two.asm["ptx"].count("barrier.cluster.arrive.release.aligned") == 3
    assert "%cluster_ctarank" in two.asm["ptx"]
    sass = two.asm["sass"]
    assert len(re.findall(r"UTMALDG\.2D\.MULTICAST", sass)) == 4
    assert len(re.findall(r"UTMALDG\.2D ", sass)) == 1  # Q: this program's own
    assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass
    assert "MULTICAST" not in one.asm["sass"] and "UCGABAR" not in one.asm["sass"]
    assert two.n_spills == 0 and two.n_regs == one.n_regs
    assert two.shared == one.shared
    assert two.num_ctas == 2 and one.num_ctas == 1


def test_a_refused_ring_compiles_as_without_clusters_but_for_the_cluster_directive():
    one, two = _compile(_cx(1), 1), _compile(_cx(1), 2)
    strip = lambda p: p.replace(".explicitcluster\n", "").replace(".reqnctapercluster 2, 1, 1\n", "")  # noqa: E731
    assert strip(two.asm["ptx"]) == one.asm["ptx"]
    assert any("not multicast" in n for n in two.compile_log)


def test_num_ctas_checks():
    with pytest.raises(ValueError, match="num_ctas must be 1 or 2"):
        _compile(_cx(), 3)
    with pytest.raises(ValueError, match="num_ctas must be 1 or 2"):
        C.check_num_ctas(True)
    with pytest.raises(ValueError, match="sm_90"):
        kernelc.compile(kv_loop, SIG, _cx(), target="sm_80", num_warps=4, num_stages=2, divisibility=DIV, num_ctas=2)
    assert C.check_num_ctas(1) == 1 and C.check_num_ctas(2) == 2


def test_num_ctas_is_in_the_cache_key_only_where_it_is_not_1():
    from kernelc.runtime.cache import cache_key
    tgt = parse_target("sm_90a")
    args = (kv_loop, SIG, _cx(), DIV, (), 4, 2, tgt)
    assert cache_key(*args) == cache_key(*args, None, None, 1)
    assert cache_key(*args, None, None, 2) != cache_key(*args)


def test_the_launcher_wants_a_grid_of_whole_clusters():
    from kernelc.runtime.launcher import _num_ctas_option
    assert _num_ctas_option({}) == 1 and _num_ctas_option({"num_ctas": 2}) == 2
    with pytest.raises(ValueError):
        _num_ctas_option({"num_ctas": 4})


def test_empty_barriers_hand_each_stage_to_its_issuer(monkeypatch):
    monkeypatch.setenv("KERNELC_MULTICAST_SYNC", "empty")
    ir, _, _ = _passes(_cx())
    filecheck(ir["plan_multicast"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=2, lookahead=1, multicast=2, multicast_sync='empty'}}
    """)
    filecheck(ir["expand_tma_rings"], """
        CHECK: [[BARS:%\\d+]] = mbarrier_alloc {count=2} : i64
        CHECK: [[EMPTY:%\\d+]] = mbarrier_alloc {count=2} : i64
        CHECK: mbarrier_init {{%\\d+}}, {{%\\d+}} {count=2}
        CHECK: mbarrier_init {{%\\d+}}, {{%\\d+}} {count=2}
        CHECK-NEXT: fence_mbarrier_init
        CHECK-NEXT: cluster_barrier
        CHECK: mbarrier_expect_tx
        CHECK-NEXT: [[EB0:%\\d+]] = mbarrier_at [[EMPTY]], {{%\\d+}} : i32
        CHECK: mbarrier_arrive_remote [[EB0]], {{%\\d+}}, {{%\\d+}}
        CHECK-NEXT: [[RK:%\\d+]] = cluster_rank : i32
        CHECK: mbarrier_wait_cluster [[EB0]], {{%\\d+}}, {{%\\d+}}
        CHECK-NEXT: tma_copy_to_ring {{.*}} {multicast=2}
        CHECK: = scf.for {{.*}} : <64x64xfp32>, i32, i32, i32, i32
        CHECK-NEXT: ^body({{.*}}, [[WR:%\\d+]]: i32, {{%\\d+}}: i32, [[WPH:%\\d+]]: i32):
        CHECK: = dot
        CHECK: = dot
        CHECK-NEXT: barrier
        CHECK-NEXT: elect_one
        CHECK: mbarrier_expect_tx
        CHECK-NEXT: [[EB:%\\d+]] = mbarrier_at [[EMPTY]], [[WR]] : i32
        CHECK: mbarrier_arrive_remote [[EB]],
        CHECK: mbarrier_wait_cluster [[EB]], [[WPH]],
        CHECK-NEXT: tma_copy_to_ring {{.*}} {source={{.*}}, multicast=2}
        CHECK: scf.yield
        CHECK: cluster_barrier
    """)
    # the refill's barrier is the CTA's: cluster barriers only after the init and after the loop
    assert ir["expand_tma_rings"].count("cluster_barrier") == 2
    ck = _compile(_cx(), 2)
    ptx = ck.asm["ptx"]
    assert "mapa.shared::cluster.u32" in ptx and "mbarrier.arrive.release.cluster.shared::cluster.b64" in ptx
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in ptx
    assert ck.asm["sass"].count("UTMALDG.2D.MULTICAST") == 4 and ck.n_spills == 0


def _fp8_forward(causal, num_ctas):
    """The fp8 attention forward's default build at D=128 (64x128, 4 warps, 2 stages, host descriptors, key order)."""
    from examples.kernels import attention as A
    D, bm, bn = 128, 64, 128
    sig = dict(Q=f"tensordesc<fp8e4nv[{bm}, {D}]>", K=f"tensordesc<fp8e4nv[{bn}, {D}]>",
               V=f"tensordesc<fp8e4nv[{D}, {bn}]>", Out="*fp16", LSE="*fp32", QScale="*fp32", KScale="*fp32",
               VScale="*fp32", sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    cx = dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=False, FP8=True, BLOCK_M=bm, BLOCK_N=bn, DESC=1, KEY_ORDER=True,
              EVEN_N=True, FOLD_SCALE=True, ONE_LOOP=causal)
    return kernelc.compile(A.attn_fwd_lse_kernel, sig, cx, target="sm_90a", num_warps=4, num_stages=2,
                           divisibility={n: 16 for n in sig if n != "sm_scale"},
                           equal_to_1=("stride_qk", "stride_kk", "stride_ok", "stride_vn"), num_ctas=num_ctas)


def test_the_fp8_forward_multicasts_its_k_v_ring_non_causal_only():
    one, two = _fp8_forward(False, 1), _fp8_forward(False, 2)
    assert two.asm["sass"].count("UTMALDG.2D.MULTICAST") == 4  # K and V^T, prologue and loop; Q its own
    assert two.n_spills == 0 and two.n_regs <= 168  # still 3 programs an SM (65536 / (128 x 168))
    assert two.shared == one.shared
    assert not any("not multicast" in n for n in two.compile_log)
    causal = _fp8_forward(True, 2)
    assert "MULTICAST" not in causal.asm["sass"]
    assert any("its bounds or step depend on program_id(0)" in n for n in causal.compile_log)
