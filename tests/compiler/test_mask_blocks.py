"""``mark_uniform_masks`` (passes/mask_blocks.py): a cp.async ring's K mask compare, uniform over aligned blocks
of 16 K offsets when K is divisible by 16, says so; code generation computes it once per block a thread holds.
Golden IR before/after, the compares it must leave alone (checked against brute force), and tutorial 03's K loop
in SASS: Triton's count of predicate instructions (docs/triton-tutorials.md, "09 persistent pointer GEMM: the
epilogue in pieces", K masks)."""
import collections
import itertools
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as tl

from examples.kernels.matmul import matmul_kernel
from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.ir.core import Op, Value
from kernelc.compiler.passes.axis_info import AxisInfo
from kernelc.compiler.passes.mask_blocks import uniform_blocks
from kernelc.language.dtypes import block_type, int1, int32
from tests.compiler.filecheck import filecheck
from tests.compiler.test_flatten_loops import _loop_of
from tests.compiler.test_store_conversion import DIV, MM_SIG, UNIT_STRIDES, _cx, _passes


def test_golden_the_k_masks_of_a_gemms_rings_are_uniform_over_16_offsets(monkeypatch):
    """03's kernel at 128x256x64: A's mask (1x64, K offsets along columns) and B's (64x1, along rows) compare a
    contiguous run of offsets starting at 0 with K - k * 64, divisible by 16: uniform over 16 offsets. The
    epilogue's row/column masks feed a store, not a ring: unmarked in a kernel with dots by default (nodots);
    KERNELC_UNIFORM_MASKS=all marks them too (offsets against M and N, divisible by 16). Only the attribute
    changes."""
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "1")
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 256, 64), 8, 3, DIV, UNIT_STRIDES, upto="mark_uniform_masks")
    before, after = ir["schedule_wgmma"], ir["mark_uniform_masks"]
    filecheck(before, """
        CHECK: scf.for
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <1x64xi1>
        CHECK: = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {{{.*}}pipeline=
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <64x1xi1>
        CHECK: = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {{{.*}}pipeline=
    """)
    filecheck(after, """
        CHECK: scf.for
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt', uniform=[1, 16]} : <1x64xi1>
        CHECK: = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {{{.*}}pipeline=
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt', uniform=[16, 1]} : <64x1xi1>
        CHECK: = load {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {{{.*}}pipeline=
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <128x1xi1>
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <1x256xi1>
        CHECK: store
    """)
    norm = lambda t: [re.sub(r", uniform=\[[^\]]*\]|\s+#.*", "", ln) for ln in t.splitlines()]  # noqa: E731
    assert norm(before) == norm(after)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "all")
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 256, 64), 8, 3, DIV, UNIT_STRIDES, upto="mark_uniform_masks")
    filecheck(ir["mark_uniform_masks"], """
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt', uniform=[16, 1]} : <128x1xi1>
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt', uniform=[1, 16]} : <1x256xi1>
    """)
    assert norm(ir["mark_uniform_masks"]) == norm(before)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "1")
    # the ring expansion clones the chain with the attribute: the prologue's copies and the loop's
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 256, 64), 8, 3, DIV, UNIT_STRIDES,
                       upto="expand_cp_async_rings")
    text = ir["expand_cp_async_rings"]
    assert text.count("uniform=[16, 1]") >= 3 and "cmpi" in text   # 2 prologue stages + the loop's (at least)
    assert all("uniform=" in ln for ln in text.splitlines() if re.search(r"cmpi .*: <(64x1|1x64)xi1>", ln))


def test_no_mark_without_k_divisible_by_16(monkeypatch):
    """K of unknown alignment: the K masks change at any offset and stay unmarked, so nothing is (under ``all`` the
    epilogue's, against M and N divisible by 16, are)."""
    div = {k: v for k, v in DIV.items() if k != "K"}
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 256, 64), 8, 3, div, UNIT_STRIDES, upto="mark_uniform_masks")
    assert "uniform=" not in ir["mark_uniform_masks"]
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "all")
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 256, 64), 8, 3, div, UNIT_STRIDES, upto="mark_uniform_masks")
    k_masks = [ln for ln in ir["mark_uniform_masks"].splitlines() if re.search(r"cmpi .*: <(64x1|1x64)xi1>", ln)]
    assert len(k_masks) == 2 and not any("uniform=" in ln for ln in k_masks)
    assert "uniform=[16, 1]" in ir["mark_uniform_masks"]
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "0")
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 256, 64), 8, 3, DIV, UNIT_STRIDES, upto="expand_cp_async_rings")
    assert "uniform=" not in ir["expand_cp_async_rings"] and "mark_uniform_masks" not in ir


