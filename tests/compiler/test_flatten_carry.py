"""A flattened persistent pointer GEMM carries the tile values its K loop reads (passes/flatten_loops.py,
``KERNELC_FLATTEN_CARRY_TILES``): tutorial 09's wrapped row and column offsets are computed once per tile, in the
branch taken on a tile's last step, not on every K step. Golden IR of the pass; the layouts the carried values
get (``layout_assign``: the slice of the copy they feed, so nothing goes through shared memory); the ring's
copies ahead of that branch (passes/rings.py); the meaning kept (the IR evaluated on the CPU, ragged shapes);
the SASS of a K step that ends no tile at the tuners' two configs (docs/triton-tutorials.md, "09 persistent
pointer GEMM: the tile values carried")."""
import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from cubintools.paths import step_path
from cubintools.sass import parse_sass
from kernelc.language.dtypes import int32
from tests.compiler import ir_eval
from tests.compiler import persistent_kernels as P
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes
from tests.compiler.test_store_conversion import _passes as _passes_unit

SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
       "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32",
       "stride_cn": "i32"}
UNIT = ("stride_ak", "stride_bk", "stride_cn")     # B given as the transpose of a row-major (N, K): tutorial 09
DIV = {k: 16 for k in SIG if k not in UNIT}
# the shared memory Triton 3.6 asks for at the tuners' picks of tutorial 09's persistent pointer kernel
TRITON_SHARED = {(128, 4, 3): 106496, (256, 8, 4): 229376}


@pytest.fixture
def flat(monkeypatch):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    monkeypatch.delenv("KERNELC_FLATTEN_CARRY_TILES", raising=False)


def _cx(bm, bn, bk, flat=True, group=8, programs=132):
    return dict(BM=bm, BN=bn, BK=bk, GROUP=group, PROGRAMS=programs, FLAT=flat)


def test_golden_the_wrapped_offsets_are_carried_and_made_in_the_tile_branch(flat):
    """Before: the tile loop makes the tile's (row, column) block (two divisions), its offsets, wraps them to 0
    past M and N and hints them; the K loop reads them. After: the flattened loop carries the two offset
    vectors; the first tile's are made before it, the next tile's in the branch on a tile's last step (with the
    divisions, the wraps and the hints); a K step reads the carried ones."""
    ir, fn, _ = _passes(P.persistent_ptr_grouped, SIG, _cx(32, 64, 16), upto="flatten_loops")
    filecheck(ir["fold_dot_accumulate"], """
        CHECK: scf.for {{.*}} {flatten=True} : i32
        CHECK: sdiv
        CHECK: [[R:%\\d+]] = hint {{%\\d+}} {max_contiguous=[32]} : <32xi32>
        CHECK: [[C:%\\d+]] = hint {{%\\d+}} {max_contiguous=[64]} : <64xi32>
        CHECK: = scf.for
        CHECK: expand_dims [[R]] {axis=1}
    """)
    filecheck(ir["flatten_loops"], """
        CHECK: [[R0:%\\d+]] = hint {{%\\d+}} {max_contiguous=[32]} : <32xi32>
        CHECK: [[C0:%\\d+]] = hint {{%\\d+}} {max_contiguous=[64]} : <64xi32>
        CHECK: = scf.for {{.*}}, [[R0]], [[C0]] {flattened=True} : i32, <32x64xfp32>, i32, i32, <32xi32>, <64xi32>
        CHECK-NEXT: ^body({{.*}}, [[RA:%\\d+]]: <32xi32>, [[CB:%\\d+]]: <64xi32>):
        CHECK-NOT: sdiv
        CHECK-NOT: select {{.*}} : <32xi32>
        CHECK: = expand_dims [[RA]] {axis=1} : <32x1xi32>
        CHECK: = load
        CHECK: = expand_dims [[CB]] {axis=0} : <1x64xi32>
        CHECK: = load
        CHECK: = dot
        CHECK: [[NR:%\\d+]], [[NC:%\\d+]] = scf.if [[LAST:%\\d+]] : <32xi32>, <64xi32>
        CHECK-NEXT: ^then():
        CHECK: sdiv
        CHECK: select {{.*}} : <32xi32>
        CHECK: [[R1:%\\d+]] = hint {{%\\d+}} {max_contiguous=[32]} : <32xi32>
        CHECK: [[C1:%\\d+]] = hint {{%\\d+}} {max_contiguous=[64]} : <64xi32>
        CHECK-NEXT: scf.yield [[R1]], [[C1]]
        CHECK-NEXT: ^else():
        CHECK-NEXT: scf.yield [[RA]], [[CB]]
        CHECK: = scf.if [[LAST]] : i32
        CHECK: store
        CHECK: scf.yield {{.*}}, [[NR]], [[NC]]
    """)


