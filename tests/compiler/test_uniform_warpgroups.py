"""``mark_uniform_warpgroups`` (passes/uniform_warpgroups.py): with several consumer warpgroups the wgmma dots read
a ``warpgroup_index {uniform}`` made once at the kernel's entry (a shuffle from lane 0 in codegen), so ptxas keeps
their A descriptors on the uniform datapath. Golden IR before -> after, the verifier's checks, the lowering, and
the SASS of tutorial 09's persistent pointer GEMM and tutorial 03's GEMM at 8 warps (no ``R2UR`` on the K step)."""
import re

import pytest

import kernelc
from examples.kernels.matmul import matmul_kernel
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.core import Op
from kernelc.compiler.ir.verifier import VerificationError
from kernelc.language.dtypes import int1, int32
from tests.compiler import persistent_kernels as P
from tests.compiler.filecheck import filecheck
from tests.compiler.test_codegen_sass import MM_SIG, UNIT_STRIDES
from tests.compiler.test_flatten_carry import DIV as PDIV, SIG as PSIG, UNIT as PUNIT, _cx as _pcx, _step
from tests.compiler.test_store_conversion import DIV, _cx, _passes
from tests.compiler.test_wgmma_desc import _loop_ops

BEFORE, AFTER = "assign_smem_offsets", "mark_uniform_warpgroups"


@pytest.fixture(autouse=True)
def _knob(monkeypatch):
    monkeypatch.delenv("KERNELC_UNIFORM_WARPGROUP", raising=False)


def _mm(bm, bn, warps, stages=3):
    return _passes(matmul_kernel, MM_SIG, _cx(bm, bn, 64), warps, stages, DIV, UNIT_STRIDES)


def test_golden_two_warpgroups_read_one_uniform_warpgroup_index():
    """Before: the dot of tutorial 03's GEMM at 128x256, 8 warps takes A, B and the accumulator. After: one
    ``warpgroup_index {uniform=True}`` is the kernel's first op and the dot's last operand; nothing else changes."""
    ir, fn, _ = _mm(128, 256, 8)
    filecheck(ir[BEFORE], """
        CHECK: kernel matmul_kernel(
        CHECK-NEXT: = program_id {axis=0} : i32
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma', wgmma='async', wgmma_desc='stepped'}
    """)
    assert "warpgroup_index" not in ir[BEFORE]
    filecheck(ir[AFTER], """
        CHECK: kernel matmul_kernel(
        CHECK-NEXT: [[WG:%\\d+]] = warpgroup_index {uniform=True} : i32
        CHECK-NEXT: = program_id {axis=0} : i32
        CHECK-NOT: warpgroup_index
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, [[WG]] {input_precision='tf32', engine='wgmma', wgmma='async', wgmma_desc='stepped'}
    """)
    assert ir[AFTER].count("warpgroup_index") == 1
    # value names aside, the rest of the text is the same
    norm = lambda text: [" ".join(re.sub(r"%\d+", "%_", ln).split()) for ln in text.splitlines()]  # noqa: E731
    after = [ln.replace("= dot %_, %_, %_, %_ {", "= dot %_, %_, %_ {") for ln in norm(ir[AFTER])
             if "warpgroup_index" not in ln]
    assert after == norm(ir[BEFORE])
    verify(fn)


def test_golden_a_flattened_dot_takes_use_acc_then_the_warpgroup_index(monkeypatch):
    """Tutorial 09's persistent pointer GEMM flattened at 128x256x64 s4 w8: the dot's ``use_acc`` stays its 4th
    operand, the warpgroup index comes after it."""
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    ir, fn, _ = _passes(P.persistent_ptr_grouped, PSIG, _pcx(128, 256, 64), 8, 4, PDIV, PUNIT)
    filecheck(ir[BEFORE], """
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma', wgmma='async'
    """)
    filecheck(ir[AFTER], """
        CHECK: [[WG:%\\d+]] = warpgroup_index {uniform=True} : i32
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, [[U:%\\d+]], [[WG]] {input_precision='tf32', engine='wgmma', wgmma='async'
    """)
    dot = next(o for o in fn.walk() if o.name == "dot")
    assert [str(v.type) for v in dot.operands[3:]] == [str(int1), str(int32)]
    verify(fn)


