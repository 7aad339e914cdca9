"""Interpreter memory: numpy arrays and torch tensors as kernel arguments, bounds checks, write-back."""
import functools

import ml_dtypes
import numpy as np
import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc import InterpreterError
from kernelc.runtime.interpreter import memory as kmem
from kernelc.runtime.interpreter.args import kl_dtype_of

jit = functools.partial(kernelc.jit, interpret=True)


def _line_of(text):
    for i, line in enumerate(open(__file__), 1):
        if text in line:
            return i
    raise AssertionError(text)


@jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    mask = offs < n
    kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=mask), mask=mask)


@jit
def unmasked_copy(x_ptr, y_ptr, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    x = kl.load(x_ptr + offs)  # OOB-LOAD
    kl.store(y_ptr + offs, x)  # OOB-STORE


@jit
def strided_scale(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, BM: kl.constexpr, BN: kl.constexpr):
    rm = kl.arange(0, BM)[:, None]
    rn = kl.arange(0, BN)[None, :]
    mask = (rm < M) & (rn < N)
    x = kl.load(x_ptr + rm * sxm + rn * sxn, mask=mask)
    kl.store(y_ptr + rm * sym + rn * syn, x * 2 + 1, mask=mask)


# ---------------------------------------------------------------------------------------------
# Out-of-bounds detection
# ---------------------------------------------------------------------------------------------


def test_unmasked_oob_load_names_line_program_and_offset():
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(12, np.float32)
    with pytest.raises(InterpreterError) as ei:
        unmasked_copy[(3,)](x, y, BLOCK=4)
    e = ei.value
    msg = str(e)
    line = _line_of("# OOB-LOAD")
    assert f"{__file__}:{line}" in msg
    assert "out-of-bounds load" in msg and "unmasked_copy" in msg
    assert "program id (2, 0, 0)" in msg
    assert "'x_ptr'" in msg and "element offset 10" in msg and "10 elements" in msg
    assert "x = kl.load(x_ptr + offs)" in msg and "^" in msg  # the source line with a caret
    assert (e.program_id, e.arg_name, e.offset, e.size, e.kind, e.line) == ((2, 0, 0), "x_ptr", 10, 10, "load", line)
    # programs 0 and 1 ran completely before the fault
    np.testing.assert_array_equal(y[:8], x[:8])


def test_unmasked_oob_store_and_negative_offsets():
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(10, np.float32)
    with pytest.raises(InterpreterError) as ei:
        unmasked_copy[(4,)](x, y, BLOCK=4)
    assert "out-of-bounds store" in str(ei.value) and "'y_ptr'" in str(ei.value)
    assert ei.value.offset == 10 and ei.value.line == _line_of("# OOB-STORE")

    @jit
    def k(x_ptr, o_ptr):
        offs = kl.arange(0, 4) - 2
        kl.store(o_ptr + kl.arange(0, 4), kl.load(x_ptr + offs))

    with pytest.raises(InterpreterError) as ei:
        k[(1,)](x, y)
    assert ei.value.offset == -2 and "element offset -2" in str(ei.value)


def test_masked_oob_is_fine_and_masked_lanes_are_untouched():
    x = np.arange(10, dtype=np.float32)
    big = np.full(16, -1, np.float32)
    copy_kernel[(3,)](x, big, 10, BLOCK=4)
    np.testing.assert_array_equal(big[:10], x)
    np.testing.assert_array_equal(big[10:], -1)  # masked-off stores never happened


def test_oob_atomic_and_scalar_pointer():
    @jit
    def k(c_ptr, i):
        kl.atomic_add(c_ptr + i, 1)

    c = np.zeros(3, np.int32)
    k[(1,)](c, 2)
    with pytest.raises(InterpreterError) as ei:
        k[(1,)](c, 3)
    msg = str(ei.value)
    assert "out-of-bounds atomic" in msg and "element offset 3" in msg and "scalar access" in msg
    np.testing.assert_array_equal(c, [0, 0, 1])


def test_oob_atomic_has_no_partial_effect():
    @jit
    def k(c_ptr):
        kl.atomic_add(c_ptr + kl.arange(0, 4), 1)

    c = np.zeros(3, np.int32)
    with pytest.raises(InterpreterError, match="atomic"):
        k[(1,)](c)
    np.testing.assert_array_equal(c, 0)


def test_far_pointer_is_reported_as_unmapped():
    @jit
    def k(x_ptr):
        kl.load(x_ptr + 2**31 - 1)

    with pytest.raises(InterpreterError) as ei:
        k[(1,)](np.zeros(4, np.float32))
    assert ei.value.offset == 2**31 - 1  # attributed to the nearest buffer

    @jit
    def null(o_ptr):
        p = kl.full((2,), 64, kl.int64).to(kl.pointer_type(kl.float32))
        kl.store(o_ptr + kl.arange(0, 2), kl.load(p))

    with pytest.raises(InterpreterError) as ei:
        null[(1,)](np.zeros(0, np.float32))  # an empty buffer: nothing is valid
    assert "lane (0,)" in str(ei.value) and "0x40 is not inside any argument's memory" in str(ei.value)


@kernelc.jit
def _helper(p):
    return kl.load(p + kl.arange(0, 8))  # HELPER-LOAD


@jit
def _outer(x_ptr):
    _helper(x_ptr)


def test_oob_in_a_device_function_points_at_its_line():
    x = np.zeros(4, np.float32)
    with pytest.raises(InterpreterError) as ei:
        _outer[(1,)](x)
    assert ei.value.line == _line_of("# HELPER-LOAD") and "in _helper" in str(ei.value)
    assert "kernel _outer" in str(ei.value)


# ---------------------------------------------------------------------------------------------
# Host arrays and tensors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32, np.float64,
                                ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_numpy_dtypes_roundtrip(dt):
    x = (np.arange(37) % 5).astype(dt)
    y = np.zeros(37, dt)
    copy_kernel[(5,)](x, y, 37, BLOCK=8)
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float32, torch.int64, torch.uint8, torch.bool,
                                torch.float8_e5m2], ids=str)