def test_without_the_knob_the_offsets_are_recomputed_on_every_step(flat, monkeypatch):
    monkeypatch.setenv("KERNELC_FLATTEN_CARRY_TILES", "0")
    _, fn, _ = _passes(P.persistent_ptr_grouped, SIG, _cx(32, 64, 16), upto="flatten_loops")
    loop = next(o for o in fn.body.ops if o.name == "scf.for")
    body = loop.regions[0]
    assert all(not kl.dtypes.shape_of(a.type) or a.type != kl.block_type(int32, [32]) for a in body.args)
    assert sum(o.name == "select" and o.results[0].type == kl.block_type(int32, [32]) for o in body.ops) == 1


@pytest.mark.parametrize("bn,warps,stages", [(128, 4, 3), (256, 8, 4)])
def test_the_carried_offsets_take_the_slice_of_the_copy_they_feed(flat, bn, warps, stages):
    """layout_assign: a carried vector whose init and next value are index math gets the layout of the access
    it reaches through expand_dims and a broadcast, sliced; so the copies read it in registers and the only
    conversion in the kernel is the epilogue's. The ring's ahead copies of the offsets keep that layout."""
    ir, fn, ctx = _passes_unit(P.persistent_ptr_grouped, SIG, _cx(128, bn, 64), warps, stages, DIV, UNIT,
                               upto="expand_cp_async_rings")
    loop = next(o for o in fn.walk() if o.name == "scf.for" and o.attrs.get("pipeline"))
    body = loop.regions[0]
    vecs = [a for a in body.args if a.type in (kl.block_type(int32, [128]), kl.block_type(int32, [bn]))]
    assert len(vecs) == 4   # the carried offsets and, from the ring, the same two steps ahead
    copies = [o for o in body.ops if o.name == "async_copy"]
    lay_a, lay_b = (ctx.plan.get(o.operands[2]) for o in copies)
    want = [lay_a.sliced(1), lay_b.sliced(0)]
    assert [ctx.plan.get(a) for a in vecs] == want + want
    assert [o.name for o in fn.walk()].count("convert_layout") == 1
    # the copies of the step ahead go out before the branch that makes the next tile's offsets
    at = [i for i, o in enumerate(body.ops) if o.name in ("async_copy", "async_commit_group", "scf.if")]
    assert [body.ops[i].name for i in at][:4] == ["async_copy", "async_copy", "async_commit_group", "scf.if"]


