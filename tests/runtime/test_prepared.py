"""Prepared launches (``runtime/prepared.py``) on CPU: a fake compiled entry stands in for the GPU, as in
test_fastpath.py, so what a prepared call launches, and when it falls back to the general path, can be checked."""
import gc
import types
import weakref

import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc.runtime import hooks
from kernelc.runtime.fastpath import make_binder, spec_part
from kernelc.runtime.grid import GridError
from kernelc.runtime.launcher import get_state


@kernelc.jit
def axpy(x_ptr, y_ptr, n, a, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < n
    kl.store(y_ptr + offs, kl.load(y_ptr + offs, mask=m) + a * kl.load(x_ptr + offs, mask=m), mask=m)


@pytest.fixture(autouse=True)
def fast_path(monkeypatch):
    """The launch fast path as on a GPU machine (without one, kernels take the interpreter's general path)."""
    monkeypatch.setattr(axpy, "_fast", make_binder(axpy))
    axpy._bound.clear()
    yield
    axpy._bound.clear()
    get_state(axpy)["cache"].clear()


def _fake(fn, x, y, n=64, a=2.0, block=64, num_warps=4, num_stages=3):
    launches = []
    compiled = types.SimpleNamespace(shared=0, cache_key="k" * 32)
    ent = types.SimpleNamespace(compiled=compiled, fast=lambda *v: launches.append(v), launch=None)
    ent.launch = ent.fast
    part = lambda t: ("*", t.dtype, t.data_ptr() & 15 == 0, t.is_cuda)  # noqa: E731
    key = ((part(x), part(y), spec_part(n), "fp32", ("c", block)), num_warps, num_stages, 0)
    get_state(fn)["cache"][key] = ent
    return launches


def test_a_prepared_call_launches_the_entry_with_the_calls_tensors_and_the_fixed_rest(monkeypatch):
    x, y = torch.zeros(64), torch.zeros(64)
    launches = _fake(axpy, x, y)
    try:
        launch = axpy.prepare((70000,), x, y, 64, 2.0, 64, num_warps=4, num_stages=3)
        launch(x, y)  # the first call: the general path (here the binder), then specialised
        # from here neither the binder nor the general launch may run
        monkeypatch.setattr(axpy, "_fast", False)
        axpy._bound.clear()
        monkeypatch.setattr(type(axpy), "run", lambda *a, **kw: pytest.fail("the general path ran"))
        x2, y2 = torch.zeros(64), torch.zeros(64)
        launch(x2, y2)
        launch(y2, x2)
    finally:
        get_state(axpy)["cache"].clear()
    assert len(launches) == 3
    for (g0, g1, g2, _stream, *vals), (a, b) in zip(launches, [(x, y), (x2, y2), (y2, x2)]):
        assert (g0, g1, g2) == (70000, 1, 1)
        assert vals == [a.data_ptr(), b.data_ptr(), 64, 2.0]


def test_a_tensor_that_changes_the_key_and_a_lost_entry_take_the_general_path(monkeypatch):
    x, y = torch.zeros(64), torch.zeros(64)
    launches = _fake(axpy, x, y)
    ran = []
    monkeypatch.setattr(type(axpy), "run", lambda self, *a, grid, **kw: ran.append((a, grid)))
    try:
        launch = axpy.prepare((3,), x, y, 64, 2.0, 64)
        launch(x, y)
        assert len(launches) == 1 and not ran
        big = torch.zeros(80)
        launch(big[1:65], y)  # 4 bytes in: not 16-byte aligned, another specialisation
        assert len(launches) == 1 and len(ran) == 1 and ran[0][0][0].data_ptr() == big[1:].data_ptr()
        launch(x.half(), y)  # another dtype
        assert len(launches) == 1 and len(ran) == 2
        launch(x, y)  # back on the entry
        assert len(launches) == 2
        get_state(axpy)["cache"].clear()  # e.g. a compile knob changed: the entry is gone
        launch(x, y)
        assert len(launches) == 2 and len(ran) == 3
        seen = []
        h = hooks.register(enter=seen.append)
        try:
            _fake(axpy, x, y)
            launch(x, y)  # hooks registered: the general path (the binder fires them)
        finally:
            hooks.unregister(h)
        assert len(seen) == 1
    finally:
        get_state(axpy)["cache"].clear()


def test_a_prepared_launch_keeps_no_tensor():
    x, y = torch.zeros(64), torch.zeros(64)
    launches = _fake(axpy, x, y)
    try:
        launch = axpy.prepare((3,), x, y, 64, 2.0, 64)
        launch(x, y)
        launch(x, y)
        refs = [weakref.ref(x), weakref.ref(y)]
        del x, y
        gc.collect()
        assert all(r() is None for r in refs)
        assert len(launches) == 2
    finally:
        get_state(axpy)["cache"].clear()


def test_other_options_or_a_callable_grid_always_take_the_general_path(monkeypatch):
    x, y = torch.zeros(64), torch.zeros(64)
    ran = []
    monkeypatch.setattr(type(axpy), "run", lambda self, *a, grid, **kw: ran.append(kw))
    launch = axpy.prepare((3,), x, y, 64, 2.0, 64, maxnreg=128)
    launch(x, y)
    launch(x, y)
    launch = axpy.prepare(lambda meta: (3,), x, y, 64, 2.0, 64)
    launch(x, y)
    assert len(ran) == 3 and ran[0]["maxnreg"] == 128
    launch = axpy.prepare((3, 70000), x, y, 64, 2.0, 64)  # past the launch limit of grid y: the general path says so
    with pytest.raises(GridError, match="more than CUDA allows"):
        launch(x, y)


def test_keyword_arguments_bind_like_a_launch(monkeypatch):
    x, y = torch.zeros(64), torch.zeros(64)
    launches = _fake(axpy, x, y, block=32, num_warps=8)
    try:
        launch = axpy.prepare((2,), x, y, a=2.0, n=64, BLOCK=32, num_warps=8)
        launch(x, y)
        monkeypatch.setattr(type(axpy), "run", lambda *a, **kw: pytest.fail("the general path ran"))
        launch(y, x)
    finally:
        get_state(axpy)["cache"].clear()
    assert [v[4:] for v in launches] == [(x.data_ptr(), y.data_ptr(), 64, 2.0), (y.data_ptr(), x.data_ptr(), 64, 2.0)]


@kernelc.jit
def rows_sum(d_x, y_ptr, BLOCK: kl.constexpr):
    t = d_x.load([kl.program_id(0) * BLOCK, 0])
    kl.store(y_ptr + kl.program_id(0) * BLOCK + kl.arange(0, BLOCK), kl.sum(t, 1))


def test_a_descriptor_slot_takes_a_tensor_rebased_onto_the_prepared_descriptor(monkeypatch):
    from kernelc.tools.tensor_descriptor import TensorDescriptor
    monkeypatch.setattr(rows_sum, "_fast", make_binder(rows_sum))
    x, y = torch.zeros(64, 32), torch.zeros(64)
    d = TensorDescriptor(x, [64, 32], [32, 1], [16, 32])
    launches = []
    ent = types.SimpleNamespace(compiled=types.SimpleNamespace(shared=0, cache_key="k" * 32),
                                fast=lambda *v: launches.append(v), launch=None)
    ent.launch = ent.fast
    st = get_state(rows_sum)
    vals = [d, y, 16]
    st["cache"][(st["spec"].key(vals, rows_sum.constexpr_mask(dict(zip(rows_sum.arg_names, vals)))), 4, 3, 0)] = ent
    ran = []
    try:
        launch = rows_sum.prepare((4,), d, y, 16)
        launch(x, y)  # a tensor in the descriptor's slot from the first call on (the general path rebases it too)
        monkeypatch.setattr(type(rows_sum), "run", lambda self, *a, grid, **kw: ran.append(a))
        x2 = torch.ones(64, 32)
        launch(x2, y)
        launch(d, y)  # a descriptor still works
        assert not ran and len(launches) == 3
        for (*_, desc, yp), base in zip(launches, (x, x2, x)):
            assert isinstance(desc, TensorDescriptor) and desc.base is base and yp == y.data_ptr()
            assert (desc.shape, desc.strides, desc.block_shape, desc.padding) == ([64, 32], [32, 1], [16, 32], "zero")
        launch(x2.half(), y)  # another dtype: another specialisation, the general path gets a rebased descriptor
        assert len(launches) == 3 and len(ran) == 1
        assert isinstance(ran[0][0], TensorDescriptor) and ran[0][0].base.dtype == torch.float16
        ref = weakref.ref(x2)
        del x2, ran[:], launches[:]
        gc.collect()
        assert ref() is None  # no tensor kept
    finally:
        st["cache"].clear()
        rows_sum._bound.clear()


def test_descriptor_slots_given_tensors_launch_by_machine_values_packed_as_the_descriptors_would(monkeypatch):
    """A descriptor slot given a tensor, with an entry whose launch takes machine values (sm_90a: a tensormap field):
    the prepared launch passes the descriptor's fields itself -- the same bytes the descriptor path packs, the map by
    the tensor's address from a per-slot cache that ``tensor_map.clear_cache`` empties -- and anything else (a
    descriptor, another dtype) goes the other ways."""
    from kernelc.compiler.abi import machine_kind, machine_params
    from kernelc.compiler.backend import parse_target
    from kernelc.runtime import driver, tensor_map
    from kernelc.runtime.driver import ArgBuffer
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import Loaded
    from kernelc.tools.tensor_descriptor import TensorDescriptor

    calls, encoded = [], []

    class FakeDriver:
        def cuLaunchKernel(self, *args):
            calls.append(args[1:4])
            return (0,)

        def CUstream(self, raw):
            return raw
    monkeypatch.setattr(driver, "_drv", lambda: FakeDriver())

    def encode(p):  # the map's bytes name its address and box, so a wrong map shows in the packed bytes
        encoded.append(p.global_address)
        return repr((p.global_address, p.global_dim, p.global_strides, p.box_dim)).encode().ljust(128, b"\0")
    monkeypatch.setattr(tensor_map, "encode", encode)
    tensor_map.clear_cache()
    monkeypatch.setattr(rows_sum, "_fast", make_binder(rows_sum))
    x, y = torch.zeros(64, 32), torch.zeros(64)
    d = TensorDescriptor(x, [64, 32], [32, 1], [16, 32])
    st = get_state(rows_sum)
    vals = [d, y, 16]
    key = st["spec"].key(vals, rows_sum.constexpr_mask(dict(zip(rows_sum.arg_names, vals))))
    sig, _, _, _, kinds = st["spec"].signature(key)
    compiled = types.SimpleNamespace(signature=sig, target=parse_target("sm_90a"), shared=0, cache_key="k" * 32,
                                     global_scratch_bytes=0)
    mkinds = tuple(machine_kind(str(t)) for _, t, _ in machine_params(sig, "sm_90a"))
    assert "tmap" in mkinds
    ent = Loaded(compiled, types.SimpleNamespace(handle=1, function=2, threads=128, shared=0, name="rows_sum"),
                 ArgBuffer(mkinds), kinds)
    ent.launch = make_launch(ent, rows_sum, [False, False, True])
    assert ent.fast.machine.names == [m for m, _, _ in machine_params(sig, "sm_90a")]
    st["cache"][(key, 4, 3, 0)] = ent
    ran = []
    try:
        launch = rows_sum.prepare((4,), d, y, 16)
        launch(x, y)  # the general path: specialises, and makes the machine-value launch
        assert launch.__globals__["_SM"][0] is not None
        monkeypatch.setattr(type(rows_sum), "run", lambda self, *a, grid, **kw: ran.append(a))
        for xs, ys in ((torch.ones(64, 32), torch.ones(64)), (x, y)):
            ent.launch(4, 1, 1, 0, TensorDescriptor(xs, [64, 32], [32, 1], [16, 32]), ys.data_ptr())
            want = bytes(ent.buffer.struct)
            ctypes_zero(ent)
            n = len(calls)
            assert launch(xs, ys) is compiled and len(calls) == n + 1 and calls[-1] == (4, 1, 1)
            assert bytes(ent.buffer.struct) == want and repr(xs.data_ptr()).encode() in want
        assert not ran
        before = len(encoded)
        launch(x, y)
        assert len(encoded) == before  # from the slot's cache
        tensor_map.clear_cache()
        launch(x, y)
        assert encoded[before:] == [x.data_ptr()]  # the slot's cache was emptied with the others
        n = len(calls)
        launch(d, y)  # a descriptor: the entry's own launch
        assert len(calls) == n + 1 and not ran
        launch(x.half(), y)  # another dtype: the general path
        assert len(calls) == n + 1 and len(ran) == 1
    finally:
        st["cache"].clear()
        rows_sum._bound.clear()
        tensor_map.clear_cache()


def ctypes_zero(ent):
    import ctypes
    ctypes.memset(ctypes.addressof(ent.buffer.struct), 0, ctypes.sizeof(ent.buffer.struct))
