"""``kprof-viewer --html`` / ``kprof-analyze --html`` without a browser: the data the page embeds
(the terminal viewer's numbers), escaping of hostile names, the Content-Security-Policy, the CLI.
The page itself is tested in Chromium by test_html_browser.py."""

import base64
import hashlib
import html
import json
import os
import re

import pytest

import html_cases as H
from profiler.viewer import html_report, tree
from profiler.viewer import metrics as M
from profiler.viewer.report import context
from profiler.viewer.source_view import collect, find_kernel


def embedded(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="kprof-data">(.*?)</script>', text, re.S)
    assert m, "no data block"
    return text, html_report.unpack(json.loads(m.group(1)))


def frame_index(data, name):
    t = data["tree"]
    return [i for i, n in enumerate(t["name"]) if t["names"][n] == name]


def test_tree_values_are_the_terminal_viewers(viewer, data, tmp_path):
    out = tmp_path / "r.html"
    status, _, err = viewer("--html", str(out), "-m", "time/ms,tflop16/s,util", "kprof_small.hatchet")
    assert status == 0 and f"wrote {out}" in err
    _, d = embedded(out)
    assert d["schema"] == "kprof-html/1" and d["other"] is None
    assert [m["name"] for m in d["metrics"]] == ["time/ms", "tflop16/s", "util"]
    profile = tree.load(data("kprof_small.hatchet"))
    ctx = context(profile)
    cat = M.catalog(profile.raw_names, profile.additive)
    nodes = [n for n, _ in profile.root.walk()]
    assert len(d["tree"]["parent"]) == len(nodes)
    for j, spec in enumerate(["time/ms", "tflop16/s", "util"]):
        m = M.resolve(spec, cat, profile.raw_names)
        for i, node in enumerate(nodes):  # pre-order in both
            assert d["tree"]["names"][d["tree"]["name"][i]] == node.name
            want = m.value(node, ctx)
            got = d["metrics"][j]["values"][i]
            assert (got is None) == (want is None)
            if want is not None:
                assert got == pytest.approx(want, rel=1e-6)  # 7 digits, float32 in the page
    # parents come before their children
    assert all(p < i for i, p in enumerate(d["tree"]["parent"]) if i)


def test_kernel_pages_carry_the_source_views_lines(data, tmp_path):
    profile = tree.load(data("kprof_small.hatchet"))
    d = html_report.build_data(profile)
    names = [k["name"] for k in d["kernels"]]
    assert "matmul_kernel" in names and not any(n.startswith("sm90_xmma") for n in names)  # cuBLAS: no page
    k = d["kernels"][names.index("matmul_kernel")]
    ident, frames = find_kernel(profile.root, "matmul_kernel")
    stats, origin = collect(frames)
    assert k["origin"] == origin == "line frames"
    assert k["samples"] == sum(s.samples for s in stats.values()) == 1580
    by_line = {(ln["file"], ln["line"]): ln for ln in k["lines"]}
    assert by_line[("matmul.py", 27)]["samples"] == 820
    assert by_line[("matmul.py", 27)]["stalls"]["math_pipe_throttle"] == 300
    assert by_line[("core.py", 512)]["samples"] == 12  # library code outside the stored source
    assert k["source"]["first_line"] == 10 and "kl.dot" in k["source"]["lines"][27 - 10]
    hot = max(k["instructions"], key=lambda i: i["samples"])
    assert hot["text"].startswith("HMMA") and hot["line"] == 27
    assert len(frames) == 2 and len(k["frames"]) == 2
    # every kernel frame in the tree points at its page
    for i, kk in enumerate(d["tree"]["kernel"]):
        if kk >= 0:
            assert d["tree"]["names"][d["tree"]["name"][i]].split(" [")[0] == d["kernels"][kk]["name"]
    assert {"math_pipe_throttle", "long_scoreboard", "selected"} <= set(d["reasons"])


def test_filters_and_frame_format_apply_as_in_the_terminal(viewer, tmp_path):
    out = tmp_path / "r.html"
    assert viewer("--html", str(out), "-i", "attn", "-e", "softmax", "kprof_small.hatchet")[0] == 0
    _, d = embedded(out)
    names = set(d["tree"]["names"])
    assert "attn" in names and "mlp" not in names and "optimizer" not in names
    assert not any(n.startswith("softmax") for n in names)
    root_time = d["metrics"][0]["values"][0]
    attn = frame_index(d, "attn")[0]
    assert root_time == pytest.approx(d["metrics"][0]["values"][attn])  # re-totalled over what is kept


def test_diff_carries_both_sides_and_the_change(viewer, data, tmp_path):
    out = tmp_path / "d.html"
    status, _, err = viewer("--html", str(out), "--diff-profile", "kprof_other.hatchet", "kprof_small.hatchet")
    assert status == 0, err
    _, d = embedded(out)
    assert d["other"] == "kprof_other.hatchet" and "side" in d["tree"]
    m = d["metrics"][0]
    for i in range(len(d["tree"]["parent"])):
        a, b, diff = m["a"][i], m["b"][i], m["d"][i]
        if a is not None and b is not None:
            assert diff == pytest.approx(a - b, rel=1e-5, abs=1e-9)
    assert set(d["tree"]["side"]) >= {0}


def test_hostile_names_cannot_leave_the_data_block(tmp_path):
    path = H.hostile_profile(str(tmp_path / "h.hatchet"))
    out = html_report.write_report(str(tmp_path / "h.html"), tree.load(path))
    text, d = embedded(out)
    # two script elements (data, code), and nothing the names brought in
    assert text.count("</script>") == 2 and text.lower().count("<script") == 2
    assert "<img" not in text and "<!--" not in text and "\u2028" not in text and "\x00" not in text
    block = text[text.index('id="kprof-data">'):]
    block = block[:block.index("</script>")]
    assert all(ord(c) < 128 for c in block) and "<" not in block[len('id="kprof-data">'):]
    # ... and yet the names come back exactly
    kernels = {k["name"] for k in d["kernels"]}
    for i, name in enumerate(H.HOSTILE):
        assert name in d["tree"]["names"] and f"{name} kernel{i}" in kernels
    # the page runs only its own script and style: a CSP with their hashes, nothing may be fetched
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text).group(1))
    js = re.search(r"<script>(.*)</script>", text, re.S).group(1)
    css = re.search(r"<style>(.*?)</style>", text, re.S).group(1)
    sha = lambda s: base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()  # noqa: E731
    assert f"script-src 'sha256-{sha(js)}'" in csp and f"style-src 'sha256-{sha(css)}'" in csp
    assert "default-src 'none'" in csp and "http" not in text.replace("http-equiv", "")


