"""Report text and JSON layout, the kprof-analyze command line, and the autotune block."""
import ast
import json

import pytest

import kernelc
from analyzer import SCHEMA, cli

from .helpers import ProfileNode, cache_case, case, kernel_node, line_of, write


@pytest.fixture
def profile(tmp_path):
    root = ProfileNode("ROOT")
    step = root.child("step")
    c = case("register_occupancy")
    kernel_node(step, c, cache_case(c), time_ns=6_000_000, count=3)
    c2 = case("strided_load")
    load = line_of(c2.kernel, "kl.load(")
    kernel_node(step, c2, cache_case(c2), time_ns=4_000_000, count=3,
                samples={load: {"lg_throttle": 50, "long_scoreboard": 30, "selected": 20}})
    return write(tmp_path / "run.hatchet", root)


def test_text_report_sections(profile, capsys):
    assert cli.main([profile, "--no-color"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kprof-analyze  ")
    assert "[1] reg_heavy_add" in out and "[2] strided_gather" in out
    assert "60.0% of GPU time" in out
    assert "launch: grid 16384x1x1 (16384 programs), warps 1, stages 1, BLOCK=4096" in out
    assert "occupancy 8/64 warps per SM (12%, registers)" in out
    assert "WARNING low-occupancy" in out and "WARNING uncoalesced-access" in out
    assert "hottest lines (100 samples, 80% stalled)" in out
    assert "lg_throttle 50%" in out and "kl.load(x_ptr + offs * STRIDE, mask=mask)" in out
    assert "fix: " in out and "evidence: " in out
    assert "@kernelc.autotune(" in out and "KERNELC_OVERRIDE='reg_heavy_add:BLOCK=4096,num_warps=" in out
    assert "\x1b[" not in out


def test_color_output_uses_ansi(profile):
    import analyzer
    rep = analyzer.analyze(profile, validate=False)
    assert "\x1b[" in rep.render(color=True, width=120)
    assert "\x1b[" not in rep.render(color=False)


def test_json_layout(profile, capsys):
    assert cli.main([profile, "--json", "--kernel", "reg_heavy"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == SCHEMA and data["profile"] == profile
    assert data["total_time_ns"] == 10_000_000
    (k,) = data["kernels"]
    for key in ("rank", "name", "time_ns", "count", "share", "grid", "programs", "num_warps", "num_stages",
                "constexprs", "cache_key", "artifacts", "device", "occupancy", "samples", "hot_lines",
                "diagnostics", "suggestions", "autotune", "notes"):
        assert key in k, key
    assert k["name"] == "reg_heavy_add" and k["share"] == pytest.approx(0.6)
    assert k["artifacts"]["origin"] == "cache" and k["artifacts"]["target"] == "sm_90a"
    assert k["occupancy"]["limiter"] == "registers"
    d = next(d for d in k["diagnostics"] if d["id"] == "low-occupancy")
    assert set(d) == {"id", "number", "title", "severity", "message", "file", "line", "source", "evidence", "fix",
                      "changes", "basis"}
    assert d["number"] == 3 and d["severity"] == "warning"
    s = k["suggestions"][0]
    assert set(s) == {"config", "changes", "fixes", "checked", "kernelc_config", "override"}
    assert s["checked"]["ok"] is True and s["checked"]["n_spills"] == 0
    assert s["kernelc_config"].startswith("kernelc.Config(")


def test_autotune_block_is_valid_python_that_makes_configs(profile):
    import analyzer
    rep = analyzer.analyze(profile, kernel="reg_heavy")
    block = rep.kernels[0].autotune
    tree = ast.parse(block + "\ndef f(): pass\n")
    call = tree.body[0].decorator_list[0]
    dec = eval(compile(ast.Expression(call), "<autotune>", "eval"), {"kernelc": kernelc})
    tuned = dec(case("register_occupancy").kernel)
    assert all(isinstance(c, kernelc.Config) for c in tuned.configs)
    assert tuned.key == ["n"]
    warps = [c.num_warps for c in tuned.configs]
    assert warps[-1] == 1 and all(w > 1 for w in warps[:-1])      # the profiled config comes last
    assert all(c.kwargs == {"BLOCK": 4096} for c in tuned.configs)


def test_override_strings_parse_back_to_the_config(profile):
    import analyzer
    from kernelc.runtime.override import parse
    rep = analyzer.analyze(profile, kernel="reg_heavy")
    for s in rep.kernels[0].suggestions:
        assert parse(s.override("reg_heavy_add")) == {"reg_heavy_add": s.config}
        assert s.make_config().all_kwargs() == s.config


def test_cli_arch_output_file_and_fail_on(profile, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli.main([profile, "--json", "--arch", "sm_80", "--no-check", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert all(k["artifacts"]["target"] == "sm_80" for k in data["kernels"])
    assert all(k["device"]["arch"] == "sm_80" for k in data["kernels"])
    assert cli.main([profile, "--no-check", "--fail-on", "warning"]) == 1
    assert cli.main([profile, "--no-check", "--fail-on", "error"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("args,msg", [
    (["{missing}"], "no such file"),
    (["{profile}", "--kernel", "nothing_like_this"], "matches none"),
    (["{profile}", "--kernel", "("], "not a valid regular expression"),
    (["{profile}", "--arch", "sm_x"], "--arch"),
    (["{profile}", "--verify", "{missing}"], "no such script"),
])
def test_cli_bad_input_exits_2_with_one_line(profile, tmp_path, capsys, args, msg):
    argv = [a.format(profile=profile, missing=str(tmp_path / "nope")) for a in args]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kprof-analyze: ") and msg in err and err.count("\n") == 1
