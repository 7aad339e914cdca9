"""The scheduling passes (passes/schedule.py, docs/schedule-ir.md): golden IR before -> after for each,
the verifier's checks of the schedule attributes, and a scan of codegen for scheduling decisions."""
import ast
import os

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from kernelc.compiler.pass_manager import PassContext, run_passes
from kernelc.compiler.backend import parse_target
from tests.compiler.filecheck import filecheck
from tests.compiler.test_warp_specialize import mm_loop, mm_pointers

MM_PTR_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}
MM_DESC_SIG = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
               "c_desc": "tensordesc<fp16[128, 128]>", "K": "i32"}
MM_DESC_DIV = {"a_desc": 16, "b_desc": 16, "c_desc": 16}


@kernelc.jit
def mm_plain(a_ptr, b_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rk = kl.arange(0, BK)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, K, BK):
        a = kl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = kl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = kl.dot(a, b, acc)
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@kernelc.jit
def two_dots(q_desc, k_desc, v_desc, o_desc, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    q = q_desc.load([kl.program_id(0) * BM, 0])
    acc = kl.zeros((BM, D), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        s = kl.dot(q, k_desc.load([n, 0]).T)
        p = kl.exp(s - kl.max(s, 1)[:, None]).to(kl.float16)
        acc = kl.dot(p, v_desc.load([n, 0]), acc)
    o_desc.store([kl.program_id(0) * BM, 0], acc.to(kl.float16))


TD_SIG = {"q_desc": "tensordesc<fp16[128, 64]>", "k_desc": "tensordesc<fp16[64, 64]>",
          "v_desc": "tensordesc<fp16[64, 64]>", "o_desc": "tensordesc<fp16[128, 64]>", "N": "i32"}
TD_DIV = {k: 16 for k in TD_SIG if k.endswith("desc")}


def _passes(kernel, sig, cx, target="sm_90a", num_warps=4, num_stages=3, div=None, upto=None):
    """{pass name: IR text after it} through the whole tile pipeline (as ``kernelc.compile`` runs it), or
    through the pass named ``upto``."""
    tgt = parse_target(target)
    div = dict(div or {})
    for k, t in sig.items():
        # pointers 16-byte aligned, as the runtime specialises them, and the pointer GEMMs' K a multiple of 16 (their
        # A rows start K elements apart); other integers stay unknown unless the test says otherwise
        if t.startswith("*") or (k == "K" and t in ("i32", "i64")):
            div.setdefault(k, 16)
    fn, _ = generate_ir(C._base_function(kernel), sig, cx, div, (), arch=tgt.arch, num_warps=num_warps)
    verify(fn)
    ctx = PassContext(tgt.arch, tuple(tgt.capability), num_warps, num_stages=num_stages)
    out = {}
    sink = lambda name, text: out.__setitem__(name, text)  # noqa: E731
    fn = run_passes(fn, C.FRONTEND_PASSES, ctx, verify_each=False, dump=sink)
    passes = C.TILE_PASSES
    if upto is not None:
        passes = passes[:[p.name for p in passes].index(upto) + 1]
    fn = run_passes(fn, passes, ctx, dump=sink)
    return out, fn, ctx


def test_the_scheduling_passes_run_after_layout_assignment():
    names = [p.name for p in C.TILE_PASSES]
    assert names[-19:] == ["assign_layouts", "schedule_pipelines", "warp_specialize", "schedule_wgmma",
                          "mark_uniform_masks", "expand_cp_async_rings", "expand_tma_rings", "expand_warp_specialize",
                          "stage_invariant_operands", "share_staged_operands", "place_wgmma_waits",
                          "expand_bulk_reductions", "defer_tma_store_waits", "issue_tma_loads_early",
                          "assign_smem_offsets", "mark_zero_acc_dots", "mark_uniform_warpgroups", "mark_copy_mad_wide", "mark_elect_form"]


def test_schedule_pipelines_rings_pointer_loads_with_cp_async(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ir, _, _ = _passes(mm_plain, MM_PTR_SIG, dict(BM=128, BN=128, BK=64), target="sm_80")
    filecheck(ir["assign_layouts"], """
        CHECK: scf.for
        CHECK-NOT: pipeline=
    """)
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}}
        CHECK: [[A:%\\d+]] = load {{.*}}pipeline={ring='cp.async', vec=8}}
        CHECK: [[B:%\\d+]] = load {{.*}}pipeline={ring='cp.async', vec=8}}
        CHECK-NEXT: = dot [[A]], [[B]], {{%\\d+}} {input_precision='tf32', engine='mma'} :
    """)
    # sm_80 has no wgmma: nothing else to decide
    assert ir["warp_specialize"] == ir["schedule_pipelines"] == ir["schedule_wgmma"]


def test_one_stage_loops_and_async_wgmma_on_cp_async_rings(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ir, _, _ = _passes(mm_plain, MM_PTR_SIG, dict(BM=128, BN=128, BK=64), num_stages=1)
    assert "pipeline=" not in ir["schedule_pipelines"]
    # cp.async + wgmma: one group in flight across iterations by default, the copies after the dots (the
    # full lookahead); KERNELC_WGMMA_ASYNC=0 waits for it in its iteration
    for knob in (None, "1"):
        if knob:
            monkeypatch.setenv("KERNELC_WGMMA_ASYNC", knob)
        ir, _, _ = _passes(mm_plain, MM_PTR_SIG, dict(BM=128, BN=128, BK=64))
        filecheck(ir["schedule_pipelines"], """
            CHECK: {pipeline={stages=3, lookahead=2, refill='after_dots'}}
            CHECK: = dot {{.*}}wgmma='async'
        """)
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "0")
    ir, _, _ = _passes(mm_plain, MM_PTR_SIG, dict(BM=128, BN=128, BK=64))
    filecheck(ir["schedule_pipelines"], """
        CHECK: {pipeline={stages=3, lookahead=2}}
        CHECK-NOT: wgmma='async'
    """)


def test_schedule_pipelines_rings_descriptor_loads_with_tma(monkeypatch):
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=False), div=MM_DESC_DIV)
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}}{pipeline={stages=3, lookahead=2}}
        CHECK: [[A:%\\d+]] = descriptor_load {{.*}}pipeline={ring='tma'}}
        CHECK: [[B:%\\d+]] = descriptor_load {{.*}}pipeline={ring='tma'}}
        CHECK-NEXT: = dot [[A]], [[B]], {{.*}}wgmma='async'}
    """)
    assert "ws=" not in ir["warp_specialize"]  # one dot, 4 warps: auto leaves it alone
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "0")
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=False), div=MM_DESC_DIV)
    assert "pipeline={stages=3, lookahead=2}" in ir["schedule_pipelines"] and "wgmma=" not in ir["schedule_pipelines"]


