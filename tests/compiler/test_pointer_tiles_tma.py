"""Plain pointer loads that read a provable tile become TMA descriptor loads on sm_90a
(kernelc/compiler/passes/pointer_tiles.py), and only those: checked in the IR, the PTX and the SASS,
and for meaning with a numpy evaluator of the IR before and after the rewrite (tests/compiler/ir_eval.py)."""
import re

import numpy as np
import pytest

import kernelc
from examples.kernels import matmul as MM
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.passes.lower_descriptors import lower_descriptors
from kernelc.compiler.passes.pointer_tiles import pointer_tiles_to_descriptors
from kernelc.compiler.passes.simplify import simplify
from tests.compiler import ir_eval
from tests.compiler import pointer_tile_kernels as PT

MM_SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
              stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
UNIT = ("stride_ak", "stride_bn", "stride_cn")
DIV = {n: 16 for n in MM_SIG if n not in UNIT}
MM_CX = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)


def _sass_ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).split(" ")[0]
            for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]


def _compile(kernel=MM.matmul_masked_kernel, sig=MM_SIG, cx=MM_CX, target="sm_90a", equal_to_1=UNIT, div=DIV,
             **kw):
    return kernelc.compile(kernel, sig, cx, target=target, num_warps=4, num_stages=3, divisibility=div,
                           equal_to_1=equal_to_1, **kw)


def _ir(kernel, sig, cx, div, equal_to_1=(), rewrite=True, scope="all"):
    fn, _ = generate_ir(kernel, sig, cx, div, tuple(equal_to_1), arch="sm_90a")
    notes = []
    if rewrite:
        pointer_tiles_to_descriptors(fn, "sm_90a", notes, scope)
    return fn, notes


# -- the tutorial matmul with masks ------------------------------------------------------------------


def test_masked_tutorial_matmul_loads_by_tma_on_sm_90a():
    ck = _compile()
    tir = ck.asm["tir_initial"]
    assert tir.count("descriptor_load") == 2 and tir.count("make_tensor_descriptor") == 2
    assert tir.index("make_tensor_descriptor") < tir.index("scf.for")  # made once, at the top level
    assert not re.search(r"= load ", tir) and "descriptor_store" not in tir  # C: a dot result, stored as before
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", ck.asm["ptx"])
    ops = _sass_ops(ck)
    assert "UTMALDG.2D" in ops and any(o.startswith("HGMMA") for o in ops) and "UTMASTG.2D" not in ops
    assert not any(o.startswith("LDGSTS") for o in ops)  # no cp.async left for A and B
    assert ck.global_scratch_bytes == 2 * 128  # one device tensor map each for A and B
    log = [n for n in ck.compile_log if "auto-TMA" in n]
    assert len(log) == 2 and all("-> descriptor_load" in n for n in log), log
    assert ck.n_spills == 0


