"""Triton's host API on kernelc: driver.active, testing.perf_report/Benchmark/do_bench, warmup's compiled
kernel, set_allocator, autotune's arguments. CPU tests run kernels in the interpreter; gpu tests check the
same on a GPU."""
import os

import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc.runtime.driver import active, driver


@kernelc.jit
def twice(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_driver_active_without_gpu(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    assert active.get_active_torch_device() == torch.device("cpu")
    t = active.get_current_target()
    assert (t.backend, t.arch, t.warp_size) == ("cuda", 90, 32)
    p = active.utils.get_device_properties(None)
    assert p["multiprocessor_count"] == 132 and p["warpSize"] == 32 and p["max_num_regs"] == 65536
    assert p["max_shared_mem"] == 227 * 1024  # sm_90's opt-in limit (cubintools/target.py)
    marker = object()
    driver.set_active(marker)
    try:
        import kernelc.runtime.driver as d
        assert d.active is marker  # looked up on each access, as Triton's DriverConfig
    finally:
        driver.reset_active()


def test_current_target_follows_the_current_device(monkeypatch):
    # host code asks for the target several times a call (tutorial 06's is_cuda/is_hopper): it is kept per
    # device, so a process that switches devices still gets each device's own architecture
    import kernelc.runtime.active as act
    import kernelc.runtime.device as dev
    import kernelc.runtime.driver as drv
    monkeypatch.delenv("KERNELC_INTERPRET", raising=False)
    monkeypatch.setattr(dev, "cuda_available", lambda: True)
    monkeypatch.setattr(act, "_TARGETS", {})
    asked = []

    def props(index):
        asked.append(index)
        return {0: {"major": 9, "minor": 0}, 1: {"major": 8, "minor": 6}}[index]
    monkeypatch.setattr(drv, "device_properties", props)
    current = [0]
    monkeypatch.setattr(dev, "current_device", lambda: current[0])  # torch's current device, as kernelc reads it
    first = active.get_current_target()
    assert (first.backend, first.arch, first.warp_size) == ("cuda", 90, 32)
    assert active.get_current_target() is first and asked == [0]
    current[0] = 1
    assert active.get_current_target().arch == 86
    current[0] = 0
    assert active.get_current_target() is first and asked == [0, 1]


def test_warmup_returns_a_launchable_compiled_kernel(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    k = twice.warmup(x, y, 100, BLOCK=64, num_warps=2, grid=(1,))
    k._init_handles()
    assert k.n_regs > 0 and k.n_spills == 0
    assert k.metadata.shared == k.shared and k.metadata.num_warps == 2 and k.metadata.name == k.name
    assert "ptx" in k.asm and k.n_max_threads == 64
    k[(2, 1, 1)](x, y, 100, 64)  # every argument, constexprs included (Triton's tutorial 02 launch)
    assert torch.equal(y, 2 * x)
    y.zero_()
    k[(2,)](x, y, 100)  # constexprs left out: the warmed values
    assert torch.equal(y, 2 * x)


@pytest.mark.parametrize("key", ["general", "generated"])
def test_repeated_warmup_returns_the_same_kernel_without_rebinding(monkeypatch, key):
    # tutorial 02 warms up before every launch: a call that specialises as an earlier one is answered from
    # a memo keyed like a launch; anything that changes the specialisation is warmed up again. Where the
    # launch fast path exists (a GPU; made here by hand) the key comes from its generated binding
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    monkeypatch.setattr(twice, "_warm_memo", {})
    generated = []
    if key == "generated":
        from kernelc.runtime.fastpath import make_binder
        fast = make_binder(twice)
        real_warm_key = fast.warm_key
        fast.warm_key = lambda *a, **kw: generated.append(real_warm_key(*a, **kw)) or generated[-1]
        monkeypatch.setattr(twice, "_fast", fast)
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    binds = []
    real_bind = type(twice).bind
    monkeypatch.setattr(type(twice), "bind", lambda self, a, kw: binds.append(1) or real_bind(self, a, kw))
    k = twice.warmup(x, y, 100, BLOCK=64, num_warps=2, grid=(1,))
    n = len(binds)
    assert twice.warmup(x.clone(), y, 100, BLOCK=64, num_warps=2, grid=(1,)) is k and len(binds) == n
    assert twice.warmup(x, y, 116, BLOCK=64, num_warps=2) is k  # 116 specialises as 100 does (not 1, not %16)
    assert len(binds) == n
    k2 = twice.warmup(x, y, 96, BLOCK=64, num_warps=2)  # divisible by 16: another specialisation
    k3 = twice.warmup(x, y, 100, BLOCK=128, num_warps=2)  # another constexpr
    k4 = twice.warmup(x, y, 100, BLOCK=64, num_warps=4)  # another option
    k5 = twice.warmup(x.double(), y.double(), 100, BLOCK=64, num_warps=2)  # another dtype
    assert len(binds) == n + 4
    assert k3.metadata.num_warps == 2 and k4.metadata.num_warps == 4 and k3 is not k and k4 is not k and k5 is not k
    assert k2.constexprs == k.constexprs
    yy = torch.zeros(100, dtype=torch.float64)
    k5[(2,)](x.double(), yy, 100)
    assert torch.equal(yy, 2 * x.double())
    if key == "generated":
        assert len(generated) == 7 and all(g is not None for g in generated)
        # a constexpr's type is part of the key (True == 1 as a dict key); options it cannot key: the general key
        assert real_warm_key(x, y, 100, BLOCK=True) != real_warm_key(x, y, 100, BLOCK=1)
        assert real_warm_key(x, y, 100, BLOCK=64, enable_fp_fusion=False) is None
        assert real_warm_key(x, y, 100, BLOCK=64, num_ctas=2) is None
        assert real_warm_key(x, y, 100, BLOCK=64, num_ctas=1) == real_warm_key(x, y, 100, BLOCK=64)


def test_warmed_kernel_launch_with_every_argument_passes_the_warmed_options(monkeypatch):
    # tutorial 02's launch, every call: all parameters by position; the launch adds the options of the warmup
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    k = twice.warmup(x, y, 100, BLOCK=64, num_warps=2, grid=(1,))
    runs = []
    real_run = type(twice).run
    monkeypatch.setattr(type(twice), "run", lambda self, *a, **kw: runs.append(kw) or real_run(self, *a, **kw))
    k[(2, 1, 1)](x, y, 100, 64)
    assert torch.equal(y, 2 * x) and runs[-1]["num_warps"] == 2
    y.zero_()
    k[(2,)](x, y, 100)  # constexprs left out: the general branch, the same options
    assert torch.equal(y, 2 * x) and runs[-1]["num_warps"] == 2 and runs[-1]["BLOCK"] == 64


def test_perf_report_table_plot_and_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    calls = []

    @kernelc.testing.perf_report(kernelc.testing.Benchmark(
        x_names=["n"], x_vals=[1, 2, 4], line_arg="provider", line_vals=["a", "b"], line_names=["A", "B"],
        styles=[("blue", "-"), ("green", "--")], ylabel="GB/s", plot_name="demo", args={"k": 10}))
    def bench(n, provider, k):
        calls.append((n, provider, k))
        return (n * k, n * k - 1, n * k + 1) if provider == "a" else 0.5 * n
    df = bench.run(print_data=True, save_path=str(tmp_path), return_df=True)
    out = capsys.readouterr().out
    assert out.startswith("demo:\n") and "A (GB/s)" in out and "B (GB/s)" in out
    assert list(df.columns) == ["n", "A (GB/s)", "B (GB/s)"]
    assert df["A (GB/s)"].tolist() == [10, 20, 40] and df["B (GB/s)"].tolist() == [0.5, 1.0, 2.0]
    assert len(calls) == 6 and all(c[2] == 10 for c in calls)
    for f in ("demo.png", "demo.csv", "results.html"):
        assert (tmp_path / f).stat().st_size > 0
    assert (tmp_path / "demo.csv").read_text().splitlines()[0] == "n,A (GB/s),B (GB/s)"


def test_do_bench_on_cpu_times_with_the_host_clock(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    import time
    ms, lo, hi = kernelc.testing.do_bench(lambda: time.sleep(0.002), warmup=1, rep=20, quantiles=[0.5, 0.2, 0.8])
    assert 1.5 < ms < 50 and lo <= ms <= hi
    assert kernelc.testing.do_bench_cudagraph(lambda: None, rep=2) >= 0
    with pytest.raises(ValueError, match="return_mode"):
        kernelc.testing.do_bench(lambda: None, warmup=0, rep=1, return_mode="avg")


def test_set_allocator_supplies_scratch(monkeypatch):
    from kernelc.runtime import scratch
    asked = []

    class Buf:
        def data_ptr(self):
            return 0x7000

    def alloc(size, alignment, stream):
        asked.append((size, alignment, stream))
        return Buf()

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    kernelc.set_allocator(alloc)
    try:
        assert scratch.scratch_pointer(300, 5, 0) == 0x7000
        assert scratch.scratch_pointer(200, 5, 0) == 0x7000 and len(asked) == 1  # reused while big enough
        assert asked[0] == (300, 128, 5)
        with pytest.raises(TypeError, match="set_allocator takes a function"):
            kernelc.set_allocator(42)
    finally:
        kernelc.set_allocator(None)
    assert scratch._allocator is None


def test_autotune_arguments_as_triton():
    model_calls = []

    def perf_model(**kw):
        model_calls.append(kw["BLOCK"])
        return kw["BLOCK"]  # smaller is "faster"

    configs = [kernelc.Config({"BLOCK": b}) for b in (128, 32, 64)]
    tuned = kernelc.autotune(configs, key=["n"], prune_configs_by={"perf_model": perf_model, "top_k": 2},
                             pre_hook=lambda kw: None, post_hook=lambda kw, exception: None,
                             use_cuda_graph=True, do_bench=lambda f, quantiles: [1.0, 1.0, 1.0],
                             cache_results=True)(twice)
    kept = tuned.prune_configs({"x_ptr": None, "y_ptr": None, "n": 10})
    assert [c.kwargs["BLOCK"] for c in kept] == [32, 64] and sorted(model_calls) == [32, 64, 128]
    assert tuned.pre_hook is not None and tuned.post_hook is not None and tuned.use_cuda_graph
    with pytest.raises(NotImplementedError, match="ir_override"):
        kernelc.Config({"BLOCK": 32}, ir_override="k.ttgir")


@pytest.mark.gpu
def test_gpu_driver_warmup_and_tuning_hooks():
    dev = active.get_active_torch_device()
    assert dev.type == "cuda"
    p = active.utils.get_device_properties(dev.index)
    tp = torch.cuda.get_device_properties(dev.index)
    assert p["multiprocessor_count"] == tp.multi_processor_count
    assert active.get_current_target().arch == tp.major * 10 + tp.minor
    x = torch.arange(5000, dtype=torch.float32, device="cuda")
    y = torch.zeros_like(x)
    k = twice.warmup(x, y, 5000, BLOCK=1024, grid=(1,))
    k._init_handles()
    k[(5, 1, 1)](x, y, 5000, 1024)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x) and k.n_regs > 0
    seen = []
    tuned = kernelc.autotune([kernelc.Config({"BLOCK": 256}), kernelc.Config({"BLOCK": 512})], key=["n"],
                             pre_hook=lambda kw: seen.append(("pre", kw["BLOCK"])),
                             post_hook=lambda kw, exception: seen.append(("post", exception)),
                             cache_results=False)(twice)
    os.environ["KERNELC_AUTOTUNE_DISK_CACHE"] = "0"
    try:
        tuned[lambda m: (kernelc.cdiv(5000, m["BLOCK"]),)](x, y, 5000)
    finally:
        del os.environ["KERNELC_AUTOTUNE_DISK_CACHE"]
    assert ("pre", 256) in seen and ("pre", 512) in seen and ("post", None) in seen
    assert tuned.configs_timings and tuned.best_config in tuned.configs_timings
    ms = kernelc.testing.do_bench_cudagraph(lambda: twice[(5,)](x, y, 5000, BLOCK=1024))
    assert 0 < ms < 10


def test_autotune_hooks_and_custom_do_bench_drive_the_selection(monkeypatch):
    from kernelc.runtime import tuning
    from kernelc.runtime.autotuner import Autotuner, Config

    class Fake:  # stands in for a JIT kernel: records what ran
        arg_names = ["x", "n"]
        __name__ = "fake"
        fn = None

        def __init__(self):
            self.ran = []

        def warmup(self, *a, grid, **kw):
            pass

        def run(self, *a, grid, **kw):
            self.ran.append(kw["BLOCK"])
            if kw["BLOCK"] == 32:
                raise RuntimeError("boom")

    monkeypatch.setattr(tuning, "_device_name", lambda: "Fake GPU")
    monkeypatch.setattr(tuning, "dependency_fingerprint", lambda fn: "fake")
    monkeypatch.setenv("KERNELC_AUTOTUNE_DISK_CACHE", "0")
    events, fake = [], Fake()
    ms = {16: 2.0, 64: 1.0}

    def bench(call, quantiles):
        call()
        return [ms[fake.ran[-1]], 0.0, 0.0]

    configs = [Config({"BLOCK": b}) for b in (16, 32, 64)]
    t = Autotuner(fake, Fake.arg_names, configs, key=["n"], do_bench=bench,
                  pre_hook=lambda kw: events.append(("pre", kw["BLOCK"])),
                  post_hook=lambda kw, exception: events.append(("post", kw["BLOCK"], type(exception).__name__)))
    best = tuning.select_config(t, configs, (None, 100), {}, (1,))
    assert best.kwargs == {"BLOCK": 64}
    assert ("pre", 16) in events and ("post", 16, "NoneType") in events
    assert ("post", 32, "RuntimeError") in events  # the failing config's exception reaches post_hook
    assert t.configs_timings[configs[1]] == float("inf")
