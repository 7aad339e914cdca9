"""The launch host path's shortcuts keep the general path's semantics (CPU): the binder's inline key parts equal
spec_part's, the descriptor key's divisibility table, TensorDescriptor's checks, options read live from the
environment, an autotuned launch that prunes only when it tunes, set_allocator's buffers."""
import math
import os

import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc import options
from kernelc.runtime import scratch, tuning
from kernelc.runtime import device as _device
from kernelc.runtime.autotuner import Autotuner, Config
from kernelc.runtime.tuning_key import key_values
from kernelc.runtime.fastpath import descriptor_part, make_binder, spec_part
from kernelc.runtime.launcher import get_state
from kernelc.tools.tensor_descriptor import TensorDescriptor


@kernelc.jit(do_not_specialize=["d"])
def _many(x_ptr, a, b, c, d, desc, BLOCK: kl.constexpr):
    pass


class _Recording(dict):
    """A kernel cache that remembers every key the fast path looked up (and never hits)."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def get(self, key, default=None):
        self.asked.append(key)
        return default


VALUES = [0, 1, 2, 15, 16, -16, 17, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**40, 2**63, True, False, 0.5, -0.0,
          float("inf"), float("-inf"), 3.4e38, None]


def test_the_binders_inline_key_parts_are_spec_parts(monkeypatch):
    st = get_state(_many)
    rec = _Recording()
    monkeypatch.setitem(st, "cache", rec)
    fast = make_binder(_many)
    monkeypatch.setattr(_many, "run", lambda *a, **kw: None)  # the general path: not under test here
    x = torch.zeros(8)
    d = TensorDescriptor(torch.zeros(32, 48, dtype=torch.float16), [32, 48], [48, 1], [16, 16])
    for v in VALUES:
        rec.asked.clear()
        fast((1,), x, v, v, v, v, d, 64)
        (parts, nw, ns, dev), = rec.asked
        assert (nw, ns) == (4, 3)
        want_c = ("c", None) if v is None else spec_part(v, True)
        want_d = ("c", None) if v is None else spec_part(v, False)   # do_not_specialize
        assert parts[1] == parts[2] == parts[3] == want_c, v
        assert parts[4] == want_d, v
        assert parts[5] == spec_part(d, True) and parts[6] == ("c", 64)
        assert type(parts[1]) is type(want_c)


def test_an_argument_spec_part_rejects_takes_the_general_path(monkeypatch):
    st = get_state(_many)
    monkeypatch.setitem(st, "cache", _Recording())
    fast = make_binder(_many)
    general = []
    monkeypatch.setattr(_many, "run", lambda *a, **kw: general.append(a))
    x = torch.zeros(8)
    for bad in (2**64, 3.5e38, -1e39, "text"):
        with pytest.raises(TypeError):
            spec_part(bad)
        fast((1,), x, bad, 1, 1, 1, 1, 64)
    assert len(general) == 4


def _reference_descriptor_part(d, specialize=True):
    # the former implementation, kept here as the reference the table must agree with
    base = d.base
    return ("tensordesc", str(d.kl_type), specialize and base.data_ptr() & 15 == 0, bool(base.is_cuda),
            tuple(specialize and s & 15 == 0 for s in d.shape), tuple(specialize and s & 15 == 0 for s in d.strides[:-1]))


@pytest.mark.parametrize("shape,strides", [([32, 17], [17, 1]), ([17, 32], [32, 1]), ([32], [1]), ([17], [1]),
                                           ([16, 32, 48], [1536, 48, 1]), ([16, 32, 48], [1600, 50, 1]),
                                           ([17, 1], [1, 1])])
def test_descriptor_key_parts_match_the_reference(shape, strides):
    t = torch.zeros(4096, dtype=torch.float16)
    for view in (t, t[1:]):
        d = TensorDescriptor(view, shape, strides, [16] * len(shape))
        for spec in (True, False):
            assert descriptor_part(d, spec) == _reference_descriptor_part(d, spec)
            assert descriptor_part(d, spec) == _reference_descriptor_part(d, spec)  # from the table now


@pytest.mark.parametrize("kw,err,match", [
    (dict(shape=[], strides=[], block_shape=[]), ValueError, "1 to 5 dimensions"),
    (dict(shape=[2] * 6, strides=[1] * 6, block_shape=[1] * 6), ValueError, "1 to 5 dimensions"),
    (dict(shape=[4, 4], strides=[1], block_shape=[2, 2]), ValueError, "one entry per dimension"),
    (dict(shape=[4, 4], strides=[4, 1], block_shape=[2]), ValueError, "one entry per dimension"),
    (dict(shape=[-1, 4], strides=[4, 1], block_shape=[2, 2]), ValueError, "non-negative"),
    (dict(shape=[2**31, 4], strides=[4, 1], block_shape=[2, 2]), ValueError, "fit in int32"),
    (dict(shape=[4, 4], strides=[4, 1], block_shape=[3, 2]), ValueError, "powers of two"),
    (dict(shape=[4, 4], strides=[4, 1], block_shape=[0, 2]), ValueError, "powers of two"),
    (dict(shape=[4, 4], strides=[1, 4], block_shape=[2, 2]), ValueError, "last stride must be 1"),
    (dict(shape=[4, 4], strides=[4, 1], block_shape=[2, 2], padding="inf"), ValueError, "padding must be one of"),
])
def test_tensor_descriptor_checks_say_what_is_wrong(kw, err, match):
    x = torch.zeros(16, dtype=torch.float16)
    with pytest.raises(err, match=match):
        TensorDescriptor(x, **kw)


def test_tensor_descriptor_dtype_checks_hold_after_the_dtype_was_seen():
    ok = TensorDescriptor(torch.zeros(16, dtype=torch.int32), [4, 4], [4, 1], [2, 2])   # int32 seen, zero padding
    assert ok.shape == [4, 4]
    for _ in range(2):   # the second time from the table of seen dtypes
        with pytest.raises(ValueError, match="padding 'nan' needs a floating-point"):
            TensorDescriptor(torch.zeros(16, dtype=torch.int32), [4, 4], [4, 1], [2, 2], padding="nan")
        with pytest.raises(TypeError, match="does not support bool"):
            TensorDescriptor(torch.zeros(16, dtype=torch.bool), [4, 4], [4, 1], [2, 2])
    nan = TensorDescriptor(torch.zeros(16, dtype=torch.float16), [4, 4], [4, 1], [2, 2], padding="nan")
    assert nan.padding == "nan"


def test_tensor_descriptor_takes_sizes_of_any_integer_type():
    import numpy as np
    x = torch.zeros(64, 32, dtype=torch.float16)
    d = TensorDescriptor(x, x.shape, x.stride(), [np.int64(16), 16])
    assert d.shape == [64, 32] and d.strides == [32, 1] and d.block_shape == [16, 16]
    assert all(type(v) is int for v in d.shape + d.strides + d.block_shape)


def test_options_follow_the_environment_as_it_changes(monkeypatch):
    monkeypatch.delenv("KERNELC_INTERPRET", raising=False)
    assert options.get("KERNELC_INTERPRET") is False
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    assert options.get("KERNELC_INTERPRET") is True
    monkeypatch.setenv("KERNELC_INTERPRET", " off ")
    assert options.get("KERNELC_INTERPRET") is False
    monkeypatch.setenv("KERNELC_INTERPRET", "perhaps")
    for _ in range(2):  # a bad value is not remembered as good
        with pytest.raises(options.OptionError, match="KERNELC_INTERPRET='perhaps'"):
            options.get("KERNELC_INTERPRET")
    monkeypatch.delenv("KERNELC_INTERPRET")
    assert options.get("KERNELC_INTERPRET") is False
    assert options.get("KERNELC_INTERPRET", {"KERNELC_INTERPRET": "yes"}) is True


def test_options_read_a_replaced_environment(monkeypatch):
    monkeypatch.setattr(os, "environ", {"KERNELC_INTERPRET": "true"})
    assert options.get("KERNELC_INTERPRET") is True


class _Kernel:
    """Stands in for a JIT kernel under an autotuner: records launches."""
    arg_names = ["x", "n"]
    __name__ = "hostpath"
    interpret = False

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *a, **kw: self.launches.append(kw.get("BLOCK"))

    def run(self, *a, grid, **kw):  # the autotuner times candidates through it
        self.launches.append(kw["BLOCK"])

    def warmup(self, *a, grid, **kw):
        return None


def test_a_tuned_key_launches_its_pick_without_pruning_again(monkeypatch):
    monkeypatch.setattr(_device, "cuda_available", lambda: True)
    monkeypatch.delenv("KERNELC_INTERPRET", raising=False)
    monkeypatch.delenv("KERNELC_OVERRIDE", raising=False)
    monkeypatch.setattr(tuning, "_device_name", lambda: "Fake GPU")
    monkeypatch.setattr(tuning, "dependency_fingerprint", lambda fn: "fake")
    times = {64: 2.0, 128: 1.0, 256: 3.0}
    monkeypatch.setattr(tuning, "_tuner_bench", lambda tuner, call: (call(), times[k.launches[-1]])[1])
    pruned = []

    def prune(configs, nargs, **kwargs):
        pruned.append(nargs["n"])
        return configs
    k = _Kernel()
    t = Autotuner(k, k.arg_names, [Config({"BLOCK": b}) for b in (64, 128, 256)], key=["n"],
                  prune_configs_by={"early_config_prune": prune})
    x = torch.zeros(4)
    t.run(x, 100, grid=(1,))
    assert pruned == [100] and k.launches[-1] == 128 and t.best_config.kwargs == {"BLOCK": 128}
    for _ in range(3):
        t.run(x, 100, grid=(1,))
    assert pruned == [100] and k.launches[-3:] == [128] * 3      # as Triton: pruned when tuned, not per launch
    t.run(x, 200, grid=(1,))
    assert pruned == [100, 200]                                  # a new key is pruned and tuned
    t.run(x.half(), 100, grid=(1,))
    assert pruned == [100, 200, 100]                             # the dtypes of tensor arguments are in the key
    monkeypatch.setenv("KERNELC_OVERRIDE", "hostpath:BLOCK=256")
    t.run(x, 100, grid=(1,))
    # an override still wins over a tuned pick: BLOCK is left to it (JITFunction.run applies it)
    assert k.launches[-1] is None and t.best_config.kwargs == {}
    with pytest.raises(ValueError, match="both passed"):
        monkeypatch.delenv("KERNELC_OVERRIDE")
        t.run(x, 100, grid=(1,), BLOCK=64)


def test_the_key_names_each_tensor_dtype_once_per_argument():
    k = _Kernel()
    t = Autotuner(k, k.arg_names, [Config({"BLOCK": 64})], key=["n"])
    a, b = torch.zeros(2, dtype=torch.float16), torch.zeros(2)
    assert key_values(t, {"x": a, "n": 3, "y": b}) == (3, "torch.float16", "torch.float32")
    assert key_values(t, {"x": a, "n": 3, "y": b}) == (3, "torch.float16", "torch.float32")


def test_set_allocator_every_call_keeps_no_buffers(monkeypatch):
    # tutorials 06 and 09 call set_allocator before every launch; each used to leave its buffer behind for good
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    kept = len(scratch._kept)
    try:
        for _ in range(50):
            scratch.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
            assert scratch.scratch_pointer(256, 0, 0) != 0
        assert len(scratch._kept) == kept
    finally:
        scratch.set_allocator(None)


def test_our_own_buffer_for_another_stream_is_kept(monkeypatch):
    # torch reuses a freed block only for work on the stream it was allocated on: a buffer of ours that serves a
    # launch on another stream must outlive set_allocator (a kernel queued there may still use it)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(scratch, "_allocate", lambda n, dev, stream=None: torch.empty(n, dtype=torch.uint8))
    monkeypatch.setattr(scratch, "_current_raw_stream", lambda torch, device: 7)
    scratch.set_allocator(None)
    kept = len(scratch._kept)
    scratch.scratch_pointer(100, 7, 0)    # torch's current stream: may go back to torch
    scratch.scratch_pointer(100, 5, 0)    # another stream: kept
    scratch.set_allocator(None)
    assert len(scratch._kept) == kept + 1 and scratch._kept[-1].numel() >= 100
    del scratch._kept[kept:]


def test_inline_float_bounds_are_fp32s():
    assert spec_part(3.4028234663852886e38) == "fp32" and spec_part(math.inf) == "fp32"
    assert spec_part(float("nan")) == "fp32"


def _launch_with(kinds, monkeypatch):
    """make_launch for a plain kernel whose runtime arguments have these buffer kinds; the driver call records the
    parameter bytes it would pass."""
    import ctypes
    import types
    from kernelc.runtime import driver, fastpath
    from kernelc.runtime.launcher import Loaded
    seen = []

    def fake_launch(func, g0, g1, g2, *rest):
        params = rest[-2]
        seen.append([ctypes.string_at(ctypes.c_void_p.from_address(params + 8 * i).value,
                                      ctypes.sizeof(driver.CTYPE[k])) for i, k in enumerate(kinds)])
        return (0,)
    monkeypatch.setattr(driver, "_drv", lambda: types.SimpleNamespace(cuLaunchKernel=fake_launch,
                                                                       CUstream=lambda s: s))
    monkeypatch.setenv("KERNELC_LAUNCH_IMPL", "cuda-python")
    buf = driver.ArgBuffer(tuple(kinds))
    compiled = types.SimpleNamespace(global_scratch_bytes=0)
    ent = Loaded(compiled, types.SimpleNamespace(handle=1, function=1, threads=128, shared=0, name="k"), buf,
                 list(kinds))
    fn = types.SimpleNamespace(__name__="k", arg_names=[f"p{i}" for i in range(len(kinds))])
    return fastpath.make_launch(ent, fn, [False] * len(kinds)), buf, seen


def _ctypes_bytes(kinds, values):
    # what ctypes' own field writes put in a buffer of these kinds: the reference
    import ctypes
    from kernelc.runtime import driver
    ref = driver.ArgBuffer(tuple(kinds))
    for i, v in enumerate(values):
        setattr(ref.struct, f"a{i}", v)
    return [ctypes.string_at(ref.ptrs[i], ctypes.sizeof(driver.CTYPE[k])) for i, k in enumerate(kinds)]


def test_packed_arguments_are_the_bytes_ctypes_writes(monkeypatch):
    from kernelc.runtime.fastpath import _packer
    kinds = ["ptr", "i1", "i32", "i64", "fp32", "u64", "i8", "fp64", "i32"]
    launch, buf, seen = _launch_with(kinds, monkeypatch)
    assert _packer(buf) is not None
    for values in ([0x7F0000001000, True, -5, -2**40, 0.1, 2**64 - 1, -3, 1e300, 2**31 - 1],
                   [16, False, 0, 2**62, float("inf"), 0, 127, -0.0, -2**31]):
        launch(1, 1, 1, 0, *values)
        assert seen[-1] == _ctypes_bytes(kinds, values)
    # a value out of a field's range: struct refuses it and the launch writes through ctypes, as before
    odd = [1, 2, 2**33 + 5, 1, 1.5, 1, 300, 2.0, 1]
    launch(1, 1, 1, 0, *odd)
    assert seen[-1] == _ctypes_bytes(kinds, odd)


def test_a_kind_struct_cannot_pack_keeps_ctypes_writes(monkeypatch):
    from kernelc.runtime.fastpath import _packer
    kinds = ["ptr", "fp16", "i32"]
    launch, buf, seen = _launch_with(kinds, monkeypatch)
    assert _packer(buf) is None
    launch(1, 1, 1, 0, 64, 0x3C00, 7)
    assert seen[-1] == _ctypes_bytes(kinds, [64, 0x3C00, 7])


def test_the_fast_path_launch_drops_arguments_a_specialisation_made_constexpr(monkeypatch):
    # Liger's cross-entropy passes None for some pointers: that specialisation compiles them away, while the
    # generated fast path hands over every declared runtime argument ("launch() takes 17 positional arguments
    # but 22 were given" on its second call, before the fix)
    import ctypes
    import types
    from kernelc.runtime import driver, fastpath
    from kernelc.runtime.launcher import Loaded
    seen = []

    def fake_launch(func, g0, g1, g2, *rest):
        params = rest[-2]
        seen.append([ctypes.string_at(ctypes.c_void_p.from_address(params + 8 * i).value, 8) for i in range(2)])
        return (0,)
    monkeypatch.setattr(driver, "_drv", lambda: types.SimpleNamespace(cuLaunchKernel=fake_launch,
                                                                       CUstream=lambda s: s))
    monkeypatch.setenv("KERNELC_LAUNCH_IMPL", "cuda-python")
    kinds = ["ptr", "i64"]
    buf = driver.ArgBuffer(tuple(kinds))
    ent = Loaded(types.SimpleNamespace(global_scratch_bytes=0),
                 types.SimpleNamespace(handle=1, function=1, threads=128, shared=0, name="k"), buf, list(kinds))
    # x_ptr, weight_ptr (None here), n (runtime), BLOCK (declared constexpr)
    fn = types.SimpleNamespace(__name__="k", arg_names=["x_ptr", "weight_ptr", "n", "BLOCK"],
                               constexpr_names={"BLOCK"})
    launch = fastpath.make_launch(ent, fn, [False, True, False, True])
    launch.fast(1, 1, 1, 0, 4096, None, 7)
    assert seen[-1] == _ctypes_bytes(kinds, [4096, 7])
    launch(1, 1, 1, 0, 4096, 7)   # the general path passes only the specialisation's runtime values
    assert seen[-1] == _ctypes_bytes(kinds, [4096, 7])
    full = fastpath.make_launch(ent, fn, [False, False, False, True])
    assert full.fast is full
