"""Autotuning: selection with a fake timer, caching per key, persistence, pruning, hooks."""
import pytest

import kernelc
from kernelc.runtime import tuning
from kernelc.runtime.autotuner import Autotuner, Config

FAKE_MS = {}


class FakeKernel:
    """Stands in for a JITFunction: records launches; 'time' comes from FAKE_MS by BLOCK."""
    arg_names = ["x", "n"]
    __name__ = "fake"

    def __init__(self):
        self.runs = []
        self.warmups = []
        self.fn = None

    def warmup(self, *args, grid, **kw):
        self.warmups.append(kw["BLOCK"])
        if kw["BLOCK"] == 512:
            raise RuntimeError("out of shared memory")

    def run(self, *args, grid, **kw):
        self.runs.append(kw["BLOCK"])


@pytest.fixture
def fake_bench(monkeypatch):
    def bench(call, warmup, rep):
        k = FAKE.runs
        before = len(k)
        call()
        return FAKE_MS[k[before]]
    monkeypatch.setattr(tuning, "_bench", bench)
    monkeypatch.setattr(tuning, "_device_name", lambda: "Fake GPU")
    monkeypatch.setattr(tuning, "dependency_fingerprint", lambda fn: "fake")


FAKE = None


def _tuner(configs, **kw):
    global FAKE
    FAKE = FakeKernel()
    t = Autotuner(FAKE, FakeKernel.arg_names, configs, key=["n"], **kw)
    return t


CONFIGS = [Config({"BLOCK": b}, num_warps=4) for b in (64, 128, 256, 512)]


def test_picks_fastest_and_caches_per_key(fake_bench, capsys, monkeypatch):
    monkeypatch.setenv("KERNELC_PRINT_AUTOTUNING", "1")
    FAKE_MS.update({64: 3.0, 128: 1.0, 256: 2.0})
    t = _tuner(CONFIGS)
    best = tuning.select_config(t, CONFIGS, (None, 1000), {}, (1,))
    assert best.kwargs == {"BLOCK": 128}
    assert sorted(FAKE.warmups) == [64, 128, 256, 512]      # every candidate compiled (in parallel)
    assert 512 not in FAKE.runs                              # the one that failed to compile was skipped
    assert "best Config({BLOCK: 128}" in capsys.readouterr().err
    n_runs = len(FAKE.runs)
    assert tuning.select_config(t, CONFIGS, (None, 1000), {}, (1,)) is best and len(FAKE.runs) == n_runs
    FAKE_MS.update({64: 0.5})
    assert tuning.select_config(t, CONFIGS, (None, 2000), {}, (1,)).kwargs == {"BLOCK": 64}   # new key: re-tuned


def test_result_persists_on_disk(fake_bench):
    FAKE_MS.update({64: 3.0, 128: 1.0, 256: 2.0})
    t = _tuner(CONFIGS)
    tuning.select_config(t, CONFIGS, (None, 77), {}, (1,))
    t2 = _tuner(CONFIGS)
    FAKE_MS.update({64: 0.1})  # would win if re-tuned
    assert tuning.select_config(t2, CONFIGS, (None, 77), {}, (1,)).kwargs == {"BLOCK": 128}
    assert FAKE.runs == []                                   # nothing timed: read from disk


def test_prune_and_reset(fake_bench):
    import torch
    FAKE_MS.update({64: 3.0, 128: 1.0, 256: 2.0})
    x = torch.ones(4)
    pruned = []
    seen = []

    def prune(cs, nargs, **kwargs):  # Triton 3.6's call: positional arguments by name, then the keywords
        seen.append((sorted(nargs), sorted(kwargs)))
        return [c for c in cs if c.kwargs["BLOCK"] != 128]
    t = _tuner(CONFIGS, prune_configs_by={"early_config_prune": prune}, reset_to_zero=["x"])
    configs = t.prune_configs({"n": 5}, {"x": x})
    assert seen == [(["x"], ["n"])]
    best = tuning.select_config(t, configs, (x, 5), {}, (1,))
    assert best.kwargs == {"BLOCK": 256}
    assert torch.equal(x, torch.zeros(4))                    # reset before every timed run
    with pytest.raises(ValueError, match="removed every config"):
        _tuner(CONFIGS, prune_configs_by={"early_config_prune": lambda cs, a: []}).prune_configs({})


