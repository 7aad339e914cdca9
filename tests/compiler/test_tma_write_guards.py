"""``guard_tma_writes`` (passes/tma_write_guards.py): a TMA bulk reduction (``desc.atomic_add``) whose
coordinates are not proven >= 0 runs only where they are, masked relaxed atomics elsewhere (Hopper's copy
engine faults on a negative coordinate of a shared -> global reduction: docs/attention.md). Golden IR of the
guarded form (before the bulk ops and after ``expand_bulk_reductions``), which coordinates count as proven,
the knob, PTX/SASS on sm_90a, the attention backward left unguarded, and the interpreter's semantics at
negative rows against numpy."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.options import compile_options
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes


@kernelc.jit
def reduce_from_row(X, OUT, M, N, row0, BM: kl.constexpr, BN: kl.constexpr, STEPS: kl.constexpr):
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    rows = kl.arange(0, BM)
    cols = kl.arange(0, BN)
    for i in kl.range(0, STEPS):
        x = kl.load(X + (pid * STEPS + i) * BM * BN + rows[:, None] * BN + cols[None, :])
        d.atomic_add([row0 + pid * BM, 8], x)  # row0 is an argument: it may be negative


@kernelc.jit
def reduce_at(X, OUT, M, N, row0, BM: kl.constexpr, BN: kl.constexpr, FORM: kl.constexpr):
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = kl.load(X + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
    # proven >= 0
    if FORM == "pid":
        d.atomic_add([pid * BM, 0], x)
    if FORM == "rem_plus":
        d.atomic_add([(pid % 2) * BM + 3, (pid // 4) * BN], x)
    if FORM == "min_of_two":
        d.atomic_add([kl.minimum(pid * BM, 64), 0], x)
    if FORM == "max_with_0":
        d.atomic_add([kl.maximum(row0, 0), 0], x)
    if FORM == "iv":
        for r in kl.range(pid * BM, M, BM):
            d.atomic_add([r, 0], x)
    if FORM == "select":
        d.atomic_add([kl.where(row0 > 0, pid * BM, 8), 0], x)
    # not proven
    if FORM == "arg":
        d.atomic_add([row0, 0], x)
    if FORM == "sub":
        d.atomic_add([pid * BM - 8, 0], x)
    if FORM == "min_with_arg":
        d.atomic_add([kl.minimum(pid * BM, row0), 0], x)
    if FORM == "iv_from_arg":
        for r in kl.range(row0, M, BM):
            d.atomic_add([r, 0], x)
    if FORM == "select_arg":
        d.atomic_add([kl.where(pid > 0, pid * BM, row0), 0], x)


@kernelc.jit
def store_from_row(X, OUT, M, N, row0, BM: kl.constexpr, BN: kl.constexpr):
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = kl.load(X + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
    d.store([row0 + pid * BM, 8], x)


@kernelc.jit
def store_at_pid(X, OUT, M, N, row0, BM: kl.constexpr, BN: kl.constexpr):
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = kl.load(X + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
    d.store([pid * BM, (pid % 3) * BN], x)


SIG = {"X": "*fp32", "OUT": "*fp32", "M": "i32", "N": "i32", "row0": "i32"}
DIV = {"X": 16, "OUT": 16, "M": 16, "N": 16}
CX = dict(BM=64, BN=32, STEPS=4)


def test_a_reduction_at_an_unproven_row_is_guarded():
    ir, fn, _ = _passes(reduce_from_row, SIG, CX, div=DIV)
    assert "scf.if" not in ir["lower_descriptors"]
    # the row is tested (the column, a constant 8, is proven); TMA where it is >= 0, masked atomics elsewhere
    filecheck(ir["guard_tma_writes"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %OUT
        CHECK: scf.for
        CHECK: [[X:%\\d+]] = load
        CHECK: [[R:%\\d+]] = add %row0, {{%\\d+}} : i32
        CHECK-NEXT: [[C:%\\d+]] = constant {value=8} : i32
        CHECK-NEXT: [[Z:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[OK:%\\d+]] = cmpi [[R]], [[Z]] {pred='sge'} : i1
        CHECK-NEXT: scf.if [[OK]]
        CHECK-NEXT: ^then():
        CHECK-NEXT: descriptor_reduce [[D]], [[X]], [[R]], [[C]] {block_shape=[64, 32], kind='add', tma=True}
        CHECK-NEXT: scf.yield
        CHECK-NEXT: ^else():
        CHECK-NOT: descriptor_reduce
        CHECK: cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <64xi1>
        CHECK: atomic_rmw {{%\\d+}}, [[X]], {{%\\d+}} {kind='fadd', sem='relaxed', scope='gpu'} : <64x32xfp32>
        CHECK-NEXT: scf.yield
        CHECK-NEXT: scf.yield
        CHECK-NEXT: return
    """)
    # the staging, the barrier and the bulk reduction inside the TMA branch; the completion after the loop
    filecheck(ir["expand_bulk_reductions"], """
        CHECK: bulk_buffer_alloc {{%\\d+}} {stages=2}
        CHECK: scf.for
        CHECK: scf.if
        CHECK-NEXT: ^then():
        CHECK: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_stage_store
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_reduce
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK-NEXT: scf.yield
        CHECK-NEXT: ^else():
        CHECK-NOT: bulk_
        CHECK: atomic_rmw
        CHECK-NEXT: scf.yield
        CHECK-NEXT: scf.yield
        CHECK-NEXT: [[T1:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T1]] {pending=0}
        CHECK-NEXT: barrier
        CHECK-NEXT: return
    """)


