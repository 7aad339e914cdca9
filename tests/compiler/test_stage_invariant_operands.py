"""``stage_invariant_operands`` (passes/stage_operands.py, docs/schedule-ir.md): a dot operand a loop without a
ring does not change is stored to shared memory once, before the loop, as a ``stage_operand`` op. Golden IR
before -> after (the IR after ``expand_warp_specialize`` -> after this pass), one copy per role, copies shared
where they dominate, the inits moved ahead of the copies, what is not staged, and the lowering."""
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from tests.compiler.filecheck import filecheck
from tests.compiler.test_cp_async_rings import qk_loop
from tests.compiler.test_schedule_passes import _passes
from tests.compiler.tma_kernels import invariant_operand_two_roles

QK_SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32"}
QK_CX = dict(BM=64, BN=64, D=32)
BEFORE = "expand_warp_specialize"  # the pass before this one
PASS = "stage_invariant_operands"


@pytest.fixture(autouse=True)
def _pointer_loads(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")  # keep the pointer loads (no rewrite to descriptors)


def test_the_pass_follows_the_ring_expansions():
    from kernelc.compiler.compiler import TILE_PASSES
    assert [p.name for p in TILE_PASSES][-12:-10] == ["expand_warp_specialize", PASS]


def test_an_invariant_operand_of_a_loop_without_a_ring_is_staged_before_it():
    """num_stages=1: no ring. q (loaded before the loop) is stored to shared memory once, then a barrier; the
    dot reads the copy. k, loaded in the loop, is not staged here (the dot stages it every iteration)."""
    ir, fn, _ = _passes(qk_loop, QK_SIG, QK_CX, target="sm_80", num_stages=1)
    filecheck(ir[BEFORE], """
        CHECK: [[Q:%\\d+]] = load {{.*}} : <64x32xfp16>
        CHECK-NOT: stage_operand
        CHECK: = scf.for
        CHECK: [[K:%\\d+]] = load {{.*}} : <32x64xfp16>
        CHECK-NEXT: = dot [[Q]], [[K]],
    """)
    filecheck(ir[PASS], """
        CHECK: [[Q:%\\d+]] = load {{.*}} : <64x32xfp16>
        CHECK: [[SQ:%\\d+]] = stage_operand [[Q]] {operand='a'} : <64x32xfp16>
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for
        CHECK: [[K:%\\d+]] = load {{.*}} : <32x64xfp16>
        CHECK-NEXT: = dot [[SQ]], [[K]],
        CHECK-NOT: stage_operand
        CHECK: return
    """)
    verify(fn)


def test_wgmma_readers_fence_the_copy():
    """On sm_90a the dot runs on wgmma, which reads shared memory through the async proxy: a fence orders
    the copy's st.shared before it."""
    ir, fn, _ = _passes(qk_loop, QK_SIG, QK_CX, target="sm_90a", num_stages=1)
    filecheck(ir[PASS], """
        CHECK: [[SQ:%\\d+]] = stage_operand {{%\\d+}} {operand='a'} : <64x32xfp16>
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for
        CHECK: = dot [[SQ]],
    """)


def test_a_tile_read_in_two_roles_is_staged_once_per_role():
    """K is A of K Q_i^T and B of sT^T K: one copy laid out as A, one as B (one copy read in both roles gave
    wrong results on an H100, 2026-11-27; tests/gpu/test_gpu_tma.py runs this kernel)."""
    sig = {"k_ptr": "*fp16", "q_ptr": "*fp16", "out_ptr": "*fp32"}
    ir, fn, _ = _passes(invariant_operand_two_roles, sig, dict(ITERS=3, BN=128, BM=16, D=128), num_warps=8,
                        num_stages=1)
    filecheck(ir[PASS], """
        CHECK: [[K:%\\d+]] = load {{.*}} : <128x128xfp16>
        CHECK: [[A:%\\d+]] = stage_operand [[K]] {operand='a'} : <128x128xfp16>
        CHECK-NEXT: [[B:%\\d+]] = stage_operand [[K]] {operand='b'} : <128x128xfp16>
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for
        CHECK: = dot [[A]], {{%\\d+}}, {{%\\d+}}
        CHECK: = dot {{%\\d+}}, [[B]], {{%\\d+}}
    """)


@kernelc.jit
def qk_two_loops(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    """Two loops read q (the causal attention's two sweeps), and a dot after them reads it once more."""
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        acc += kl.dot(q, kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :]))
    for n in kl.range(N, 2 * N, BN):
        acc += kl.dot(q, kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :]))
    acc += kl.dot(q, kl.load(k_ptr + rd[:, None] * N + rn[None, :]))
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_copy_serves_later_loops_and_dots_it_dominates():
    """The copy staged before the first loop is read by the second loop and by the dot after both; only
    the first loop gets the barrier."""
    ir, fn, _ = _passes(qk_two_loops, QK_SIG, QK_CX, target="sm_80", num_stages=1)
    filecheck(ir[PASS], """
        CHECK: [[Q:%\\d+]] = load {{.*}} : <64x32xfp16>
        CHECK: [[SQ:%\\d+]] = stage_operand [[Q]] {operand='a'}
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for
        CHECK: = dot [[SQ]],
        CHECK: scf.yield
        CHECK-NOT: barrier
        CHECK: = scf.for
        CHECK: = dot [[SQ]],
        CHECK: scf.yield
        CHECK-NOT: stage_operand
        CHECK: = dot [[SQ]],
        CHECK: return
    """)
    assert sum(o.name == "stage_operand" for o in fn.walk()) == 1
    assert sum(o.name == "barrier" for o in fn.walk()) == 1