def test_torch_cpu_dtypes_roundtrip(dt):
    x = (torch.arange(37) % 5).to(dt)
    y = torch.zeros(37, dtype=dt)
    copy_kernel[(5,)](x, y, 37, BLOCK=8)
    assert torch.equal(y.view(torch.uint8), x.view(torch.uint8))


def test_torch_bf16_arithmetic():
    @jit
    def k(x_ptr, o_ptr, N: kl.constexpr):
        offs = kl.arange(0, N)
        x = kl.load(x_ptr + offs)
        kl.static_assert(x.dtype == kl.bfloat16)
        kl.store(o_ptr + offs, x * x + 1.0)

    x = torch.linspace(-3, 3, 16, dtype=torch.bfloat16)
    o = torch.empty_like(x)
    k[(1,)](x, o, N=16)
    assert torch.equal(o, (x.float() * x.float()).bfloat16().float().add(1).bfloat16())


def test_torch_non_contiguous_views_and_storage_offset():
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    src = base[1:5, 2:9:2]  # storage offset 12, strides (10, 2)
    dst_base = torch.zeros(8, 6)
    dst = dst_base.t()[1:5, 2:6]  # non-contiguous destination, strides (1, 6)
    strided_scale[(1,)](src, dst, 4, 4, src.stride(0), src.stride(1), dst.stride(0), dst.stride(1), BM=8, BN=8)
    assert torch.equal(dst, src * 2 + 1)
    assert int(dst_base.ne(0).sum()) == 16  # nothing else written


