"""``kl.bulk_add`` (issue 27, FlashAttention-3's 1-D dQ reduction): the staging order (language/bulk.py),
``claim_bulk_adds`` (passes/bulk_adds.py: tma=True or the element atomics), its expansion by
``expand_bulk_reductions`` (golden IR), PTX/SASS on sm_90a (``cp.reduce.async.bulk...add.f32`` / UBLKRED),
the verifier's checks and the interpreter's result against numpy."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from kernelc.language.bulk import staging_offset_of
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes
from tests.compiler.verifier_cases import first_ops, rejects_bad_attrs, rejects_bad_operands


@kernelc.jit
def add_in_loop(X, OUT, R: kl.constexpr, C: kl.constexpr, STEPS: kl.constexpr):
    pid = kl.program_id(0)
    rows = kl.arange(0, R)
    cols = kl.arange(0, C)
    for i in kl.range(0, STEPS):
        x = kl.load(X + (pid * STEPS + i) * R * C + rows[:, None] * C + cols[None, :])
        kl.bulk_add(OUT + (i % 2) * R * C, x)  # two blocks, each added by half the trips of every program


@kernelc.jit
def staging_order(OUT, R: kl.constexpr, C: kl.constexpr):
    rows = kl.arange(0, R)
    cols = kl.arange(0, C)
    kl.store(OUT + rows[:, None] * C + cols[None, :], kl.staging_offsets(R, C, kl.float32))


SIG = {"X": "*fp32", "OUT": "*fp32"}
DIV = {"X": 16, "OUT": 16}
CX = dict(R=64, C=32, STEPS=4)
ADD_LINE = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1) if "kl.bulk_add(OUT + (i % 2)" in t)


def _ref_offsets(R, C):
    return np.array([[staging_offset_of(r, c, R, C, 4) for c in range(C)] for r in range(R)])


@pytest.mark.parametrize("R,C", [(64, 32), (128, 64), (16, 16), (8, 8), (4, 256)])
def test_the_staging_order_is_a_permutation_that_swizzles_16_byte_chunks(R, C):
    off = _ref_offsets(R, C)
    assert sorted(off.ravel()) == list(range(R * C))
    # 16-byte chunks move whole: 4 consecutive fp32 of a row stay consecutive and chunk-aligned
    assert (off[:, 0::4] % 4 == 0).all() and (np.diff(off.reshape(R, C // 4, 4), axis=2) == 1).all()
    if C >= 32 and R >= 8:  # 128-byte rows: the 8 rows of a phase put column 0 in 8 different chunks (bank groups)
        assert len({int(off[r, 0]) % 32 for r in range(8)}) == 8


def test_the_bulk_add_in_a_loop_becomes_a_staged_1d_bulk_reduction():
    ir, fn, _ = _passes(add_in_loop, SIG, CX, div=DIV)
    # claim_bulk_adds, before -> after: the add keeps its op, tagged for the copy engine (OUT 16-byte aligned)
    filecheck(ir["lower_descriptors"], """
        CHECK: scf.for
        CHECK: bulk_add {{%\\d+}}, {{%\\d+}} {kind='add'}
    """)
    filecheck(ir["claim_bulk_adds"], """
        CHECK: scf.for
        CHECK: bulk_add {{%\\d+}}, {{%\\d+}} {kind='add', tma=True}
    """)
    filecheck(ir["expand_bulk_reductions"], """
        CHECK: [[BUF:%\\d+]] = bulk_add_buffer_alloc {stages=2} : <64x32xfp32>
        CHECK: scf.for
        CHECK-NEXT: ^body([[IV:%\\d+]]: i32):
        CHECK: [[X:%\\d+]] = load
        CHECK-NOT: bulk_add {{
        CHECK: [[K:%\\d+]] = sdiv
        CHECK-NEXT: [[S:%\\d+]] = constant {value=2} : i32
        CHECK-NEXT: [[ST:%\\d+]] = srem [[K]], [[S]] : i32
        CHECK-NEXT: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_stage_store [[BUF]], [[ST]], [[X]]
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_reduce_1d [[BUF]], [[ST]], [[T0]], {{%\\d+}} {kind='add', source='{{.*}}:ADD_LINE:{{\\d+}}'}
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK-NEXT: scf.yield
        CHECK-NEXT: [[T1:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T1]] {pending=0}
        CHECK-NEXT: barrier
    """.replace("ADD_LINE", str(ADD_LINE)))
    verify(fn)


def test_the_ptx_and_sass_carry_one_1d_bulk_reduction_per_trip():
    ck = kernelc.compile(add_in_loop, signature=SIG, constexprs=CX, target="sm_90a", divisibility=DIV)
    ptx = ck.asm["ptx"]
    reds = re.findall(r"cp\.reduce\.async\.bulk\.global\.shared::cta\.bulk_group\.add\.f32 \[%rd\d+\], \[%r\d+\], "
                      r"8192;", ptx)
    assert len(reds) == CX["STEPS"], ptx  # the 4-trip loop is unrolled; 64 x 32 fp32 = 8192 bytes
    assert "cp.reduce.async.bulk.tensor" not in ptx and not re.search(r"\b(atom|red)\.", ptx)
    sass = ck.asm["sass"]
    assert len(re.findall(r"\bUBLKRED\b", sass)) == CX["STEPS"], sorted(set(re.findall(r"\bU[A-Z]+\b", sass)))
    assert ck.n_spills == 0
    assert ck.shared >= 2 * 64 * 32 * 4
    accesses = [a for a in ck.reports["memory_accesses"] if a["kind"] == "atomic add (1-D bulk reduction)"]
    assert len(accesses) == 1 and accesses[0]["line"] == ADD_LINE


@pytest.mark.parametrize("target,div,why", [("sm_80", DIV, "no TMA"),
                                            ("sm_90a", {"X": 16, "OUT": 4}, "pointer not proven 16-byte aligned")])
def test_without_a_legal_bulk_copy_the_add_is_relaxed_atomics(target, div, why):
    ck = kernelc.compile(add_in_loop, signature=SIG, constexprs=CX, target=target, divisibility=div)
    assert "cp.reduce.async.bulk" not in ck.asm["ptx"], why
    tir = ck.asm["tir"]
    assert not re.search(r"^\s*bulk_add ", tir, re.M) and "atomic_rmw" in tir and "sem='relaxed'" in tir
    assert re.search(r"\b(RED|ATOM)G?\.E\.ADD\.F32", ck.asm["sass"]), why


@kernelc.jit
def add_evict_last(X, OUT, R: kl.constexpr, C: kl.constexpr):
    rows = kl.arange(0, R)
    cols = kl.arange(0, C)
    kl.bulk_add(OUT, kl.load(X + rows[:, None] * C + cols[None, :]), eviction_policy="evict_last")


def test_an_eviction_policy_becomes_an_l2_cache_hint_on_the_bulk_reduction():
    ck = kernelc.compile(add_evict_last, signature=SIG, constexprs=dict(R=16, C=16), target="sm_90a", divisibility=DIV)
    assert "l2='evict_last'" in ck.asm["tir"]
    ptx = ck.asm["ptx"]
    assert "createpolicy.fractional.L2::evict_last.b64" in ptx
    assert "cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.add.f32" in ptx
    assert re.search(r"L2::cache_hint\.add\.f32 \[%rd\d+\], \[%r\d+\], 1024, pol;", ptx)  # 16 x 16 fp32
    assert re.search(r"\bUBLKRED\.G\.S\.ADD\.F32\.RN \[UR\d+\], \[UR\d+\], UR\d+, desc\[UR\d+\]", ck.asm["sass"])
    with pytest.raises(kernelc.CompilationError, match="eviction_policy must be one of"):
        kernelc.compile(add_bad_policy, signature={"OUT": "*fp32"}, target="sm_90a")


@kernelc.jit
def add_bad_policy(OUT):
    kl.bulk_add(OUT, kl.zeros([4, 4], dtype=kl.float32), eviction_policy="evict_soon")


def test_the_verifier_checks_the_1d_bulk_ops():
    _, fn, _ = _passes(add_in_loop, SIG, CX, div=DIV)
    alloc, store, red = first_ops(fn, "bulk_add_buffer_alloc", "bulk_stage_store", "bulk_reduce_1d")
    rejects_bad_attrs(fn, [
        (alloc, "stages", 0, "stages must be an int >= 1"),
        (red, "kind", "mul", "kind must be one of"),
    ])
    rejects_bad_operands(fn, [
        (red, 2, red.operands[1], "the predicate must be an i1 scalar"),
        (red, 3, red.operands[1], "operand 3 must be a scalar pointer"),
        (red, 0, red.operands[1], "operand 0 must be a bulk_add_buffer_alloc"),
    ])


@kernelc.jit
def add_fp16(OUT):
    kl.bulk_add(OUT, kl.zeros([8, 8], dtype=kl.float16))


@kernelc.jit
def add_odd(OUT):
    kl.bulk_add(OUT, kl.zeros([2, 1], dtype=kl.float32))


def test_clear_errors_for_what_bulk_add_does_not_do():
    with pytest.raises(kernelc.CompilationError, match=r"adds into fp32 memory"):
        kernelc.compile(add_fp16, signature={"OUT": "*fp16"}, target="sm_90a")
    with pytest.raises(kernelc.CompilationError, match=r"multiple of 16 bytes"):
        kernelc.compile(add_odd, signature={"OUT": "*fp32"}, target="sm_90a")


def test_the_interpreter_adds_every_tile_in_the_staging_order():
    torch = pytest.importorskip("torch")
    R, C, STEPS, P = 16, 32, 4, 3
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(P * STEPS, R, C, generator=g) * 8).round()  # exact sums in any order
    out = torch.zeros(2 * R * C)
    import os
    old = os.environ.get("KERNELC_INTERPRET")
    os.environ["KERNELC_INTERPRET"] = "1"
    try:
        add_in_loop[(P,)](x, out, R=R, C=C, STEPS=STEPS)
        got = torch.zeros(R, C, dtype=torch.int32)
        staging_order[(1,)](got, R=R, C=C)
    finally:
        if old is None:
            del os.environ["KERNELC_INTERPRET"]
        else:
            os.environ["KERNELC_INTERPRET"] = old
    off = _ref_offsets(R, C)
    assert (got.numpy() == off).all()
    ref = np.zeros(2 * R * C, np.float32)
    for p in range(P):
        for i in range(STEPS):
            np.add.at(ref, (i % 2) * R * C + off.ravel(), x[p * STEPS + i].numpy().ravel())
    np.testing.assert_array_equal(out.numpy(), ref)


@kernelc.jit
def ws_add(X, W, OUT, N, R: kl.constexpr, C: kl.constexpr):
    pid = kl.program_id(0)
    desc = kl.make_tensor_descriptor(X, shape=[N, C], strides=[C, 1], block_shape=[R, C])
    w = kl.load(W + kl.arange(0, C)[:, None] * C + kl.arange(0, C)[None, :])
    for i in kl.range(0, N, R, warp_specialize=True):
        x = desc.load([i, 0])
        kl.bulk_add(OUT + ((i // R + pid) % 2) * R * C, kl.dot(x, w))


WS_SIG = {"X": "*fp16", "W": "*fp16", "OUT": "*fp32", "N": "i32"}
WS_DIV = {"X": 16, "W": 16, "OUT": 16, "N": 16}


def _ws_tir():
    return kernelc.compile(ws_add, signature=WS_SIG, constexprs=dict(R=64, C=64), target="sm_90a",
                           divisibility=WS_DIV, num_warps=4).asm["tir"]


def test_under_a_producer_warp_the_producer_issues_the_reductions(monkeypatch):
    # warp_regions (KERNELC_WS_BULK_ISSUE=producer, the default): each consumer thread stages its part of the tile,
    # fences and arrives on full[s]; the producer warp, after the trip's copies, waits on full[s], issues the 1-D
    # reduction, lets one group stay in flight and releases the stage on empty[s]; the last S-1 trips are reduced after
    # its loop, then it waits for all. The consumers' loop keeps no reduction and no CTA barrier for it.
    monkeypatch.setenv("KERNELC_WS_BULK_ISSUE", "producer")
    filecheck(_ws_tir(), """
        CHECK: [[BUF:%\\d+]] = bulk_add_buffer_alloc {stages=2} : <64x64xfp32>
        CHECK: ws_producer
        CHECK: scf.for
        CHECK: tma_copy_to_ring
        CHECK: scf.if
        CHECK: mbarrier_wait
        CHECK: bulk_reduce_1d [[BUF]]
        CHECK-NEXT: bulk_commit_group
        CHECK-NEXT: bulk_wait_group {{%\\d+}} {pending=1, read=True}
        CHECK: mbarrier_arrive
        CHECK: scf.for
        CHECK: bulk_reduce_1d [[BUF]]
        CHECK: bulk_wait_group {{%\\d+}} {pending=0}
        CHECK: scf.for {{.*}}ws=
        CHECK: wgmma_wait {{.*}}{pending=0}
        CHECK: mbarrier_wait
        CHECK: bulk_stage_store [[BUF]]
        CHECK-NEXT: fence_async_shared
        CHECK: mbarrier_arrive
        CHECK-NOT: bulk_reduce_1d
        CHECK-NOT: {{\\s}}barrier{{\\s}}
        CHECK: scf.yield
    """)


def test_under_a_producer_warp_the_consumers_can_issue_the_reductions(monkeypatch):
    # KERNELC_WS_BULK_ISSUE=consumer: the producer only copies; an elected consumer thread reduces behind a CTA barrier,
    # as without warp specialisation
    monkeypatch.setenv("KERNELC_WS_BULK_ISSUE", "consumer")
    filecheck(_ws_tir(), """
        CHECK: [[BUF:%\\d+]] = bulk_add_buffer_alloc {stages=2} : <64x64xfp32>
        CHECK: ws_producer
        CHECK-NOT: bulk_reduce_1d
        CHECK: scf.for {{.*}}ws=
        CHECK: bulk_stage_store [[BUF]]
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: bulk_wait_group {{%\\d+}} {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_reduce_1d [[BUF]]
        CHECK-NEXT: bulk_commit_group
        CHECK: scf.yield
        CHECK: bulk_wait_group {{%\\d+}} {pending=0}
    """)
