"""bench/triton_tutorials.py --warm: the dry run that fills the compile caches, the table shards, and the
copy of a warm cache that each measured run starts from (no GPU needed)."""
import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO, subprocess_env

# A tutorial-shaped script: tensors on "cuda", a plain kernel, an autotuned one with two configs, and
# three benchmark tables (the last two run under the shard options).
TUTORIAL = '''
import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * SCALE, mask=m)


x = torch.rand(1000, device="cuda")
y = torch.rand(1000, device=DEVICE)
out = torch.empty_like(x)
add_kernel[(8,)](x, y, out, 1000, BLOCK=128)
print("DEVICE", x.device.type, out.device.type)


def bench(N, provider, which):
    a = torch.rand(N, device="cuda")
    o = torch.empty_like(a)
    if which == 2:
        # the second launch reuses the first one's autotune key with another constexpr: on a GPU it
        # compiles the chosen config only, which a dry run cannot know, so the dry run compiles both
        scale_kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](a, o, N, SCALE=2.0)
        scale_kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](a, o, N, SCALE=3.0)
    return triton.testing.do_bench(lambda: add_kernel[(1,)](a, a, o, N, BLOCK=256 << which))


tables = [triton.testing.Benchmark(x_names=["N"], x_vals=[1024], line_arg="provider", line_vals=["triton"],
                                   line_names=["Triton"], ylabel="ms", plot_name=f"t{i}", args={"which": i})
          for i in range(3)]
triton.testing.perf_report(tables)(bench).run(print_data=True)
'''


def _runner(tmp_path, impl, extra, cache, name="r.json", env=None):
    tut = tmp_path / "tut.py"
    tut.write_text(TUTORIAL)
    js = tmp_path / name
    cmd = [sys.executable, os.path.join(REPO, "bench", "tutorial_runner.py"), "--impl", impl, "--json", str(js),
           *extra, str(tut)]
    env = dict(env or subprocess_env(), MPLBACKEND="Agg", KERNELC_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache))
    env.pop("KERNELC_INTERPRET", None)
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert js.exists(), r.stderr[-3000:]
    res = json.loads(js.read_text())
    assert res["rc"] == 0, res["stderr_tail"]
    return res


def test_table_shards_split_the_benchmarks(tmp_path):
    cache = tmp_path / "kcache"
    res = _runner(tmp_path, "kernelc", ["--dry-run", "--tables", "1/2"], cache)
    assert [b["plot_name"] for b in res["benchmarks"]] == ["t1"]
    # the code outside the tables runs in every shard: add_kernel at 128, and table 1's at 512
    assert res["compile"]["kernels"] == 2, res["compile"]
    res0 = _runner(tmp_path, "kernelc", ["--dry-run", "--tables", "0/2"], cache, name="r0.json")
    assert [b["plot_name"] for b in res0["benchmarks"]] == ["t0", "t2"]


TRITON_SITE = os.environ.get("KERNELC_TEST_TRITON_SITE", "/work/ext/triton_site")


@pytest.mark.skipif(not os.path.isdir(os.path.join(TRITON_SITE, "triton")),
                    reason="needs an unpacked Triton wheel (KERNELC_TEST_TRITON_SITE)")
def test_triton_dry_run_shards_fill_its_cache_once(tmp_path):
    env = subprocess_env()
    env["PYTHONPATH"] = TRITON_SITE + os.pathsep + env["PYTHONPATH"]
    # two processes splitting the compiles by kernel: each kernel compiled once, by one of them
    shared = tmp_path / "tshared"
    runs = [_runner(tmp_path, "triton", ["--dry-run", "--kernels", f"{i}/2"], shared, name=f"s{i}.json", env=env)
            for i in range(2)]
    for res in runs:
        assert res["triton_version"].startswith("3.")
        assert "DEVICE meta meta" in res["stdout_tail"]
    counts = [r["compile"] for r in runs]
    assert [c["cache_hits"] for c in counts] == [0, 0] and sum(c["kernels"] for c in counts) == 8, counts
    # Triton compiles its candidates one by one: compile time within the autotuner's wall time
    assert any(c["autotune_compile_s"] > 0 for c in counts)
    assert all(c["autotune_compile_s"] <= c["autotune_s"] for c in counts), counts
    cubins = [f for _, _, files in os.walk(shared) for f in files if f.endswith(".cubin")]
    assert len(cubins) == 8
    again = _runner(tmp_path, "triton", ["--dry-run"], shared, name="r2.json", env=env)
    assert (again["compile"]["cache_hits"], again["compile"]["cache_misses"]) == (8, 0), again["compile"]


