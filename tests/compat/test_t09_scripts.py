"""Session 23's tutorial-09 measurement scripts (bench/experiments/tutorial_gaps/t09_profile_ab.py, t09_b2b.py): the
parts that run without a GPU -- holding the tutorial's autotuners to one runtime's picks, and the summaries."""
import importlib.util
import json
import os
import types

from kernelc.runtime.autotuner import Config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GAPS = os.path.join(ROOT, "bench", "experiments", "tutorial_gaps")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(GAPS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pool(subtile):
    return [Config(dict({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8},
                        **({"EPILOGUE_SUBTILE": st} if subtile else {})), num_warps=w, num_stages=s)
            for bn in (128, 256) for bk in (64, 128) for s in (2, 3, 4) for w in (4, 8)
            for st in ((True, False) if subtile else (None,))]


def test_hold_to_picks_keeps_each_runtimes_pick_and_prunes_by_warp_specialize():
    ab = _load("t09_profile_ab")
    names = ("matmul_kernel", "matmul_kernel_persistent", "matmul_kernel_tma", "matmul_kernel_tma_persistent",
             "matmul_kernel_descriptor_persistent")
    for impl in ("kernelc", "triton"):
        mod = types.SimpleNamespace(**{n: types.SimpleNamespace(configs=_pool("tma_persistent" in n or "descriptor" in n),
                                                                prune_configs_by={}) for n in names})
        held = ab.hold_to_picks(mod, impl)
        assert all(len(v) == 1 for k, v in held.items() if k != "matmul_kernel_descriptor_persistent")
        d = mod.matmul_kernel_descriptor_persistent
        assert len(d.configs) == 2
        prune = d.prune_configs_by["early_config_prune"]  # (kernelc keeps it there; Triton as an attribute)
        ws, plain = prune(d.configs, {}, WARP_SPECIALIZE=True), prune(d.configs, {"WARP_SPECIALIZE": False})
        assert (ws[0].num_warps, ws[0].num_stages, ws[0].kwargs["EPILOGUE_SUBTILE"]) == (4, 3, False)
        want = {"kernelc": (8, 4, True), "triton": (8, 3, False)}[impl]
        assert (plain[0].num_warps, plain[0].num_stages, plain[0].kwargs["EPILOGUE_SUBTILE"]) == want
        tma = mod.matmul_kernel_tma.configs[0]
        assert tma.num_stages == {"kernelc": 3, "triton": 2}[impl] and tma.kwargs["BLOCK_SIZE_N"] == 128


def test_summaries_take_medians_per_runtime(tmp_path):
    ab, b2b = _load("t09_profile_ab"), _load("t09_b2b")
    for i, (impl, tf) in enumerate((("kernelc", 500.0), ("triton", 550.0), ("triton", 560.0), ("kernelc", 520.0))):
        (tmp_path / f"p{i}.json").write_text(json.dumps({"impl": impl, "frames": {"tma_persistent [M=8192]":
                                                                                     {"tflops": tf}}}))
    line, = ab.summary(sorted(str(p) for p in tmp_path.glob("p*.json")))
    assert "kernelc  510.0" in line and "Triton  555.0" in line and "k/T 0.919" in line
    rows = lambda us: [{"case": "tma:128:3:4:0", "repeat": r, "b2b_us": us + r, "flush_us": us + 5, "host_us": 10,  # noqa
                        "covered": True} for r in range(2)]
    (tmp_path / "k.json").write_text(json.dumps({"impl": "kernelc", "rows": rows(120.0)}))
    (tmp_path / "t.json").write_text(json.dumps({"impl": "triton", "rows": rows(126.0)}))
    line, = b2b.summary([str(tmp_path / "k.json"), str(tmp_path / "t.json")])
    assert "T/k 1.050" in line and "flushed k   125.0 T   131.0" in line