def test_title_is_escaped(tmp_path):
    name = 'a<b>"c".hatchet'
    path = H.hostile_profile(str(tmp_path / name))
    text, _ = embedded(html_report.write_report(str(tmp_path / "t.html"), tree.load(path)))
    assert "<title>kprof: a&lt;b&gt;&quot;c&quot;.hatchet</title>" in text


def test_cli_errors_are_one_line_and_leave_no_file(viewer, tmp_path):
    status, out, err = viewer("--html", str(tmp_path / "nodir" / "r.html"), "kprof_small.hatchet")
    assert status == 1 and err.count("\n") == 1 and "does not exist" in err
    status, _, err = viewer("--html", str(tmp_path / "r.html"), "-m", "nosuch", "kprof_small.hatchet")
    assert status == 1 and "unknown metric 'nosuch'" in err
    assert os.listdir(tmp_path) == []  # nothing half-written, no temporary file


def test_package_data_holds_the_page_assets():
    for name in ("report.html", "report.css", "report.js"):
        assert html_report._asset(name).strip()
    toml = open(os.path.join(H.REPO, "pyproject.toml"), encoding="utf-8").read()
    assert '"profiler.viewer" = ["html/*' in toml


def test_analyzer_html_adds_diagnoses_sass_and_build_facts(analyzed_report, tmp_path):
    from analyzer import cli
    r = analyzed_report
    assert r["status"] == 0
    assert r["stdout"] == "" and f"wrote {r['html']}" in r["stderr"]  # the page is the report
    _, d = embedded(r["html"])
    assert d["tool"] == "kprof-analyze"
    load = r["load_line"]
    k = next(k for k in d["kernels"] if k["name"] == "strided_gather")
    a = k["analysis"][0]
    diag = next(x for x in a["diagnostics"] if x["id"] == "uncoalesced-access")
    assert diag["line"] == load and diag["evidence"] and diag["fix"]
    assert a["facts"]["n_regs"] > 0 and "warps per SM" in a["facts"]["occupancy"] and a["facts"]["origin"] == "cache"
    assert len(a["sass"]) > 20 and any(i["line"] == load and "LDG" in i["text"] for i in a["sass"])
    heavy = next(k for k in d["kernels"] if k["name"] == "reg_heavy_add")["analysis"][0]
    assert heavy["autotune"].startswith("@kernelc.autotune(") and heavy["override"].startswith("reg_heavy_add:")
    assert any(x["id"] == "low-occupancy" for x in heavy["diagnostics"])
    assert cli.main([r["profile"], "--html", str(tmp_path / "no" / "a.html"), "--no-check"]) == 2