def test_copy_cache_rewrites_triton_groups_and_drops_tuning_results(tmp_path):
    from bench.triton_tutorials import copy_cache
    src = tmp_path / "warm"
    d = src / "HASH1"
    d.mkdir(parents=True)
    (d / "k.cubin").write_bytes(b"\x7fELF")
    (d / "k.json").write_text("{}")
    (d / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.cubin": str(d / "k.cubin"),
                                                                  "k.json": str(d / "k.json")}}))
    (src / "HASH2").mkdir()
    (src / "HASH2" / "f.autotune.json").write_text("{}")
    dst = tmp_path / "run" / "triton_cache"
    assert copy_cache(str(src), str(dst), "triton") == 1
    grp = json.loads((dst / "HASH1" / "__grp__k.json").read_text())
    assert grp["child_paths"] == {"k.cubin": str(dst / "HASH1" / "k.cubin"), "k.json": str(dst / "HASH1" / "k.json")}
    assert not (dst / "HASH2" / "f.autotune.json").exists()

    ksrc = tmp_path / "kwarm"
    (ksrc / "ab" / "abcdef").mkdir(parents=True)
    (ksrc / "ab" / "abcdef" / "meta.json").write_text("{}")
    (ksrc / "autotune").mkdir()
    (ksrc / "autotune" / "k-1.json").write_text("{}")
    kdst = tmp_path / "run" / "kernelc_cache"
    assert copy_cache(str(ksrc), str(kdst), "kernelc") == 1
    assert (kdst / "ab" / "abcdef" / "meta.json").exists() and not (kdst / "autotune").exists()
    assert copy_cache(str(tmp_path / "none"), str(tmp_path / "empty"), "kernelc") == 0


def test_main_warms_once_and_runs_from_copies(tmp_path, monkeypatch):
    import bench.triton_tutorials as tt
    src = tmp_path / "src"
    src.mkdir()
    (src / "06-fused-attention.py").write_text("")
    warmed, ran = [], []

    def fake_warm(path, impl, cache, points, spread, jobs, timeout, site, tutorial_args=(), **kw):
        warmed.append((os.path.basename(path), impl, jobs))
        return {"jobs": jobs, "rc": [0] * jobs, "compile": {"kernels": 3}, "wall_s": 1.0}

    def fake_run_one(path, impl, points, timeout, site, spread=False, warm=None, **kw):
        ran.append((impl, os.path.basename(warm) if warm else None))
        return {"benchmarks": [], "first_calls": [], "rc": 0, "seconds": 0.1,
                "compile": {"kernels": 3, "cache_hits": 3}}
    monkeypatch.setattr(tt, "warm_caches", fake_warm)
    monkeypatch.setattr(tt, "run_one", fake_run_one)
    monkeypatch.setattr(tt, "environment", lambda: {})
    out = tmp_path / "r.json"
    assert tt.main(["--tutorials", str(src), "--only", "06", "--repeats", "2", "--warm", "--warm-jobs", "3",
                    "--libdevice", str(src / "06-fused-attention.py"), "--out", str(out)]) == 0
    assert warmed == [("06-fused-attention.py", "triton", 3), ("06-fused-attention.py", "kernelc", 3)]
    assert ran == [("triton", "triton"), ("kernelc", "kernelc"), ("kernelc", "kernelc"), ("triton", "triton")]
    rep = json.load(open(out))
    assert rep["warm"]["06-fused-attention"]["kernelc"]["compile"]["kernels"] == 3
    assert rep["tutorials"]["06-fused-attention"]["kernelc"]["compile"] == [{"kernels": 3, "cache_hits": 3}] * 2


def test_a_failing_table_is_recorded_and_the_others_run(tmp_path):
    tut = tmp_path / "tut.py"
    tut.write_text('''
import triton


def bench(N, provider, which):
    if which == 1:
        raise ValueError("table 1 cannot run")
    return float(N + which)


tables = [triton.testing.Benchmark(x_names=["N"], x_vals=[8, 16], line_arg="provider", line_vals=["triton"],
                                   line_names=["Triton"], ylabel="GB/s", plot_name=f"t{i}", args={"which": i})
          for i in range(3)]
triton.testing.perf_report(tables)(bench).run(print_data=True)
''')
    js = tmp_path / "r.json"
    r = subprocess.run([sys.executable, os.path.join(REPO, "bench", "tutorial_runner.py"), "--impl", "kernelc",
                        "--json", str(js), str(tut)], cwd=tmp_path, env=dict(subprocess_env(), MPLBACKEND="Agg"),
                       capture_output=True, text=True, timeout=300)
    res = json.loads(js.read_text())
    assert res["rc"] == 1 and r.returncode == 1  # the tutorial still fails as a whole
    assert [b["plot_name"] for b in res["benchmarks"]] == ["t0", "t2"]
    assert res["benchmarks"][1]["rows"] == [[8.0, 10.0], [16.0, 18.0]]
    assert res["table_errors"] == [{"plot_name": "t1", "error": "ValueError: table 1 cannot run"}]