def _cmp(pred, x: AxisInfo, y: AxisInfo, n=64):
    ty = block_type(int1, (n,))
    xv, yv = Value(block_type(int32, (n,))), Value(block_type(int32, (n,)))
    op = Op("cmpi", [xv, yv], [ty], {"pred": pred})

    class Axis:
        def get(self, v):
            return x if v is xv else y
    return uniform_blocks(op, Axis())


RUN = AxisInfo((64,), (16,), (1,))      # 64 consecutive values from a multiple of 16
BOUND = AxisInfo((1,), (16,), (64,))    # one value, a multiple of 16


@pytest.mark.parametrize("pred", ["slt", "sle", "sgt", "sge", "eq", "ne", "ult", "ule", "ugt", "uge"])
@pytest.mark.parametrize("swap", [False, True])
def test_only_compares_that_flip_between_blocks_are_marked(pred, swap):
    """What the pass claims, against brute force: a run of offsets from a multiple of 16 compared with every
    multiple of 16 near it; a claimed block must hold one value. ``x <= y``, ``x > y`` and (in)equality flip
    inside a block and must not be claimed (``y >= x`` etc. are the mirrored forms of the strict ones)."""
    x, y = (BOUND, RUN) if swap else (RUN, BOUND)
    got = _cmp(pred, x, y)
    fn = {"slt": np.less, "sle": np.less_equal, "sgt": np.greater, "sge": np.greater_equal, "eq": np.equal,
          "ne": np.not_equal}[pred.replace("u", "s") if pred[0] == "u" else pred]
    uniform = True
    for start, bound in itertools.product(range(-64, 65, 16), range(-96, 97, 16)):
        run, b = np.arange(start, start + 64), np.full(64, bound)
        if pred[0] == "u":   # the same bits read as unsigned
            run, b = run.astype(np.uint32), b.astype(np.uint32)
        r = fn(b, run) if swap else fn(run, b)
        uniform &= bool((r.reshape(4, 16) == r.reshape(4, 16)[:, :1]).all())
    want = {False: {"slt", "sge", "ult", "uge"}, True: {"sgt", "sle", "ugt", "ule"}}[swap]
    assert (got == (16,)) == (pred in want)
    if got is not None:
        assert uniform   # a claim is true
    assert got is None or got == (16,)


def test_blocks_are_bounded_by_both_operands():
    assert _cmp("slt", AxisInfo((64,), (8,), (1,)), BOUND) == (8,)            # the run starts at multiples of 8
    assert _cmp("slt", RUN, AxisInfo((1,), (4,), (64,))) == (4,)               # the bound: multiples of 4
    assert _cmp("slt", AxisInfo((4,), (16,), (1,)), BOUND) == (4,)             # runs of 4
    assert _cmp("slt", RUN, AxisInfo((1,), (1,), (64,))) is None               # any bound
    assert _cmp("eq", AxisInfo((1,), (1,), (8,)), AxisInfo((1,), (1,), (32,))) == (8,)   # both constant over 8


def _k_loop_counts(ck):
    loop = _loop_of(ck)
    c = collections.Counter(o.split(" ")[0].split(".")[0] for o in loop)
    return len(loop), c["ISETP"] + c["SEL"], c


