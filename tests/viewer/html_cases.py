"""Profiles for the HTML report tests, built with profiler.format the way kprof writes them."""

from __future__ import annotations

import json
import os
import random

import pytest

from profiler.format import ProfileNode, device_entry, write_profile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")
PCS_FIXTURE = os.path.join(REPO, "tests", "pcsampling", "data", "sm90_matmul.json")
H100 = {"CUDA": {"0": device_entry("90", 132, 1980000, 2619000, 5120)}}

# Names a profile may carry (scope names and kernel names come from user code): markup, quotes,
# a script end tag, control characters, an HTML comment opener, line separators.
HOSTILE = [
    "</script><script>window.__pwned=1;alert(1)</script>",
    "<img src=x onerror=\"window.__pwned=2\">",
    "quote's \"double\" `back` &amp; <!-- comment",
    "ctrl\x00\x01\x1b[31m\x7f tab\there",
    "sep\u2028line\u2029para \ud7ff \U0001f525",
]


def pcs_profile(path: str) -> str:
    """The real PC samples recorded on an H200 (kernelc matmul) as a kprof profile."""
    from profiler.pcsampling import PCSampler, fixture
    rec = fixture.load(PCS_FIXTURE)
    root = PCSampler.from_recorded(rec, hook_kernelc=False).profile()
    for k in root.children:  # the recording has samples only: give the kernels a time as kprof would
        k.add_metrics({"time (ns)": 1_500_000, "count": 2, "device_id": "0", "device_type": "CUDA"})
    write_profile(path, root, H100)
    return path


def hostile_profile(path: str) -> str:
    """Every :data:`HOSTILE` name as a scope, a kernel (with a kernel page: source text and a
    sampled line) and a metric-less leaf."""
    root = ProfileNode("ROOT")
    for i, name in enumerate(HOSTILE):
        scope = root.child(name)
        k = scope.child(f"{name} kernel{i}")
        k.add_metrics({"time (ns)": 1000 * (i + 1), "count": 1, "device_id": "0", "device_type": "CUDA"})
        k.extra = {"kind": "kernel", "kernel": f"{name} kernel{i}",
                   "source": {"file": f"/tmp/{name}.py", "first_line": 1, "lines": [name, f"x = '{name}'"]},
                   "instructions": [{"pc": 16, "opcode": name, "file": f"/tmp/{name}.py", "line": 2, "samples": 3,
                                     "stalls": {"long_scoreboard": 2, "selected": 1}}]}
        line = k.child(f"{name}.py:2", "line")
        line.add_metrics({"num_samples": 3, "num_stalled_samples": 2, "stalled_long_scoreboard": 2,
                          "stalled_selected": 1})
    write_profile(path, root, H100)
    return path


def big_profile(path: str, nodes: int = 100_000, seed: int = 7) -> str:
    """A profile of about ``nodes`` frames: scopes ten wide, kernels at the leaves with time,
    count, flops and bytes (as a long training run's profile with many call sites has)."""
    rng = random.Random(seed)
    root = ProfileNode("ROOT")
    made = 1
    frontier = [root]
    depth = 0
    while made < nodes:
        nxt = []
        for parent in frontier:
            for j in range(10):
                if made >= nodes:
                    break
                c = ProfileNode(f"scope_{depth}_{made}" if depth < 4 else f"kernel_{made % 977}_d{depth}")
                parent.children.append(c)
                made += 1
                nxt.append(c)
        frontier = nxt
        depth += 1
    leaves = [n for n, _ in root.walk() if not n.children]
    for leaf in leaves:
        leaf.metrics.update({"time (ns)": rng.randint(1_000, 2_000_000), "count": rng.randint(1, 50),
                             "flops16": rng.randint(0, 10**12), "bytes": rng.randint(0, 10**9),
                             "device_id": "0", "device_type": "CUDA"})
    root.metrics.update({"time (ns)": 0, "count": 0, "flops16": 0, "bytes": 0})  # as write_profile does
    # The same layout as profiler.format.write_profile, without its indentation: json's pure-Python
    # indenting encoder takes ~7 s of CPU for 100k frames, the C one well under one.
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps([root.to_json(), H100], separators=(",", ":")))
    return path


@pytest.fixture(scope="session")
def analyzed_report(tmp_path_factory):
    """``kprof-analyze --html`` run once on a profile of two planted kernels (compiled through a
    kernel cache of its own): a strided load with lg_throttle samples on its line, and a register-
    heavy add with low occupancy.  Returns a dict: profile, html, load_line, status, stdout, stderr."""
    import contextlib
    import io

    from analyzer import cli
    from tests.analyzer.helpers import ProfileNode, cache_case, case, kernel_node, line_of, write

    tmp = tmp_path_factory.mktemp("analyzed")
    saved = os.environ.get("KERNELC_CACHE_DIR")
    os.environ["KERNELC_CACHE_DIR"] = str(tmp / "kcache")  # session scope: before the per-test cache fixture
    try:
        c = case("strided_load")
        load = line_of(c.kernel, "kl.load(")
        root = ProfileNode("ROOT")
        step = root.child("step")
        kernel_node(step, c, cache_case(c), time_ns=4_000_000, count=3,
                    samples={load: {"lg_throttle": 50, "long_scoreboard": 30, "selected": 20}})
        c2 = case("register_occupancy")
        kernel_node(step, c2, cache_case(c2), time_ns=1_000_000, count=3)
        prof = write(tmp / "run.hatchet", root)
        html = str(tmp / "a.html")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main([prof, "--html", html, "--no-check"])
    finally:
        if saved is None:
            os.environ.pop("KERNELC_CACHE_DIR", None)
        else:
            os.environ["KERNELC_CACHE_DIR"] = saved
    return {"profile": prof, "html": html, "load_line": load, "status": status, "stdout": out.getvalue(),
            "stderr": err.getvalue()}
