"""Issue #28: property-based fuzzers for the profile reader, kprof-viewer (its main flags, with and
without colour) and kprof-analyze, on random trees, names (any Unicode, controls, bidi, lone
surrogates), numbers (NaN, Inf, huge, negative, not numbers at all) and device info.

The properties: nothing crashes (a bad file gets a clean one-line error), and nothing from the
file reaches the terminal raw.  Fixed budget: derandomized, bounded examples, no deadline.
"""
import contextlib
import io
import json
import math
import re

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from profiler.format import ProfileFormatError, read_profile, write_profile
from profiler.viewer.cli import main as viewer_main

from test_hostile_viewer import HOSTILE, assert_clean

FUZZ = settings(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])

METRIC_NAMES = ["time (ns)", "count", "flops", "flops16", "flops32", "bytes", "device_id", "device_type",
                "num_samples", "num_stalled_samples", "stalled_long_scoreboard", "stalled_selected",
                "start_time (ns)", "util"]

names = st.one_of(
    st.text(max_size=12),
    st.sampled_from(sorted(HOSTILE.values())),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Cs", "Zl", "Zp"]), max_size=6),
    st.sampled_from(["ROOT", "__proton_launch_metadata", "matmul.py:27", "/x/t.py:3@f", "", " ",
                     "k [grid 2x1x1, warps 4, stages 2, smem 1KiB]", "file.py:-1", "a.py:99999999999999999999"]),
)
numbers = st.one_of(
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e308, -1e308, 5e-324, 10 ** 40, float("nan"), float("inf"), float("-inf")]),
)
junk = st.one_of(st.none(), st.booleans(), names, st.lists(st.integers(), max_size=2),
                 st.dictionaries(names, st.integers(), max_size=2))
values = st.one_of(numbers, numbers, numbers, junk)
plausible = st.one_of(st.integers(min_value=0, max_value=10 ** 12), st.integers(min_value=0, max_value=10 ** 12),
                      numbers, junk)
# Mostly the metrics kprof and Proton write (so the viewer and analyzer get past "no metrics"),
# each with any value at times, plus a few arbitrary ones.
metrics = st.tuples(
    st.fixed_dictionaries({}, optional={
        **{m: plausible for m in ("time (ns)", "count", "flops16", "flops32", "bytes", "num_samples",
                                  "num_stalled_samples", "stalled_long_scoreboard", "stalled_selected")},
        "device_id": st.sampled_from(["0", "1"]) | values, "device_type": st.just("CUDA") | values}),
    st.dictionaries(st.one_of(st.sampled_from(METRIC_NAMES), names), values, max_size=2),
).map(lambda t: {**t[1], **t[0]})

instruction = st.fixed_dictionaries({}, optional={
    "pc": values, "opcode": names, "line": values, "samples": values,
    "stalls": st.one_of(st.dictionaries(names, values, max_size=3), junk)})
extras = st.one_of(
    st.none(),
    st.fixed_dictionaries({"kind": st.sampled_from(["kernel", "kernel", "other"]) | names}, optional={
        "kernel": names | names | junk,
        "cache_key": st.sampled_from(["77e0aa31c9f2", "0" * 64]) | names | junk,
        "grid": st.lists(values, max_size=3) | junk,
        "num_warps": values, "num_stages": values, "constexprs": st.dictionaries(names, values, max_size=2) | junk,
        "source": st.one_of(junk, st.fixed_dictionaries({}, optional={
            "file": names | junk, "first_line": values, "lines": st.lists(names, max_size=4) | junk})),
        "instructions": st.one_of(junk, st.lists(instruction, max_size=3)),
        "non_finite_metrics": st.dictionaries(names, names, max_size=2),
    }),
)


@st.composite
def node(draw, children=st.just([])):
    out = {"frame": {"name": draw(names), "type": draw(st.sampled_from(["function", "line", "kernel"]) | names)},
           "metrics": draw(metrics), "children": draw(children)}
    extra = draw(extras)
    if extra is not None:
        out["kprof"] = extra
    return out


trees = st.recursive(node(), lambda kids: node(st.lists(kids, max_size=4)), max_leaves=14)
device_entry = st.one_of(
    st.fixed_dictionaries({}, optional={"arch": names | numbers | st.sampled_from(["90", "80", "100", "89", "sm_90a"]),
                                         "num_sms": values, "clock_rate": values, "memory_clock_rate": values,
                                         "bus_width": values}),
    junk)
