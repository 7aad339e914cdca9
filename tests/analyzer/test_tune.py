"""``kprof-analyze --tune``: the launch hook records tensor shapes/strides/dtypes and scalars, the
analyzer rebuilds synthetic inputs from them, and without a GPU --tune says so (the GPU timing test
is marked ``gpu``)."""
from __future__ import annotations

import pytest

import analyzer
from analyzer.tune import grid_for, synthetic_args, tune

from .corpus import cases


def _profile_transpose(tmp_path):
    profiler = pytest.importorskip("profiler")
    import torch
    c = {c.name: c for c in cases()}["transpose_store"]
    x = torch.randn(64, 128)[:, :64]          # a strided view: row pitch 128
    y = torch.empty(64, 64)
    sid = profiler.start(str(tmp_path / "kp"), backend="cpu")
    try:
        c.kernel[(1, 1)](x, y, 64, 64, x.stride(0), y.stride(0), BM=64, BN=64)
    finally:
        paths = profiler.finalize(sid)
    return next(p for p in paths if p.endswith(".hatchet"))


def test_recorded_launch_is_rebuilt_with_its_strides_and_tune_skips_without_gpu(tmp_path, capsys):
    path = _profile_transpose(tmp_path)
    k = analyzer.analyze(path, validate=False).kernel("transpose")
    rec = {a["name"]: a for a in k.facts.launch_args}
    assert rec["x_ptr"]["shape"] == [64, 64] and rec["x_ptr"]["strides"] == [128, 1]
    assert rec["stride_xm"]["value"] == 128
    args = synthetic_args(k.facts, device="cpu")
    assert tuple(args[0].shape) == (64, 64) and args[0].stride() == (128, 1) and args[0].dtype.is_floating_point
    assert args[2:] == [64, 64, 128, 64]
    assert grid_for(k.facts, k.facts.config()) == (1, 1, 1)
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the skip message is for machines without one")
    res = tune(k.facts, k.suggestions)
    assert res["rows"] == [] and "needs a CUDA GPU" in res["skipped"]
    from analyzer.cli import main
    assert main([path, "--tune", "--no-check", "--no-color"]) == 0
    assert "--tune transpose (rank 1, BM=64, BN=64, num_warps=4, num_stages=3):" in capsys.readouterr().out


