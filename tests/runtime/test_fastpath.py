"""The generated launch fast path, on CPU: a fake compiled entry stands in for the GPU so the
binder's argument handling and the launch record it gives hooks can be checked."""
import types

import torch

import kernelc
import kernelc.language as kl
from kernelc.runtime import hooks
from kernelc.runtime.fastpath import make_binder, record_slots, spec_part
from kernelc.runtime.launcher import get_state


@kernelc.jit(launch_metadata=lambda grid, meta, args: {"flops": 2 * args["n"]})
def scaled(x_ptr, n, g, dev, ent, st, rec, h, BLOCK: kl.constexpr):
    # parameter names that the generated code once used for its own locals
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * g, mask=offs < n)


def fake_entry():
    launches = []
    compiled = types.SimpleNamespace(shared=0, cache_key="k" * 32)
    return types.SimpleNamespace(compiled=compiled, launch=lambda *a: launches.append(a)), launches


def test_user_names_do_not_clash_with_the_binders_locals():
    fast = make_binder(scaled)
    assert fast is not None
    x = torch.zeros(64)
    args = (x, 1 << 20, 3, 7, 11, 13, 17, 19)
    key = tuple(spec_part(v) if i else ("*", x.dtype, x.data_ptr() & 15 == 0, x.is_cuda)
                for i, v in enumerate(args)) + (("c", 128),)
    ent, launches = fake_entry()
    get_state(scaled)["cache"][(key, 4, 3, 0)] = ent
    seen = []
    handle = hooks.register(enter=seen.append)
    try:
        fast((5,), *args, 128)
    finally:
        hooks.unregister(handle)
        get_state(scaled)["cache"].clear()
    assert len(launches) == 1
    g0, g1, g2, _stream, *values = launches[0]
    assert (g0, g1, g2) == (5, 1, 1)
    assert values == [x.data_ptr(), 1 << 20, 3, 7, 11, 13, 17, 19]
    rec = seen[0]
    assert rec.grid == (5, 1, 1)
    assert rec.launch_metadata == {"flops": 2 << 20}


def test_the_generated_record_sets_every_slot_as_init_does():
    # the fast path builds LaunchRecord with object.__new__ and one store per slot (no __init__ call): a slot it
    # missed would raise AttributeError in a hook, one it set differently would mislead every tool
    assert set(record_slots("(x,)")) == set(hooks.LaunchRecord.__slots__)
    fast = make_binder(scaled)
    x = torch.zeros(64)
    args = (x, 1 << 20, 3, 7, 11, 13, 17, 19)
    key = tuple(spec_part(v) if i else ("*", x.dtype, x.data_ptr() & 15 == 0, x.is_cuda)
                for i, v in enumerate(args)) + (("c", 128),)
    ent, _ = fake_entry()
    get_state(scaled)["cache"][(key, 4, 3, 0)] = ent
    seen = []
    handle = hooks.register(enter=seen.append, exit=seen.append)
    try:
        fast((5, 2), *args, 128)
    finally:
        hooks.unregister(handle)
        get_state(scaled)["cache"].clear()
    assert len(seen) == 2 and seen[0] is seen[1]
    got = seen[0]
    want = hooks.LaunchRecord("scaled", (5, 2, 1), 4, 3, 0, got.stream, "cuda", ent.compiled, "k" * 32, scaled,
                              (*args, 128), [n in scaled.constexpr_names for n in scaled.arg_names],
                              scaled.launch_metadata)
    for slot in hooks.LaunchRecord.__slots__:
        assert getattr(got, slot) == getattr(want, slot), slot
    assert got.constexprs == {"BLOCK": 128} and got.launch_metadata == {"flops": 2 << 20}
    assert got.display_name == want.display_name


def test_underscore_parameters_keep_the_general_path():
    @kernelc.jit
    def k(_cache, n, BLOCK: kl.constexpr):
        pass
    assert make_binder(k) is None