def test_warp_specialize_tags_the_loop_a_producer_warp_fills():
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=True), div=MM_DESC_DIV)
    assert "ws=" not in ir["schedule_pipelines"]
    filecheck(ir["warp_specialize"], """
        CHECK: = scf.for {{.*}} {warp_specialize=True, pipeline={stages=3, lookahead=2}, ws={producer_warps=1, setmaxnreg=False, release='lagged', pingpong=False}}
        CHECK: = dot {{.*}}wgmma='async'}
    """)


def test_a_loop_that_cannot_be_specialised_is_left_alone_with_a_note(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ir, _, ctx = _passes(mm_pointers, MM_PTR_SIG, dict(BM=128, BN=128, BK=64))
    assert "ws=" not in ir["warp_specialize"] and "pipeline={stages=3" in ir["warp_specialize"]
    assert any("not warp-specialised: no tensor-descriptor (TMA) loads" in n for n in ctx.plan.notes)


def test_schedule_wgmma_defers_waits_and_takes_turns(monkeypatch):
    cx = dict(BM=128, BN=64, D=64)
    ir, _, _ = _passes(two_dots, TD_SIG, cx, num_warps=8, num_stages=2, div=TD_DIV)
    # Q comes from outside the loop, P from registers: neither dot may stay in flight across iterations
    filecheck(ir["warp_specialize"], """
        CHECK: = scf.for {{.*}}ws={producer_warps=1, setmaxnreg=False, release='at_issue', pingpong=False}}
        CHECK: = trans {{.*}}pipeline={ring='tma'}}
        CHECK-NEXT: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
    """)
    filecheck(ir["schedule_wgmma"], """
        CHECK: = dot {{.*}}wgmma='deferred'}
        CHECK: = dot {{.*}}wgmma='deferred'}
    """)
    monkeypatch.setenv("KERNELC_WGMMA_DEFER", "0")
    monkeypatch.setenv("KERNELC_WS_PINGPONG", "1")
    monkeypatch.setenv("KERNELC_WS_SETMAXNREG", "1")
    ir, _, _ = _passes(two_dots, TD_SIG, cx, num_warps=8, num_stages=2, div=TD_DIV)
    filecheck(ir["schedule_wgmma"], """
        CHECK: ws={producer_warps=4, setmaxnreg=True, release='at_issue', pingpong=True}}
        CHECK: = dot {{.*}}wgmma_turns=True}
        CHECK-NOT: {{wgmma[_=]}}
    """)
    assert "wgmma='deferred'" not in ir["schedule_wgmma"]


def test_tma_tiles_outside_a_ring_are_read_in_place_only_by_dots():
    from tests.compiler.tma_kernels import copy2d
    ir, _, _ = _passes(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), num_warps=8, num_stages=2, div=TD_DIV)
    # Q, loaded once before the loop, is only a dot operand: the dot reads it where TMA put it
    filecheck(ir["schedule_pipelines"], """
        CHECK: [[Q:%\\d+]] = descriptor_load {{.*}}tma=True, in_place=True} : <128x64xfp16>
        CHECK: scf.for
        CHECK: = dot [[Q]], {{.*}}
    """)
    assert "in_place" not in ir["assign_layouts"]
    ty = "tensordesc<fp16[64, 64]>"
    ir, _, _ = _passes(copy2d, {"x_desc": ty, "y_desc": ty}, dict(BM=64, BN=64), div={"x_desc": 16, "y_desc": 16})
    filecheck(ir["schedule_pipelines"], """
        CHECK: = descriptor_load {{.*}}{block_shape=[64, 64], padding='zero', tma=True} :
        CHECK-NOT: in_place
    """)