@pytest.mark.gpu
def test_tune_finds_a_faster_config_for_the_32x32x32_matmul(tmp_path):
    """GPU: profile the issue's 4096^3 fp16 matmul with its single 32x32x32 config, then --tune times the
    suggested configs on synthetic inputs: one must be >= 1.3x faster."""
    import torch
    import profiler
    import kernelc
    from .corpus import mm
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    sid = profiler.start(str(tmp_path / "mm"))
    try:
        for _ in range(3):
            mm[((n // 32) * (n // 32),)](a, b, c, n, n, n, n, n, n, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32,
                                          num_warps=4, num_stages=3)
        torch.cuda.synchronize()
    finally:
        paths = profiler.finalize(sid)
    path = next(p for p in paths if p.endswith(".hatchet"))
    from analyzer.load import SourcePolicy
    k = analyzer.analyze(path, kernel="^mm$", source_policy=SourcePolicy(recompile_from_source=True)).kernel("mm")
    assert "small-tiles" in k.ids(), [(d.id, d.severity) for d in k.diagnostics]
    res = tune(k.facts, k.suggestions)
    assert res["skipped"] is None, res
    best = max(r.get("speedup") or 0 for r in res["rows"])
    assert best >= 1.3, res["rows"]
    assert "@kernelc.autotune(" in res["autotune"]
    del kernelc


def test_tune_loop_times_each_config_and_prints_the_winner(tmp_path, monkeypatch):
    # the GPU parts replaced by the interpreter and a host timer: the replay, grid and ranking logic run
    import time

    import torch
    import kernelc.testing
    from analyzer.suggest import Suggestion
    from analyzer.tune import render
    path = _profile_transpose(tmp_path)
    k = analyzer.analyze(path, validate=False).kernel("transpose")

    def host_bench(fn, **kw):
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(kernelc.testing, "do_bench", host_bench)
    other = Suggestion(dict(k.facts.config(), num_warps=2), {"num_warps": 2}, ["test"])
    res = tune(k.facts, [other], device="cpu")
    assert res["skipped"] is None and [r["status"] for r in res["rows"]] == ["ok", "ok"]
    assert res["rows"][0]["speedup"] == 1.0 and res["rows"][1]["speedup"] > 0
    assert res["winner"] in (k.facts.config(), other.config)
    text = render("transpose", res)
    assert "winner:" in text and "@kernelc.autotune(" in text


def _mm32_facts(function):
    import kernelc
    from analyzer.facts import facts_from_compiled
    from .corpus import MM_DIV, MM_SIG, mm
    ck = kernelc.compile(mm, signature=MM_SIG, constexprs={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32},
                         target="sm_90a", num_warps=4, num_stages=3, divisibility=MM_DIV)
    f = facts_from_compiled(ck, grid=(16384,), function=mm if function else None)
    f.arg_values = {"M": 4096, "N": 4096, "K": 4096, "stride_am": 4096, "stride_bk": 4096, "stride_cm": 4096}
    return f


def test_tune_space_has_the_usual_hopper_configs_first_and_prunes_spills_by_compiling():
    from analyzer import space as SP
    f = _mm32_facts(function=False)
    tiles = [tuple(c.config[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
             for c in SP.tune_space(f, n=40)]
    # unchecked (no source): the usual configs in their order, then the model's best
    assert tiles[:len(SP.HOPPER_USUAL)] == list(SP.HOPPER_USUAL)
    assert len(set(tiles)) == len(tiles) and (32, 32, 32, 4, 3) not in tiles
    # a WARP_SPECIALIZE constexpr doubles every candidate, on and off
    f.constexprs["WARP_SPECIALIZE"] = False
    ws = SP.tune_space(f, n=4)
    assert [c.config["WARP_SPECIALIZE"] for c in ws] == [True, False, True, False]
    del f.constexprs["WARP_SPECIALIZE"]
    # compiled: what spills on sm_90a is dropped (and reported), what is kept compiled clean on wgmma
    f = _mm32_facts(function=True)
    dropped = []
    kept = SP.tune_space(f, n=2, dropped=dropped)
    assert len(kept) == 2
    for c in kept:
        assert c.checked["ok"] and c.checked["n_spills"] == 0 and c.checked["dot_engines"] == ["wgmma"]
        assert c.config["BLOCK_M"] * c.config["BLOCK_N"] >= 128 * 128
    for c in dropped:
        assert not c.checked.get("ok") or c.checked["n_spills"] > 0


def test_tune_times_the_space_candidates_of_a_small_tile_matmul_in_the_interpreter(tmp_path, monkeypatch):
    # the replay of a recorded 128^3 fp16 matmul launch (32x32x32 tiles): tune_space's candidates are
    # compiled for sm_90a on the CPU, the spilling ones listed as pruned, the rest launched through the
    # interpreter with the grid scaled to their tiles and timed (host clock in place of the GPU's)
    import functools
    import time

    import torch
    import kernelc.testing
    import profiler
    from analyzer import space as SP
    from analyzer.load import SourcePolicy
    from .corpus import mm
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: kernelc would launch there (the GPU version is the gpu-marked test)")
    n = 128
    a, b = torch.randn(n, n, dtype=torch.float16), torch.randn(n, n, dtype=torch.float16)
    c = torch.empty(n, n, dtype=torch.float16)
    sid = profiler.start(str(tmp_path / "mm"), backend="cpu")
    try:
        mm[((n // 32) ** 2,)](a, b, c, n, n, n, n, n, n, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4,
                              num_stages=3)
    finally:
        path = next(p for p in profiler.finalize(sid) if p.endswith(".hatchet"))
    k = analyzer.analyze(path, arch="sm_90a", validate=False,
                         source_policy=SourcePolicy(recompile_from_source=True)).kernel("mm")
    timed = []

    def host_bench(fn, **kw):
        t0 = time.perf_counter()
        fn()
        timed.append(1)
        return (time.perf_counter() - t0) * 1e3
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(kernelc.testing, "do_bench", host_bench)
    monkeypatch.setattr(SP, "tune_space", functools.partial(SP.tune_space, n=2))
    res = tune(k.facts, [], device="cpu")
    assert res["skipped"] is None, res
    ok = [r for r in res["rows"] if r["status"] == "ok"]
    assert len(ok) == 3 and len(timed) == 3, [(r["config"], r["status"]) for r in res["rows"]]  # current + 2
    for r in ok[1:]:
        assert r["from"] == ["tune-space"] and r["config"]["BLOCK_M"] * r["config"]["BLOCK_N"] >= 128 * 128
        assert r["grid"] == [1, 1, 1] and r["speedup"] > 0
    pruned = [r for r in res["rows"] if r["status"].startswith("pruned on the CPU")]
    assert all(r["checked"].get("n_spills") or not r["checked"].get("ok") for r in pruned)
    assert res["best_speedup"] == max(r["speedup"] for r in ok) and "@kernelc.autotune(" in res["autotune"]
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=0.5, rtol=0.05)