@pytest.mark.parametrize("bn,warps,knob", [(128, 4, None), (256, 8, "0")])
def test_one_warpgroup_or_the_knob_off_leaves_the_ir_alone(monkeypatch, bn, warps, knob):
    if knob is not None:
        monkeypatch.setenv("KERNELC_UNIFORM_WARPGROUP", knob)
    ir, _, _ = _mm(128, bn, warps)
    assert ir[AFTER] == ir[BEFORE]


def test_mma_v2_dots_get_no_warpgroup_index():
    """sm_80 (mma.sync, no warpgroups): nothing to read the index."""
    from kernelc.compiler import compiler as C
    from kernelc.compiler.backend import parse_target
    from kernelc.compiler.frontend import generate_ir
    from kernelc.compiler.pass_manager import PassContext, run_passes
    tgt = parse_target("sm_80")
    fn, _ = generate_ir(C._base_function(matmul_kernel), MM_SIG, _cx(128, 256, 64), DIV, UNIT_STRIDES,
                        arch=tgt.arch, num_warps=8)
    ctx = PassContext(tgt.arch, tuple(tgt.capability), 8, num_stages=3)
    fn = run_passes(run_passes(fn, C.FRONTEND_PASSES, ctx, verify_each=False), C.TILE_PASSES, ctx)
    assert not any(o.name == "warpgroup_index" for o in fn.walk())


def test_the_verifier_checks_the_dot_operands_and_the_op():
    _, fn, _ = _mm(128, 256, 8)
    dot = next(o for o in fn.walk() if o.name == "dot")
    wg = fn.body.ops[0]
    assert wg.name == "warpgroup_index"
    other = next(o for o in fn.walk() if o.name == "program_id")
    dot.operands[3] = other.results[0]          # an i32 that is no warpgroup index
    with pytest.raises(VerificationError, match="use_acc operand must be a scalar i1, got i32"):
        verify(fn)
    flag = next(o for o in fn.walk() if o.name == "cmpi" and str(o.results[0].type) == str(int1))
    dot.operands[3:] = [wg.results[0], flag.results[0]]   # the index before use_acc
    with pytest.raises(VerificationError, match="must be its last operand"):
        verify(fn)
    dot.operands[3:] = [flag.results[0], flag.results[0], wg.results[0]]
    with pytest.raises(VerificationError, match="at most a use_acc and a warpgroup index"):
        verify(fn)
    dot.operands[3:] = [flag.results[0], wg.results[0]]
    verify(fn)
    dot.operands[3:] = [wg.results[0]]
    verify(fn)
    wg.attrs["uniform"] = "yes"
    with pytest.raises(VerificationError, match="warpgroup_index yields an i32"):
        verify(fn)
    wg.attrs["uniform"] = True
    bad = Op("warpgroup_index", [], [int1], {"uniform": True})
    bad.block = fn.body
    fn.body.ops.insert(0, bad)
    with pytest.raises(VerificationError, match="warpgroup_index yields an i32"):
        verify(fn)


def _compile_mm(bn, warps, stages=3):
    return kernelc.compile(matmul_kernel, MM_SIG, _cx(128, bn, 64), target="sm_90a", num_warps=warps,
                           num_stages=stages, divisibility=DIV, equal_to_1=UNIT_STRIDES)


def test_the_index_is_one_shuffle_from_lane_0_at_entry(monkeypatch):
    """The op lowers to ``shfl.sync.idx`` of tid.x / 128 from lane 0, once, before the loop; off: no shuffle."""
    ck = _compile_mm(256, 8)
    llir = ck.asm["llir"]
    assert llir.count("call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1") == 1
    entry = llir[llir.index("define "):]
    assert entry.index("llvm.nvvm.shfl.sync.idx.i32(") < entry.index("wgmma.mma_async")
    monkeypatch.setenv("KERNELC_UNIFORM_WARPGROUP", "0")
    assert "shfl.sync.idx" not in _compile_mm(256, 8).asm["llir"]