device_info = st.one_of(
    st.just({"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                            "bus_width": 5120}}}),
    st.dictionaries(st.sampled_from(["CUDA", "HIP"]) | names,
                    st.dictionaries(st.sampled_from(["0", "1"]) | names, device_entry, max_size=2) | junk,
                    max_size=2),
)
# Mostly well-formed files; sometimes a broken top level or node.
profiles = st.tuples(trees, device_info).map(lambda t: [dict(t[0], frame={"name": "ROOT", "type": "function"}), t[1]])
broken = st.one_of(
    st.tuples(trees, device_info).map(lambda t: [t[0], t[1]]),
    junk,
    st.lists(junk, max_size=3),
    trees.map(lambda t: [dict(t, children=[1, "x", None]), {}]),
)


def mostly_profiles(percent):
    """Well-formed profile files ``percent`` % of the time, broken files otherwise (one_of would
    not weight them: it merges equal branches)."""
    return st.integers(0, 99).flatmap(lambda i: profiles if i < percent else broken)


documents = mostly_profiles(60)


def _write(tmp_path, doc, name="f.hatchet"):
    path = tmp_path / name
    path.write_text(json.dumps(doc, allow_nan=True))   # NaN/Infinity tokens, as Python writes them
    return str(path)


def _finite_or_other(v):
    return not (isinstance(v, float) and not math.isfinite(v))


def _one_line_error(err, prog):
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), err


@settings(FUZZ, max_examples=100)
@given(doc=documents)
def test_fuzz_reader(tmp_path, doc):
    path = _write(tmp_path, doc)
    try:
        root, dev = read_profile(path)
    except ProfileFormatError as e:
        assert "\n" not in str(e)
        event("reader: one-line error")
        return
    event("reader: read")
    assert isinstance(dev, dict) and root is not None
    # Whatever was read can be written back (NaN/Inf, huge numbers, any names) and reads the same.
    before = [(n.name, n.frame_type, d, {k: v for k, v in n.metrics.items() if _finite_or_other(v)})
              for n, d in root.walk()]
    moved = write_profile(tmp_path / "again.hatchet", root, dev)
    again, _ = read_profile(tmp_path / "again.hatchet")
    after = [(n.name, n.frame_type, d, dict(n.metrics)) for n, d in again.walk()]
    assert [a[:3] for a in after] == [b[:3] for b in before]
    for (_, _, _, m_before), (_, _, _, m_after) in zip(before[1:], after[1:]):
        assert m_after == m_before
    assert all(v in ("nan", "inf", "-inf") for _, _, v in moved)


FLAGS = st.lists(st.one_of(
    st.just(["--print-sorted"]),
    st.just(["-l"]),
    st.tuples(st.just("-m"), st.sampled_from(["time/ms", "time/%", "flops", "tflop/s", "util", "avg_time/us",
                                              "bytes,count", "gbyte/s", "flop16/s", "num_samples"])).map(list),
    st.tuples(st.just("-d"), st.sampled_from(["0", "1", "3"])).map(list),
    st.just(["-t", "0.5"]),
    st.just(["-i", "."]),
    st.just(["-e", "[a-m]"]),
    st.tuples(st.just("-f"), st.sampled_from(["full", "function_line", "file_function"])).map(list),
    st.tuples(st.just("--source"), st.sampled_from(["k", "matmul", ".", "ROOT"])).map(list),
    st.just(["--diff-profile", "{other}"]),
    st.just(["-w", "40"]),
), max_size=3)


@settings(FUZZ, max_examples=90)
@given(doc=mostly_profiles(85), other=profiles, flags=FLAGS, colour=st.booleans())
def test_fuzz_viewer(tmp_path, monkeypatch, doc, other, flags, colour):
    path = _write(tmp_path, doc)
    other_path = _write(tmp_path, other, "other.hatchet")
    argv = [a.replace("{other}", other_path) for f in flags for a in f] + [path]
    monkeypatch.delenv("NO_COLOR", raising=False)
    if colour:
        monkeypatch.setenv("FORCE_COLOR", "1")
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
        argv.append("--no-color")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()) as usage:   # argparse's usage errors (rc 2)
        rc = viewer_main(argv, stdout=out, stderr=err)
    assert rc in (0, 1, 2), rc
    event(f"viewer exit status {rc}" + (re.sub(r"\S*hatchet", "F", err.getvalue())[:70] if rc == 1 else ""))
    if rc == 1:
        _one_line_error(err.getvalue(), "kprof-viewer")
        assert err.getvalue().startswith("kprof-viewer: error: ")
    assert_clean(out.getvalue(), colour)
    assert_clean(err.getvalue())
    assert_clean(usage.getvalue())


@settings(FUZZ, max_examples=60)
@given(doc=mostly_profiles(85), colour=st.booleans(), as_json=st.booleans())
def test_fuzz_analyzer(tmp_path, monkeypatch, doc, colour, as_json):
    import analyzer
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path / "empty-cache"))
    path = _write(tmp_path, doc)
    try:
        rep = analyzer.analyze(path, validate=False)
    except analyzer.AnalyzerError as e:
        assert "\n" not in str(e)
        event("analyzer: one-line error")
        return
    event(f"analyzer: {len(rep.kernels)} kernelc kernel(s), {len(rep.other_kernels)} other")
    if as_json:
        json.loads(rep.json_text())   # valid JSON whatever the names (controls are JSON-escaped)
        return
    text = rep.render(color=colour, width=100)
    assert_clean(text, colour)