@pytest.mark.parametrize("BM,D,num_warps", [(16, 128, 8), (32, 64, 8), (64, 64, 4)])
def test_a_tma_tile_two_dots_read_in_different_orientations_is_not_read_in_place(BM, D, num_warps):
    # K is wgmma's A in K Q^T (K-major) and the B of sT^T K (N-major; mma.sync below 64 rows at 8 warps,
    # wgmma at 64 rows and 4 warps): codegen keeps one view per value, so K goes through registers
    # (H100, 2026-11-27: in place, dq was wrong by its own size or the kernel faulted)
    from tests.compiler.tma_kernels import wgmma_then_mma_sync
    sig = {"k_desc": f"tensordesc<fp16[128, {D}]>", "q_desc": f"tensordesc<fp16[{BM}, {D}]>", "out_ptr": "*fp32"}
    ir, _, _ = _passes(wgmma_then_mma_sync, sig, dict(BN=128, BM=BM, D=D, ATOMIC=False), num_warps=num_warps,
                       div={"k_desc": 16, "q_desc": 16, "out_ptr": 16})
    filecheck(ir["schedule_pipelines"], f"""
        CHECK: [[K:%\\d+]] = descriptor_load {{{{.*}}}}tma=True}} : <128x{D}xfp16>
        CHECK: = descriptor_load {{{{.*}}}}tma=True, in_place=True}} : <{BM}x{D}xfp16>
        CHECK: = dot [[K]],
        CHECK: = dot {{{{%\\d+}}}}, [[K]],
    """)


