"""#28: the analyzer never runs the user's code unasked. A profile whose cache entry is missing names
a source file; that file is imported only with --recompile-from-source, and only inside the working
directory unless --allow-import-outside is given too."""
import os
import textwrap

import pytest

from analyzer import cli
from profiler.format import ProfileNode

from .helpers import write

KERNEL = textwrap.dedent('''
    import os
    import kernelc
    import kernelc.language as kl

    open(os.environ["MARKER_FILE"], "a").write("imported\\n")   # the side effect that must not happen unasked

    @kernelc.jit
    def side_effect_copy(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
        offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
        kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
''')


def _profile(tmp_path, src_dir):
    src = src_dir / "user_kernel.py"
    src.write_text(KERNEL)
    root = ProfileNode("ROOT")
    node = root.child("side_effect_copy [grid 4x1x1, warps 4, stages 3, smem 0KiB]")
    node.add_metrics({"time (ns)": 1_000_000, "count": 1, "device_id": "0", "device_type": "CUDA"})
    node.extra = {"kind": "kernel", "kernel": "side_effect_copy", "cache_key": "f" * 40,
                  "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, "constexprs": {"BLOCK": 128},
                  "num_warps": 4, "num_stages": 3, "target": "sm_90a", "grid": [4, 1, 1],
                  "source": {"file": str(src), "first_line": 8, "lines": []}}
    return write(tmp_path / "p.hatchet", root), str(src)


@pytest.fixture
def marker(tmp_path, monkeypatch):
    m = tmp_path / "marker.txt"
    monkeypatch.setenv("MARKER_FILE", str(m))
    return m


def test_missing_cache_entry_does_not_import_the_source(tmp_path, marker, capsys, monkeypatch):
    (tmp_path / "w").mkdir()
    path, src = _profile(tmp_path, tmp_path / "w")
    monkeypatch.chdir(tmp_path / "w")
    assert cli.main([path, "--json", "--no-check"]) == 0
    out = capsys.readouterr().out
    assert not marker.exists()
    assert "--recompile-from-source" in out and src in out


def test_flag_imports_a_file_in_the_working_tree_and_names_it(tmp_path, marker, capsys, monkeypatch):
    (tmp_path / "w").mkdir()
    path, src = _profile(tmp_path, tmp_path / "w")
    monkeypatch.chdir(tmp_path / "w")
    assert cli.main([path, "--json", "--no-check", "--recompile-from-source"]) == 0
    cap = capsys.readouterr()
    assert marker.read_text() == "imported\n"
    assert f"importing {src}" in cap.err
    assert '"origin": "recompiled"' in cap.out


def test_flag_refuses_a_file_outside_the_working_tree(tmp_path, marker, capsys, monkeypatch):
    (tmp_path / "w").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path, src = _profile(tmp_path, tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path / "w")
    assert cli.main([path, "--json", "--no-check", "--recompile-from-source"]) == 0
    out = capsys.readouterr().out
    assert not marker.exists()
    assert "--allow-import-outside" in out
    assert cli.main([path, "--json", "--no-check", "--recompile-from-source", "--allow-import-outside"]) == 0
    assert marker.read_text() == "imported\n"


def test_allow_outside_alone_is_a_usage_error(tmp_path, capsys):
    assert cli.main([str(tmp_path / "p.hatchet"), "--allow-import-outside"]) == 2
    assert "needs --recompile-from-source" in capsys.readouterr().err


def test_text_the_output_encoding_cannot_carry_is_escaped(tmp_path, monkeypatch, capsys):
    # before: UnicodeEncodeError on an ASCII stdout, and -o FILE followed the locale's encoding
    import io
    import sys
    from .helpers import cache_case, case, kernel_node
    c = case("strided_load")
    root = ProfileNode("ROOT")
    kernel_node(root, c, cache_case(c), extra={"kernel": "gather_\u03c0"})
    path = write(tmp_path / "p.hatchet", root)
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", out)
    assert cli.main([path, "--no-check", "--no-color"]) == 0
    out.seek(0)
    assert "[1] gather_\\u03c0" in out.read()
    monkeypatch.setattr("locale.getpreferredencoding", lambda *a: "ascii")
    assert cli.main([path, "--no-check", "-o", str(tmp_path / "r.txt")]) == 0
    assert "[1] gather_\u03c0" in (tmp_path / "r.txt").read_text(encoding="utf-8")


def test_artifacts_bundled_next_to_the_profile_are_found_on_another_machine(tmp_path, monkeypatch, capsys):
    import json
    import analyzer
    from .helpers import cache_case, case, kernel_node
    c = case("strided_load")
    root = ProfileNode("ROOT")
    ck = cache_case(c)
    kernel_node(root, c, ck)
    path = write(tmp_path / "p.hatchet", root)
    assert cli.main([path, "--json", "--no-check", "--bundle-artifacts"]) == 0
    assert "1 of 1 kernel artifacts in" in capsys.readouterr().err
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path / "empty-cache"))       # "another machine"
    k = analyzer.analyze(path, validate=False).kernels[0]
    assert k.facts.artifact_origin == "cache" and k.facts.compiled.cache_key == ck.cache_key
    meta = tmp_path / "p.hatchet.kernels" / ck.cache_key / "meta.json"
    meta.write_text(json.dumps(dict(json.loads(meta.read_text()), n_regs="many")))
    k = analyzer.analyze(path, validate=False).kernels[0]
    assert k.facts.artifact_origin != "cache"
    assert any("unusable" in n and "n_regs" in n for n in k.facts.notes)