@kernelc.jit
def qk_loop_in_branch(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    if N > BN:
        for n in kl.range(0, N, BN):
            acc += kl.dot(q, kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :]))
    for n in kl.range(0, N, BN):
        acc += kl.dot(q, kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :]))
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_copy_made_in_a_branch_does_not_serve_a_loop_after_the_branch():
    """The copy staged before the loop in the ``if`` does not dominate the loop after the ``if`` (the branch
    may not run): that loop stages its own."""
    ir, fn, _ = _passes(qk_loop_in_branch, QK_SIG, QK_CX, target="sm_80", num_stages=1)
    filecheck(ir[PASS], """
        CHECK: [[Q:%\\d+]] = load {{.*}} : <64x32xfp16>
        CHECK: = scf.if
        CHECK: [[S1:%\\d+]] = stage_operand [[Q]] {operand='a'}
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for
        CHECK: = dot [[S1]],
        CHECK: [[S2:%\\d+]] = stage_operand [[Q]] {operand='a'}
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for
        CHECK: = dot [[S2]],
    """)
    verify(fn)


@kernelc.jit
def qk_nested(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for j in range(2):
        for n in kl.range(0, N, BN):
            acc += kl.dot(q, kl.load(k_ptr + rd[:, None] * N + (j * N + n + rn)[None, :]))
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_an_inner_loop_is_staged_where_its_dots_are():
    """The outer loop has no dot of its own: q is staged before the inner loop (in the outer body), where the
    code generator staged it when it decided this."""
    ir, fn, _ = _passes(qk_nested, QK_SIG, QK_CX, target="sm_80", num_stages=1)
    filecheck(ir[PASS], """
        CHECK: [[Q:%\\d+]] = load {{.*}} : <64x32xfp16>
        CHECK: = scf.for
        CHECK: ^body(
        CHECK: [[SQ:%\\d+]] = stage_operand [[Q]] {operand='a'}
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for
        CHECK: = dot [[SQ]],
    """)


@kernelc.jit
def qk_carried_ptrs(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    kp = k_ptr + rd[:, None] * N + rn[None, :]
    for n in kl.range(0, N, BN):
        acc += kl.dot(q, kl.load(kp))
        kp += BN
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_pointer_init_only_the_loop_reads_is_computed_before_the_copies():
    """The loop's pointer-tile init has no layout of its own (materialised where first used, on loop entry):
    its defining op moves to just before the copies and takes the carried layout, which keeps the order in
    which the code generator emitted them when it made this decision."""
    ir, fn, ctx = _passes(qk_carried_ptrs, QK_SIG, QK_CX, target="sm_80", num_stages=1)
    filecheck(ir[BEFORE], """
        CHECK: [[P:%\\d+]] = addptr {{.*}} : <32x64x*fp16>
        CHECK: = constant {value=0} : i32
        CHECK: = scf.for {{%\\d+}}, %N, {{%\\d+}}, {{%\\d+}}, [[P]]
    """)
    filecheck(ir[PASS], """
        CHECK: = constant {value=0} : i32
        CHECK: [[P:%\\d+]] = addptr {{.*}} : <32x64x*fp16>
        CHECK-NEXT: [[SQ:%\\d+]] = stage_operand {{%\\d+}} {operand='a'}
        CHECK-NEXT: barrier
        CHECK-NEXT: = scf.for {{%\\d+}}, %N, {{%\\d+}}, {{%\\d+}}, [[P]]
        CHECK: = dot [[SQ]],
    """)
    p = next(o for o in fn.walk() if o.name == "stage_operand").block.ops
    loop = next(o for o in p if o.name == "scf.for")
    assert ctx.plan.layouts[loop.operands[4].id] == ctx.plan.layouts[loop.regions[0].args[2].id]


@kernelc.jit
def not_staged(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    """The loop's tensor-core dot reads only values it computes; the fp32 dot with ieee precision runs on FMA
    (registers) though it reads q from outside the loop."""
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        k = kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :])
        acc += kl.dot(q + 1.0, k)
        acc += kl.dot(q.to(kl.float32), k.to(kl.float32), input_precision="ieee")
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_operands_computed_in_the_loop_and_fma_dots_are_not_staged():
    ir, fn, ctx = _passes(not_staged, QK_SIG, QK_CX, target="sm_80", num_stages=1)
    assert ir[PASS] == ir[BEFORE]
    assert any(id(o) in ctx.plan.dot_fma for o in fn.walk() if o.name == "dot")


def test_the_copies_lower_to_shared_memory_before_the_loop():
    """PTX: q's copy is stored (st.shared) and the barrier passed before the loop's first block; the loop's
    mma.sync reads it with ldmatrix. Codegen has no staging of its own left (codegen/control.py)."""
    import inspect

    from kernelc.compiler.codegen import control
    assert "stage" not in inspect.getsource(control.lower_for)
    ck = kernelc.compile(qk_loop, QK_SIG, QK_CX, target="sm_80", num_warps=4, num_stages=1,
                         divisibility={"q_ptr": 16, "k_ptr": 16, "o_ptr": 16})
    ptx = ck.asm["ptx"]
    entry = ptx[:ptx.index("$L__BB0_")]
    assert "st.shared" in entry and "bar.sync" in entry
    assert entry.index("st.shared") < entry.rindex("bar.sync")
    assert "ldmatrix" in ptx and "mma.sync.aligned.m16n8k16" in ptx