def test_numpy_strided_and_negative_strides():
    a = np.arange(40, dtype=np.float64).reshape(4, 10)
    src = a[:, ::3]  # (4, 4), strides in elements (10, 3)
    rev = a[::-1, ::-1]  # negative strides: pointer at a[3, 9]
    out = np.zeros((4, 4))
    s = src.strides
    strided_scale[(1,)](src, out, 4, 4, s[0] // 8, s[1] // 8, 4, 1, BM=4, BN=4)
    np.testing.assert_array_equal(out, src * 2 + 1)
    out2 = np.zeros((4, 10))
    strided_scale[(1,)](rev, out2, 4, 10, -10, -1, 10, 1, BM=4, BN=16)
    np.testing.assert_array_equal(out2, rev * 2 + 1)


def test_same_storage_in_and_out_aliases():
    x = torch.arange(8, dtype=torch.float32)

    @jit
    def shift(x_ptr, y_ptr):
        offs = kl.arange(0, 4)
        kl.store(y_ptr + offs, kl.load(x_ptr + offs) + 100)

    shift[(1,)](x, x[4:])
    assert x.tolist() == [0, 1, 2, 3, 100, 101, 102, 103]
    a = np.arange(8, dtype=np.float32)
    shift[(1,)](a[4:], a)
    np.testing.assert_array_equal(a, [104, 105, 106, 107, 4, 5, 6, 7])


def test_data_pointers_are_16_byte_aligned():
    @jit
    def k(a_ptr, b_ptr, c_ptr, o_ptr):
        kl.store(o_ptr, a_ptr.to(kl.int64) % 16)
        kl.store(o_ptr + 1, b_ptr.to(kl.int64) % 16)
        kl.store(o_ptr + 2, c_ptr.to(kl.int64) % (1 << 20))
        kl.store(o_ptr + 3, (b_ptr.to(kl.int64) - a_ptr.to(kl.int64)) > (1 << 20))

    o = np.full(4, -1, np.int64)
    k[(1,)](np.zeros(3, np.int8), torch.zeros(5, dtype=torch.float16), np.zeros(7), o)
    np.testing.assert_array_equal(o, [0, 0, 0, 1])


def test_read_only_arrays_can_be_loaded_but_not_stored():
    x = np.arange(8, dtype=np.float32)
    x.flags.writeable = False
    y = np.zeros(8, np.float32)
    copy_kernel[(1,)](x, y, 8, BLOCK=8)
    np.testing.assert_array_equal(y, x)
    with pytest.raises(InterpreterError, match="read-only"):
        copy_kernel[(1,)](y, x, 8, BLOCK=8)


def test_pointer_arithmetic_on_bool_and_int64_offsets():
    @jit
    def k(m_ptr, o_ptr, off):
        offs = kl.arange(0, 4).to(kl.int64) + off
        m = kl.load(m_ptr + offs)
        kl.static_assert(m.dtype == kl.int1)
        kl.store(o_ptr + offs, kl.where(m, 1.0, -1.0))
        kl.store(m_ptr + offs, ~m)

    m = torch.tensor([True, False, True, True, False, False])
    o = torch.zeros(6)
    k[(1,)](m, o, 2)
    assert o.tolist() == [0, 0, 1, 1, -1, -1]
    assert m.tolist() == [True, False, False, False, True, True]


def test_pointer_int64_round_trip():
    @jit
    def k(x_ptr, o_ptr):
        addr = x_ptr.to(kl.int64) + 8  # two fp32 elements further
        p = addr.to(kl.pointer_type(kl.float32))
        kl.store(o_ptr, kl.load(p))

    x = np.array([1, 2, 3, 4], np.float32)
    o = np.zeros(1, np.float32)
    k[(1,)](x, o)
    assert o[0] == 3


def test_copied_tensors_are_written_back_after_the_launch(monkeypatch):
    # CUDA tensors are copied to the host and back; FORCE_HOST_COPY runs that path on CPU tensors.
    monkeypatch.setattr(kmem, "FORCE_HOST_COPY", True)
    x = torch.arange(10, dtype=torch.float32, requires_grad=True)
    y = torch.zeros(16)
    seen = []

    @jit
    def k(x_ptr, y_ptr, n, BLOCK: kl.constexpr, PEEK: kl.constexpr):
        offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
        kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)
        PEEK()

    k[(3,)](x, y[2:], 10, BLOCK=4, PEEK=lambda: seen.append(float(y.sum())))
    assert seen == [0.0, 0.0, 0.0]  # the caller's tensor is untouched during the launch
    assert torch.equal(y[2:12], x.detach() * 3) and y[:2].eq(0).all() and y[12:].eq(0).all()
    with pytest.raises(InterpreterError):
        unmasked_copy[(3,)](x, y, BLOCK=8)  # faults in program 1 ...
    assert torch.equal(y[:8], x.detach()[:8])  # ... after program 0's stores were written back


