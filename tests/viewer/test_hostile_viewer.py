"""Issue #28, viewer and analyzer output: text from a profile never reaches the terminal raw, and
the readers bound what they load.  (The property-based fuzzers are in test_fuzz_profiles.py.)"""
import io
import json
import os
import re

import pytest

from profiler.format import ProfileFormatError, ProfileNode, read_profile, write_profile
from profiler.viewer.cli import main as viewer_main

from make_fixtures import H100, MATMUL_SOURCE, build_small

# Each would clear the screen, retitle the window, hide or reorder text, or cut a line if printed raw.
HOSTILE = {
    "clear": "\x1b[2J\x1b[H",
    "title": "\x1b]0;pwned\x07",
    "link": "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
    "cr": "shown\rHIDDEN",
    "nul": "nul\x00byte",
    "c1csi": "c1\x9b2Jcsi",
    "bidi": "abc\u202eevil\u202c",
    "isolate": "\u2066iso\u2069",
    "newline": "one\ntwo",
    "tab": "a\tb",
    "del": "d\x7fel",
    "bell": "bell\x07",
    "backspace": "ab\x08\x08XY",
    "surrogate": "lone\ud800half",
    "nel": "next\x85line",
    "bom": "\ufeffbom",
}
SGR = re.compile(r"\x1b\[[0-9;]*m")   # colour codes rich itself writes
# What a terminal interprets (written out here independently of profiler.textsafe).
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff\ud800-\udfff]")


def has_unsafe(text):
    return UNSAFE.search(text) is not None


def term_escape(text):
    from profiler.textsafe import term_escape as esc
    return esc(text)


def assert_clean(text, coloured=False):
    """No character a terminal would interpret, except the newlines between lines (and, with
    colour, rich's own SGR colour codes)."""
    if coloured:
        text = SGR.sub("", text)
    bad = [ch for ch in text.replace("\n", "") if has_unsafe(ch)]
    assert not bad, f"raw control characters {bad!r} in output:\n{text!r}"


@pytest.mark.parametrize("key", sorted(HOSTILE))
def test_term_escape_shows_every_control_visibly(key):
    s = HOSTILE[key]
    e = term_escape(s)
    assert not has_unsafe(e)
    assert term_escape(e) == e                      # idempotent: the sink may escape again
    visible = re.sub(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[tnr])", "", e)
    assert visible == "".join(ch for ch in s if not has_unsafe(ch))  # only the controls changed


def test_term_escape_keeps_ordinary_unicode():
    for s in ("matmul_kernel [grid 1024x1x1]", "données → 時間 ✓ 🙂", "back\\slash", ""):
        assert term_escape(s) == s


def hostile_profile(tmp_path, name="hostile.hatchet"):
    root = build_small()
    payload = "".join(HOSTILE.values())
    for node, _ in list(root.walk()):
        if node is root:
            continue
        node.name = f"{node.name}{payload}"
        if node.extra and node.extra.get("kind") == "kernel":
            node.extra["kernel"] += payload
            src = node.extra.get("source")
            if src:
                src["file"] = src["file"] + payload
                src["lines"] = [ln + payload for ln in src["lines"]]
    root.children[0].add_metrics({"evil" + payload: 5})
    dev = {"CUDA": {"0": dict(H100["CUDA"]["0"], arch="90" + payload)}}
    path = tmp_path / name
    write_profile(path, root, dev)
    return str(path)


