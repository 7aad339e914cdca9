"""A flattened loop's zero-started accumulator reset in the branch on a tile's last step (``KERNELC_FLATTEN_ACC_RESET``,
passes/flatten_loops.py), as Triton does, instead of the tile's first wgmma ignoring it through its scale-d predicate
(``use_acc``); and stepped wgmma descriptors stepped in their low 32-bit word (``KERNELC_WGMMA_DESC_WORDS``,
passes/uniform_warpgroups.py). Golden IR of ``flatten_loops``, ``schedule_pipelines`` and ``place_wgmma_waits`` (the
dot stays in flight: the branch that only passes it on waits for nothing); the meaning kept (the IR evaluated on
the CPU, ragged shapes, after the wait placement); the SASS of tutorial 09's persistent kernel in shape
(docs/triton-tutorials.md, "09 persistent GEMMs: the accumulator reset in the tile branch")."""
import re

import numpy as np
import pytest

import kernelc
from cubintools.paths import step_path
from cubintools.sass import parse_sass
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.core import Function, Op
from kernelc.compiler.ir.verifier import VerificationError
from tests.compiler import ir_eval
from tests.compiler import persistent_kernels as P
from tests.compiler.filecheck import filecheck
from tests.compiler.test_flatten_carry import DIV, SIG, UNIT, _cx
from tests.compiler.test_flatten_loops import TK_SIG, tiles_k
from tests.compiler.test_schedule_passes import _passes
from tests.compiler.test_store_conversion import _passes as _passes_unit


@pytest.fixture
def reset(monkeypatch):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    monkeypatch.setenv("KERNELC_FLATTEN_ACC_RESET", "1")
    monkeypatch.delenv("KERNELC_WGMMA_DESC_WORDS", raising=False)


def test_golden_the_zero_started_accumulator_is_reset_by_the_tile_branch(reset):
    """The dot takes no ``use_acc``: it always accumulates, and the branch on a tile's last step (the epilogue's)
    yields the accumulator's zero start for the next tile, the other branch the dot's result."""
    ir, fn, _ = _passes(tiles_k, TK_SIG, dict(BM=16, ACC0=0.0, FLAT=True), upto="flatten_loops")
    filecheck(ir["flatten_loops"], """
        CHECK: [[ACC0:%\\d+]] = constant {value=0.0} : <16x16xfp32>
        CHECK: ^body({{%\\d+}}: i32, [[DONE:%\\d+]]: i32, [[ACC:%\\d+]]: <16x16xfp32>, [[KI:%\\d+]]: i32, {{%\\d+}}: i32):
        CHECK-NOT: pred='ne'
        CHECK: [[D:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, [[ACC]] {input_precision='tf32'}
        CHECK: [[DN:%\\d+]], [[AN:%\\d+]] = scf.if {{%\\d+}} : i32, <16x16xfp32>
        CHECK-NEXT: ^then():
        CHECK: = fadd [[D]], {{%\\d+}} : <16x16xfp32>
        CHECK: scf.yield {{%\\d+}}, [[ACC0]]
        CHECK-NEXT: ^else():
        CHECK-NEXT: scf.yield [[DONE]], [[D]]
        CHECK-NEXT: scf.yield [[DN]], [[AN]], {{%\\d+}}, {{%\\d+}}
    """)
    verify(fn)


def test_without_the_knob_the_dot_takes_use_acc(reset, monkeypatch):
    monkeypatch.setenv("KERNELC_FLATTEN_ACC_RESET", "0")
    ir, _, _ = _passes(tiles_k, TK_SIG, dict(BM=16, ACC0=0.0, FLAT=True), upto="flatten_loops")
    filecheck(ir["flatten_loops"], """
        CHECK: [[FIRST:%\\d+]] = cmpi {{%\\d+}}, {{%\\d+}} {pred='ne'} : i1
        CHECK-NEXT: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, [[FIRST]]
    """)


def _pipeline(bn=256, warps=8, stages=4, upto=None):
    return _passes_unit(P.persistent_ptr_grouped, SIG, _cx(128, bn, 64), warps, stages, DIV, UNIT, upto=upto)


