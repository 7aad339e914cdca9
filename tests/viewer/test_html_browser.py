"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

Reports are made from real profiles (the Proton fixture, the PC samples recorded on an H200, an
analysed kernelc profile) and clicked through: tree -> kernel page -> source line <-> SASS.  Every
page must log no console error and make no request besides the report file itself.

Without a browser these tests skip, except with ``KPROF_REQUIRE_BROWSER=1`` (CI), where they fail.
``KPROF_CHROMIUM`` names the browser binary (default: ``chromium`` on PATH).  With
``KPROF_SCREENSHOT_DIR`` set, the kernel page of the sampled profile is saved there as PNG.
"""

import os
import shutil
import time

import pytest

import html_cases as H
from profiler.viewer import html_report, tree

REQUIRE = os.environ.get("KPROF_REQUIRE_BROWSER") == "1"


def _chromium():
    for cand in (os.environ.get("KPROF_CHROMIUM"), "chromium", "chromium-browser"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed (pip install playwright==1.65.2)"
    if why is None and exe is None:
        why = "no chromium binary (apt-get install chromium, or set KPROF_CHROMIUM)"
    if why:
        if REQUIRE:
            pytest.fail(f"KPROF_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # root (CI) needs it
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=args)
        yield b
        b.close()


class Opened:
    """A report open in a fresh browser context, with everything it logged and requested."""

    def __init__(self, browser, path, fragment=""):
        self.url = "file://" + os.path.abspath(path)
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()
        self.errors, self.requests, self.dialogs = [], [], []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.t0 = time.perf_counter()
        self.page.goto(self.url + fragment)
        self.page.wait_for_function("() => document.body.dataset.ready === '1'")
        self.wall_ready = time.perf_counter() - self.t0

    def js(self, expr, arg=None):
        return self.page.evaluate(expr, arg)

    def frame(self, name):
        i = self.js("(n) => kprofReport.findFrame(n)", name)
        assert i >= 0, f"no frame {name!r}"
        return i, self.js("(i) => kprofReport.frameRect(i)", i)

    def click_frame(self, name):
        i, r = self.frame(name)
        assert r is not None, f"frame {name!r} is not drawn"
        self.page.mouse.click(r["x"] + min(5, r["w"] / 2), r["y"] + 5)
        return i

    def hover_frame(self, name):
        _, r = self.frame(name)
        self.page.mouse.move(r["x"] + min(5, r["w"] / 2), r["y"] + 5)
        return self.page.locator("#tooltip").text_content()

    def data(self):
        """The data the page embeds, unpacked as the page unpacks it."""
        return html_report.unpack(self.js("() => JSON.parse(document.getElementById('kprof-data').textContent)"))

    def close_clean(self):
        """No console error or warning, no page error, no dialog, no request but the page itself."""
        try:
            assert self.errors == [], self.errors
            assert self.dialogs == [], self.dialogs
            others = [u for u in self.requests if u.split("#")[0] != self.url]
            assert others == [], others
        finally:
            self.context.close()


def _write(tmp_path, name, src, **kw):
    return html_report.write_report(str(tmp_path / name), tree.load(src), **kw)


def test_proton_report_hover_click_zoom_metric_and_filter(browser, tmp_path):
    path = _write(tmp_path, "proton.html", os.path.join(H.DATA, "proton_small.hatchet"))
    o = Opened(browser, path)
    d = o.data()
    j = [m["name"] for m in d["metrics"]].index("time/ms")
    i, _ = o.frame("matmul_512x512x512")
    tip = o.hover_frame("matmul_512x512x512")
    assert tip.startswith("matmul_512x512x512\n")
    assert f"time/ms: {d['metrics'][j]['values'][i]:.3f}" in tip and "% of total" in tip
    o.click_frame("matmul_512x512x512")
    assert o.page.locator("#details .name").text_content() == "matmul_512x512x512"
    assert "in train_step \u203a triton_matmul" in o.page.locator("#details").text_content()
    zoomed = o.frame("matmul_512x512x512")[1]
    assert zoomed["w"] > 1300  # the clicked frame now spans the graph
    o.page.locator("#reset").click()
    assert o.frame("matmul_512x512x512")[1]["w"] < 1300
    o.page.select_option("#metric", label="tflop16/s")
    assert "colour: tflop16/s" in o.page.locator("#legend").text_content()
    o.page.fill("#include", "triton_matmul")
    o.page.wait_for_function("() => kprofReport.frameRect(kprofReport.findFrame('torch_matmul')) === null")
    assert o.frame("matmul_512x512x512")[1] is not None
    o.page.fill("#include", "(")  # a bad regex is reported, not thrown
    o.page.wait_for_function("() => document.getElementById('filter-msg').textContent.startsWith('include:')")
    o.close_clean()


def test_tree_to_kernel_page_to_line_and_back_from_sass(browser, tmp_path):
    prof = H.pcs_profile(str(tmp_path / "pcs.hatchet"))
    o = Opened(browser, _write(tmp_path, "pcs.html", prof))
    d = o.data()
    k = next(k for k in d["kernels"] if k["name"] == "matmul_kernel")
    o.click_frame("matmul_kernel")
    o.page.locator("#details button.open-kernel").click()
    o.page.wait_for_selector("#kernel-view:not([hidden])")
    assert o.page.locator("#k-name").text_content() == "matmul_kernel"
    assert f"samples: {k['samples']}" in o.page.locator("#k-facts").text_content()
    hot = max(k["instructions"], key=lambda x: x["samples"])
    assert f"hot instruction: {hot['text']} at 0x{hot['pc']:x}" in o.page.locator("#k-hot").text_content()
    # the hottest source line: click it, its instructions light up in the SASS column
    top = max(k["lines"], key=lambda x: x["samples"])
    row = o.page.locator("#src-list .vrow", has_text=f"{top['samples']}").first
    row.click()
    assert "sel" in row.get_attribute("class")
    want = [x for x in k["instructions"] if x["line"] == top["line"]]
    panel = o.page.locator("#k-line").text_content()
    assert f"line {top['file']}:{top['line']}" in panel
    assert f"{len(want)} instructions, {top['samples']} samples" in panel
    linked = o.page.locator("#sass-list .vrow.linked")
    assert linked.count() >= 1
    for t in linked.locator(".ln").all_text_contents():
        assert t == str(top["line"])
    assert o.js("() => decodeURIComponent(location.hash)") == f"#kernel/{d['kernels'].index(k)}/line/{top['file']}:{top['line']}"
    if os.environ.get("KPROF_SCREENSHOT_DIR"):
        os.makedirs(os.environ["KPROF_SCREENSHOT_DIR"], exist_ok=True)
        o.page.screenshot(path=os.path.join(os.environ["KPROF_SCREENSHOT_DIR"], "kernel_page.png"), full_page=True)
    # and back: a SASS instruction of another line selects that source line
    first, count = k["source"]["first_line"], len(k["source"]["lines"])
    j, other = next((j, x) for j, x in enumerate(k["instructions"])
                    if x["line"] != top["line"] and x["line"] is not None and first <= x["line"] < first + count)
    o.js("(j) => { const l = document.getElementById('sass-list'); l.scrollTop = j * 18; l.onscroll(); }", j)
    pc = f"{other['pc']:04x}"
    o.page.locator(f"#sass-list .vrow[data-index='{j}']").click()
    assert o.page.locator(f"#sass-list .vrow[data-index='{j}'] .pc").text_content() == pc
    assert o.page.locator("#src-list .vrow.sel .no").text_content() == str(other["line"])
    o.page.locator("#nav-tree").click()
    o.page.wait_for_selector("#tree-view:not([hidden])")
    # a sampled line frame in the tree opens the kernel page on that line
    o.page.select_option("#metric", label="num_samples")
    o.click_frame(f"{top['file']}:{top['line']}")
    o.page.locator("#details button.open-line").click()
    o.page.wait_for_selector("#kernel-view:not([hidden])")
    assert o.page.locator("#src-list .vrow.sel .no").text_content() == str(top["line"])
    o.close_clean()


def test_analyzer_report_puts_diagnoses_on_their_lines(browser, analyzed_report):
    load = analyzed_report["load_line"]
    o = Opened(browser, analyzed_report["html"])
    d = o.data()
    o.page.goto(o.url + f"#kernel/{[k['name'] for k in d['kernels']].index('strided_gather')}")
    assert o.page.locator("#k-name").text_content() == "strided_gather"
    row = o.page.locator("#src-list .vrow", has=o.page.locator(".badge.warning", has_text="uncoalesced-access"))
    assert row.locator(".no").text_content() == str(load)
    card = o.page.locator("#k-diags .diag.warning", has_text="uncoalesced-access")
    assert "evidence: " in card.text_content() and "fix: " in card.text_content()
    assert "occupancy:" in o.page.locator("#k-facts").text_content()
    assert "instructions, from the build" in o.page.locator("#sass-title").text_content()
    card.locator("a", has_text="go to line").click()
    assert o.page.locator("#src-list .vrow.sel .no").text_content() == str(load)
    assert any("LDG" in t for t in o.page.locator("#sass-list .vrow.linked .txt").all_text_contents())
    assert "uncoalesced-access" in o.page.locator("#k-line").text_content()
    # the other kernel's page: its finding and the suggested @autotune block
    o.page.locator("#kernel-select").select_option(label="reg_heavy_add")
    o.page.wait_for_function("() => document.getElementById('k-name').textContent === 'reg_heavy_add'")
    assert "low-occupancy" in o.page.locator("#k-diags").text_content()
    block = o.page.locator("#k-autotune pre.autotune").text_content()
    heavy = next(k for k in d["kernels"] if k["name"] == "reg_heavy_add")["analysis"][0]
    assert block == heavy["autotune"] and "kernelc.Config(" in block
    assert "KERNELC_OVERRIDE='reg_heavy_add:" in o.page.locator("#k-autotune").text_content()
    o.page.goto(o.url + "#tree")
    table = o.page.locator("#kernel-table").text_content()
    assert table.count("strided_gather") == 1 and table.count("reg_heavy_add") == 1
    o.close_clean()


def test_hostile_names_are_shown_as_text(browser, tmp_path):
    o = Opened(browser, _write(tmp_path, "h.html", H.hostile_profile(str(tmp_path / "h.hatchet"))))
    assert o.js("() => window.__pwned === undefined")
    assert o.page.locator("img").count() == 0
    for i, name in enumerate(H.HOSTILE):
        tip = o.hover_frame(name)
        assert tip.split("\n")[0] == name.replace("\r", "")
        o.click_frame(name)
        assert o.page.locator("#details .name").text_content() == name
        o.page.locator("#reset").click()
    o.page.goto(o.url + "#kernel/0")
    assert o.page.locator("#k-name").text_content() == f"{H.HOSTILE[0]} kernel0"
    assert o.page.locator("#src-list .vrow .txt").first.text_content() == H.HOSTILE[0]
    assert o.page.locator("#sass-list .vrow .txt").first.text_content() == H.HOSTILE[0]
    assert o.js("() => window.__pwned === undefined")
    o.close_clean()


def test_diff_report_colours_by_change(browser, tmp_path, viewer):
    out = str(tmp_path / "diff.html")
    assert viewer("--html", out, "--diff-profile", "kprof_other.hatchet", "kprof_small.hatchet")[0] == 0
    o = Opened(browser, out)
    d = o.data()
    legend = o.page.locator("#legend").text_content()
    assert "kprof_small.hatchet minus kprof_other.hatchet" in legend
    t = d["tree"]
    only = next(i for i, s in enumerate(t["side"]) if s != 0 and o.js("(i) => kprofReport.frameRect(i)", i))
    name = t["names"][t["name"][only]]
    tip = o.hover_frame(name)
    side = "kprof_small.hatchet" if t["side"][only] == 1 else "kprof_other.hatchet"
    assert tip.startswith(f"{name} (only in {side})")
    changed = next(i for i in range(1, len(t["parent"])) if t["side"][i] == 0 and d["metrics"][0]["d"][i])
    tip = o.hover_frame(t["names"][t["name"][changed]])
    assert f"{d['metrics'][0]['name']}: " in tip and " vs " in tip
    o.close_clean()


CLICK_FIRST_FRAME = """() => { const t0 = performance.now(); const r = kprofReport.frameRect(1);
    document.getElementById('flame').dispatchEvent(new MouseEvent('click', {clientX: r.x + 2, clientY: r.y + 2,
    bubbles: true})); return performance.now() - t0; }"""


def test_100k_frames_interactive_within_2s(browser, tmp_path):
    prof = H.big_profile(str(tmp_path / "big.hatchet"))
    profile = tree.load(prof)
    n = sum(1 for _ in profile.root.walk())
    assert n >= 100_000
    path = html_report.write_report(str(tmp_path / "big.html"), profile)
    size = os.path.getsize(path)
    # Time in the page's own clock: navigation start to interactive (data parsed, graph drawn,
    # handlers set), plus the first click's handling.  Best of up to three loads: the shared CI
    # machine's noise is not the page's cost (every load is printed).
    runs = []
    for _ in range(3):
        o = Opened(browser, path)
        ready_ms = o.js("() => kprofReport.readyAt")
        click_ms = o.js(CLICK_FIRST_FRAME)
        assert o.page.locator("#details .name").text_content().startswith("scope_")
        runs.append((ready_ms + click_ms, ready_ms, click_ms, o.wall_ready))
        o.close_clean()
        if ready_ms + click_ms < 2000:
            break
    print(f"\n100k-frame report ({n} frames, {size / 1e6:.1f} MB), per load: " + "; ".join(
        f"interactive {r:.0f} ms + first click {c:.0f} ms (wall clock from goto {w * 1000:.0f} ms)"
        for _, r, c, w in runs))
    assert min(runs)[0] < 2000


def test_50k_sass_lines_are_virtualised(browser, tmp_path):
    profile = tree.load(os.path.join(H.DATA, "kprof_small.hatchet"))
    sass = [{"pc": 16 * i, "text": f"IMAD.WIDE R{i % 200}, R2, 0x4, R{(i + 7) % 200}", "file": "matmul.py",
             "line": 10 + (i // 100) % 24, "samples": 0, "stalls": {}} for i in range(50_000)]
    entry = {"label": "synthetic", "facts": {}, "notes": [], "diagnostics": [], "autotune": None, "sass": sass}
    path = html_report.write_report(str(tmp_path / "sass.html"), profile, analysis={"matmul_kernel": [entry]})
    o = Opened(browser, path)
    idx = [k["name"] for k in o.data()["kernels"]].index("matmul_kernel")
    t = time.perf_counter()
    o.page.goto(o.url + f"#kernel/{idx}")
    o.page.wait_for_selector("#kernel-view:not([hidden])")
    print(f"\nkernel page with {len(sass)} SASS lines shown in {1000 * (time.perf_counter() - t):.0f} ms")
    assert "50000 instructions" in o.page.locator("#sass-title").text_content()
    assert o.page.locator("#sass-list .vrow").count() < 200  # only the rows in view exist
    o.js("() => { const l = document.getElementById('sass-list'); l.scrollTop = l.scrollHeight; l.onscroll(); }")
    last = o.page.locator("#sass-list .vrow[data-index='49999']")
    last.wait_for()
    assert last.locator(".pc").text_content() == f"{16 * 49999:04x}"
    assert o.page.locator("#sass-list .vrow").count() < 200
    last.click()  # the last instruction's line is selected in the source column
    assert o.page.locator("#src-list .vrow.sel .no").text_content() == str(sass[-1]["line"])
    o.close_clean()


@pytest.mark.skipif(not os.environ.get("KPROF_SCREENSHOT_PROFILE"),
                    reason="KPROF_SCREENSHOT_PROFILE (a .hatchet profile or an .html report) is not set")
def test_screenshot_of_a_given_profile(browser, tmp_path):
    """The README screenshot: the hottest sampled kernel's page of a real profile, its hottest line
    selected, written to $KPROF_SCREENSHOT_DIR (default: the test's temporary directory)."""
    src = os.environ["KPROF_SCREENSHOT_PROFILE"]
    path = src if src.endswith(".html") else _write(tmp_path, "report.html", src)
    shots = os.environ.get("KPROF_SCREENSHOT_DIR") or str(tmp_path)
    os.makedirs(shots, exist_ok=True)
    o = Opened(browser, path)
    o.page.screenshot(path=os.path.join(shots, "tree.png"))
    kernels = o.data()["kernels"]
    assert kernels and max(k["samples"] or 0 for k in kernels) > 0, f"{src} has no kernel with PC samples"
    i = max(range(len(kernels)), key=lambda j: kernels[j]["samples"] or 0)
    top = max(kernels[i]["lines"], key=lambda x: x["samples"])
    o.page.goto(o.url + f"#kernel/{i}/line/{top['file']}:{top['line']}")
    o.page.wait_for_selector("#kernel-view:not([hidden])")
    assert o.page.locator("#src-list .vrow.sel").count() == 1
    o.page.screenshot(path=os.path.join(shots, "kernel_page.png"), full_page=True)
    print(f"\nscreenshots of {kernels[i]['name']} in {shots}: tree.png, kernel_page.png")
    o.close_clean()