@pytest.mark.parametrize("bm,bn,bk,stages,warps,pred_max", [(128, 256, 64, 3, 8, 26), (128, 128, 32, 4, 4, 20)])
def test_the_k_loop_pays_tritons_predicates(monkeypatch, bm, bn, bk, stages, warps, pred_max):
    """Tutorial 03's configs (the tuners' 128x256x64 s3 w8 pick at 4096, and 128x128x32 s4 w4, 0.89 of Triton at
    1536): the K loop's ISETP + SEL count is Triton 3.6's (26 and 20: t03_sweep.py) or fewer; without the pass
    each B copy had its own compare and source-size selects (42 and 26)."""
    kw = dict(divisibility=DIV, equal_to_1=UNIT_STRIDES)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "1")
    ck = kcompile(matmul_kernel, MM_SIG, _cx(bm, bn, bk), "sm_90a", warps, stages, **kw)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "0")
    old = kcompile(matmul_kernel, MM_SIG, _cx(bm, bn, bk), "sm_90a", warps, stages, **kw)
    n, pred, c = _k_loop_counts(ck)
    n0, pred0, c0 = _k_loop_counts(old)
    assert pred <= pred_max < pred0, (pred, pred0)
    assert n < n0 and c["LDGSTS"] == c0["LDGSTS"] and c["HGMMA"] == c0["HGMMA"]
    assert ck.n_spills == 0
    # no more registers, or none that cost a CTA a SM: at 128x256 s3 w8 (147456 B of shared memory: one CTA a SM)
    # with the warpgroup index on the uniform datapath (passes/uniform_warpgroups.py) ptxas takes 221 against 208
    ctas = lambda k: min(65536 // (k.n_regs * 32 * warps), 233472 // k.shared)  # noqa: E731
    assert ck.n_regs <= old.n_regs or ctas(ck) == ctas(old)


@pytest.mark.parametrize("pred,vector", [("slt", True), ("sge", True), ("sle", False), ("sgt", False),
                                         ("eq", False), ("ne", False)])
def test_a_vector_load_is_masked_as_one_only_where_its_mask_cannot_flip_inside(pred, vector):
    """The axis analysis (passes/axis_info.py) gives a compare of contiguous offsets with an aligned bound the
    constancy of the bound's alignment only for ``offs < n`` / ``offs >= n``: ``offs <= n`` or ``offs == n``
    flip inside a block of 4 (n = 16: element 16 in, 17-19 out), so such a load must not be one predicated v4
    (it read 17-19 instead of giving ``other``)."""
    import kernelc
    import kernelc.language as kl

    @kernelc.jit
    def k(x_ptr, y_ptr, n, PRED: kl.constexpr):
        offs = kl.arange(0, 1024)
        if PRED == "slt":
            m = offs < n
        elif PRED == "sge":
            m = offs >= n
        elif PRED == "sle":
            m = offs <= n
        elif PRED == "sgt":
            m = offs > n
        elif PRED == "eq":
            m = offs == n
        else:
            m = offs != n
        kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=m, other=0.0))

    ck = kcompile(k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"PRED": pred}, "sm_90a", 4, 1,
                  divisibility={"n": 16})
    loads = set(re.findall(r"ld\.global[\w.]*", ck.asm["ptx"]))
    assert (loads == {"ld.global.v4.b32"}) == vector, loads


@kernelc.jit
def _row_grad(DX, DY, X, Mean, Rstd, stride, N, BLOCK: tl.constexpr):
    # a layer-norm backward row in the style of Triton's tutorial 05: one row a program, `cols < N` masks
    # the loads and the selects of the two row sums
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0).to(tl.float32)
    xhat = tl.where(mask, (x - tl.load(Mean + row)) * tl.load(Rstd + row), 0.)
    dy = tl.where(mask, dy, 0.)
    c1 = tl.sum(xhat * dy, axis=0) / N
    c2 = tl.sum(dy, axis=0) / N
    tl.store(DX + row * stride + cols, (dy - (xhat * c1 + c2)).to(tl.float16), mask=mask)


ROW_SIG = {"DX": "*fp16", "DY": "*fp16", "X": "*fp16", "Mean": "*fp32", "Rstd": "*fp32", "stride": "i32", "N": "i32"}
ROW_DIV = {k: 16 for k in ROW_SIG}