def test_unknown_key_is_ignored_with_a_warning():
    # Triton ignores key names that are not parameters (tutorial 08 has one misspelt); so do we, aloud
    with pytest.warns(UserWarning, match=r"autotune key\(s\) 'm' of fake are not parameters"):
        t = Autotuner(FakeKernel(), FakeKernel.arg_names, CONFIGS, key=["m", "n"])
    assert t.key == ["m", "n"]


def test_a_tensor_in_the_key_is_keyed_by_identity_as_in_triton(fake_bench, tmp_path, monkeypatch):
    # Triton 3.6 puts a key argument that is a tensor into its key as the object: each new tensor
    # (tutorial 08 keys on its per-problem pointer arrays) is tuned again, the same object is not
    import gc
    import torch
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path))
    FAKE_MS.update({64: 3.0, 128: 1.0, 256: 2.0})
    global FAKE
    FAKE = FakeKernel()
    t = Autotuner(FAKE, FakeKernel.arg_names, CONFIGS, key=["x"])
    a, b = torch.ones(4), torch.ones(4)   # equal values, dtypes and shapes: only identity differs
    assert tuning.select_config(t, CONFIGS, (a, 1), {}, (1,)).kwargs == {"BLOCK": 128}
    n = len(FAKE.runs)
    assert tuning.select_config(t, CONFIGS, (a, 1), {}, (1,)).kwargs == {"BLOCK": 128} and len(FAKE.runs) == n
    FAKE_MS.update({64: 0.5})
    assert tuning.select_config(t, CONFIGS, (b, 1), {}, (1,)).kwargs == {"BLOCK": 64}   # a new tensor: tuned again
    assert len(FAKE.runs) > n
    assert not list(tmp_path.rglob("*.json"))            # an identity means nothing to another process
    assert len(t.cache) == 2
    del a
    gc.collect()
    assert len(t.cache) == 1                             # the dead tensor's entry left with it (ids are reused)
    assert len(t.picks) == 2                             # reports still see both picks


def test_a_jit_kernel_is_timed_through_its_launch_fast_path(monkeypatch):
    # kernel[grid], bound once per tuning, as a user launches it: not JITFunction.run's general binding on every
    # timed call (the GPU test test_autotune_times_a_short_kernel_as_do_bench_does says why)
    import kernelc.language as kl
    from kernelc.runtime.jit import JITFunction

    @kernelc.jit
    def k(x_ptr, n, BLOCK: kl.constexpr):
        pass

    grids, calls = [], []
    orig = JITFunction.__getitem__

    def getitem(self, grid):
        grids.append(grid)
        launch = orig(self, grid)
        return lambda *a, **kw: (calls.append(kw.get("BLOCK")), launch(*a, **kw))
    monkeypatch.setattr(JITFunction, "__getitem__", getitem)
    monkeypatch.setattr(JITFunction, "warmup", lambda self, *a, grid, **kw: None)
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, grid, **kw: None)
    monkeypatch.setattr(tuning, "_bench", lambda call, warmup, rep: (call(), calls[-1] / 1000)[1])
    monkeypatch.setattr(tuning, "_device_name", lambda: "Fake GPU")
    t = Autotuner(k, ["x_ptr", "n"], [Config({"BLOCK": b}) for b in (256, 64, 128)], key=["n"])
    assert tuning.select_config(t, t.configs, (None, 7), {}, (1,)).kwargs["BLOCK"] == 64
    assert grids == [(1,)] and calls == [256, 64, 128]