def test_kernelc_dry_run_shards_compile_each_kernel_once_and_a_run_over_their_cache_hits(tmp_path):
    cache = tmp_path / "kcache"
    counts, requests, compiled_tuned = [], [], []
    for i in range(2):
        res = _runner(tmp_path, "kernelc", ["--dry-run", "--kernels", f"{i}/2"], cache, name=f"s{i}.json")
        assert res["dry_run"] is True
        assert "DEVICE meta meta" in res["stdout_tail"]  # "cuda" tensors (and the driver's device) live on meta
        assert [b["plot_name"] for b in res["benchmarks"]] == ["t0", "t1", "t2"]  # every shard runs everything
        assert res["compile"]["cache_hits"] == 0  # the other shard never compiled this one's kernels
        # the autotuner runs in every shard (kernelc compiles the candidates on parallel threads: their summed
        # seconds may exceed the wall time)
        assert res["compile"]["autotune_s"] > 0, res["compile"]
        counts.append(res["compile"]["kernels"])
        compiled_tuned.append(res["compile"]["autotune_compile_s"] > 0)
        requests.append(sorted(res["compile"]["requests"]))
    assert any(compiled_tuned)  # scale_kernel's candidates were compiled by one shard or both
    # both processes were asked for the same 8 compiles (what the split relies on): add_kernel at BLOCK 128
    # (before the tables), 256, 512, 1024 (tables 0-2) + scale_kernel's two configs at SCALE 2 and 3
    assert requests[0] == requests[1] and len(set(requests[0])) == 8
    assert sum(counts) == 8 and all(counts), counts  # the 8 kernels, each compiled by one shard
    entries = [d for d, _, files in os.walk(cache) if "meta.json" in files]
    assert len(entries) == 8
    for e in entries:  # compiled for the H100 the GPU run will look the kernels up for
        assert json.load(open(os.path.join(e, "meta.json")))["target"].startswith("sm_90")
    # the union is the whole run's cache: an unsharded run finds everything and compiles nothing
    again = _runner(tmp_path, "kernelc", ["--dry-run"], cache, name="all.json")
    assert (again["compile"]["cache_hits"], again["compile"]["cache_misses"]) == (8, 0), again["compile"]
    assert again["compile"]["kernels"] == 8
    assert [b["plot_name"] for b in again["benchmarks"]] == ["t0", "t1", "t2"]
    # the configs the autotuners chose, per key (here the dry run's "choice": every timing is 1 ms)
    (chosen,) = again["autotune"]["scale_kernel"].values()
    assert "BLOCK" in chosen and "64" in chosen


def test_dry_run_retunes_only_a_call_unlike_the_ones_before():
    # 09 launches each autotuned kernel 20000 times with the same arguments: tuning each call again
    # compiled nothing new and made its dry run 260 s of host time; a new kind of call still retunes
    import torch
    from bench.tutorial_dryrun import _retuning

    class Tuner:
        def __init__(self):
            self.cache, self.runs = {}, []

        def run(self, *args, **kwargs):
            self.runs.append(not self.cache)   # True: this call tuned (every config compiled)
            self.cache["k"] = "config"

    Tuner.run = _retuning(Tuner.run)
    t = Tuner()
    a = torch.empty(64, 64, device="meta")
    for _ in range(3):
        t.run(a, 64, grid=lambda m: (1,), FLAG=False)
    t.run(torch.empty(64, 64, device="meta"), 64, grid=lambda m: (2,), FLAG=False)   # same kind of call
    t.run(a, 64, grid=None, FLAG=True)                     # another constexpr: on a GPU, another compile
    t.run(a.half(), 64, grid=None, FLAG=True)              # another dtype
    t.run(a, 128, grid=None, FLAG=True)                    # another size
    assert t.runs == [True, False, False, False, True, True, True]
