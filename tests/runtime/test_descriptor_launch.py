"""TensorDescriptor arguments on the CUDA launch path, checked on CPU: the specialisation key and
signature, and the generated launch (also reached by the fast path) packing the flattened fields
into the argument buffer, with a fake driver standing in for the GPU."""
import ctypes
import types

import pytest
import torch

import kernelc
from kernelc import TensorDescriptor
from kernelc.compiler.backend import parse_target
from kernelc.runtime import driver
from kernelc.runtime.driver import ArgBuffer
from kernelc.runtime.fastpath import make_binder, make_launch, spec_part
from kernelc.runtime.launcher import Loaded, Specializer, get_state
from tests import block_kernels as KS


def test_tensor_descriptor_is_importable_like_tritons():
    from kernelc.tools.tensor_descriptor import TensorDescriptor as T2
    assert T2 is kernelc.TensorDescriptor


def _key(fn, values, cx):
    spec = Specializer(fn)
    vals = list(values) + list(cx)
    mask = [False] * len(values) + [True] * len(cx)
    key = spec.key(vals, mask)
    return spec.signature(key), key


def test_specialisation_of_descriptor_arguments():
    x = torch.zeros(64, 48, dtype=torch.float16)
    y = torch.zeros(70, 40, dtype=torch.float16)
    (sig, cx, div, eq1, kinds), key = _key(KS.desc_copy, [TensorDescriptor.from_tensor(x, [64, 64]),
                                                         TensorDescriptor.from_tensor(y[:, 1:], [64, 64])], [64, 64])
    assert sig == {"in_desc": "tensordesc<fp16[64, 64]>", "out_desc": "tensordesc<fp16[64, 64]>"}
    assert kinds == [("tensordesc", sig["in_desc"])] * 2
    # x: aligned base, shape (64, 48) and stride 48 divisible by 16; y[:, 1:]: base 2 bytes off, shape (70, 39), stride 40
    assert div == {"in_desc.base": 16, "in_desc.shape0": 16, "in_desc.shape1": 16, "in_desc.stride0": 16,
                   "out_desc.base": 1}
    assert key[0][0] == "tensordesc"
    padded = spec_part(TensorDescriptor.from_tensor(x, [32, 16], padding="nan"))
    assert padded[1] == "tensordesc<fp16[32, 16], padding=nan>" and padded != key[0]


class _FakeDriver:
    """Stands in for cuda.bindings.driver: records cuLaunchKernel calls."""

    def __init__(self):
        self.calls = []

    def cuLaunchKernel(self, *args):
        self.calls.append(args)
        return (0,)

    def CUstream(self, raw):
        return raw


def _fake_entry(kernel, sig, kinds, arch="sm_80"):  # sm_80: no CUtensorMap field (Hopper TMA)
    from kernelc.compiler.abi import machine_kind, machine_params
    compiled = types.SimpleNamespace(signature=sig, target=parse_target(arch), shared=0, cache_key="k" * 32)
    buf = ArgBuffer(tuple(machine_kind(str(t)) for _, t, _ in machine_params(sig, arch)))
    fn = types.SimpleNamespace(handle=1, function=2, threads=128, shared=0, name=kernel.__name__)
    return Loaded(compiled, fn, buf, kinds)


def test_generated_launch_packs_descriptor_fields_fast_path_included(monkeypatch):
    fake = _FakeDriver()
    monkeypatch.setattr(driver, "_drv", lambda: fake)
    x = torch.zeros(70, 45, dtype=torch.float16)
    y = torch.zeros(40, 96, dtype=torch.float16)
    dx, dy = TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor(y, [33, 80], [96, 1], [64, 64])
    (sig, _, _, _, kinds), key = _key(KS.desc_copy, [dx, dy], [64, 64])
    ent = _fake_entry(KS.desc_copy, sig, kinds)
    ent.launch = make_launch(ent, KS.desc_copy, [False, False, True, True])
    ent.launch(2, 1, 1, 0, dx, dy)
    fields = [getattr(ent.buffer.struct, f"a{i}") for i in range(8)]
    assert fields == [x.data_ptr(), 70, 45, 45, y.data_ptr(), 33, 80, 96]
    assert [t for t, _ in ent.buffer.struct_t._fields_] == ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"]
    assert [c for _, c in ent.buffer.struct_t._fields_] == [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32,
                                                          ctypes.c_int64] * 2
    assert len(fake.calls) == 1 and fake.calls[0][1:4] == (2, 1, 1)
    # the generated fast path takes descriptors too: it hands the objects to the same launch
    fast = make_binder(KS.desc_copy)
    assert fast is not None
    get_state(KS.desc_copy)["cache"][(key, 4, 3, 0)] = ent
    try:
        dx2 = TensorDescriptor(x, [69, 33], [45, 1], [64, 64])  # same specialisation, other values
        fast((3, 2), dx2, dy, 64, 64)
    finally:
        get_state(KS.desc_copy)["cache"].clear()
    assert len(fake.calls) == 2 and fake.calls[1][1:4] == (3, 2, 1)
    assert [getattr(ent.buffer.struct, f"a{i}") for i in range(4)] == [x.data_ptr(), 69, 33, 45]


def test_descriptor_kernels_with_cpu_tensors_run_in_the_interpreter(monkeypatch):
    x = torch.randn(33, 20)
    y = torch.zeros(33, 20)
    KS.desc_copy[(3, 1)](TensorDescriptor.from_tensor(x, [16, 32]), TensorDescriptor.from_tensor(y, [16, 32]),
                         BM=16, BN=32)
    assert torch.equal(x, y)


def test_unsupported_argument_message_mentions_descriptors():
    with pytest.raises(TypeError, match="TensorDescriptor"):
        spec_part(object())


def test_generated_launch_passes_global_scratch_for_every_program(monkeypatch):
    """A kernel that builds tensor maps on the device (descriptors made in the kernel) gets a hidden
    last parameter: grid size x its per-program scratch bytes, from runtime/scratch.py."""
    from kernelc.runtime import scratch
    fake = _FakeDriver()
    monkeypatch.setattr(driver, "_drv", lambda: fake)
    asked = []
    monkeypatch.setattr(scratch, "scratch_pointer", lambda n, stream, dev: asked.append((n, stream, dev)) or 0xABC00)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
    ent = _fake_entry(KS.dev_desc_matmul, sig, ["ptr"] * 3 + ["i32"] * 3)
    ent.buffer = ArgBuffer(("ptr",) * 3 + ("i32",) * 3 + ("ptr",))
    ent.compiled.global_scratch_bytes = 384  # three maps of 128 bytes
    ent.device = 1
    ent.launch = make_launch(ent, KS.dev_desc_matmul, [False] * 6 + [True] * 3)
    ent.launch(4, 3, 2, 77, 0x1000, 0x2000, 0x3000, 256, 512, 1024)
    assert asked == [(4 * 3 * 2 * 384, 77, 1)]
    assert [getattr(ent.buffer.struct, f"a{i}") for i in range(7)] == [0x1000, 0x2000, 0x3000, 256, 512, 1024, 0xABC00]
    assert len(fake.calls) == 1