def run_viewer(argv, colour, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    if colour:
        monkeypatch.setenv("FORCE_COLOR", "1")
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
        argv = argv + ["--no-color"]
    out, err = io.StringIO(), io.StringIO()
    rc = viewer_main(argv, stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


VIEWS = {
    "tree": [],
    "sorted": ["--print-sorted", "-m", "time/ms,flops,util"],
    "source": ["--source", "matmul_kernel"],
    "list": ["-l"],
    "diff": ["--diff-profile", "{other}"],
    "diff-sorted": ["--diff-profile", "{other}", "--print-sorted"],
    "filtered": ["-i", "attn", "-e", "softmax", "-f", "function_line"],
    "bad-metric": ["-m", "evil\x1b[2J"],            # an error message quoting names
}


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_viewer_never_prints_profile_text_raw(tmp_path, monkeypatch, view, colour):
    path = hostile_profile(tmp_path)
    other = hostile_profile(tmp_path, "other.hatchet")
    argv = [a.replace("{other}", other) for a in VIEWS[view]] + [path]
    rc, out, err = run_viewer(argv, colour, monkeypatch)
    assert rc == (1 if view == "bad-metric" else 0), err
    assert_clean(out, colour)
    assert_clean(err)
    shown = out + err
    if view == "bad-metric":
        assert "evil\\x1b[2J" in err and len(err.splitlines()) == 1
    elif view == "list":
        assert "\\x1b]0;pwned\\x07" in shown
    else:
        # Long names are shortened in the middle: their escaped start and end are both shown.
        assert "\\x1b[2J\\x1b[H" in shown and "\\ufeffbom" in shown
    if view == "source":
        assert term_escape(MATMUL_SOURCE[17] + "".join(HOSTILE.values()))[:40] in out


def test_viewer_output_to_an_ascii_stream(tmp_path, monkeypatch):
    # Text the stream's encoding cannot carry ("…", "└─", any name) becomes escapes, not a crash.
    path = hostile_profile(tmp_path)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii")
    assert viewer_main([path, "--no-color"], stdout=out, stderr=io.StringIO()) == 0
    out.flush()
    text = raw.getvalue().decode("ascii")
    assert "\\u2514" in text and "\\x1b[2J" in text   # the tree glyph and an escaped ESC
    assert_clean(text)


def test_viewer_errors_quote_file_names_escaped(tmp_path, monkeypatch):
    bad = tmp_path / "evil\x1b]0;t\x07.hatchet"
    bad.write_text("[1, 2, 3]")
    rc, out, err = run_viewer([str(bad)], False, monkeypatch)
    assert rc == 1 and out == ""
    assert err.startswith("kprof-viewer: error: ") and "evil\\x1b]0;t\\x07.hatchet" in err
    assert_clean(err)


@pytest.mark.parametrize("colour", [False, True])
def test_analyzer_never_prints_profile_text_raw(tmp_path, monkeypatch, capsys, colour):
    from analyzer import cli
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path / "cache"))
    path = hostile_profile(tmp_path)
    if colour:
        import analyzer
        text = analyzer.analyze(path, validate=False).render(color=True, width=120)
    else:
        assert cli.main([path, "--no-color", "--no-check"]) == 0
        text = capsys.readouterr().out
    assert_clean(text, colour)
    assert "\\x1b[2J\\x1b[H" in text
    # An error naming the profile is escaped too.
    bad = tmp_path / "x\x1b[2J.hatchet"
    bad.write_text("{}")
    assert cli.main([str(bad), "--no-color"]) == 2
    err = capsys.readouterr().err
    assert "x\\x1b[2J.hatchet" in err
    assert_clean(err)


# -- bounded readers ----------------------------------------------------------------------------------
def test_dev_zero_is_refused_at_once():
    with pytest.raises(ProfileFormatError, match="binary data, not JSON"):
        read_profile("/dev/zero")


def test_size_limit_with_option_and_environment(tmp_path, monkeypatch):
    from profiler import options
    path = tmp_path / "p.hatchet"
    write_profile(path, build_small(), H100)
    size = os.path.getsize(path)
    with pytest.raises(ProfileFormatError, match=f"file is {size} bytes, too large.*--max-size"):
        read_profile(path, max_bytes=size - 1)
    assert read_profile(path, max_bytes=size)[0].name == "ROOT"
    monkeypatch.setenv("KPROF_MAX_PROFILE_SIZE", "1K")
    err = io.StringIO()
    assert viewer_main([str(path), "--no-color"], stdout=io.StringIO(), stderr=err) == 1
    assert "too large to load" in err.getvalue() and len(err.getvalue().splitlines()) == 1
    assert viewer_main([str(path), "--no-color", "--max-size", "10M"], stdout=io.StringIO(), stderr=err) == 0
    assert options.get("max_profile_bytes") == 1024   # the flag lasts for that run only
    monkeypatch.setenv("KPROF_MAX_PROFILE_SIZE", "lots")
    with pytest.raises(ProfileFormatError, match="KPROF_MAX_PROFILE_SIZE: bad size 'lots'"):
        read_profile(path)


