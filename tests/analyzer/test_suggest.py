"""Suggested configs: derived from the diagnostics, compiled on the CPU and re-checked; the best one
removes the planted problem."""
import pytest

from analyzer.suggest import Suggestion, autotune_block, autotune_key, candidates

from .helpers import static_kernel_report
from .planted import PLANTED

CONFIG_FIXABLE = [c for c in PLANTED if c.config_fix]


@pytest.mark.parametrize("case", CONFIG_FIXABLE, ids=lambda c: c.name)
def test_best_checked_suggestion_fixes_the_planted_problem(case):
    rep = static_kernel_report(case.name, validate=True)
    assert rep.suggestions, f"no suggestion for {case.name}"
    best = rep.suggestions[0]
    assert best.checked and best.checked["ok"], best.checked
    assert case.expected in best.fixes
    assert case.expected not in best.checked["remaining"], best.checked
    assert best.checked["n_spills"] == 0
    # the autotune block lists the suggestions and then the profiled config
    assert rep.autotune.count("kernelc.Config(") == len(rep.suggestions) + 1
    assert rep.autotune.rstrip().endswith(")") and "# the profiled config" in rep.autotune


def test_specific_best_configs():
    assert static_kernel_report("unpipelined_dot", validate=True).suggestions[0].changes == {"num_stages": 3}
    assert static_kernel_report("hmma_on_hopper", validate=True).suggestions[0].changes == {"num_warps": 4}
    best = static_kernel_report("tiny_tile_dot", validate=True).suggestions[0]
    assert best.checked["dot_engines"] == ["wgmma"]
    assert static_kernel_report("few_programs", validate=True).suggestions[0].changes == {"CHUNK": 16384}


def test_code_fixes_do_not_invent_configs():
    rep = static_kernel_report("strided_load", validate=True)
    assert rep.suggestions == [] and rep.autotune == ""


def test_candidates_merge_findings_and_dedupe():
    rep = static_kernel_report("register_spills")
    cands = candidates(rep.facts, rep.diagnostics)
    configs = [c.config for c in cands]
    assert len(configs) == len({tuple(sorted(c.items())) for c in configs})
    merged = cands[0]
    assert set(merged.fixes) == {"register-spills", "low-occupancy"}


def test_kernelc_config_text_and_key():
    s = Suggestion({"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}, {"BLOCK_M": 64})
    assert s.kernelc_config() == 'kernelc.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=2)'
    rep = static_kernel_report("unpipelined_dot")
    assert autotune_key(rep.facts) == ["M", "N", "K"]
    assert autotune_block(rep.facts, []) == ""