def test_an_mma_sync_dot_reads_its_only_tma_operand_in_place():
    from tests.compiler.tma_kernels import mma_sync_reads_tma_b
    sig = {"a_ptr": "*fp16", "k_desc": "tensordesc<fp16[128, 128]>", "out_ptr": "*fp32"}
    ir, _, _ = _passes(mma_sync_reads_tma_b, sig, dict(BN=128, BM=16, D=128), num_warps=8,
                       div={"a_ptr": 16, "k_desc": 16, "out_ptr": 16})
    filecheck(ir["schedule_pipelines"], """
        CHECK: [[K:%\\d+]] = descriptor_load {{.*}}tma=True, in_place=True} : <128x128xfp16>
        CHECK: = dot {{%\\d+}}, [[K]],
    """)

def test_lower_descriptors_tags_what_tma_takes_and_codegen_trusts_the_tag():
    ir, fn, ctx = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=False), div=MM_DESC_DIV)
    filecheck(ir["hoist_descriptors"], """
        CHECK: descriptor_load {{.*}}{block_shape=[128, 64], padding='zero'} :
        CHECK-NOT: tma=True
    """)
    filecheck(ir["lower_descriptors"], """
        CHECK: = descriptor_load {{.*}}{block_shape=[128, 64], padding='zero', tma=True} :
        CHECK: = descriptor_load {{.*}}{block_shape=[64, 128], padding='zero', tma=True} :
        CHECK: descriptor_store {{.*}}{block_shape=[128, 128], tma=True}
    """)
    # no TMA on sm_80: the same ops become masked loads/stores, nothing is tagged
    ir80, _, _ = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=False), target="sm_80",
                         div=MM_DESC_DIV)
    assert "descriptor_load" not in ir80["lower_descriptors"] and "tma=True" not in ir80["lower_descriptors"]
    # codegen lowers descriptor ops only when tagged
    from kernelc.compiler.codegen import lower_to_llvm
    from kernelc.errors import CompilationError
    next(o for o in fn.walk() if o.name == "descriptor_store").attrs.pop("tma")
    with pytest.raises(CompilationError, match="without a TMA lowering"):
        lower_to_llvm(fn, ctx.plan, ctx.axis, 4, parse_target("sm_90a"))


def test_the_verifier_checks_the_schedule():
    # the attributes as the scheduling passes leave them (the expansions after them turn rings into ops)
    _, fn, _ = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=True), div=MM_DESC_DIV,
                       upto="schedule_wgmma")
    loop = next(o for o in fn.walk() if o.name == "scf.for")
    dot = next(o for o in fn.walk() if o.name == "dot")
    ld = next(o for o in fn.walk() if o.name == "descriptor_load")
    for op, key, bad, msg in [
        (loop, "pipeline", {"stages": 3, "lookahead": 3}, "lookahead in 1..stages-1"),
        (loop, "ws", {"producer_warps": 2, "setmaxnreg": False, "release": "lagged", "pingpong": False}, "ws must be"),
        (ld, "pipeline", {"ring": "cp.async", "vec": 8}, "cannot join a 'cp.async' ring"),
        (dot, "wgmma", "sometimes", "wgmma must be one of"),
        (dot, "wgmma", "deferred", None),  # fine: the loop is warp-specialised
        (loop, "ws", {"producer_warps": 1, "setmaxnreg": False, "release": "at_issue", "pingpong": False},
         "must release its stages 'lagged'"),  # its dot is async: a stage released at issue is refilled under it
        (dot, "wgmma_turns", True, "wgmma_turns needs a warp-specialised loop with pingpong"),
        (ld, "tma", "maybe", "tma must be True"),
        (ld, "in_place", True, "in_place is True on a TMA tile outside a ring"),  # it is in the ring
    ]:
        old = op.attrs.get(key)
        op.attrs[key] = bad
        try:
            if msg is None:
                verify(fn)
            else:
                with pytest.raises(VerificationError, match=msg):
                    verify(fn)
        finally:
            if old is None:
                op.attrs.pop(key)
            else:
                op.attrs[key] = old
    verify(fn)
    # a ringed load outside a pipelined loop
    pipe = loop.attrs.pop("pipeline")
    with pytest.raises(VerificationError, match="a ringed load must sit directly in a pipelined loop"):
        verify(fn)
    loop.attrs["pipeline"] = pipe


# -- codegen reads the schedule, it does not decide it ----------------------------------------------

