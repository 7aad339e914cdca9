"""The golden cases of kprof-viewer: (name, argv), run in tests/viewer/data.

Shared by the tests (which compare) and make_fixtures.py --goldens (which writes).  Each expected
file holds stdout, then "--- stderr ---" and stderr if any, then "--- exit N ---" if N != 0.
proton_small.hatchet is, until the lead replaces it with a file written by Proton on a GPU
(bench/make_proton_fixture.py), a hand-made stand-in; after replacing it, regenerate the goldens
(python tests/viewer/make_fixtures.py --goldens) and read the proton_* ones.
"""

from __future__ import annotations

import io
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
EXPECTED = os.path.join(DATA, "expected")

K, O, P, PY = "kprof_small.hatchet", "kprof_other.hatchet", "proton_small.hatchet", "kprof_python.hatchet"

CASES: list[tuple[str, list[str]]] = [
    # -l
    ("list_kprof", ["-l", K]),
    ("list_proton", ["-l", P]),
    # default and -m
    ("default_kprof", [K]),
    ("metrics_many", ["-m", "time/ms,count,tflop16/s,gbyte/s,util,time/%", K]),
    ("metrics_forgiving", ["-m", "Time (MS), TFLOPS, gb/s, avg_time/us, flops, bytes/%", K]),
    ("metrics_repeated_flag", ["-m", "time/us", "-m", "num_samples,num_samples/%", K]),
    # -d -i -e -t
    ("depth_2", ["-d", "2", K]),
    ("depth_0", ["-d", "0", K]),
    ("include_attn", ["-i", "attn", "-m", "time/ms,time/%", K]),
    ("include_kernel", ["-i", "^matmul_kernel", "-m", "time/ms,tflop16/s", K]),
    ("exclude_optimizer_mlp", ["-e", "optimizer|mlp", "-m", "time/ms,time/%", K]),
    ("threshold_1ms", ["-m", "time/ms,count", "-t", "1.0", K]),
    # -f on a python-context profile
    ("format_full", ["-f", "full", "-m", "time/ms", PY]),
    ("format_file_function_line", ["-f", "file_function_line", "-m", "time/ms", PY]),
    ("format_file_colon_function_colon_line", ["-f", "file:function:line", "-m", "time/ms", PY]),
    ("format_function_line", ["-f", "function_line", "-m", "time/ms", PY]),
    ("format_file_function", ["-f", "file_function", "-m", "time/ms", PY]),
    # --print-sorted
    ("sorted", ["--print-sorted", "-m", "time/us,time/%,count", K]),
    ("sorted_threshold", ["--print-sorted", "-m", "tflop16/s,time/ms", "-t", "100", K]),
    # narrow output: long names shortened in the middle
    ("width_80", ["-w", "80", "-m", "time/ms,tflop16/s,util", K]),
    # --diff-profile
    ("diff_default", ["--diff-profile", O, K]),
    ("diff_metric_sets", ["--diff-profile", O, "-m", "time/ms,tflop16/s,gbyte/s,count", K]),
    ("diff_sorted", ["--diff-profile", O, "--print-sorted", "-m", "time/us", K]),
    ("diff_threshold", ["--diff-profile", O, "-m", "time/ms", "-t", "0.2", K]),
    # --source
    ("source_matmul", ["--source", "matmul_kernel", K]),
    ("source_no_samples", ["--source", "softmax", K]),
    # Proton profile
    ("proton_default", [P]),
    ("proton_metrics", ["-m", "time/us,count,tflop/s,gbyte/s,util", P]),
    ("proton_sorted", ["--print-sorted", "-m", "time/us,time/%", P]),
    # errors: each one line on stderr, exit 1
    ("error_missing_file", ["no_such_profile.hatchet"]),
    ("error_truncated", ["bad_truncated.hatchet"]),
    ("error_other_format", ["bad_trace.json"]),
    ("error_empty", ["bad_empty.hatchet"]),
    ("error_misspelt_metric", ["-m", "time/ms,tflp/s", K]),
    ("error_misspelt_raw", ["-m", "bytez", K]),
    ("error_missing_source_metric", ["-m", "tflop/s", O]),
    ("error_unknown_kernel", ["--source", "matmull_kernel", K]),
    ("error_bad_regex", ["-i", "attn(", K]),
    ("error_bad_format", ["-f", "function_file", K]),
]


def run(argv: list[str]) -> tuple[int, str, str]:
    """Run kprof-viewer in-process in DATA, without colour; returns (status, stdout, stderr)."""
    from profiler.viewer.cli import main

    saved = {k: os.environ.pop(k, None) for k in ("FORCE_COLOR", "NO_COLOR")}
    cwd = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(DATA)
        status = main(argv, stdout=out, stderr=err)
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
    return status, out.getvalue(), err.getvalue()


def render_case(argv: list[str]) -> str:
    status, out, err = run(argv)
    text = out
    if err:
        text += "--- stderr ---\n" + err
    if status:
        text += f"--- exit {status} ---\n"
    return text


def expected_path(name: str) -> str:
    return os.path.join(EXPECTED, name + ".txt")


def write_goldens() -> int:
    os.makedirs(EXPECTED, exist_ok=True)
    for name, argv in CASES:
        with open(expected_path(name), "w", encoding="utf-8") as f:
            f.write(render_case(argv))
    return len(CASES)
