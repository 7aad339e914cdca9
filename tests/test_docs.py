"""The docs stay true: MkDocs builds them with warnings as errors, every Python example in docs/ and README.md
runs, and every ``$ kprof-viewer ...`` capture is what the viewer prints today.

A ```python block runs unless the line before it is ``<!-- docs-test: gpu -->`` (runs only with a GPU) or
``<!-- docs-test: skip REASON -->``.  Blocks run in a temporary directory holding links to the checkout's
``examples/`` and ``tests/``, so they may read fixtures and write files.
"""
import glob
import io
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARK = re.compile(r"<!--\s*docs-test:\s*(gpu|skip)\b(.*?)-->")


def _blocks():
    """``(page, line, language, code, mark)`` for every fenced block."""
    out = []
    for page in PAGES:
        text = open(page, encoding="utf-8").read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[:m.start()].rstrip().rsplit("\n", 1)[-1]
            mark = MARK.search(before)
            out.append((os.path.relpath(page, ROOT), line, m.group(1), m.group(2), mark))
    return out


BLOCKS = _blocks()
# README's kernel example compiles and runs a 4096-row softmax: tests/test_readme.py runs it (with its SASS
# check); the language guide shows the same block.
_README_KERNEL = re.search(r"## One kernel\n\n```python\n(.*?)```", open(PAGES[-1], encoding="utf-8").read(),
                           re.S).group(1)


def _python_params():
    params = []
    for page, line, lang, code, mark in BLOCKS:
        if lang != "python" or code == _README_KERNEL:
            continue
        marks = []
        if mark and mark.group(1) == "skip":
            assert mark.group(2).strip(), f"{page}:{line}: docs-test: skip needs a reason"
            continue
        if mark and mark.group(1) == "gpu":
            marks.append(pytest.mark.gpu)
        params.append(pytest.param(code, id=f"{page}:{line}", marks=marks))
    return params


@pytest.fixture
def docs_cwd(tmp_path, monkeypatch):
    for name in ("examples", "tests"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(ROOT)
    return tmp_path


def test_docs_have_examples():
    assert len(_python_params()) >= 3
    assert any(code == _README_KERNEL for page, _, _, code, _ in BLOCKS if page.startswith("docs"))


@pytest.mark.parametrize("code", _python_params())
def test_python_example_runs(code, docs_cwd, request):
    if request.node.get_closest_marker("gpu"):
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("needs an NVIDIA GPU")
    path = docs_cwd / "doc_example.py"  # kernels need a real source file
    path.write_text(code)
    exec(compile(code, str(path), "exec"), {"__name__": "doc_example"})


def _viewer_captures():
    out = []
    for page, line, lang, code, mark in BLOCKS:
        if not code.startswith("$ kprof-viewer "):
            continue
        cmd, expected = None, []
        for row in code.rstrip("\n").split("\n") + ["$ <end>"]:
            if row.startswith("$ "):
                if cmd is not None:
                    out.append(pytest.param(cmd, expected, id=f"{page}:{line}:{cmd[:40]}"))
                cmd, expected = row[2:], []
            else:
                expected.append(row)
    return out


@pytest.mark.parametrize("cmd, expected", _viewer_captures())
def test_viewer_capture_is_current(cmd, expected, monkeypatch):
    from profiler.viewer import cli
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    out, err = io.StringIO(), io.StringIO()
    cli.main(cmd.split()[1:], stdout=out, stderr=err)
    got = (out.getvalue() + err.getvalue()).rstrip("\n").split("\n")
    got = [g.rstrip() for g in got]
    # a "..." line in the docs abridges the output: each piece between them appears in order
    pos = 0
    for piece in "\n".join(e.rstrip() for e in expected).split("\n...\n"):
        rows = piece.split("\n")
        for start in range(pos, len(got) - len(rows) + 1):
            if got[start:start + len(rows)] == rows:
                pos = start + len(rows)
                break
        else:
            pytest.fail(f"`{cmd}` no longer prints\n{piece}\nit prints\n" + "\n".join(got))


def test_mkdocs_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extra: pip install -e '.[test]'")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f",
                        os.path.join(ROOT, "mkdocs.yml"), "-d", str(tmp_path / "site")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "architecture" / "index.html").exists()