def test_auto_tma_all_stores_c_by_tma_too(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")
    ck = _compile()
    tir = ck.asm["tir_initial"]
    assert tir.count("descriptor_load") == 2 and tir.count("descriptor_store") == 1
    assert not re.search(r"= load |\bstore %", tir)  # no plain load or store left
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", ck.asm["ptx"])  # the store
    assert "UTMASTG.2D" in _sass_ops(ck) and ck.global_scratch_bytes == 3 * 128
    assert sum("-> descriptor_store" in n for n in ck.compile_log) == 1


def test_loop_carried_pointers_are_dropped_and_offsets_follow_the_trip_count():
    fn, _ = _ir(MM.matmul_masked_kernel, MM_SIG, MM_CX, DIV, UNIT)
    loop = next(op for op in fn.walk() if op.name == "scf.for")
    assert len(loop.results) == 1  # only the accumulator: a_ptrs / b_ptrs are no longer carried
    loads = [op for op in fn.walk() if op.name == "descriptor_load"]
    assert [op.attrs["block_shape"] for op in loads] == [(128, 64), (64, 128)]
    assert all(op.block is loop.regions[0] for op in loads)
    makes = [op for op in fn.walk() if op.name == "make_tensor_descriptor"]
    assert all(op.block is fn.body for op in makes)
    # K is A's dim-1 and B's dim-0 extent (select(K < 1, 16, K)), the bound the relative mask K - k*BK names
    K = fn.body.args[5]
    assert [[o.op.operands[2] is K for o in mk.operands[1:3]] for mk in makes] == [[False, True], [True, False],
                                                                                   [False, False]]


def test_masked_matmul_keeps_plain_loads_elsewhere():
    ck = _compile(target="sm_80")
    assert "descriptor" not in ck.asm["tir_initial"]
    assert any(o.startswith("LDGSTS") for o in _sass_ops(ck))


def test_kernelc_auto_tma_0_keeps_plain_loads(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ck = _compile()
    assert "descriptor" not in ck.asm["tir_initial"] and not any(o.startswith("UTMA") for o in _sass_ops(ck))


@pytest.mark.parametrize("why,kw,reason", [
    ("the last stride is a runtime value", dict(equal_to_1=()), "last stride"),
    ("row strides not known 16-byte aligned", dict(div={}), "16-byte aligned"),
])
def test_masked_matmul_not_rewritten_without_proof(why, kw, reason):
    ck = _compile(**kw)
    assert "descriptor" not in ck.asm["tir_initial"], why
    assert sum(reason in n for n in ck.compile_log) == 2, ck.compile_log  # A and B


def test_tutorial_modulo_wrap_is_not_a_tile():
    ck = _compile(kernel=MM.matmul_kernel, cx=dict(MM_CX, ACTIVATION=""))
    assert "descriptor" not in ck.asm["tir_initial"]
    assert not any("auto-TMA" in n for n in ck.compile_log), ck.compile_log  # no tile: nothing to say
    assert any(o.startswith("LDGSTS") for o in _sass_ops(ck))


# -- forms that are not tiles -----------------------------------------------------------------------


SUM_SIG = dict(x_ptr="*fp16", out_ptr="*fp32", idx_ptr="*i32", M="i32", K="i32", stride_xm="i32")
SUM_DIV = {n: 16 for n in SUM_SIG}


@pytest.mark.parametrize("form,rewritten,reason", [
    ("tile", True, ""),
    ("gather", False, None),
    ("static_bound", False, "does not move with the pointer"),
    ("parity", False, "mask is not one bound per dim"),
    ("lower_too", False, "mask is not one bound per dim"),
    ("after_store", False, "global memory before it"),
    ("store_in_loop", False, "global memory before it"),
])
def test_only_per_dim_bounds_of_the_tile_are_rewritten(form, rewritten, reason, monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")  # the loads feed no dot
    ck = kernelc.compile(PT.masked_sum, SUM_SIG, dict(BM=64, BK=64, FORM=form), target="sm_90a",
                         divisibility=SUM_DIV)
    tir = ck.asm["tir_initial"]
    assert ("descriptor_load" in tir) == rewritten
    assert ("UTMALDG.2D" in _sass_ops(ck)) == rewritten
    if reason is None:  # no tile access at all: no note
        assert not any("auto-TMA: load" in n for n in ck.compile_log), ck.compile_log
    elif not rewritten:
        assert any(reason in n for n in ck.compile_log), ck.compile_log


def test_non_unit_last_stride_is_not_rewritten():
    ck = _compile(equal_to_1=("stride_bn", "stride_cn"))  # stride_ak is a runtime value (not 1)
    log = [n for n in ck.compile_log if "auto-TMA: load" in n]
    assert len(log) == 2 and "kept: the last stride" in log[0] and "-> descriptor_load" in log[1], log
    assert ck.asm["tir_initial"].count("descriptor_load") == 1  # B only


# -- meaning: the IR before and after computes the same ------------------------------------------------


def _run_all(fn, args, buffers, grid):
    for pid in range(grid):
        ir_eval.run(fn, args, buffers, pid=(pid, 0, 0), nprog=(grid, 1, 1))
    return buffers


def _same_meaning(kernel, sig, cx, div, eq1, args, make_buffers, grid, expect_descriptors):
    """Run every program before and after the rewrite (the descriptor loads lowered to what they
    mean); a program that reads outside a buffer before (undefined) is not compared."""
    before, _ = _ir(kernel, sig, cx, div, eq1, rewrite=False)
    after, notes = _ir(kernel, sig, cx, div, eq1)
    n_desc = sum(op.name == "descriptor_load" for op in after.walk())
    assert n_desc == expect_descriptors, notes
    simplify(lower_descriptors(after, "sm_90a", claim=lambda op, arch: False))  # the descriptor's meaning
    want, got = make_buffers(), make_buffers()
    ran = 0
    for pid in range(grid):
        try:
            ir_eval.run(before, args, want, pid=(pid, 0, 0), nprog=(grid, 1, 1))
        except ir_eval.OutOfBounds:
            continue
        ir_eval.run(after, args, got, pid=(pid, 0, 0), nprog=(grid, 1, 1))
        ran += 1
    assert ran
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("M,N,K,extra", [(37, 29, 45, 0), (16, 16, 16, 3), (50, 8, 70, 5), (1, 40, 3, 2)])
def test_masked_matmul_means_the_same_after_the_rewrite(M, N, K, extra):
    lda, ldb, ldc = K + 3, N + 5, N + 1
    cx = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=16, BLOCK_SIZE_K=16, GROUP_SIZE_M=2)

    def buffers():
        rng = np.random.default_rng(M * N + K)
        return {"a": rng.standard_normal(M * lda).round(2), "b": rng.standard_normal(K * ldb).round(2),
                "c": np.full(M * ldc, -7.0)}
    grid = -(-M // 16) * -(-N // 16) + extra  # extra programs: tiles wholly out of bounds (extent <= 0)
    args = dict(a_ptr="a", b_ptr="b", c_ptr="c", M=M, N=N, K=K, stride_am=lda, stride_ak=1, stride_bk=ldb,
                stride_bn=1, stride_cm=ldc, stride_cn=1)
    _same_meaning(MM.matmul_masked_kernel, MM_SIG, cx, DIV, UNIT, args, buffers, grid, 2)
    bufs = buffers()
    a = bufs["a"].reshape(M, lda)[:, :K]
    b = bufs["b"].reshape(K, ldb)[:, :N]
    after = _ir(MM.matmul_masked_kernel, MM_SIG, cx, DIV, UNIT)[0]
    got = _run_all(simplify(lower_descriptors(after, "sm_90a", claim=lambda op, arch: False)), args, bufs,
                   grid - extra)["c"]
    np.testing.assert_allclose(got.reshape(M, ldc)[:, :N], a @ b)


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("shift,step", [(0, 16), (5, 16), (5, 32), (21, 16)])
def test_shifted_rows_and_stepped_loops_mean_the_same(pad, shift, step):
    M, N, ld, BM, BN = 40, 50, 64, 16, 16
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", SHIFT="i32")
    grid = 4

    def buffers():
        rng = np.random.default_rng(1)
        return {"x": rng.standard_normal((M + 24) * ld).round(2), "y": np.zeros(grid * BM * BN)}
    args = dict(x_ptr=("x", 24 * ld), y_ptr="y", M=M, N=N, stride_xm=ld, SHIFT=shift)
    _same_meaning(PT.shifted_copy, sig, dict(BM=BM, BN=BN, PAD=pad, STEP=step), {"x_ptr": 16, "y_ptr": 16,
                  "stride_xm": 16}, (), args, buffers, grid, 1)


def test_unmasked_tile_reads_unchecked_dims(monkeypatch):
    sig = dict(x_ptr="*fp16", y_ptr="*fp16", stride_xm="i32")
    fn, notes = _ir(PT.unmasked_tile, sig, dict(BM=64, BN=64), {n: 16 for n in sig})
    mk = next(op for op in fn.walk() if op.name == "make_tensor_descriptor")
    extents = [v.op.attrs["value"] for v in mk.operands[1:3]]
    assert extents == [2**31 - 1] * 2  # no bound: every i32 coordinate is inside
    args = dict(x_ptr="x", y_ptr="y", stride_xm=80)
    _same_meaning(PT.unmasked_tile, sig, dict(BM=16, BN=16), {n: 16 for n in sig}, (), args,
                  lambda: {"x": np.arange(48 * 80, dtype=float), "y": np.zeros(48 * 16)}, 3, 1)
    compile_ = lambda: kernelc.compile(PT.unmasked_tile, sig, dict(BM=64, BN=64), target="sm_90a",  # noqa: E731
                                       divisibility={n: 16 for n in sig})
    assert "UTMALDG.2D" not in _sass_ops(compile_())  # the tile feeds no dot: not by default
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")
    ck = compile_()
    assert "UTMALDG.2D" in _sass_ops(ck) and "UTMASTG.2D" in _sass_ops(ck) and "cp.async.bulk.tensor" in ck.asm["ptx"]


STORE_SIG = dict(x_ptr="*fp16", y_ptr="*fp16", z_ptr="*fp16", M="i32", N="i32", stride="i32")


@pytest.mark.parametrize("loop,div_n,want", [
    (False, 16, ["load -> descriptor_load", "store kept: other memory accesses", "store -> descriptor_store"]),
    (True, 16, ["load -> descriptor_load", "store kept: other memory accesses"]),
    (False, 1, ["load -> descriptor_load"] + ["store kept: base or strides (or a stored row's extent) not proven"] * 2),
])
def test_a_store_copies_by_tma_only_as_the_last_access_with_whole_16_byte_rows(loop, div_n, want, monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")
    div = dict({n: 16 for n in STORE_SIG}, N=div_n)
    ck = kernelc.compile(PT.tile_stores, STORE_SIG, dict(BM=64, BN=64, LOOP=loop), target="sm_90a", divisibility=div)
    log = [re.sub(r" at \S+", "", n) for n in ck.compile_log if "auto-TMA" in n]
    assert [n[len("auto-TMA: "):len("auto-TMA: ") + len(w)] for n, w in zip(log, want)] == want and \
        len(log) == len(want), log
    assert ("UTMASTG.2D" in _sass_ops(ck)) == ("descriptor_store" in want[-1])
    sig = dict(STORE_SIG)
    args = dict(x_ptr="x", y_ptr="y", z_ptr="z", M=40, N=24, stride=32)
    bufs = lambda: {"x": np.arange(48 * 32, dtype=float), "y": np.zeros(48 * 32), "z": np.zeros(48 * 32)}  # noqa
    _same_meaning(PT.tile_stores, sig, dict(BM=16, BN=32, LOOP=loop), div, (), args, bufs, 3, 1)


@pytest.mark.parametrize("kmajor", [False, True])
def test_operands_read_through_a_trans_and_stepped_loops(kmajor):
    sig = dict(a_ptr="*fp16", bt_ptr="*fp16", c_ptr="*fp32", K="i32", stride_a="i32", stride_b="i32")
    div = {n: 16 for n in sig}
    ck = kernelc.compile(PT.dot_bt, sig, dict(BM=64, BN=64, BK=32, KMAJOR=kmajor), target="sm_90a", divisibility=div)
    assert ck.asm["tir_initial"].count("descriptor_load") == 2 and "UTMALDG.2D" in _sass_ops(ck)
    assert not any(o.startswith("LDGSTS") for o in _sass_ops(ck))
    cx = dict(BM=16, BN=16, BK=16, KMAJOR=kmajor)
    fn, _ = _ir(PT.dot_bt, sig, cx, div, scope="dots")
    assert any(op.name == "sdiv" and op.block.parent is not None and op.block.parent.name == "scf.for"
               for op in fn.walk())  # the trip count k // BK, at the top of the loop body
    if kmajor:  # b's K-contiguous [BK, BN] tile: the descriptor reads [BN, BK], a trans gives it back
        ld = [op for op in fn.walk() if op.name == "descriptor_load"][1]
        assert ld.attrs["block_shape"] == (16, 16) and ld.results[0].type.shape == (16, 16)
        assert any(op.name == "trans" and op.operands[0] is ld.results[0] for op in fn.walk())
    args = dict(a_ptr="a", bt_ptr="b", c_ptr="c", K=37, stride_a=48, stride_b=40)
    bufs = lambda: {"a": np.arange(16 * 48) % 7 - 3.0, "b": np.arange(16 * 40) % 5 - 2.0, "c": np.zeros(256)}  # noqa
    _same_meaning(PT.dot_bt, sig, cx, div, (), args, bufs, 1, 2)
    c = bufs()
    a, b = c["a"].reshape(16, 48)[:, :37], c["b"].reshape(16, 40)[:, :37]
    ir_eval.run(simplify(lower_descriptors(fn, "sm_90a", claim=lambda op, arch: False)), args, c)
    np.testing.assert_allclose(c["c"].reshape(16, 16), a @ b.T)


def test_attention_copies_q_k_and_v_by_tma():
    from examples.kernels import attention as A
    sig = dict(Q="*fp16", K="*fp16", V="*fp16", Out="*fp16", sm_scale="fp32")
    sig.update({n: "i32" for n in A.attn_fwd_kernel.arg_names if n.startswith("stride") or n in ("H", "N_CTX")})
    unit = ("stride_qk", "stride_kk", "stride_vk", "stride_ok")
    div = {n: 16 for n in sig if n not in unit and n != "sm_scale"}

    def build(num_warps):
        return kernelc.compile(A.attn_fwd_kernel, sig, dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=64, CAUSAL=False),
                               target="sm_90a", num_warps=num_warps, num_stages=2, divisibility=div, equal_to_1=unit)
    ck = build(4)
    log = [n for n in ck.compile_log if "auto-TMA" in n]
    assert len(log) == 3 and all("-> descriptor_load [" in n for n in log), log  # q, k (transposed), v
    ops = _sass_ops(ck)
    assert "UTMALDG.2D" in ops and not any(o.startswith("LDGSTS") for o in ops) and ck.n_spills == 0
    # warp specialisation by default only with two consumer warpgroups (one lost 14% on an H200)
    assert ck.extra_warps == 0 and build(8).extra_warps == 1


def test_pointer_matmul_warp_specialises_once_its_loads_are_tma():
    from tests.compiler.test_warp_specialize import mm_pointers
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}

    def build(div):
        return kernelc.compile(mm_pointers, sig, dict(BM=128, BN=128, BK=64), target="sm_90a", num_warps=4,
                               num_stages=3, divisibility=div)
    # a's row stride K not known aligned: a stays a pointer load and only b becomes a descriptor load (since the
    # axis_info fix of 2026-11-28 a is no longer assumed 16-byte aligned; this build then spills: see docs/performance.md)
    unaligned = build({})
    assert sum("-> descriptor_load" in n for n in unaligned.compile_log) == 1
    ck = build({"K": 16})
    # a second consumer warpgroup for the 128-row dot at 4 warps (passes/ws_consumers.py) and the producer warp
    assert ck.extra_warps == 5 and sum("-> descriptor_load" in n for n in ck.compile_log) == 2


def test_the_mask_says_which_dim_the_loop_moves():
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", N="i32")
    cx = dict(BM=16, BN=16, LD=16)
    fn, notes = _ir(PT.row_chunks, sig, cx, {"x_ptr": 16, "y_ptr": 16})
    ld = next(op for op in fn.walk() if op.name == "descriptor_load")
    row, col = ld.operands[1].op, ld.operands[2].op
    assert row.name == "constant" and row.attrs["value"] == 0  # rows: unbounded, they do not move
    mul = col.operands[0].op  # columns: (n0 // 16) * 16 + the empty-extent shift
    assert col.name == "add" and mul.name == "mul" and mul.operands[0].op.name == "sdiv"
    args = dict(x_ptr="x", y_ptr="y", N=16 * 3 - 5)
    bufs = lambda: {"x": np.arange(16 * 16 * 3, dtype=float), "y": np.zeros(256)}  # noqa: E731
    _same_meaning(PT.row_chunks, sig, cx, {"x_ptr": 16, "y_ptr": 16}, (), args, bufs, 1, 1)


@pytest.mark.parametrize("volatile", [False, True])
def test_a_tile_read_after_a_flag_read_stays_plain(volatile):
    sig = dict(x_ptr="*fp16", flag_ptr="*i32", y_ptr="*fp16", M="i32")
    ck = kernelc.compile(PT.after_flag, sig, dict(BM=64, BN=64, VOLATILE=volatile), target="sm_90a",
                         divisibility={n: 16 for n in sig})
    assert ("descriptor_load" in ck.asm["tir_initial"]) == (not volatile), ck.compile_log
    if volatile:
        assert any("global memory before it" in n for n in ck.compile_log)