def test_golden_the_reset_dot_stays_in_flight(reset):
    """09's kernel in shape at 128x256x64, 8 warps, 4 stages: the dot is left in flight (``wgmma='async'``, the
    cp.async ring refilled after it) although its result reaches the loop's yield through the branch; the
    epilogue's arm waits for it (pending 0) before reading it and yields the zero start, the other arm passes it
    on with no wait; one ``wait 1`` after the dot on every step."""
    ir, fn, _ = _pipeline(upto="place_wgmma_waits")
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=4, lookahead=3, refill='after_dots'}}
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', wgmma='async'}
    """)
    filecheck(ir["place_wgmma_waits"], """
        CHECK: [[ZERO:%\\d+]] = constant {value=0} : <128x256xfp32>
        CHECK: = scf.for {{.*}} {pipeline=
        CHECK: [[D:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', wgmma='async', wgmma_desc='stepped'}
        CHECK-NEXT: wgmma_wait {pending=1}
        CHECK: = scf.if {{%\\d+}} : i32, <128x256xfp32>
        CHECK-NEXT: ^then():
        CHECK: [[W:%\\d+]] = wgmma_wait [[D]] {pending=0} : <128x256xfp32>
        CHECK: cast [[W]]
        CHECK: scf.yield {{%\\d+}}, [[ZERO]]
        CHECK-NEXT: ^else():
        CHECK-NEXT: scf.yield {{%\\d+}}, [[D]]
    """)
    assert sum(o.name == "wgmma_wait" for o in fn.walk()) == 3   # the step's, the epilogue's, after the loop


def _run(fn, args, buffers, programs):
    for p in range(programs):
        ir_eval.run(fn, args, buffers, pid=(p, 0, 0), nprog=(programs, 1, 1))


@pytest.mark.parametrize("M,N,K", [(300, 260, 200), (130, 390, 64), (200, 130, 0)])
def test_the_reset_loop_computes_the_product_after_the_wait_placement(reset, M, N, K):
    """The whole tile pipeline (cp.async ring, waits, warpgroup index) at 128x128x64, 8 warps, 3 programs:
    every tile of every program starts from zero (ragged M, N, K; no K step)."""
    _, fn, _ = _passes_unit(P.persistent_ptr_grouped, SIG, _cx(128, 128, 64, group=2, programs=3), 8, 3, DIV, UNIT)
    assert not any(o.name == "dot" and len(o.operands) > 3 and o.operands[3].op.name != "warpgroup_index"
                   for o in fn.walk())
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    bufs = {"a": a.reshape(-1).copy(), "b": b.T.reshape(-1).copy(), "c": np.full(M * N, np.nan)}
    _run(fn, dict(a_ptr="a", b_ptr="b", c_ptr="c", M=M, N=N, K=K, stride_am=K, stride_ak=1, stride_bk=1,
                  stride_bn=K, stride_cm=N, stride_cn=1), bufs, 3)
    np.testing.assert_allclose(bufs["c"].reshape(M, N), a @ b, rtol=1e-9, atol=1e-9)


def _build(bn, warps, stages):
    return kernelc.compile(P.persistent_ptr_grouped, SIG, _cx(128, bn, 64), target="sm_90a", num_warps=warps,
                           num_stages=stages, divisibility=DIV, equal_to_1=UNIT)


_HGMMA = re.compile(r"HGMMA\.\S+ (R\d+), gdesc\[UR\d+\], R\d+(.*);")


def _hgmma_predicates(sass: str):
    """The operands after each HGMMA's accumulator: a uniform predicate (``UP0``: scale-d) or ``gsb0``."""
    return [m.group(2).strip(" ,") for m in _HGMMA.finditer(sass)]


# the shortest path through a step (a K step that ends no tile), measured on this tree (ptxas of CUDA 13.0) with
# the reset; with use_acc the same kernel takes 120 / 150 (221 / 255 registers against 207 / 197 reset)
STEP_BOUND = {256: 113, 128: 146}


@pytest.mark.parametrize("bn,warps,stages", [(256, 8, 4), (128, 4, 3)])
def test_sass_no_hgmma_reads_a_predicate_and_one_group_stays_in_flight(reset, monkeypatch, bn, warps, stages):
    """The tutorial 09 kernel's shape at both tuners' picks: no HGMMA takes a scale-d predicate (with use_acc the
    tile's first one reads ``UP0``, which the instructions after it rewrite and read), the step waits with
    ``WARPGROUP.DEPBAR.LE gsb0, 0x1``, the step is at most its measured length, no spills, and no more registers
    than with use_acc."""
    ck = _build(bn, warps, stages)
    sass = ck.asm["sass"]
    preds = _hgmma_predicates(sass)
    assert preds and all(p in ("", "gsb0") for p in preds), preds
    path = step_path(sass, parse_sass(sass))
    ops = [i.opcode for i in path]
    assert len(path) <= STEP_BOUND[bn], len(path)
    assert "WARPGROUP.DEPBAR.LE" in ops
    assert any(i.opcode == "WARPGROUP.DEPBAR.LE" and "0x1" in i.text for i in path)
    assert ck.n_spills == 0
    monkeypatch.setenv("KERNELC_FLATTEN_ACC_RESET", "0")
    off = _build(bn, warps, stages)
    assert any(p.startswith("UP") for p in _hgmma_predicates(off.asm["sass"]))
    assert ck.n_regs <= off.n_regs


def test_the_tma_kernel_is_reset_too(reset):
    """The TMA persistent kernel (flattened by default): no predicated HGMMA, one group in flight."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    ck = kernelc.compile(P.persistent_desc, sig, dict(BM=128, BN=256, BK=64, PROGRAMS=132, FLAT=True),
                         target="sm_90a", num_warps=8, num_stages=3,
                         divisibility={k: 16 for k in sig})
    sass = ck.asm["sass"]
    preds = _hgmma_predicates(sass)
    assert preds and all(p in ("", "gsb0") for p in preds), preds
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass
    assert ck.n_spills == 0


# --- descriptors stepped in their low word ----------------------------------------------------------------------

def test_golden_descriptor_words_mark_the_stepped_dots(monkeypatch):
    """``mark_uniform_warpgroups``'s pass also writes ``wgmma_desc='words'`` on a stepped dot with the knob on, and
    leaves it ``'stepped'`` without."""
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    monkeypatch.setenv("KERNELC_WGMMA_DESC_WORDS", "1")
    ir, fn, _ = _pipeline(upto="mark_uniform_warpgroups")
    filecheck(ir["assign_smem_offsets"], "CHECK: = dot {{.*}} wgmma_desc='stepped'}")
    filecheck(ir["mark_uniform_warpgroups"], """
        CHECK: [[WG:%\\d+]] = warpgroup_index {uniform=True} : i32
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, [[WG]] {{{.*}}wgmma_desc='words'}
    """)
    verify(fn)
    monkeypatch.setenv("KERNELC_WGMMA_DESC_WORDS", "0")
    ir, _, _ = _pipeline(upto="mark_uniform_warpgroups")
    assert "wgmma_desc='words'" not in ir["mark_uniform_warpgroups"]


def test_the_verifier_takes_stepped_or_words():
    fn = Function("k", [], "f.py", 1)
    bad = Op("dot", [], [], {"wgmma_desc": "halves"})
    bad.block = fn.body
    fn.body.ops.append(bad)
    with pytest.raises(VerificationError, match="wgmma_desc is 'stepped' or 'words' on a dot"):
        verify(fn)


@pytest.mark.parametrize("bn,warps,stages", [(256, 8, 4), (128, 4, 3)])
def test_sass_descriptor_words_make_no_64_bit_descriptor_add(reset, monkeypatch, bn, warps, stages):
    """With the knob, no ``UIADD3.X`` (the high word's add of the low word's carry) nor ``UIADD3.64`` is left in
    the kernel; without it the step has them (two HGMMAs' descriptors a 64-bit add each)."""
    monkeypatch.setenv("KERNELC_WGMMA_DESC_WORDS", "1")
    sass = _build(bn, warps, stages).asm["sass"]
    assert not re.search(r"UIADD3\.(X|64)\b", sass)
    monkeypatch.setenv("KERNELC_WGMMA_DESC_WORDS", "0")
    sass = _build(bn, warps, stages).asm["sass"]
    assert re.search(r"UIADD3\.X\b", sass) and re.search(r"UIADD3\.64\b", sass)