def test_golden_an_elementwise_rows_mask_is_uniform_over_16_columns(monkeypatch):
    """Not only a ring's masks (a one-pass kernel without dots, the default onepass): `cols < N` with N divisible by 16 is
    uniform over 16 columns wherever it is used (the loads, the selects, the store). Only the attribute changes;
    under ``rings`` (the rule until 2026-11-28) nothing is marked."""
    ir, _, _ = _passes(_row_grad, ROW_SIG, {"BLOCK": 4096}, 8, 3, ROW_DIV, upto="mark_uniform_masks")
    before, after = ir["schedule_wgmma"], ir["mark_uniform_masks"]
    filecheck(before, """
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <4096xi1>
    """)
    filecheck(after, """
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt', uniform=[16]} : <4096xi1>
        CHECK: = load
        CHECK: = select
        CHECK: store
    """)
    norm = lambda t: [re.sub(r", uniform=\[[^\]]*\]|\s+#.*", "", ln) for ln in t.splitlines()]  # noqa: E731
    assert norm(before) == norm(after)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "rings")
    ir, _, _ = _passes(_row_grad, ROW_SIG, {"BLOCK": 4096}, 8, 3, ROW_DIV, upto="mark_uniform_masks")
    assert "uniform=" not in ir["mark_uniform_masks"]


def test_an_elementwise_rows_compares_are_made_once_per_block(monkeypatch):
    """4096 columns over 256 threads: 16 a thread, one block of 16. With the pass the row's compare is one per
    block a thread holds; without it one per element (tutorial 05's dx kernel at 16384 columns: 78 ISETP against
    Triton's 22, docs/triton-tutorials.md)."""
    kw = dict(divisibility=ROW_DIV)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "1")
    ck = kcompile(_row_grad, ROW_SIG, {"BLOCK": 4096}, "sm_90a", 8, 3, **kw)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "0")
    old = kcompile(_row_grad, ROW_SIG, {"BLOCK": 4096}, "sm_90a", 8, 3, **kw)
    count = lambda k: collections.Counter(  # noqa: E731
        re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).split(" ")[0].split(".")[0]
        for ln in k.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln))
    c, c0 = count(ck), count(old)
    assert c["ISETP"] < c0["ISETP"] and sum(c.values()) < sum(c0.values()), (c["ISETP"], c0["ISETP"])
    assert c["LDG"] == c0["LDG"] and c["STG"] == c0["STG"] and ck.n_spills == 0


@kernelc.jit
def _row_mean_loop(X, Mean, stride, N, BLOCK: tl.constexpr):
    # tutorial 05's forward shape: a loop over the row's column blocks, each load masked by `cols < N`
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(X + row * stride + cols, mask=cols < N, other=0.).to(tl.float32)
    tl.store(Mean + row, tl.sum(acc, axis=0) / N)


LOOP_SIG = {"X": "*fp16", "Mean": "*fp32", "stride": "i32", "N": "i32"}
LOOP_DIV = {k: 16 for k in LOOP_SIG}


def test_a_loop_kernels_compares_are_left_alone_by_default_and_marked_under_nodots(monkeypatch):
    """The default (onepass) widens only kernels with no loop that loads: in tutorial 05's forward, a loop kernel,
    the widened code moved the fill policy to the launch bound's build, 3-11% slower on an H200 (C2/C2b). Under
    ``nodots`` the same compare is marked; the one-pass row kernel above is marked either way."""
    monkeypatch.delenv("KERNELC_UNIFORM_MASKS", raising=False)
    ir, _, _ = _passes(_row_mean_loop, LOOP_SIG, {"BLOCK": 1024}, 4, 3, LOOP_DIV, upto="mark_uniform_masks")
    assert "cmpi" in ir["mark_uniform_masks"] and "uniform=" not in ir["mark_uniform_masks"]
    ir, _, _ = _passes(_row_grad, ROW_SIG, {"BLOCK": 4096}, 8, 3, ROW_DIV, upto="mark_uniform_masks")
    assert "uniform=[16]" in ir["mark_uniform_masks"]
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "nodots")
    ir, _, _ = _passes(_row_mean_loop, LOOP_SIG, {"BLOCK": 1024}, 4, 3, LOOP_DIV, upto="mark_uniform_masks")
    assert re.search(r"cmpi .*uniform=\[\d+\]", ir["mark_uniform_masks"])