CODEGEN = os.path.join(os.path.dirname(kernelc.__file__), "compiler", "codegen")
SCHEDULE_KNOBS = {"KERNELC_WARP_SPECIALIZE", "KERNELC_WS_SETMAXNREG", "KERNELC_WS_PINGPONG", "KERNELC_WGMMA_ASYNC",
                  "KERNELC_WGMMA_DEFER", "KERNELC_WGMMA_DEFER_RING", "KERNELC_WGMMA_DEFER_ACC",
                  "KERNELC_WGMMA_ASYNC_TAIL", "KERNELC_TMA", "KERNELC_PIPELINE_LOADS", "KERNELC_AUTO_TMA"}


ENGINE_TABLES = ("wgmma", "dot_fma")   # the layout plan's own record of the dot engines it chose


def codegen_scheduling_reads(root=CODEGEN):
    """'file:line: what' for every place in codegen that reads a scheduling knob (any options/env read of
    one), calls a planner (``plan_*``, ``decide_*``), imports the scheduling pass or looks a dot up in the layout
    plan's engine tables (``id(op) in plan.wgmma``) instead of reading the dot's ``engine``."""
    out = []
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(root, name)
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            where = f"{name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and node.value in SCHEDULE_KNOBS:
                out.append(f"{where}: reads {node.value}")
            elif isinstance(node, ast.Call):
                f = node.func
                fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                planner = fname.startswith(("plan_pipeline", "plan_warp", "decide_"))
                if planner or fname in ("default_policy", "applies"):
                    out.append(f"{where}: calls {fname}")
            elif isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops) \
                    and any(isinstance(c, ast.Attribute) and c.attr in ENGINE_TABLES for c in node.comparators):
                # a dot's engine is its `engine` attribute (passes/layout_assign.py), not a table keyed by id(op)
                out.append(f"{where}: tests membership in {[c.attr for c in node.comparators][0]}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                mod = getattr(node, "module", None) or ""
                names = [a.name for a in node.names]
                if mod.endswith("passes.schedule") or "schedule" in names or mod.endswith("options"):
                    out.append(f"{where}: imports {mod or names}")
    return sorted(out, key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def test_codegen_makes_no_scheduling_decision():
    assert codegen_scheduling_reads() == []


def test_the_codegen_scan_catches_a_knob_read_and_a_planner(tmp_path):
    (tmp_path / "bad.py").write_text(
        "from ...options import get\n"
        "def f(lw):\n"
        "    if get('KERNELC_WS_PINGPONG'):\n"
        "        return plan_warp_specialization(lw)\n"
        "def g(lw, op):\n"
        "    return id(op) in lw.plan.wgmma or id(op) not in lw.plan.dot_fma, lw.plan.dot_fma.get(id(op))\n")
    found = codegen_scheduling_reads(str(tmp_path))
    assert found == ["bad.py:1: imports options", "bad.py:3: reads KERNELC_WS_PINGPONG",
                     "bad.py:4: calls plan_warp_specialization", "bad.py:6: tests membership in wgmma",
                     "bad.py:6: tests membership in dot_fma"], found


def test_a_dot_reading_an_operand_staged_before_the_loop_releases_its_stage_lagged(monkeypatch):
    # qk_sum: Q is loaded before the loop, K is ringed; the dot stays in flight (wgmma='async'), so the
    # producer may refill K's stage only once that wgmma has finished (the WS pass said 'at_issue' before)
    from tests.compiler.tma_kernels import qk_sum
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "1")
    ir, _, _ = _passes(qk_sum, {"q_desc": "tensordesc<fp16[128, 64]>", "k_desc": "tensordesc<fp16[64, 64]>",
                                "out_ptr": "*fp32", "N_CTX": "i32"}, dict(BM=128, BN=64, D=64),
                       div={"q_desc": 16, "k_desc": 16})
    filecheck(ir["warp_specialize"], """
        CHECK: = scf.for {{.*}}ws={producer_warps=1, setmaxnreg=False, release='lagged', pingpong=False}}
        CHECK: = dot {{.*}}wgmma='async'}
    """)