def test_a_carried_offset_vector_of_a_plain_loop_takes_its_access_layout():
    """The same rule outside flattening: a K loop that advances a 1-D offset vector (not a pointer tile) and
    reads A through ``offs[None, :]`` gives the vector the slice of A's load layout."""
    @kernelc.jit
    def advance(a_ptr, c_ptr, K, BM: kl.constexpr, BK: kl.constexpr):
        rows = kl.arange(0, BM)
        offs = kl.arange(0, BK)
        acc = kl.zeros((BM, BK), dtype=kl.float32)
        for _ in range(0, K, BK):
            acc += kl.load(a_ptr + rows[:, None] * K + offs[None, :]).to(kl.float32)
            offs += BK
        kl.store(c_ptr + rows[:, None] * BK + kl.arange(0, BK)[None, :], acc)

    sig = {"a_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}
    _, fn, ctx = _passes(advance, sig, dict(BM=64, BK=64), div={"a_ptr": 16, "c_ptr": 16, "K": 16},
                         upto="assign_layouts")
    loop = next(o for o in fn.walk() if o.name == "scf.for")
    arg = next(a for a in loop.regions[0].args if a.type == kl.block_type(int32, [64]))
    ld = next(o for o in loop.walk() if o.name == "load")
    assert ctx.plan.get(arg) == ctx.plan.get(ld.results[0]).sliced(0)


def _run(fn, args, buffers, programs):
    for p in range(programs):
        ir_eval.run(fn, args, buffers, pid=(p, 0, 0), nprog=(programs, 1, 1))


@pytest.mark.parametrize("M,N,K", [(100, 72, 40), (130, 200, 16), (64, 64, 0), (260, 70, 100)])
@pytest.mark.parametrize("carry", ["1", "0"])
def test_the_flattened_grouped_kernel_computes_what_the_nested_one_computes(monkeypatch, M, N, K, carry):
    """Ragged M, N and K, grouped tile order with a last group of fewer rows, fewer tiles than programs for some
    programs, no K step; the epilogue's own tile counter."""
    monkeypatch.setenv("KERNELC_FLATTEN_CARRY_TILES", carry)
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    outs = []
    for knob in ("0", "1"):
        monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", knob)
        _, fn, _ = _passes(P.persistent_ptr_grouped, SIG, _cx(32, 32, 16, group=2, programs=3), upto="flatten_loops")
        assert any(o.name == "scf.if" for o in fn.body.ops) == (knob == "1")
        bufs = {"a": a.reshape(-1).copy(), "b": b.reshape(-1).copy(), "c": np.full(M * N, np.nan)}
        _run(fn, dict(a_ptr="a", b_ptr="b", c_ptr="c", M=M, N=N, K=K, stride_am=K, stride_ak=1, stride_bk=N,
                      stride_bn=1, stride_cm=N, stride_cn=1), bufs, 3)
        outs.append(bufs["c"].reshape(M, N))
    np.testing.assert_allclose(outs[1], a @ b, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(outs[0], outs[1])


def _build(bn, warps, stages):
    return kernelc.compile(P.persistent_ptr_grouped, SIG, _cx(128, bn, 64), target="sm_90a", num_warps=warps,
                           num_stages=stages, divisibility=DIV, equal_to_1=UNIT)


def _step(ck):
    text = ck.asm["sass"]
    return step_path(text, parse_sass(text))


# instructions on the shortest path through one flattened step (a step that ends no tile), measured on this
# tree (ptxas of CUDA 13.0); recomputing the offsets on every step took 207 and 176; tutorial 09's own kernel
# under Triton 3.6 takes 144 and 119 (bench/experiments/tutorial_gaps/pointer_gemm_sass.py)
STEP_BOUND = {128: 150, 256: 133}


@pytest.mark.parametrize("bn,warps,stages", [(128, 4, 3), (256, 8, 4)])
def test_a_step_that_ends_no_tile_is_as_short_as_tritons(flat, monkeypatch, bn, warps, stages):
    """The SASS at the tuners' configs: a step that ends no tile runs at most STEP_BOUND instructions, its 8 or 4
    HGMMAs (a warpgroup's) and its 16 or 12 cp.async copies, no compare of the wrapped offsets; no spills, Triton's shared
    memory. With the knob off the same step is longer by the offsets' wraps."""
    ck = _build(bn, warps, stages)
    path = _step(ck)
    ops = [i.opcode for i in path]
    assert len(path) <= STEP_BOUND[bn], len(path)
    # per warpgroup: 4 k slices of 16 for each of its 64-row blocks
    assert sum(o.startswith("HGMMA") for o in ops) == 4 * 128 // 64 // (warps // 4) and sum(o.startswith("LDGSTS") for o in ops) == \
        (128 * 64 + 64 * bn) * 2 // 16 // (32 * warps)
    assert not any(o.startswith("STG") for o in ops)
    assert ck.n_spills == 0 and ck.shared == TRITON_SHARED[(bn, warps, stages)]
    if bn == 128:
        monkeypatch.setenv("KERNELC_FLATTEN_CARRY_TILES", "0")
        off = _step(_build(bn, warps, stages))
        assert len(off) >= len(path) + 40
        sel = lambda p: sum(i.opcode.startswith(("ISETP", "SEL")) for i in p)  # noqa: E731
        assert sel(off) >= sel(path) + 16   # a compare and a select per row and column offset a thread holds


@pytest.mark.parametrize("M,N,K", [(300, 260, 200), (130, 390, 64), (260, 140, 16), (200, 130, 0)])
def test_the_ring_expanded_flattened_loop_computes_the_product(flat, M, N, K):
    """After the cp.async ring expansion (sm_90a, 128x128x64, 3 stages): the copies two steps ahead read the
    carried offsets through the clone of the tile-change branch, across tile boundaries (one K step a tile: two
    boundaries ahead), and every program's tiles come out right (the IR evaluated in program order on the CPU)."""
    _, fn, _ = _passes_unit(P.persistent_ptr_grouped, SIG, _cx(128, 128, 64, group=2, programs=3), 4, 3, DIV, UNIT,
                            upto="expand_cp_async_rings")
    assert sum(o.name == "async_copy" for o in fn.walk()) == 6   # two prologue steps and the loop's, A and B
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    bufs = {"a": a.reshape(-1).copy(), "b": b.T.reshape(-1).copy(), "c": np.full(M * N, np.nan)}
    _run(fn, dict(a_ptr="a", b_ptr="b", c_ptr="c", M=M, N=N, K=K, stride_am=K, stride_ak=1, stride_bk=1,
                  stride_bn=K, stride_cm=N, stride_cn=1), bufs, 3)
    np.testing.assert_allclose(bufs["c"].reshape(M, N), a @ b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("bn,bk,warps,carried", [(128, 64, 4, True), (128, 128, 4, False), (128, 128, 8, True),
                                                 (256, 64, 8, True), (256, 128, 8, True), (256, 64, 4, False)])
def test_tile_values_are_carried_within_a_register_budget(flat, bn, bk, warps, carried):
    """The pass estimates a thread's registers for the accumulator and the carried offsets (a 16-byte copy
    vector's row each) and recomputes the offsets on every step past CARRY_REGISTERS, with a note: 128x128x128 at
    4 warps spilled when carried (128 + 32 registers), 128x128x64 (128 + 16) and 128x256x128 at 8 warps
    (128 + 24) did not; a 256-wide tile at 4 warps holds 256 accumulator registers a thread."""
    from kernelc.compiler.passes.flatten_loops import CARRY_REGISTERS
    _, fn, ctx = _passes_unit(P.persistent_ptr_grouped, SIG, _cx(128, bn, bk), warps, 3, DIV, UNIT,
                              upto="flatten_loops")
    loop = next(o for o in fn.body.ops if o.name == "scf.for")
    vecs = [a for a in loop.regions[0].args if a.type in (kl.block_type(int32, [128]), kl.block_type(int32, [bn]))]
    assert len(vecs) == (2 if carried else 0)
    notes = [n for n in ctx.notes if "recomputed on every step, not carried" in n]
    assert bool(notes) == (not carried) and all(f"more than {CARRY_REGISTERS}" in n for n in notes)


@pytest.mark.parametrize("bk,warps,flattened", [(64, 4, True), (128, 4, False), (128, 8, True)])
def test_by_default_a_pointer_loop_is_flattened_where_its_tile_values_are_carried(monkeypatch, bk, warps, flattened):
    """``KERNELC_FLATTEN_LOOPS`` unset (``auto``): the pointer kernel is flattened unless its offsets would be
    recomputed on every step (past the register budget: 128x128x128 at 4 warps), and the log says why."""
    monkeypatch.delenv("KERNELC_FLATTEN_LOOPS", raising=False)
    monkeypatch.delenv("KERNELC_FLATTEN_CARRY_TILES", raising=False)
    _, fn, ctx = _passes_unit(P.persistent_ptr_grouped, SIG, _cx(128, 128, bk), warps, 3, DIV, UNIT,
                              upto="flatten_loops")
    assert any(o.name == "scf.if" for o in fn.body.ops) == flattened
    notes = [n for n in ctx.notes if "not flattened" in n]
    assert bool(notes) == (not flattened)
    assert all("would be recomputed on every step" in n and "KERNELC_FLATTEN_LOOPS=auto, the default" in n
               for n in notes), notes