# SASS of tutorial 09's persistent pointer GEMM at 128x256x64 s4 w8, measured on this tree (ptxas of CUDA 13.0):
# the shortest path through the K loop (flattened: a step that ends no tile) and its R2UR moves, knob on / off
#   flattened: 120 / 133 instructions, 0 / 8 R2UR;  nested: 88 / 105 instructions, 0 / 8 R2UR
# (tutorial 09's own kernel, pointer_gemm_sass.py: flattened 115 / 128, nested 101 / 118; Triton 3.6: 119, no R2UR)
STEP_BOUND = {True: 120, False: 88}


@pytest.mark.parametrize("flat", [True, False])
def test_the_k_step_moves_no_descriptor_to_the_uniform_datapath(monkeypatch, flat):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")

    def build():
        return kernelc.compile(P.persistent_ptr_grouped, PSIG, _pcx(128, 256, 64, flat=flat), target="sm_90a",
                               num_warps=8, num_stages=4, divisibility=PDIV, equal_to_1=PUNIT)
    ck = build()
    # without the NOPs nvJitLink 13.0.88 (the GPU hosts') puts before the two HGMMAs whose descriptor the UIADD3.64
    # before them writes; 13.5 none (docs/performance.md, "nvj27"): the instructions the compiler's code costs
    step = [i.opcode for i in _step(ck) if i.opcode != "NOP"]
    assert sum(o.startswith("R2UR") for o in step) == 0
    assert len(step) <= STEP_BOUND[flat], len(step)
    assert sum(o.startswith("HGMMA") for o in step) == 4
    assert ck.n_spills == 0
    monkeypatch.setenv("KERNELC_UNIFORM_WARPGROUP", "0")
    off = build()
    off_step = [i.opcode for i in _step(off) if i.opcode != "NOP"]
    assert sum(o.startswith("R2UR") for o in off_step) >= 8      # one per HGMMA operand descriptor pair
    assert len(off_step) >= len(step) + 8
    assert ck.n_regs <= off.n_regs


@pytest.mark.parametrize("bm,bn", [(128, 256), (256, 128)])
def test_tutorial_03_gemm_loop_at_8_warps(monkeypatch, bm, bn):
    """The plain pointer GEMM's K loop at 8 warps (one or two 64-row blocks per warpgroup): no R2UR, shorter."""
    def build():
        return kernelc.compile(matmul_kernel, MM_SIG, _cx(bm, bn, 64), target="sm_90a", num_warps=8, num_stages=3,
                               divisibility=DIV, equal_to_1=UNIT_STRIDES)
    new = build()
    monkeypatch.setenv("KERNELC_UNIFORM_WARPGROUP", "0")
    old = build()
    ln, lo = _loop_ops(new), _loop_ops(old)
    assert sum(o.startswith("R2UR") for o in ln) == 0 < sum(o.startswith("R2UR") for o in lo)
    assert len(ln) < len(lo)
    assert new.n_spills == 0 == old.n_spills


@pytest.mark.parametrize("M,N,K", [(300, 260, 200), (130, 390, 64), (200, 130, 0)])
def test_the_whole_tile_pipeline_at_8_warps_computes_the_product(monkeypatch, M, N, K):
    """09's kernel in shape flattened at 128x128x64, 8 warps, 3 programs, through every tile pass (the cp.async ring,
    the wgmma waits, the warpgroup index): the IR evaluated on the CPU (``ir_eval``, which reads a dot's last i32
    operand as the warpgroup index and its i1 one as ``use_acc``) gives every tile of every program from zero (ragged
    M, N, K; no K step)."""
    import numpy as np

    from tests.compiler import ir_eval
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    _, fn, _ = _passes(P.persistent_ptr_grouped, PSIG, _pcx(128, 128, 64, group=2, programs=3), 8, 3, PDIV, PUNIT)
    dot = next(o for o in fn.walk() if o.name == "dot")
    assert [str(v.type) for v in dot.operands[3:]] == [str(int1), str(int32)]
    assert any(o.name == "wgmma_wait" for o in fn.walk())
    c, want = ir_eval.gemm_product(fn, M, N, K, programs=3, seed=4)
    np.testing.assert_allclose(c, want, rtol=1e-9, atol=1e-9)