def test_misaligned_access_faults_like_the_gpu():
    @jit
    def k(x_ptr, o_ptr, SHIFT: kl.constexpr):
        p = (x_ptr.to(kl.int64) + SHIFT).to(kl.pointer_type(kl.float32))
        kl.store(o_ptr + kl.arange(0, 2), kl.load(p + kl.arange(0, 2)))

    x = np.arange(4, dtype=np.float32)
    o = np.zeros(2, np.float32)
    k[(1,)](x, o, SHIFT=4)
    np.testing.assert_array_equal(o, [1, 2])
    with pytest.raises(InterpreterError, match="misaligned load") as ei:
        k[(1,)](x, o, SHIFT=2)
    assert "not a multiple of the element size (4 bytes)" in str(ei.value)


def test_cuda_tensors_are_copied_back():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the host-copy path runs on the GPU machine")
    x = torch.arange(10, dtype=torch.float32, device="cuda")
    y = torch.zeros(10, device="cuda")
    copy_kernel[(3,)](x, y, 10, BLOCK=4)
    assert torch.equal(x, y)
    base = torch.arange(60, dtype=torch.bfloat16, device="cuda").reshape(6, 10)
    src = base[1:5, 2:9:2]
    dst = torch.zeros(8, 6, dtype=torch.bfloat16, device="cuda").t()[1:5, 2:6]
    strided_scale[(1,)](src, dst, 4, 4, src.stride(0), src.stride(1), dst.stride(0), dst.stride(1), BM=8, BN=8)
    assert dst.device.type == "cuda" and torch.equal(dst, src * 2 + 1)


def test_memory_map_reuses_storage_and_spaces_buffers():
    mem = kmem.Memory()
    t = torch.zeros(10)
    p1 = mem.map(t, "a", kl.float32)
    p2 = mem.map(t[3:], "b", kl.float32)
    p3 = mem.map(np.zeros(3), "c", kl.float64)
    assert p2 - p1 == 12 and len(mem.buffers) == 2
    assert p1 % (1 << 20) == 0 and p3 % (1 << 20) == 0 and p3 - (p1 + 40) >= kmem.GUARD


def test_dtype_table():
    assert kl_dtype_of(torch.float16) == kl.float16
    assert kl_dtype_of(torch.bfloat16) == kl.bfloat16
    assert kl_dtype_of(torch.float8_e4m3fn) == kl.float8e4nv
    assert kl_dtype_of(torch.float8_e5m2) == kl.float8e5
    assert kl_dtype_of(torch.bool) == kl.int1
    assert kl_dtype_of(torch.zeros(1, dtype=torch.int16)) == kl.int16
    assert kl_dtype_of(np.dtype(ml_dtypes.bfloat16)) == kl.bfloat16
    assert kl_dtype_of(np.zeros(1, np.uint64)) == kl.uint64
    with pytest.raises(TypeError, match="complex64 is not supported"):
        kl_dtype_of(torch.complex64)


def _record(rec, name, v):  # a plain helper: kernels may not assign into a subscript themselves
    rec[name] = (v.dtype, float(v))


def test_scalar_argument_types():
    seen = {}

    @jit
    def k(a, b, c, d, e, f, g, REC: kl.constexpr):
        for name, v in zip("abcdefg", (a, b, c, d, e, f, g)):
            _record(REC, name, v)

    k[(1,)](5, 2**40, 2**63 + 1, 1.5, True, np.float16(0.5), np.uint8(200), REC=seen)
    assert seen["a"] == (kl.int32, 5.0)
    assert seen["b"] == (kl.int64, float(2**40))
    assert seen["c"] == (kl.uint64, float(2**63 + 1))
    assert seen["d"] == (kl.float32, 1.5)
    assert seen["e"] == (kl.int1, 1.0)
    assert seen["f"] == (kl.float16, 0.5)
    assert seen["g"] == (kl.uint8, 200.0)