@pytest.mark.parametrize("form,guarded", [("pid", False), ("rem_plus", False), ("min_of_two", False),
                                          ("max_with_0", False), ("iv", False), ("select", False), ("arg", True),
                                          ("sub", True), ("min_with_arg", True), ("iv_from_arg", True),
                                          ("select_arg", True)])
def test_which_coordinates_are_proven_non_negative(form, guarded):
    ir, fn, _ = _passes(reduce_at, SIG, dict(BM=64, BN=32, FORM=form), div=DIV)
    assert "descriptor_reduce" in ir["lower_descriptors"] and "tma=True" in ir["lower_descriptors"]
    if guarded:
        assert ir["guard_tma_writes"].count("scf.if") == 1
        # one offset unproven, one scalar test (the masked path's tests are of tiles)
        assert len(re.findall(r"\{pred='sge'\} : i1 ", ir["guard_tma_writes"])) == 1
    else:  # the pass leaves the IR as it was
        assert ir["guard_tma_writes"] == ir["lower_descriptors"]


def test_stores_are_guarded_only_on_request():
    # desc.store faults at negative coordinates too, but its masked path would cost the TMA-store epilogues of
    # the matmul and attention kernels their warp specialisation or registers: KERNELC_TMA_WRITE_GUARD=all
    ir, _, _ = _passes(store_from_row, SIG, dict(BM=64, BN=32), div=DIV)
    assert "tma=True" in ir["lower_descriptors"]
    assert ir["guard_tma_writes"] == ir["lower_descriptors"]