@kernelc.jit
def staged(x_ptr, n, BLOCK: kl.constexpr, num_stages: kl.constexpr):
    # Triton's tutorial softmax names a constexpr parameter like the launch option
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_a_parameter_named_num_stages_is_also_the_option_and_keeps_the_fast_path():
    values, options = staged.bind((1, 2), {"BLOCK": 4, "num_stages": 2})
    assert values["num_stages"] == 2 and options == {"num_stages": 2}
    fast = make_binder(staged)
    assert fast is not None  # used to fall back to the general (slow) launch path
    x = torch.zeros(8)
    key = (("*", x.dtype, x.data_ptr() & 15 == 0, x.is_cuda), spec_part(8), ("c", 8), ("c", 2))
    ent, launches = fake_entry()
    get_state(staged)["cache"][(key, 4, 2, 0)] = ent  # compiled with num_stages=2: the parameter's value
    try:
        fast((1,), x, 8, 8, 2)
        fast((1,), x, 8, BLOCK=8, num_stages=2)
    finally:
        get_state(staged)["cache"].clear()
    assert len(launches) == 2


def test_reload_modules_loads_each_kernel_again_and_rebinds_its_launch(monkeypatch):
    from kernelc.runtime import driver, fastpath, launcher
    loads = []

    class FakeLoaded:
        def __init__(self, cubin, name, shared, num_warps, n_regs, device=0, total_shared=None):
            loads.append((cubin, name, num_warps, device))
            self.threads = 32 * num_warps

    monkeypatch.setattr(driver, "LoadedFunction", FakeLoaded)
    monkeypatch.setattr(fastpath, "make_launch", lambda ent, fn, cmask: ("launch", ent.function, tuple(cmask)))
    compiled = types.SimpleNamespace(asm={"cubin": b"CUBIN"}, name="staged", dynamic_shared=0, n_regs=32, shared=0)
    ent = launcher.Loaded(compiled, types.SimpleNamespace(threads=256), None, ())
    ent.cmask, ent.device = [False, False, True, True], 0
    other = launcher.Loaded(compiled, types.SimpleNamespace(threads=128), None, ())
    other.cmask, other.device = [False], 1
    cache = get_state(staged)["cache"]
    cache[("k", 8, 2, 0)] = ent
    cache[("k", 4, 2, 1)] = other
    # only this test's kernel: kernels that earlier tests of the worker loaded (on CPU) would be reloaded too
    monkeypatch.setattr(launcher, "_with_state", [staged])
    try:
        assert launcher.reload_modules(0) == 1      # only the device asked for
    finally:
        cache.clear()
    assert loads == [(b"CUBIN", "staged", 8, 0)]
    assert isinstance(ent.function, FakeLoaded) and ent.launch == ("launch", ent.function, (False, False, True, True))
    assert not isinstance(other.function, FakeLoaded)


def test_descriptor_key_part_follows_dtype_block_and_padding():
    # the kernel type of a descriptor is remembered per (dtype, block shape, padding): each must still
    # give its own key, and a descriptor whose block shape a pre-hook changed must get the new one
    import torch
    from kernelc.runtime.fastpath import descriptor_part
    from kernelc.tools.tensor_descriptor import TensorDescriptor
    x16 = torch.zeros(64, 64, dtype=torch.float16)
    x32 = torch.zeros(64, 64, dtype=torch.float32)
    d = TensorDescriptor(x16, [64, 64], [64, 1], [16, 16])
    first = descriptor_part(d)[1]
    assert first == "tensordesc<fp16[16, 16]>"
    d.block_shape = [32, 16]
    assert descriptor_part(d)[1] == "tensordesc<fp16[32, 16]>"
    assert descriptor_part(TensorDescriptor(x32, [64, 64], [64, 1], [16, 16]))[1] == "tensordesc<fp32[16, 16]>"
    nan = descriptor_part(TensorDescriptor(x16, [64, 64], [64, 1], [16, 16], padding="nan"))[1]
    assert nan != first and "nan" in nan


def test_num_ctas_1_keeps_the_fast_path_and_other_values_take_the_general_one(monkeypatch):
    # Triton's tutorial 05 launches with num_ctas=1 (the default): that used to send every launch to the
    # general path (~40 us on CPU against ~5)
    fast = make_binder(staged)
    x = torch.zeros(8)
    key = (("*", x.dtype, x.data_ptr() & 15 == 0, x.is_cuda), spec_part(8), ("c", 8), ("c", 2))
    ent, launches = fake_entry()
    general = []
    monkeypatch.setattr(staged, "run", lambda *a, **kw: general.append(kw))
    get_state(staged)["cache"][(key, 4, 2, 0)] = ent
    try:
        fast((1,), x, 8, 8, 2, num_ctas=1)
        assert len(launches) == 1 and general == []
        fast((1,), x, 8, 8, 2, num_ctas=2)
    finally:
        get_state(staged)["cache"].clear()
    assert len(launches) == 1 and general[0]["num_ctas"] == 2
