"""Static diagnostics on CPU-compiled sm_90a kernels: each planted kernel triggers its diagnosis,
with the line, the numbers and a fix; the well-tuned example kernels get no warning or error."""
import pytest

from analyzer import diagnostics as D
from analyzer.facts import facts_from_compiled

from .helpers import case as case_of
from .helpers import compiled, grid_of, line_of, static_kernel_report
from .planted import BY_NAME, PLANTED, well_tuned


def _find(report, ident):
    hits = [d for d in report.diagnostics if d.id == ident and d.is_finding]
    assert hits, f"{ident} not found; got {[(d.id, d.severity, d.message) for d in report.diagnostics]}"
    return hits[0]


@pytest.mark.parametrize("case", PLANTED, ids=lambda c: c.name)
def test_planted_kernel_gets_its_diagnosis(case):
    rep = static_kernel_report(case.name)
    d = _find(rep, case.expected)
    assert d.fix and d.message and d.evidence
    assert d.severity in ("error", "warning")
    assert d.to_json()["id"] == case.expected


def test_fp32_ieee_dot_names_the_dot_the_reason_and_the_fix():
    d = _find(static_kernel_report("fp32_ieee_dot"), "no-tensor-cores")
    k = BY_NAME["fp32_ieee_dot"].kernel
    assert d.line == line_of(k, "kl.dot(")
    assert "input_precision" in d.message and "64x16 @ 16x64" in d.message
    assert d.evidence["tensor_core_instructions"] == 0 and d.evidence["fma_instructions"] > 100
    assert 'input_precision="tf32"' in d.fix
    assert "kl.dot(a, b, input_precision=\"ieee\")" in d.source


def test_tiny_tile_dot_suggests_tensor_core_tiles():
    d = _find(static_kernel_report("tiny_tile_dot"), "no-tensor-cores")
    assert d.severity == "error"
    assert "8x8x8 is below the tensor-core minimum" in d.message
    assert {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4} in d.changes


def test_hmma_on_hopper_suggests_a_warpgroup():
    d = _find(static_kernel_report("hmma_on_hopper"), "hopper-no-wgmma")
    assert d.changes[0] == {"num_warps": 4}
    assert d.evidence["hmma_instructions"] > 0 and d.evidence["hgmma_instructions"] == 0
    assert "num_warps=2" in d.message


def test_hopper_check_is_silent_off_hopper():
    ck = compiled("hmma_on_hopper", target="sm_80")
    facts = facts_from_compiled(ck, grid=grid_of(BY_NAME["hmma_on_hopper"]))
    assert not [d for d in D.run(facts) if d.id == "hopper-no-wgmma"]


def test_few_programs_reports_idle_sms_and_a_smaller_chunk():
    d = _find(static_kernel_report("few_programs"), "low-utilisation")
    assert d.severity == "error"
    assert d.evidence["programs"] == 4 and d.evidence["sms"] == 132
    assert "only 4 programs for 132 SMs" in d.message and "128 SMs" in d.message
    assert d.changes[0] == {"CHUNK": 16384}


def test_register_occupancy_names_the_binding_limit():
    d = _find(static_kernel_report("register_occupancy"), "low-occupancy")
    assert d.evidence["limiter"] == "registers"
    assert d.evidence["n_regs"] > 128 and d.evidence["active_warps"] < 16
    assert "registers per thread" in d.message
    assert all("num_warps" in c for c in d.changes)


def test_strided_load_names_the_load_and_the_stride():
    d = _find(static_kernel_report("strided_load"), "uncoalesced-access")
    k = BY_NAME["strided_load"].kernel
    assert d.line == line_of(k, "kl.load(")
    assert "STRIDE=16" in d.message and "no dimension has stride 1" in d.message
    assert d.evidence["sectors_per_request"] == 32.0 and d.evidence["min_sectors_per_request"] == 4.0
    assert d.evidence["vector_bytes"] == 4 and d.evidence["contiguity"] == [1]


def test_spills_are_counted_with_a_line_and_a_fix():
    d = _find(static_kernel_report("register_spills"), "register-spills")
    assert d.evidence["spill_bytes"] > 0 and d.evidence["stl_instructions"] > 0
    assert d.line is not None and d.file.endswith("planted.py")
    assert {"num_warps": 8} in d.changes


def test_unpipelined_dot_loop_suggests_stages():
    d = _find(static_kernel_report("unpipelined_dot"), "latency-bound-loop")
    k = BY_NAME["unpipelined_dot"].kernel
    assert d.line == line_of(k, "for k in range")
    assert d.evidence["num_stages"] == 1 and d.evidence["pipelined_loads"] == 0
    assert d.changes[0] == {"num_stages": 3}


def test_barrier_reduce_suggests_fewer_warps():
    d = _find(static_kernel_report("barrier_reduce"), "barrier-stalls")
    assert d.evidence["num_warps"] == 16
    assert {"num_warps": 2} in d.changes


@pytest.mark.parametrize("case", well_tuned(), ids=lambda c: c.name)
def test_well_tuned_kernels_have_no_findings(case):
    rep = static_kernel_report(case.name)
    assert not rep.findings, [(d.id, d.message) for d in rep.findings]
    assert not rep.suggestions


def test_pipelined_matmul_is_not_latency_bound():
    ck = compiled("unpipelined_dot", num_stages=3)
    facts = facts_from_compiled(ck, grid=grid_of(BY_NAME["unpipelined_dot"]))
    assert not [d for d in D.run(facts) if d.id == "latency-bound-loop"]


def test_a_check_that_raises_becomes_an_info_diagnostic(monkeypatch):
    ck = compiled("few_programs")
    facts = facts_from_compiled(ck, grid=(4, 1, 1))
    reg = D.registry()

    def boom(f):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(D, "REGISTRY", [(1, "broken", boom)] + list(reg))
    out = D.run(facts)
    assert any(d.id == "analyzer-error" and "kaboom" in d.message for d in out)
    assert any(d.id == "low-utilisation" for d in out)


def test_pointer_operands_on_hopper_suggest_tensor_descriptors():
    """The examples' pointer matmul is correct and tuned (no finding), but on sm_90a the analyzer says its
    operand tiles could come by TMA, naming the load lines and the descriptor to write."""
    rep = static_kernel_report("matmul[0]")
    hits = [d for d in rep.diagnostics if d.id == "hopper-no-tma"]
    assert len(hits) == 1 and hits[0].severity == "info"
    d = hits[0]
    from examples.kernels import matmul as MM
    assert d.line == line_of(MM.matmul_kernel, "for k in range(")
    assert d.evidence["load_kinds"] == ["load (cp.async pipelined)"] and len(d.evidence["load_lines"]) == 2
    assert "kl.make_tensor_descriptor(a_ptr" in d.fix


def test_descriptor_operands_and_other_targets_get_no_tma_advice():
    import kernelc
    from analyzer.diagnostics import tma
    from examples.kernels.matmul_persistent import matmul_descriptor_persistent_kernel
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    cx = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMS=132)
    ck = kernelc.compile(matmul_descriptor_persistent_kernel, sig, cx, target="sm_90a", num_warps=8, num_stages=3,
                         divisibility={"M": 16, "N": 16, "K": 16})
    assert ck.global_scratch_bytes  # TMA through maps built on the device
    assert not tma.check(facts_from_compiled(ck, grid=(132, 1, 1)))
    ck = compiled("matmul[0]", target="sm_80")
    assert not tma.check(facts_from_compiled(ck, grid=grid_of(case_of("matmul[0]"))))