def test_a_store_at_an_unproven_row_is_guarded(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_WRITE_GUARD", "all")
    ir, fn, _ = _passes(store_from_row, SIG, dict(BM=64, BN=32), div=DIV)
    filecheck(ir["guard_tma_writes"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %OUT
        CHECK: [[X:%\\d+]] = load
        CHECK: [[R:%\\d+]] = add %row0, {{%\\d+}} : i32
        CHECK-NEXT: [[C:%\\d+]] = constant {value=8} : i32
        CHECK-NEXT: [[Z:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[OK:%\\d+]] = cmpi [[R]], [[Z]] {pred='sge'} : i1
        CHECK-NEXT: scf.if [[OK]]
        CHECK-NEXT: ^then():
        CHECK-NEXT: descriptor_store [[D]], [[X]], [[R]], [[C]] {block_shape=[64, 32], tma=True}
        CHECK-NEXT: scf.yield
        CHECK-NEXT: ^else():
        CHECK-NOT: descriptor_store
        CHECK: store {{%\\d+}}, [[X]], {{%\\d+}}
        CHECK-NEXT: scf.yield
        CHECK-NEXT: return
    """)
    ck = kernelc.compile(store_from_row, signature=SIG, constexprs=dict(BM=64, BN=32), target="sm_90a",
                         divisibility=DIV)
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ck.asm["ptx"]
    sass = ck.asm["sass"]
    assert "UTMASTG.2D" in sass and re.search(r"\bSTG\.E", sass)  # TMA, and the masked store
    assert ck.n_spills == 0


def test_a_store_at_proven_coordinates_is_not_guarded(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_WRITE_GUARD", "all")
    ir, _, _ = _passes(store_at_pid, SIG, dict(BM=64, BN=32), div=DIV)
    assert "descriptor_store" in ir["lower_descriptors"] and "tma=True" in ir["lower_descriptors"]
    assert ir["guard_tma_writes"] == ir["lower_descriptors"]


def test_the_knob_turns_the_guard_off(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_WRITE_GUARD", "0")
    ir, _, _ = _passes(reduce_from_row, SIG, CX, div=DIV)
    assert ir["guard_tma_writes"] == ir["lower_descriptors"]
    off = compile_options().key()
    monkeypatch.delenv("KERNELC_TMA_WRITE_GUARD")
    assert compile_options().key() != off  # a compile knob: part of the cache key


def test_the_ptx_and_sass_branch_on_the_row():
    ck = kernelc.compile(reduce_from_row, signature=SIG, constexprs=CX, target="sm_90a", divisibility=DIV)
    ptx = ck.asm["ptx"]
    # with its branch the loop stays a loop (unguarded, its 4 trips are unrolled): one bulk reduction
    reds = re.findall(r"cp\.reduce\.async\.bulk\.tensor\.2d\.global\.shared::cta\.add\.tile\.bulk_group", ptx)
    assert len(reds) == 1
    # the uniform test of the row (loop-invariant here: LLVM computes it once), a branch on it
    preds = re.findall(r"setp\.lt\.s32\s+(%p\d+), %r\d+, 0;", ptx)
    assert any(re.search(rf"@{p} bra\b", ptx) for p in preds), preds
    assert re.search(r"\b(red|atom)\.relaxed\.gpu\.global\.add", ptx)  # the masked path
    sass = ck.asm["sass"]
    assert len(re.findall(r"\bUTMAREDG\.2D\.ADD\b", sass)) == 1
    assert re.search(r"\b(RED|ATOM)G?\.E\.ADD\.F32", sass)
    assert ck.n_spills == 0


def test_a_tile_added_at_a_loop_index_from_zero_or_the_programs_block_is_not_guarded():
    # the tile is added at [0, i]: i is a loop's induction variable from 0 or from the program's own block, proven
    # >= 0, so the reduction stays unguarded (as in the one-kernel attention backward's dQ^T)
    from tests.compiler.test_bulk_reductions import compile_ring_reduce
    for from_pid in (False, True):
        tir = compile_ring_reduce(from_pid).asm["tir"]
        assert "bulk_reduce" in tir and "atomic_rmw" not in tir and "scf.if" not in tir


@pytest.mark.parametrize("row0", [-3, -16, 5])
def test_the_interpreter_adds_tiles_that_start_above_the_tensor(row0):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3 * 2, 16, 8, generator=g)
    out = torch.zeros(40, 11)
    reduce_from_row[(3,)](x, out, 40, 11, row0, BM=16, BN=8, STEPS=2)
    ref = np.zeros((40 + 64, 11 + 32))  # padded by 32 rows / 16 columns on each side
    for p in range(3):
        r = row0 + p * 16 + 32
        for i in range(2):
            ref[r:r + 16, 16 + 8:16 + 16] += x[p * 2 + i].numpy()
    np.testing.assert_allclose(out.numpy(), ref[32:72, 16:27], rtol=1e-6, atol=1e-5)


def test_a_store_split_on_its_extent_gets_the_test_in_the_same_branch(monkeypatch):
    # the grouped GEMM's C: lower_descriptors already tests its loaded extent, ldc and address; the tile's row
    # and column (from the loaded problem sizes) are and-ed into that test, not given a second masked path
    monkeypatch.setenv("KERNELC_TMA_WRITE_GUARD", "all")
    from tests.compiler.test_device_tensor_maps_in_loops import _grouped
    tir = _grouped(True).asm["tir"]
    m = re.search(r"\n((?:.*\n){1,40}?).*scf\.if (%\w+) .*\n.*\^then\(\):\n.*descriptor_store .*extent_checked=True, "
                  r"tma=True.*\n.*scf\.yield.*\n.*\^else\(\):\n", tir)
    assert m, tir
    before = m.group(1)
    assert len(re.findall(r"= cmpi %\w+, %\w+ \{pred='sge'\} : i1", before)) == 2  # row >= 0, col >= 0
    assert f"{m.group(2)} = and " in before
    assert tir.count("descriptor_store") == 1 and len(re.findall(r"^\s*store ", tir, re.M)) == 1


@kernelc.jit
def reduce_at_column(X, OUT, M, N, col0, BM: kl.constexpr, BN: kl.constexpr, FORM: kl.constexpr):
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = kl.load(X + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
    if FORM == "arg":
        d.atomic_add([0, col0], x)
    if FORM == "plus2":
        d.atomic_add([0, kl.program_id(0) * BN + 2], x)
    if FORM == "plus4":
        d.atomic_add([0, kl.program_id(0) * BN + 4], x)


@pytest.mark.parametrize("form,div,tma", [("arg", {}, False), ("arg", {"col0": 16}, True), ("plus2", {}, False),
                                          ("plus4", {}, True)])
def test_an_inner_offset_not_whole_16_byte_chunks_takes_the_generic_lowering(form, div, tma):
    # the copy engine faults on an inner coordinate that is not a multiple of 16 bytes (fp32: 4 elements), for
    # loads, stores and reductions alike (docs/attention.md): unproven, the op is rewritten element-wise
    sig = dict(SIG, col0="i32")
    sig.pop("row0")
    ir, _, _ = _passes(reduce_at_column, sig, dict(BM=64, BN=32, FORM=form), div=dict(DIV, **div))
    assert ("tma=True" in ir["lower_descriptors"]) == tma
    assert ("descriptor_reduce" in ir["lower_descriptors"]) == tma
