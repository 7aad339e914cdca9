"""``desc.atomic_add`` (issue 27, FlashAttention-3's dQ): the ``descriptor_reduce`` op, its lowering to TMA
bulk tensor reductions by ``expand_bulk_reductions`` (passes/bulk_reductions.py; golden IR before -> after),
the verifier's checks of the new ops, PTX/SASS on sm_90a (``cp.reduce.async.bulk.tensor`` / UTMAREDG), the
relaxed-atomics lowering elsewhere, and the interpreter's semantics against numpy."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes
from tests.compiler.verifier_cases import first_ops, rejects_bad_attrs, rejects_bad_operands


@kernelc.jit
def reduce_in_loop(X, OUT, M, N, BM: kl.constexpr, BN: kl.constexpr, STEPS: kl.constexpr):
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    rows = kl.arange(0, BM)
    cols = kl.arange(0, BN)
    for i in kl.range(0, STEPS):
        x = kl.load(X + (pid * STEPS + i) * BM * BN + rows[:, None] * BN + cols[None, :])
        # coordinates provably >= 0: the reduction is not guarded (passes/tma_write_guards.py)
        d.atomic_add([(pid % 2) * BM + 3, 8], x)  # the inner coordinate whole 16-byte chunks, as TMA needs


@kernelc.jit
def reduce_once(X, OUT, M, N, BM: kl.constexpr, BN: kl.constexpr):
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    rows = kl.arange(0, BM)
    cols = kl.arange(0, BN)
    x = kl.load(X + rows[:, None] * BN + cols[None, :])
    d.atomic_add([kl.program_id(0) * BM, 0], x * 2.0)


@kernelc.jit
def ring_reduce(X, W, ACC, N, R: kl.constexpr, C: kl.constexpr, FROM_PID: kl.constexpr):
    # a TMA ring feeding a dot whose [C, R] tile is added at the loop's own column: the one-kernel attention
    # backward's dQ^T (the loop from 0, or from the program's own block)
    x_desc = kl.make_tensor_descriptor(X, shape=[N, C], strides=[C, 1], block_shape=[R, C])
    acc_desc = kl.make_tensor_descriptor(ACC, shape=[C, N], strides=[N, 1], block_shape=[C, R])
    w = kl.load(W + kl.arange(0, C)[:, None] * C + kl.arange(0, C)[None, :])
    lo = kl.program_id(0) * R if FROM_PID else 0
    for i in kl.range(lo, N, R):
        x = x_desc.load([i, 0])
        acc_desc.atomic_add([0, i], kl.dot(w, kl.trans(x)))


def compile_ring_reduce(from_pid=False):
    return kernelc.compile(ring_reduce, signature={"X": "*fp16", "W": "*fp16", "ACC": "*fp32", "N": "i32"},
                           constexprs=dict(R=32, C=64, FROM_PID=from_pid), target="sm_90a",
                           divisibility={"X": 16, "W": 16, "ACC": 16, "N": 16}, num_warps=4, num_stages=3)


SIG = {"X": "*fp32", "OUT": "*fp32", "M": "i32", "N": "i32"}
# the line of reduce_in_loop's atomic_add (the source the reduction and the memory-access report name)
ADD_LINE = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1) if "d.atomic_add([(pid % 2)" in t)
DIV = {"X": 16, "OUT": 16, "M": 16, "N": 16}
CX = dict(BM=64, BN=32, STEPS=4)


def test_atomic_add_in_a_loop_becomes_a_staged_bulk_reduction():
    ir, fn, _ = _passes(reduce_in_loop, SIG, CX, div=DIV)
    # lower_descriptors keeps it for TMA (the descriptor's base, stride and inner extent are 16-byte aligned)
    filecheck(ir["place_wgmma_waits"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %OUT, %M, %N, {{.*}}tensor_map={slot=0, build='entry'
        CHECK: scf.for
        CHECK: descriptor_reduce [[D]], {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {block_shape=[64, 32], kind='add', tma=True}
    """)
    filecheck(ir["expand_bulk_reductions"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %OUT
        CHECK-NEXT: [[BUF:%\\d+]] = bulk_buffer_alloc [[D]] {stages=2} : <64x32xfp32>
        CHECK: [[LB:%\\d+]] = constant {value=0} : i32
        CHECK: [[STEP:%\\d+]] = constant {value=1} : i32
        CHECK-NEXT: scf.for [[LB]], {{%\\d+}}, [[STEP]]
        CHECK-NEXT: ^body([[IV:%\\d+]]: i32):
        CHECK: [[X:%\\d+]] = load
        CHECK-NOT: descriptor_reduce
        CHECK: [[K0:%\\d+]] = sub [[IV]], [[LB]] : i32
        CHECK-NEXT: [[K:%\\d+]] = sdiv [[K0]], [[STEP]] : i32
        CHECK-NEXT: [[S:%\\d+]] = constant {value=2} : i32
        CHECK-NEXT: [[ST:%\\d+]] = srem [[K]], [[S]] : i32
        CHECK-NEXT: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_stage_store [[BUF]], [[ST]], [[X]]
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_reduce [[BUF]], [[ST]], [[T0]], {{%\\d+}}, {{%\\d+}} {kind='add', source='{{.*}}test_bulk_reductions.py:ADD_LINE:{{\\d+}}'}
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK-NEXT: scf.yield
        CHECK-NEXT: [[T1:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T1]] {pending=0}
        CHECK-NEXT: barrier
        CHECK-NEXT: return
    """.replace("ADD_LINE", str(ADD_LINE)))
    verify(fn)
    assert not [o for o in fn.walk() if o.name == "descriptor_reduce"]


@pytest.mark.parametrize("stages,pending", [("1", None), ("3", 1)])
def test_the_stages_knob_moves_the_wait(monkeypatch, stages, pending):
    monkeypatch.setenv("KERNELC_BULK_REDUCE_STAGES", stages)
    ir, fn, _ = _passes(reduce_in_loop, SIG, CX, div=DIV)
    if pending is None:  # one stage: the previous reduction must have read it before the tile is staged
        filecheck(ir["expand_bulk_reductions"], """
            CHECK: bulk_buffer_alloc {{%\\d+}} {stages=1}
            CHECK: [[T0:%\\d+]] = elect_one : i1
            CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
            CHECK-NEXT: barrier
            CHECK-NEXT: bulk_stage_store
            CHECK-NEXT: fence_async_shared
            CHECK-NEXT: barrier
            CHECK-NEXT: bulk_reduce
        """)
        (st,) = [o for o in fn.walk() if o.name == "bulk_stage_store"]
        assert st.operands[1].op.name == "constant" and st.operands[1].op.attrs["value"] == 0
    else:
        filecheck(ir["expand_bulk_reductions"], f"""
            CHECK: bulk_buffer_alloc {{{{%\\d+}}}} {{stages={stages}}}
            CHECK: elect_one
            CHECK-NEXT: bulk_stage_store
            CHECK-NEXT: fence_async_shared
            CHECK-NEXT: bulk_wait_group {{{{%\\d+}}}} {{pending={pending}, read=True}}
            CHECK-NEXT: barrier
            CHECK-NEXT: bulk_reduce
        """)
        (rem,) = [o for o in fn.walk() if o.name == "srem" and o.operands[0].op.name == "sdiv"]
        assert rem.operands[1].op.attrs["value"] == int(stages)


def test_an_atomic_add_outside_loops_completes_before_the_program_goes_on():
    ir, fn, _ = _passes(reduce_once, SIG, dict(BM=64, BN=32), div=DIV)
    filecheck(ir["expand_bulk_reductions"], """
        CHECK: bulk_buffer_alloc {{%\\d+}} {stages=1}
        CHECK: [[V:%\\d+]] = fmul
        CHECK: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_stage_store {{%\\d+}}, {{%\\d+}}, [[V]]
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_reduce
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0}
        CHECK-NEXT: return
    """)


def test_a_barrier_right_after_the_reduction_publishes_the_tile():
    # a TMA ring's loop (the one-kernel attention backward's dK/dV loop): the ring's barrier before its refill follows
    # the tile's staging; the reduction is issued after it (one barrier a trip, not two)
    ck = compile_ring_reduce()
    body = ck.asm["tir"].split("scf.for", 1)[1]
    filecheck(body, """
        CHECK: bulk_stage_store
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: bulk_wait_group {{%\\d+}} {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_reduce
        CHECK-NEXT: bulk_commit_group
        CHECK-NEXT: elect_one
        CHECK: tma_copy_to_ring
    """)
    after = body.split("bulk_commit_group", 1)[1].split("tma_copy_to_ring", 1)[0]
    assert not re.search(r"^\s*barrier\b", after, re.M), after


def test_the_ptx_and_sass_carry_one_bulk_tensor_reduction_per_trip():
    ck = kernelc.compile(reduce_in_loop, signature=SIG, constexprs=CX, target="sm_90a", divisibility=DIV)
    ptx = ck.asm["ptx"]
    reds = re.findall(r"cp\.reduce\.async\.bulk\.tensor\.2d\.global\.shared::cta\.add\.tile\.bulk_group", ptx)
    assert len(reds) == CX["STEPS"]  # the 4-trip loop is unrolled
    assert ptx.count("cp.async.bulk.commit_group") == CX["STEPS"]
    assert ptx.count("cp.async.bulk.wait_group.read 0") == CX["STEPS"]
    assert len(re.findall(r"cp\.async\.bulk\.wait_group 0;", ptx)) == 1  # after the loop
    assert not re.search(r"\b(atom|red)\.", ptx)
    sass = ck.asm["sass"]
    assert len(re.findall(r"\bUTMAREDG\.2D\.ADD\b", sass)) == CX["STEPS"]
    assert ck.n_spills == 0
    # 2 stages of the 64x32 fp32 box (8 KiB each, 1024-aligned)
    assert ck.shared >= 2 * 64 * 32 * 4
    accesses = [a for a in ck.reports["memory_accesses"] if a["kind"] == "atomic add (TMA bulk reduction)"]
    assert len(accesses) == 1 and accesses[0]["line"] == ADD_LINE and accesses[0]["engine"] == "tma"


@pytest.mark.parametrize("target,why", [("sm_80", "no TMA"), ("sm_90a", "unaligned inner extent")])
def test_without_tma_the_add_is_relaxed_atomics(target, why):
    div = DIV if target == "sm_80" else dict(DIV, N=1)
    ck = kernelc.compile(reduce_in_loop, signature=SIG, constexprs=CX, target=target, divisibility=div)
    assert "cp.reduce.async.bulk" not in ck.asm["ptx"], why
    assert "descriptor_reduce" not in ck.asm["tir"] and "atomic_rmw" in ck.asm["tir"]
    assert "sem='relaxed'" in ck.asm["tir"]
    assert re.search(r"\b(RED|ATOM)G?\.E\.ADD\.F32", ck.asm["sass"]), why


def test_the_verifier_checks_the_bulk_ops():
    _, fn, _ = _passes(reduce_in_loop, SIG, CX, div=DIV)
    alloc, store, red, commit, wait = first_ops(fn, "bulk_buffer_alloc", "bulk_stage_store", "bulk_reduce",
                                                "bulk_commit_group", "bulk_wait_group")
    rejects_bad_attrs(fn, [
        (alloc, "stages", 0, "stages must be an int >= 1"),
        (red, "kind", "mul", "kind must be one of"),
        (wait, "pending", 9, "pending must be an int in 0..7"),
        (wait, "read", "yes", "read must be a bool"),
    ])
    rejects_bad_operands(fn, [
        (store, 0, red.operands[1], "operand 0 must be a bulk_buffer_alloc"),
        (store, 1, red.operands[2], "the stage must be an i32 scalar"),
        (red, 2, red.operands[1], "the predicate must be an i1 scalar"),
        (red, 3, red.operands[2], "one i32 offset per descriptor dimension"),
        (commit, 0, red.operands[1], "the predicate must be an i1 scalar"),
        (alloc, 0, red.operands[1], "operand 0 must be a tensor descriptor"),
    ])


def test_the_verifier_checks_descriptor_reduce():
    ir, fn, _ = _passes(reduce_in_loop, SIG, CX, div=DIV, upto="place_wgmma_waits")
    (red,) = [o for o in fn.walk() if o.name == "descriptor_reduce"]
    rejects_bad_attrs(fn, [(red, "kind", "max", "kind must be one of"),
                           (red, "block_shape", (32, 32), "block_shape")])


@kernelc.jit
def reduce_int8(OUT, N, BN: kl.constexpr):
    d = kl.make_tensor_descriptor(OUT, shape=[N], strides=[1], block_shape=[BN])
    d.atomic_add([0], kl.zeros([BN], dtype=kl.int8))


@kernelc.jit
def reduce_max(OUT, N, BN: kl.constexpr):
    d = kl.make_tensor_descriptor(OUT, shape=[N], strides=[1], block_shape=[BN])
    d.atomic_max([0], kl.zeros([BN], dtype=kl.float32))


def test_clear_errors_for_what_desc_atomics_do_not_do():
    with pytest.raises(kernelc.CompilationError, match=r"atomic_add\(\) adds into fp32, fp16, bf16, i32 and u32 "
                                                        r"tensors, got a i8 descriptor") as e:
        kernelc.compile(reduce_int8, signature={"OUT": "*i8", "N": "i32"}, constexprs={"BN": 16}, target="sm_90a")
    assert "test_bulk_reductions.py" in str(e.value)
    with pytest.raises(kernelc.CompilationError, match=r"atomic_min/max/and/or/xor is not supported"):
        kernelc.compile(reduce_max, signature={"OUT": "*fp32", "N": "i32"}, constexprs={"BN": 16}, target="sm_90a")


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_the_interpreter_adds_every_tile_and_skips_out_of_bounds_elements(dtype):
    torch = pytest.importorskip("torch")
    tdt = {np.float32: torch.float32, np.int32: torch.int32}[dtype]
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3 * 4, 16, 8, generator=g) * 8).to(tdt)
    out = torch.zeros(20, 11, dtype=tdt)
    reduce_in_loop[(3,)](x, out, 20, 11, BM=16, BN=8, STEPS=4)
    # a padded copy: tiles end past row 20 and column 11, outside the tensor (tests/compiler/
    # test_tma_write_guards.py has tiles starting at negative rows)
    ref = torch.zeros(60, 51, dtype=tdt)
    for p in range(3):
        r0 = (p % 2) * 16 + 3
        for i in range(4):
            ref[20 + r0:20 + r0 + 16, 28:36] += x[p * 4 + i]
    torch.testing.assert_close(out, ref[20:40, 20:31], rtol=1e-6, atol=1e-5)
