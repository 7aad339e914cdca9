"""``flatten_loops`` (passes/flatten_loops.py, docs/schedule-ir.md "Flattened loops"): golden IR before ->
after, the loops it refuses (and why), the verifier's check of a dot's ``use_acc``, the meaning kept (the tile
IR evaluated on the CPU before and after), and the persistent matmul's SASS main loop on sm_90a."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from kernelc.language.dtypes import int32
from tests.compiler import ir_eval
from tests.compiler import persistent_kernels as P
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes


@pytest.fixture
def on(monkeypatch):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")


@kernelc.jit
def tiles_k(a_ptr, c_ptr, T, K, BM: kl.constexpr, ACC0: kl.constexpr, FLAT: kl.constexpr):
    r = kl.arange(0, BM)
    done = 0
    for t in kl.range(kl.program_id(0), T, 4, flatten=FLAT):
        acc = kl.full((BM, BM), ACC0, kl.float32)
        for k in range(K):
            a = kl.load(a_ptr + (t * K + k) * BM * BM + r[:, None] * BM + r[None, :])
            acc = kl.dot(a, a, acc)
        done += 1
        kl.store(c_ptr + t * BM * BM + r[:, None] * BM + r[None, :], acc + done)


TK_SIG = {"a_ptr": "*fp16", "c_ptr": "*fp32", "T": "i32", "K": "i32"}


def test_a_tile_loop_and_its_k_loop_become_one_loop(on):
    ir, fn, _ = _passes(tiles_k, TK_SIG, dict(BM=16, ACC0=0.0, FLAT=True), upto="flatten_loops")
    filecheck(ir["fold_dot_accumulate"], """
        CHECK: scf.for %1, %T, {{%\\d+}}, {{%\\d+}} {flatten=True} : i32
        CHECK: = scf.for {{%\\d+}}, %K, {{%\\d+}}, {{%\\d+}} : <16x16xfp32>
    """)
    filecheck(ir["flatten_loops"], """
        CHECK: [[D0:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[ACC0:%\\d+]] = constant {value=0.0} : <16x16xfp32>
        CHECK-NEXT: [[KST:%\\d+]] = constant {value=1} : i32
        CHECK: [[NT:%\\d+]] = smax {{%\\d+}}, {{%\\d+}} : i32
        CHECK-NEXT: [[K0:%\\d+]] = sub %K, [[D0]] : i32
        CHECK: [[NK:%\\d+]] = smax [[K0]], {{%\\d+}} : i32
        CHECK-NEXT: [[Z:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[HASK:%\\d+]] = cmpi [[NK]], [[Z]] {pred='sgt'} : i1
        CHECK-NEXT: [[PROD:%\\d+]] = mul [[NT]], [[NK]] : i32
        CHECK-NEXT: [[TOTAL:%\\d+]] = select [[HASK]], [[PROD]], [[Z]] : i32
        CHECK: [[NK1:%\\d+]] = smax [[NK]], {{%\\d+}} : i32
        CHECK: [[F:%\\d+]], {{%\\d+}}, {{%\\d+}}, {{%\\d+}} = scf.for [[Z]], [[TOTAL]], {{%\\d+}}, [[D0]], [[ACC0]], [[Z]], [[Z]] {flattened=True} : i32, <16x16xfp32>, i32, i32
        CHECK-NEXT: ^body({{%\\d+}}: i32, [[DONE:%\\d+]]: i32, [[ACC:%\\d+]]: <16x16xfp32>, [[KI:%\\d+]]: i32, [[TILE:%\\d+]]: i32):
        CHECK-NEXT: [[TS:%\\d+]] = mul [[TILE]], %2 : i32
        CHECK-NEXT: [[T:%\\d+]] = add %1, [[TS]] : i32
        CHECK-NEXT: [[KS:%\\d+]] = mul [[KI]], [[KST]] : i32
        CHECK-NEXT: [[KIV:%\\d+]] = add [[D0]], [[KS]] : i32
        CHECK: = mul [[T]], %K : i32
        CHECK-NEXT: = add {{%\\d+}}, [[KIV]] : i32
        CHECK: [[FIRST:%\\d+]] = cmpi [[KI]], [[Z]] {pred='ne'} : i1
        CHECK-NEXT: [[D:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, [[ACC]], [[FIRST]]
        CHECK: [[KI1:%\\d+]] = add [[KI]], {{%\\d+}} : i32
        CHECK-NEXT: [[LAST:%\\d+]] = cmpi [[KI1]], [[NK1]] {pred='eq'} : i1
        CHECK: [[KN:%\\d+]] = select [[LAST]], {{%\\d+}}, [[KI1]] : i32
        CHECK: [[T1:%\\d+]] = add [[TILE]], {{%\\d+}} : i32
        CHECK-NEXT: [[TN:%\\d+]] = select [[LAST]], [[T1]], [[TILE]] : i32
        CHECK-NEXT: [[DN:%\\d+]] = scf.if [[LAST]] : i32
        CHECK-NEXT: ^then():
        CHECK: = add [[DONE]], {{%\\d+}} : i32
        CHECK: = fadd [[D]], {{%\\d+}} : <16x16xfp32>
        CHECK-NEXT: store {{.*}}
        CHECK-NEXT: scf.yield {{%\\d+}}
        CHECK-NEXT: ^else():
        CHECK-NEXT: scf.yield [[DONE]]
        CHECK-NEXT: scf.yield [[DN]], [[D]], [[KN]], [[TN]]
        CHECK-NEXT: [[NOK:%\\d+]] = cmpi [[NK]], [[Z]] {pred='sle'} : i1
        CHECK-NEXT: [[R:%\\d+]] = scf.if [[NOK]] : i32
        CHECK-NEXT: ^then():
        CHECK-NEXT: = scf.for %1, %T, %2, [[F]] : i32
        CHECK-NOT: dot
        CHECK: store
        CHECK: ^else():
        CHECK-NEXT: scf.yield [[F]]
        CHECK-NEXT: return
    """)
    assert "flatten=" not in ir["flatten_loops"]
    verify(fn)


def test_an_accumulator_that_does_not_start_at_zero_is_reset_at_the_tile_end(on):
    """use_acc only stands for a zero start; any other start value is yielded by the last step's branch."""
    ir, fn, _ = _passes(tiles_k, TK_SIG, dict(BM=16, ACC0=1.0, FLAT=True), upto="flatten_loops")
    filecheck(ir["flatten_loops"], """
        CHECK: [[ACC0:%\\d+]] = constant {value=1.0} : <16x16xfp32>
        CHECK: ^body({{%\\d+}}: i32, [[DONE:%\\d+]]: i32, [[ACC:%\\d+]]: <16x16xfp32>, {{%\\d+}}: i32, {{%\\d+}}: i32):
        CHECK: [[D:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, [[ACC]] {input_precision='tf32'}
        CHECK: {{%\\d+}}, {{%\\d+}} = scf.if {{%\\d+}} : i32, <16x16xfp32>
        CHECK: scf.yield {{%\\d+}}, [[ACC0]]
        CHECK-NEXT: ^else():
        CHECK-NEXT: scf.yield [[DONE]], [[D]]
    """)


def test_without_the_knob_the_request_is_dropped(monkeypatch):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "0")
    flat, _, _ = _passes(tiles_k, TK_SIG, dict(BM=16, ACC0=0.0, FLAT=True), upto="flatten_loops")
    plain, _, _ = _passes(tiles_k, TK_SIG, dict(BM=16, ACC0=0.0, FLAT=False), upto="flatten_loops")
    strip = lambda s: re.sub(r"(FLAT=\w+)", "", s)  # noqa: E731  (the constexpr in the header)
    assert strip(flat["flatten_loops"]) == strip(plain["flatten_loops"])
    assert "flatten=True" in flat["fold_dot_accumulate"]


@kernelc.jit
def refused(a_ptr, c_ptr, T, K, S, BM: kl.constexpr, CASE: kl.constexpr):
    r = kl.arange(0, BM)
    for t in kl.range(kl.program_id(0), T, S if CASE == 0 else 4, flatten=True):
        if CASE == 2:
            kl.store(c_ptr + r, r.to(kl.float32))  # a side effect before the K loop
        acc = kl.zeros((BM, BM), dtype=kl.float32)
        n = K
        if CASE == 1:
            n = t
        if CASE == 4:
            n = K // 2 + 1
        if CASE == 5:
            n = kl.load(c_ptr).to(kl.int32)  # a load before the K loop (it would run again on every step)
        for k in range(n):
            acc = kl.dot(kl.load(a_ptr + k * BM * BM + r[:, None] * BM + r[None, :]),
                         kl.load(a_ptr + r[:, None] * BM + r[None, :]), acc)
        if CASE == 3:
            for k in range(K):
                acc += 1.0
        kl.store(c_ptr + t * BM * BM + r[:, None] * BM + r[None, :], acc)


@pytest.mark.parametrize("case,why", [
    (0, "its step must be a positive constant"),
    (1, "the inner upper bound depends on the outer iteration"),
    (2, "`store` before the inner loop has side effects"),
    (3, "its body must hold exactly one loop"),
    (5, "`load` before the inner loop would run on every step"),
])
def test_loops_it_cannot_flatten_stay_nested_and_say_why(on, case, why):
    sig = dict(TK_SIG, S="i32")
    ir, fn, ctx = _passes(refused, sig, dict(BM=16, CASE=case), upto="flatten_loops")
    assert any("not flattened: " + why in n for n in ctx.notes), ctx.notes
    top = [o for o in fn.body.ops if o.name == "scf.for"]
    assert len(top) == 1 and any(o.name == "scf.for" for o in top[0].regions[0].ops)
    assert "flatten" not in top[0].attrs


def test_bounds_computed_in_the_tile_loop_from_invariants_are_made_before_it(on):
    """``range(K // 2 + 1)`` inside the tile loop: its bound reads nothing of the tile, so the flattened loop's
    trip count is computed before the loop (the division hoisted) and the loop is flattened."""
    ir, fn, ctx = _passes(refused, dict(TK_SIG, S="i32"), dict(BM=16, CASE=4), upto="flatten_loops")
    assert not any("not flattened" in n for n in ctx.notes), ctx.notes
    filecheck(ir["flatten_loops"], """
        CHECK: [[H:%\\d+]] = sdiv %K, {{%\\d+}} : i32
        CHECK: [[UB:%\\d+]] = add [[H]], {{%\\d+}} : i32
        CHECK: = sub [[UB]], {{%\\d+}} : i32
        CHECK: = scf.for {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {flattened=True} : <16x16xfp32>, i32, i32
        CHECK-NEXT: ^body(
    """)


def test_the_verifier_wants_use_acc_to_be_a_scalar_i1(on):
    _, fn, _ = _passes(tiles_k, TK_SIG, dict(BM=16, ACC0=0.0, FLAT=True), upto="flatten_loops")
    dot = next(o for o in fn.walk() if o.name == "dot")
    assert len(dot.operands) == 4
    verify(fn)
    dot.operands[3] = next(o for o in fn.walk() if o.results and o.results[0].type == int32).results[0]
    with pytest.raises(VerificationError, match="use_acc operand must be a scalar i1"):
        verify(fn)


# -- the meaning: the tile IR before and after, evaluated on the CPU ----------------------------------------


def _run(fn, args, buffers, programs):
    for p in range(programs):
        ir_eval.run(fn, args, buffers, pid=(p, 0, 0), nprog=(programs, 1, 1))


@pytest.mark.parametrize("carry", ["1", "0"])
@pytest.mark.parametrize("M,N,K", [(100, 72, 40), (64, 128, 32), (130, 40, 8), (48, 64, 0), (200, 300, 96)])
def test_flattened_ir_computes_what_the_nested_loops_compute(monkeypatch, M, N, K, carry):
    """Ragged edges, one K step, fewer tiles than programs, no K step at all (the other branch); the tile's
    offsets carried from step to step (KERNELC_FLATTEN_CARRY_TILES) or recomputed on every step."""
    monkeypatch.setenv("KERNELC_FLATTEN_CARRY_TILES", carry)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((N, K))
    outs = []
    for knob in ("0", "1"):  # the IR without the pass's rewrite, and with it
        monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", knob)
        _, fn, _ = _passes(P.persistent_ptr, sig, dict(BM=32, BN=32, BK=16, PROGRAMS=3, FLAT=True),
                           upto="flatten_loops")
        assert any(o.name == "scf.if" for o in fn.body.ops) == (knob == "1")
        bufs = {"a": a.reshape(-1).copy(), "b": b.reshape(-1).copy(), "c": np.full(M * N, np.nan)}
        _run(fn, dict(a_ptr="a", b_ptr="b", c_ptr="c", M=M, N=N, K=K, stride_am=K, stride_bn=K, stride_cm=N),
             bufs, 3)
        outs.append(bufs["c"].reshape(M, N))
    np.testing.assert_allclose(outs[1], a @ b.T, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("acc0", [0.0, 1.5])
@pytest.mark.parametrize("T,K", [(9, 3), (2, 1), (5, 0)])
def test_carried_tile_counter_and_reset_accumulator_keep_their_values(on, acc0, T, K):
    """tiles_k carries a counter the epilogue advances and (acc0 != 0) an accumulator the branch resets."""
    BM = 16
    rng = np.random.default_rng(1)
    a = rng.standard_normal((T, max(K, 1), BM, BM))
    _, fn, _ = _passes(tiles_k, TK_SIG, dict(BM=BM, ACC0=acc0, FLAT=True), upto="flatten_loops")
    assert any(o.name == "scf.if" for o in fn.body.ops)
    c = np.full(T * BM * BM, np.nan)
    _run(fn, dict(a_ptr="a", c_ptr="c", T=T, K=K), {"a": a.reshape(-1).copy(), "c": c}, 4)
    want = np.empty((T, BM, BM))
    for p in range(4):
        for n, t in enumerate(range(p, T, 4), 1):
            acc = np.full((BM, BM), acc0)
            for k in range(K):
                acc = a[t, k] @ a[t, k] + acc
            want[t] = acc + n
    np.testing.assert_allclose(c.reshape(T, BM, BM), want, rtol=1e-12, atol=1e-12)


# -- the persistent matmul on sm_90a -----------------------------------------------------------------


def _loop_of(ck):
    lines = ck.asm["sass"].splitlines()
    label_at, ops = {}, []
    for ln in lines:
        m = re.match(r"\s*\.L_x_(\d+):", ln)
        if m:
            label_at[m.group(1)] = len(ops)
            continue
        if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln):
            ops.append(re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).rstrip(" ;"))
    loops = []
    for i, o in enumerate(ops):
        m = re.search(r"BRA\S*\s+`\(\.L_x_(\d+)\)", o)
        if m and label_at.get(m.group(1), i + 1) <= i:
            body = ops[label_at[m.group(1)]:i + 1]
            if any(x.startswith("HGMMA") for x in body):
                loops.append(body)
    return min(loops, key=len) if loops else []


def _desc_kernel(monkeypatch, flat):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    return kernelc.compile(P.persistent_desc, sig, dict(BM=128, BN=128, BK=64, PROGRAMS=132, FLAT=True),
                           target="sm_90a", num_warps=4, num_stages=3, divisibility={k: 16 for k in sig})


def test_the_persistent_main_loop_holds_the_mmas_the_next_loads_and_the_epilogue(monkeypatch):
    """Flattened (128x128x64, 4 warps, 3 stages): one loop issues the 8 HGMMAs (the first of each row block
    predicated on use_acc), leaves one group in flight, refills the TMA ring -- the loads of a step up to two
    ahead, across the tile boundary -- and only then runs the epilogue (its wait for the group, the TMA
    store) under a branch. Nested, the MMA loop holds no store and the ring is set up per tile."""
    loop = _loop_of(_desc_kernel(monkeypatch, True))
    names = [o.split()[0] for o in loop]
    hg = [i for i, n in enumerate(names) if n.startswith("HGMMA")]
    assert len(hg) == 8 and sum(bool(re.search(r",\s*!?U?P\d\s*$", loop[i])) for i in hg) == 2, loop
    ld = [i for i, n in enumerate(names) if n.startswith("UTMALDG")]
    st = [i for i, n in enumerate(names) if n.startswith("UTMASTG")]
    assert len(ld) == 2 and st, names
    inflight = [i for i, o in enumerate(loop) if o.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1")]
    drained = [i for i, o in enumerate(loop) if o.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0")]
    assert hg[-1] < inflight[0] < ld[0] < drained[0] < st[0], names
    nested = _loop_of(_desc_kernel(monkeypatch, False))
    assert not any(o.startswith("UTMASTG") for o in nested) and any(o.startswith("UTMALDG") for o in nested)


def test_by_default_k_loops_of_one_kind_without_warp_specialisation_are_flattened(monkeypatch):
    """``KERNELC_FLATTEN_LOOPS`` unset (``auto``): the descriptor kernel's tile loop is flattened (measured faster
    on an H200) and the pointer kernel's (a cp.async ring, its tile values carried; an H100); a warp-specialised
    one stays nested and the compile log says why. ``tma``, or the pointer kernel without its tile values
    carried: the pointer kernel stays nested too. ``1`` flattens all three, ``0`` none."""
    monkeypatch.delenv("KERNELC_FLATTEN_LOOPS", raising=False)
    monkeypatch.delenv("KERNELC_FLATTEN_CARRY_TILES", raising=False)
    dsig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    psig = dict(dsig, stride_am="i32", stride_bn="i32", stride_cm="i32")

    def flattened(kernel, sig, **cx):
        _, fn, ctx = _passes(kernel, sig, dict(BM=64, BN=64, BK=32, PROGRAMS=8, FLAT=True, **cx),
                             div={k: 16 for k in sig}, upto="flatten_loops")
        # flattened: the no-K-step branch after the one loop (module docstring of passes/flatten_loops.py)
        return any(o.name == "scf.if" for o in fn.body.ops), ctx.notes

    desc, _ = flattened(P.persistent_desc, dsig)
    ws, ws_notes = flattened(P.persistent_desc, dsig, WS=True)
    ptr, _ = flattened(P.persistent_ptr, psig)
    assert (desc, ws, ptr) == (True, False, True)
    assert any("asks for warp specialisation (KERNELC_FLATTEN_LOOPS=auto, the default" in n for n in ws_notes), \
        ws_notes
    for env, value in (("KERNELC_FLATTEN_LOOPS", "tma"), ("KERNELC_FLATTEN_CARRY_TILES", "0")):
        monkeypatch.setenv(env, value)
        ptr, ptr_notes = flattened(P.persistent_ptr, psig)
        assert not ptr and any("loads through pointers" in n for n in ptr_notes), ptr_notes
        assert flattened(P.persistent_desc, dsig)[0]
        monkeypatch.delenv(env)
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    assert [flattened(P.persistent_desc, dsig)[0], flattened(P.persistent_desc, dsig, WS=True)[0],
            flattened(P.persistent_ptr, psig)[0]] == [True, True, True]
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "0")
    assert not any(flattened(k, s)[0] for k, s in ((P.persistent_desc, dsig), (P.persistent_ptr, psig)))


def test_mma_sync_takes_use_acc_too(on):
    """sm_80 (mma.sync, cp.async ring): the flattened pointer kernel compiles; the accumulator is selected."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}
    ck = kernelc.compile(P.persistent_ptr, sig, dict(BM=64, BN=64, BK=32, PROGRAMS=8, FLAT=True), target="sm_80",
                         num_warps=4, num_stages=3, divisibility={k: 16 for k in sig})
    assert "ring_alloc" in ck.asm["tir"] and "HMMA" in ck.asm["sass"]
    assert re.search(r"= dot .*, %\d+ \{", ck.asm["tir"])


def test_a_flattened_tile_loop_can_be_warp_specialised(monkeypatch):
    """``warp_specialize=True`` on the tile loop: nested, its K loop is specialised (the producer repeats
    the tile loop's bounds; the compile log says so); flattened, a producer warp runs the TMA copies and the
    consumers' MMA loop holds the HGMMAs and the epilogue's store, and no UTMALDG. Both at 4 warps: two
    consumer warpgroups of 64 rows (passes/ws_consumers.py), 4 HGMMA.64x128 each per K step."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}

    def build(flat):
        monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")
        return kernelc.compile(P.persistent_desc, sig, dict(BM=128, BN=128, BK=64, PROGRAMS=132, FLAT=True, WS=True),
                               target="sm_90a", num_warps=4, num_stages=3, divisibility={k: 16 for k in sig})

    nested = build(False)
    assert nested.extra_warps == 5 and "ws_producer" in nested.asm["tir"]
    assert any("warp specialisation asked here runs the loop of line 26" in n
               for n in nested.compile_log), nested.compile_log
    flat = build(True)
    assert flat.extra_warps == 5 and "ws_producer" in flat.asm["tir"]
    names = [o.split()[0] for o in _loop_of(flat)]
    assert sum(n.startswith("HGMMA.64x128x16") for n in names) == 4 and any(n.startswith("UTMASTG") for n in names)
    assert not any(n.startswith("UTMALDG") for n in names), names


PTR_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}


@pytest.mark.parametrize("carry", ["1", "0"])
def test_the_tile_coordinates_are_carried_and_the_next_computed_on_a_tile_change(on, monkeypatch, carry):
    """persistent_ptr's rows/columns of the tile (``t % n_m``, ``t // n_m``) are carried scalars: the flattened
    loop divides only in the branch taken on a tile's last step, which computes the next tile's; the epilogue
    is another branch on the same condition. Before the loop, the first tile's are computed. With
    KERNELC_FLATTEN_CARRY_TILES (the default) the wrapped row and column offsets the K loop reads are carried
    too, the next tile's made in the same branch; the epilogue makes its own rows and columns from the carried
    scalars, in its branch."""
    monkeypatch.setenv("KERNELC_FLATTEN_CARRY_TILES", carry)
    _, fn, _ = _passes(P.persistent_ptr, PTR_SIG, dict(BM=32, BN=32, BK=16, PROGRAMS=3, FLAT=True),
                       upto="flatten_loops")
    flat = next(o for o in fn.body.ops if o.name == "scf.for")
    body = flat.regions[0]
    tiles = [kl.block_type(int32, [32])] * 2 if carry == "1" else []
    # K index, tile number, the tile's row and column (and its wrapped row and column offsets)
    assert [a.type for a in body.args[-4 - len(tiles):]] == [int32] * 4 + tiles
    top = [o.name for o in body.ops]
    assert "srem" not in top and "sdiv" not in top
    ifs = [o for o in body.ops if o.name == "scf.if"]
    assert len(ifs) == 2 and ifs[0].operands[0] is ifs[1].operands[0]
    assert {"srem", "sdiv"} <= {o.name for o in ifs[0].regions[0].ops}
    assert [r.type for r in ifs[0].results] == [int32] * 2 + tiles
    assert any(o.name == "store" for o in ifs[1].walk())
    before = fn.body.ops[:fn.body.ops.index(flat)]
    assert {"srem", "sdiv"} <= {o.name for o in before}
    # the offsets' compare and select: on every step without the knob, only in the branches with it
    wraps = [o for o in body.ops if o.name == "select" and o.results[0].type == kl.block_type(int32, [32])]
    assert len(wraps) == (2 if carry == "0" else 0)
    if carry == "1":
        assert not {"srem", "sdiv", "select"} & {o.name for o in ifs[1].walk()}
        loads = [o for o in body.ops if o.name == "load"]
        assert [o.operands[0] for o in body.ops if o.name == "expand_dims" and o.operands[0] in body.args[-2:]] \
            == list(body.args[-2:]) and len(loads) == 2


def test_a_ring_runs_ahead_through_the_coordinate_branch(monkeypatch):
    """After the ring passes (sm_90a, the descriptor kernel): the loop's top level divides nowhere; the
    copies' coordinates two steps ahead come from a clone of the branch, taken when that step starts a tile."""
    ck = _desc_kernel(monkeypatch, True)
    tir = ck.asm["tir"]
    lines = tir.splitlines()
    at = next(i for i, ln in enumerate(lines) if "scf.for" in ln and "pipeline=" in ln)
    pad = len(lines[at]) - len(lines[at].lstrip())
    body = []
    for ln in lines[at + 2:]:
        if len(ln) - len(ln.lstrip()) <= pad:
            break
        body.append(ln)
    top = [ln for ln in body if len(ln) - len(ln.lstrip()) == pad + 4]
    assert not any(re.search(r"= s(div|rem) ", ln) for ln in top), top
    assert sum("scf.if" in ln for ln in top) == 3  # the copies' coordinates, the carried ones, the epilogue
