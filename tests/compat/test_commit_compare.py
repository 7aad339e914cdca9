"""bench/experiments/tutorial_gaps/commit_compare.py (issue 20): the kernels it compiles per tutorial and how it
judges two sides' outputs. CPU only; nothing here compiles a kernel."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "commit_compare", os.path.join(ROOT, "bench", "experiments", "tutorial_gaps", "commit_compare.py"))
cc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cc)


def test_jobs_cover_every_config_and_variant():
    j06 = list(cc.jobs_06())
    fwd = [j for j in j06 if j["fn"] == "_attn_fwd"]
    # 21 Hopper configs (8 warps only at 128x128) x D 64/128 x fp16/fp8 x (causal, non-causal, ws on pointers)
    assert len(cc.configs_06(64)) == 21 and len(fwd) == 2 * 2 * 3 * 21
    assert {j["fn"] for j in j06} == {"_attn_fwd", "_attn_bwd", "_attn_bwd_preprocess"}
    ws = [j for j in fwd if j["cx"]["warp_specialize"]]
    assert ws and all(j["sig"]["desc_q"].startswith("*") and j["cx"]["STAGE"] == 1 for j in ws)
    fp8 = next(j for j in fwd if j["cx"]["FP8_OUTPUT"] and not j["cx"]["warp_specialize"])
    d, bn = fp8["cx"]["HEAD_DIM"], fp8["cx"]["BLOCK_N"]
    assert fp8["sig"]["desc_v"] == f"tensordesc<fp8e5[{d}, {bn}]>"   # v transposed for fp8, as the tutorial
    assert len(list(cc.jobs_03())) == 32
    j09 = list(cc.jobs_sweep("09"))
    assert len(j09) == 192 and len({j["label"] for j in j09}) == 192
    assert all(n in j["sig"] and j["sig"][n] == "i32" for j in j09 for n in j["eq1"])   # folded ones are in sig
    assert {j["tut"] for j in cc.all_jobs(["01", "02", "04", "05", "07", "08"])} == {"01", "02", "04", "05", "07", "08"}


def test_compare_reads_identical_differs_and_errors(tmp_path):
    jobs = [dict(tut="09", fn="k", label=f"k {i}", i=i) for i in range(4)]
    (tmp_path / "b").mkdir()
    (tmp_path / "h").mkdir()
    (tmp_path / "b" / "1.sass").write_text("  /*0010*/  @P0 BRA `(.L_x_1) ;\n  /*0020*/  VOTEU.ALL UP0, PT ;\n")
    (tmp_path / "h" / "1.sass").write_text("  /*0010*/  ELECT P0, URZ, PT ;\n  /*0020*/  VOTEU.ALL UP0, PT ;\n")
    ok = {"ptx": "a", "sass": "b", "n_regs": 10, "shared": 0}
    base = {0: dict(ok, i=0), 1: dict(ok, i=1), 2: {"i": 2, "error": "OutOfResources: x"},
            3: {"i": 3, "error": "CompilationError: y"}}
    head = {0: dict(ok, i=0), 1: dict(ok, i=1, sass="c"), 2: {"i": 2, "error": "OutOfResources: x"},
            3: dict(ok, i=3)}
    rows = cc.compare(jobs, base, head, str(tmp_path / "b"), str(tmp_path / "h"))
    assert [r["status"] for r in rows] == ["identical", "differs", "error on both (same)", "error differs"]
    assert rows[1]["ptx_same"] and not rows[1]["sass_same"]
    assert rows[1]["base_has_more"] == {"BRA": 1} and rows[1]["head_has_more"] == {"ELECT": 1}