def test_a_pipe_larger_than_the_limit_is_refused(tmp_path):
    # No size to check up front: the reader stops after limit + 1 bytes.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    import threading

    def feed():
        try:
            with open(fifo, "w") as f:
                f.write("[" + " " * 5000 + "]")
        except BrokenPipeError:
            pass

    t = threading.Thread(target=feed)
    t.start()
    with pytest.raises(ProfileFormatError, match="more than 1000 bytes"):
        read_profile(fifo, max_bytes=1000)
    t.join(10)


def test_deeply_nested_json_reads_or_fails_in_one_line(tmp_path):
    # A hand-made file 20000 frames deep: too deep for json's recursion, read iteratively.
    depth = 20000
    text = '{"frame": {"name": "f"}, "metrics": {"t": 1}, "children": [' * depth
    text = '[{"frame": {"name": "ROOT"}, "children": [' + text + '{"frame": {"name": "leaf"}}' + "]}" * depth + "]}, {}]"
    path = tmp_path / "deep.hatchet"
    path.write_text(text)
    root, _ = read_profile(path, max_depth=30000)
    assert max(d for _, d in root.walk()) == depth + 1
    with pytest.raises(ProfileFormatError, match="nested deeper than 10000 frames.*KPROF_MAX_PROFILE_DEPTH") as e:
        read_profile(path)   # the default limit
    assert "\n" not in str(e.value)
    # Arrays nested with no frames at all (a hostile file): the same one-line error.
    path.write_text("[" * 30000 + "]" * 30000)
    with pytest.raises(ProfileFormatError, match="nested deeper"):
        read_profile(path, max_depth=1000)


@pytest.mark.parametrize("flags", [["-e", "nothing"], ["-i", "leaf", "--diff-profile", "SELF"]])
def test_viewer_shows_a_tree_as_deep_as_the_reader_accepts(tmp_path, flags):
    # The report walks recurse a few frames per level: the viewer gives them the stack they need.
    depth = 5000
    text = '{"frame": {"name": "f"}, "metrics": {"time (ns)": 1}, "children": [' * depth
    text = ('[{"frame": {"name": "ROOT"}, "children": [' + text + '{"frame": {"name": "leaf"}, "metrics": '
            '{"time (ns)": 1}}' + "]}" * depth + "]}, {}]")
    path = tmp_path / "deep.hatchet"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    argv = [a.replace("SELF", str(path)) for a in flags] + [str(path), "--no-color"]
    assert viewer_main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    assert "└─ f" in out.getvalue() or "leaf" in out.getvalue()   # the tree (cut at -d 100), or the flat list


@pytest.mark.parametrize("text,what", [
    ("[" + "9" * 5000 + ", {}]", "unreadable JSON value"),       # more digits than int() takes
    ('[{"frame": {"name": "ROOT"}, "metrics": {"t": NaN}}, {}]', None),
    ('[{"frame": {"name": "ROOT"}, "metrics": {"t": -Infinity}}, {}]', None),
])
def test_numbers_json_can_spell(tmp_path, text, what):
    path = tmp_path / "n.hatchet"
    path.write_text(text)
    if what:
        with pytest.raises(ProfileFormatError, match=what):
            read_profile(path)
    else:
        rc = viewer_main([str(path), "--no-color"], stdout=io.StringIO(), stderr=io.StringIO())
        assert rc in (0, 1)


def test_writer_output_is_protons_layout_for_ordinary_trees(tmp_path):
    root = build_small()
    path = tmp_path / "p.hatchet"
    write_profile(path, root, H100)
    assert path.read_text() == "\n" + json.dumps([root.to_json(), H100], indent=4, sort_keys=True) + "\n"


def test_child_lookup_indexes_children_appended_directly():
    n = ProfileNode("p")
    a = n.child("a")
    b = ProfileNode("b")
    n.children.append(b)
    assert n.child("b") is b and n.child("a") is a and len(n.children) == 2
    n.children = []
    assert n.child("a") is not a and len(n.children) == 1
