"""Masks a loop reads from outside it (passes/loop_masks.py) and their marking under the default
``KERNELC_UNIFORM_MASKS=invariant`` (passes/mask_blocks.py): a layer-norm backward's ``cols < n_cols``, made
before its row loop, is uniform over 16 columns when n_cols is divisible by 16 and is marked so; a compare made
inside a loop (tutorial 05's forward) is left per element, as under ``onepass``. Golden IR before/after, the
analysis on small kernels, and the SASS of memory_bound.layer_norm_bwd_kernel on CPU (the predicates the row loop
kept in general registers, ``P2R``, go away; docs/performance.md, eighteenth session)."""
import collections
import re

import kernelc
import kernelc.language as tl

from examples.kernels.memory_bound import layer_norm_bwd_kernel
from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.passes.loop_masks import compares_read_in_loops
from tests.compiler.filecheck import filecheck
from tests.compiler.test_store_conversion import _passes
from tests.compiler.test_mask_blocks import LOOP_DIV, LOOP_SIG, _row_mean_loop


@kernelc.jit
def _rows_bwd(DX, DY, X, stride, n_rows, n_cols, rows_per, BLOCK: tl.constexpr):
    # a layer-norm backward's shape: the mask is made once, before the loop over this program's rows
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    after = cols < n_rows          # read only after the loop
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(pid * rows_per, tl.minimum(pid * rows_per + rows_per, n_rows)):
        dy = tl.load(DY + row * stride + cols, mask=mask, other=0.).to(tl.float32)
        x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
        xh = tl.where(mask, x * 2.0, 0.)
        acc += dy * xh
        tl.store(DX + row * stride + cols, (dy - xh).to(tl.float16), mask=mask)
    tl.store(DX + cols, acc.to(tl.float16), mask=after)


BWD_SIG = {"DX": "*fp16", "DY": "*fp16", "X": "*fp16", "stride": "i32", "n_rows": "i32", "n_cols": "i32",
           "rows_per": "i32"}
BWD_DIV = {k: 16 for k in BWD_SIG}


def _cmp_lines(text):
    return [ln.strip() for ln in text.splitlines() if "= cmpi" in ln and "xi1>" in ln]


def test_golden_a_mask_made_before_a_row_loop_is_uniform_over_16_columns(monkeypatch):
    """Before: both tile compares per element. After (the default): the one the loop reads, `cols < n_cols`, says
    uniform=[16]; the one read only after the loop is left alone (a loop kernel: onepass's rule). Nothing else
    changes. Under onepass neither is marked."""
    monkeypatch.delenv("KERNELC_UNIFORM_MASKS", raising=False)
    ir, _, _ = _passes(_rows_bwd, BWD_SIG, {"BLOCK": 4096}, 8, 3, BWD_DIV, upto="mark_uniform_masks")
    before, after = ir["schedule_wgmma"], ir["mark_uniform_masks"]
    filecheck(before, """
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <4096xi1>
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <4096xi1>
        CHECK: scf.for
    """)
    filecheck(after, """
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt', uniform=[16]} : <4096xi1>
        CHECK: = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : <4096xi1>
        CHECK: scf.for
        CHECK: = load
        CHECK: = select
        CHECK: store
    """)
    assert sum("uniform=" in ln for ln in _cmp_lines(after)) == 1
    norm = lambda t: [re.sub(r", uniform=\[[^\]]*\]|\s+#.*", "", ln) for ln in t.splitlines()]  # noqa: E731
    assert norm(before) == norm(after)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "onepass")
    ir, _, _ = _passes(_rows_bwd, BWD_SIG, {"BLOCK": 4096}, 8, 3, BWD_DIV, upto="mark_uniform_masks")
    assert "uniform=" not in ir["mark_uniform_masks"]


def test_no_mark_when_the_column_count_is_not_divisible(monkeypatch):
    """n_cols of unknown alignment: `cols < n_cols` can flip inside any block, the loop's read changes nothing."""
    monkeypatch.delenv("KERNELC_UNIFORM_MASKS", raising=False)
    div = {k: v for k, v in BWD_DIV.items() if k != "n_cols"}
    ir, _, _ = _passes(_rows_bwd, BWD_SIG, {"BLOCK": 4096}, 8, 3, div, upto="mark_uniform_masks")
    assert "uniform=" not in ir["mark_uniform_masks"]


def test_compares_read_in_loops_finds_live_in_masks_only():
    """The analysis: `cols < n_cols` (read in the loop, directly and through the select) is found once; the
    compare read after the loop is not; in tutorial 05's forward shape the compare is made inside the loop, so
    none is."""
    ir, fn, _ = _passes(_rows_bwd, BWD_SIG, {"BLOCK": 4096}, 8, 3, BWD_DIV, upto="schedule_wgmma")
    found = compares_read_in_loops(fn)
    assert len(found) == 1 and found[0].name == "cmpi"
    users_in_loop = [o for o in fn.walk() if o.name == "scf.for"][0]
    assert any(found[0].results[0] is v for o in users_in_loop.walk() for v in o.operands)
    _, fn2, _ = _passes(_row_mean_loop, LOOP_SIG, {"BLOCK": 1024}, 4, 3, LOOP_DIV, upto="schedule_wgmma")
    assert compares_read_in_loops(fn2) == []


def test_a_loop_made_mask_stays_per_element_by_default(monkeypatch):
    """Tutorial 05's forward shape (compare inside the loop): the default leaves it, as onepass did; nodots marks
    it (the widening that moved that kernel to the launch bound's build)."""
    monkeypatch.delenv("KERNELC_UNIFORM_MASKS", raising=False)
    ir, _, _ = _passes(_row_mean_loop, LOOP_SIG, {"BLOCK": 1024}, 4, 3, LOOP_DIV, upto="mark_uniform_masks")
    assert "uniform=" not in ir["mark_uniform_masks"]


LN_SIG = {"dy_ptr": "*fp16", "x_ptr": "*fp16", "w_ptr": "*fp16", "mean_ptr": "*fp32", "rstd_ptr": "*fp32",
          "dx_ptr": "*fp16", "dw_ptr": "*fp32", "db_ptr": "*fp32", "stride": "i32", "n_rows": "i32", "n_cols": "i32",
          "rows_per_program": "i32"}
LN_DIV = {k: 16 for k in LN_SIG}


def _opcodes(ck):
    return collections.Counter(
        re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).split(" ")[0].split(".")[0]
        for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln))


def test_layer_norm_bwd_keeps_no_predicates_in_registers(monkeypatch):
    """The memory-bound set's layer_norm bwd at 4096 columns, 8 warps (sm_90a): under onepass its row loop keeps
    the per-element masks in general registers (P2R) and makes more compares; under the default neither, with the
    same loads, stores and no spills."""
    kw = dict(divisibility=LN_DIV)
    monkeypatch.delenv("KERNELC_UNIFORM_MASKS", raising=False)
    ck = kcompile(layer_norm_bwd_kernel, LN_SIG, {"BLOCK_SIZE": 4096}, "sm_90a", 8, 3, **kw)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "onepass")
    old = kcompile(layer_norm_bwd_kernel, LN_SIG, {"BLOCK_SIZE": 4096}, "sm_90a", 8, 3, **kw)
    c, c0 = _opcodes(ck), _opcodes(old)
    assert c0["P2R"] > 0 and c["P2R"] == 0, (c0["P2R"], c["P2R"])
    assert c["ISETP"] < c0["ISETP"] and sum(c.values()) < sum(c0.values())
    assert c["LDG"] == c0["LDG"] and c["STG"] == c0["STG"] and ck.n_spills == 0
