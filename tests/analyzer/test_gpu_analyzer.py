"""On the GPU: a planted kernel profiled (kprof when it works, else launch record + timing) gets its
diagnosis and its suggested config runs faster; a well-tuned kernel gets no finding.  The full
table is bench/bench_analyzer.py."""
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def bench():
    import argparse
    b = pytest.importorskip("bench.bench_analyzer")
    return b, argparse.Namespace(no_profiler=False, no_sampling=True, no_verify=True)


def test_few_programs_diagnosed_and_sped_up_on_gpu(bench):
    b, args = bench
    from tests.analyzer.planted import BY_NAME
    rows = []
    b.run_planted(BY_NAME["few_programs"], args, rows, verify_case=None)
    r = rows[0]
    assert r["found"] == "yes", r
    assert r["correct"] is True
    assert r["speedup"] and r["speedup"] > 2, r


def test_vector_add_has_no_false_alarm_on_gpu(bench):
    b, args = bench
    rows = []
    label, make = [x for x in b.well_tuned_cases() if x[0].startswith("vector add")][0]
    b.run_well_tuned(label, make, args, rows)
    assert rows[0]["found"] == "none", rows[0]
