"""kprof-viewer output for every flag, compared with expected text in data/expected/.

The expected files were generated with `python tests/viewer/make_fixtures.py --goldens` and
checked by eye; the numbers in them are also checked independently in test_viewer_metrics.py.

NOTE: data/proton_small.hatchet is a hand-made STAND-IN that follows the layout Proton (Triton 3.6)
writes, taken from Proton's source (TreeData.cpp, Metric.h, viewer.py).  The lead replaces it with
the file bench/make_proton_fixture.py writes with Proton on a GPU; then the proton_* goldens are
regenerated with the command above (and read).
"""

import os

import pytest

import viewer_cases


@pytest.mark.parametrize("name,argv", viewer_cases.CASES, ids=[c[0] for c in viewer_cases.CASES])
def test_output_matches_expected(name, argv, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    path = viewer_cases.expected_path(name)
    assert os.path.exists(path), f"no expected output for {name}; run make_fixtures.py --goldens"
    with open(path, encoding="utf-8") as f:
        expected = f.read()
    assert viewer_cases.render_case(argv) == expected


def test_every_expected_file_has_a_case():
    names = {n for n, _ in viewer_cases.CASES}
    files = {f[:-4] for f in os.listdir(viewer_cases.EXPECTED) if f.endswith(".txt")}
    assert files == names


@pytest.mark.parametrize("name", [n for n, _ in viewer_cases.CASES if n.startswith("error_")])
def test_errors_are_one_line_and_exit_1(name):
    argv = dict(viewer_cases.CASES)[name]
    status, out, err = viewer_cases.run(argv)
    assert status == 1
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kprof-viewer: error: ")
