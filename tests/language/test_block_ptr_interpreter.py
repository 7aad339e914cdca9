"""Block pointers and tensor descriptors in the CPU interpreter, against numpy: ragged edges,
boundary_check and padding, out-of-bounds stores dropped, control flow, and the kernel-line errors."""
import numpy as np
import pytest

import kernelc
from kernelc import CompilationError, InterpreterError, TensorDescriptor
from tests import block_kernels as KS


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")


def _rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _f32(x):
    return x.astype(np.float32)


@pytest.mark.parametrize("M,N,K", [(70, 45, 83), (32, 64, 32), (1, 17, 5)])
def test_block_pointer_matmul_ragged_edges(M, N, K):
    rng = np.random.default_rng(M * N * K)
    a, b = _rand(rng, (M, K), np.float16), _rand(rng, (K, N), np.float16)
    c = np.full((M, N), 7, np.float16)
    BM, BN, BK = 32, 32, 16
    KS.bp_matmul[(kernelc.cdiv(M, BM), kernelc.cdiv(N, BN))](
        a, b, c, M, N, K, K, 1, N, 1, N, 1, BM=BM, BN=BN, BK=BK)
    ref = (_f32(a) @ _f32(b)).astype(np.float16)
    np.testing.assert_allclose(_f32(c), _f32(ref), atol=2e-2, rtol=1e-2)


def test_block_pointer_matmul_on_strided_views():
    # A is the transpose of a stored matrix (strides (1, M)); C a column slice of a wider buffer
    rng = np.random.default_rng(1)
    M, N, K = 40, 24, 50
    at = _rand(rng, (K, M), np.float32)
    a = at.T
    b = _rand(rng, (K, N), np.float32)
    wide = np.zeros((M, 2 * N), np.float32)
    c = wide[:, N:]
    KS.bp_matmul[(2, 1)](a, b, c, M, N, K, 1, M, N, 1, 2 * N, 1, BM=32, BN=32, BK=16)
    np.testing.assert_allclose(c, a @ b, atol=2e-2, rtol=2e-2)  # tf32 dot
    assert not wide[:, :N].any()


@pytest.mark.parametrize("check,pad", [((0, 1), "nan"), ((0,), "zero"), ((1,), "nan"), ((0, 1), "")])
def test_block_pointer_boundary_check_and_padding(check, pad):
    M, N, BM, BN = 20, 24, 16, 16
    x = np.arange(M * 32, dtype=np.float32).reshape(M, 32)  # 32 columns: reads past N stay in the array
    big = np.arange(40 * 32, dtype=np.float32).reshape(40, 32)  # rows past M exist too
    for arr, off_m, off_n in ((big, 16, 0), (x, 0, 16)):
        if 0 not in check and off_m + BM > arr.shape[0] or 1 not in check and off_n + BN > 32:
            continue
        y = np.zeros((BM, BN), np.float32)
        KS.bp_load_store[(1,)](arr, y, M, N, 32, off_m, off_n, BM=BM, BN=BN, CHECK=check, PAD=pad)
        ref = arr[off_m:off_m + BM, off_n:off_n + BN].copy()
        fill = np.nan if pad == "nan" else 0.0
        if 0 in check:
            ref[max(0, M - off_m):, :] = fill
        if 1 in check:
            ref[:, max(0, N - off_n):] = fill
        np.testing.assert_array_equal(y, ref)


def test_block_pointer_negative_offsets_read_padding():
    x = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
    y = np.zeros((16, 16), np.float32)
    KS.bp_load_store[(1,)](x, y, 16, 16, 16, -4, -8, BM=16, BN=16, CHECK=(0, 1), PAD="zero")
    ref = np.zeros((16, 16), np.float32)
    ref[4:, 8:] = x[:12, :8]
    np.testing.assert_array_equal(y, ref)


def test_block_pointer_store_drops_out_of_bounds_elements():
    M, N = 20, 21
    buf = np.full((32, 32), -1.0, np.float32)  # the described tensor is the top-left 20 x 21 of it
    x = np.arange(16 * 16, dtype=np.float32).reshape(16, 16) + 1
    KS.bp_store_checked[(1,)](x, buf, M, N, 32, 8, 12, BM=16, BN=16)
    ref = np.full((32, 32), -1.0, np.float32)
    ref[8:20, 12:21] = x[:12, :9]
    np.testing.assert_array_equal(buf, ref)


@pytest.mark.parametrize("flag", [1, 0])
def test_block_pointer_through_if_else(flag):
    x = np.arange(20 * 30, dtype=np.float32).reshape(20, 30)
    y = np.zeros((16, 16), np.float32)
    KS.bp_ifelse[(1,)](x, y, 20, 30, flag, BM=16, BN=16)
    ref = np.full((16, 16), np.nan, np.float32)
    sub = x[16:32, 0:16] if flag else x[0:16, 16:32]
    ref[:sub.shape[0], :sub.shape[1]] = sub
    np.testing.assert_array_equal(y, ref)


def test_block_pointer_through_while_loop():
    v = np.arange(100, dtype=np.float32)
    out = np.zeros(32, np.float32)
    KS.bp_while_sum[(1,)](v, out, 100, BN=32)
    np.testing.assert_array_equal(out, np.pad(v, (0, 28)).reshape(4, 32).sum(0))


def test_block_pointers_in_nested_loops_and_device_functions():
    x = np.arange(50 * 70, dtype=np.float32).reshape(50, 70)
    out = np.zeros((16, 32), np.float32)
    KS.bp_nested_sum[(1,)](x, out, 50, 70, BM=16, BN=32)
    padded = np.zeros((64, 96), np.float32)
    padded[:50, :70] = x
    np.testing.assert_array_equal(out, padded.reshape(4, 16, 3, 32).sum((0, 2)))
    v = np.arange(64, dtype=np.float32)
    for flag, start in ((1, 0), (0, 16)):
        o = np.zeros(16, np.float32)
        KS.bp_from_device_function[(1,)](v, o, flag, BN=16)
        np.testing.assert_array_equal(o, v[start:start + 16])


def test_descriptor_copy_ragged_numpy_and_torch():
    rng = np.random.default_rng(2)
    x = _rand(rng, (70, 45), np.float32)
    y = np.zeros_like(x)
    grid = (kernelc.cdiv(70, 16), kernelc.cdiv(45, 32))
    KS.desc_copy[grid](TensorDescriptor.from_tensor(x, [16, 32]), TensorDescriptor.from_tensor(y, [16, 32]), BM=16, BN=32)
    np.testing.assert_array_equal(x, y)
    torch = pytest.importorskip("torch")
    xt = torch.from_numpy(x).to(torch.bfloat16)
    yt = torch.zeros_like(xt)
    KS.desc_copy[grid](TensorDescriptor.from_tensor(xt, [16, 32]), TensorDescriptor.from_tensor(yt, [16, 32]),
                      BM=16, BN=32)
    assert torch.equal(xt, yt)


def test_descriptor_store_drops_out_of_bounds_elements():
    # the destination descriptor describes the top-left 10 x 20 of a 16 x 32 buffer
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    buf = np.full((16, 32), -1.0, np.float32)
    dst = TensorDescriptor(buf, [10, 20], [32, 1], [16, 32])
    KS.desc_copy[(1, 1)](TensorDescriptor.from_tensor(x, [16, 32]), dst, BM=16, BN=32)
    ref = np.full((16, 32), -1.0, np.float32)
    ref[:10, :20] = x[:10, :20]
    np.testing.assert_array_equal(buf, ref)


def test_descriptor_transpose_ragged():
    rng = np.random.default_rng(3)
    x = _rand(rng, (37, 70), np.float16)
    y = np.zeros((70, 37), np.float16)
    KS.desc_transpose[(2, 2)](TensorDescriptor.from_tensor(x, [32, 64]), TensorDescriptor.from_tensor(y, [64, 32]),
                             BM=32, BN=64)
    np.testing.assert_array_equal(x.T, y)


@pytest.mark.parametrize("M,N,K", [(70, 45, 83), (64, 64, 64), (5, 33, 17)])
def test_descriptor_matmul_host_and_device_descriptors(M, N, K):
    rng = np.random.default_rng(M + N + K)
    a, b = _rand(rng, (M, K), np.float16), _rand(rng, (K, N), np.float16)
    ref = _f32(a) @ _f32(b)
    BM, BN, BK = 32, 32, 16
    grid = (kernelc.cdiv(M, BM), kernelc.cdiv(N, BN))
    c = np.zeros((M, N), np.float32)
    KS.desc_matmul[grid](TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BK, BN]),
                        TensorDescriptor.from_tensor(c, [BM, BN]), BM=BM, BN=BN, BK=BK)
    np.testing.assert_allclose(c, ref, atol=1e-3, rtol=1e-3)
    c2 = np.zeros((M, N), np.float16)
    KS.dev_desc_matmul[grid](a, b, c2, M, N, K, BM=BM, BN=BN, BK=BK)
    np.testing.assert_allclose(_f32(c2), ref, atol=2e-2, rtol=1e-2)


def test_descriptor_3d_copy_ragged():
    rng = np.random.default_rng(4)
    x = _rand(rng, (3, 10, 50), np.float32)
    y = np.zeros_like(x)
    KS.desc_copy3[(2, 2, 2)](TensorDescriptor.from_tensor(x, [2, 8, 32]), TensorDescriptor.from_tensor(y, [2, 8, 32]),
                            B0=2, B1=8, B2=32)
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_device_descriptor_padding(pad):
    x = np.arange(10 * 12, dtype=np.float32).reshape(10, 12)
    y = np.zeros((16, 16), np.float32)
    KS.dev_desc_pad[(1,)](x, y, 10, 12, -2, 4, BM=16, BN=16, PAD=pad)
    ref = np.full((16, 16), np.nan if pad == "nan" else 0.0, np.float32)
    ref[2:12, :8] = x[:, 4:12]
    np.testing.assert_array_equal(y, ref)


def test_host_descriptor_nan_padding():
    x = np.ones((5, 6), np.float32)
    y = np.zeros((8, 8), np.float32)
    KS.desc_copy[(1, 1)](TensorDescriptor.from_tensor(x, [8, 8], padding="nan"), TensorDescriptor.from_tensor(y, [8, 8]),
                        BM=8, BN=8)
    assert np.isnan(y[5:]).all() and np.isnan(y[:, 6:]).all() and (y[:5, :6] == 1).all()


def test_descriptor_attributes_in_the_kernel():
    buf = np.zeros((9, 40), np.float16)
    out = np.zeros(5, np.int64)
    KS.desc_attrs[(1,)](TensorDescriptor(buf, [9, 33], [40, 1], [8, 16]), out)
    assert out.tolist() == [9, 33, 40, 1, 816]


def test_access_outside_the_allocation_still_raises_with_the_kernel_line():
    x = np.zeros((10, 16), np.float32)  # the descriptor claims 16 rows
    y = np.zeros((16, 16), np.float32)
    with pytest.raises(InterpreterError) as ei:
        KS.desc_transpose[(1, 1)](TensorDescriptor(x, [16, 16], [16, 1], [16, 16]), TensorDescriptor.from_tensor(y, [16, 16]),
                                 BM=16, BN=16)
    msg = str(ei.value)
    line = next(i for i, l in enumerate(open(KS.__file__), 1) if "t = x_desc.load([pm, pn])" in l)
    assert f"block_kernels.py:{line}" in msg and "out-of-bounds load" in msg and "'x_desc'" in msg
    assert "t = x_desc.load([pm, pn])\n" in msg and "^" in msg


@pytest.mark.parametrize("kernel,marker,text,message", KS.ERROR_CASES, ids=[c[1] for c in KS.ERROR_CASES])
def test_mistakes_point_at_the_kernel_line(kernel, marker, text, message):
    with pytest.raises(CompilationError) as ei:
        kernel[(1,)](np.zeros((32, 32), np.float32), 32, 32)
    e = ei.value
    assert (e.line, e.col) == (KS.line_of(marker), KS.col_of(marker, text))
    assert message in str(e)
    assert "\n" + " " * (4 + e.col) + "^" in str(e)


def test_host_descriptor_mistakes():
    x = np.zeros((8, 8), np.float32)
    with pytest.raises(ValueError, match="last stride must be 1"):
        TensorDescriptor(x, [8, 8], [1, 8], [8, 8])
    with pytest.raises(ValueError, match="block_shape must be powers of two"):
        TensorDescriptor.from_tensor(x, [8, 6])
    with pytest.raises(ValueError, match="one entry per dimension"):
        TensorDescriptor(x, [8, 8], [8, 1], [8])
    with pytest.raises(ValueError, match="padding must be one of"):
        TensorDescriptor.from_tensor(x, [8, 8], padding="inf")
    with pytest.raises(ValueError, match="needs a floating-point tensor"):
        TensorDescriptor.from_tensor(x.astype(np.int32), [8, 8], padding="nan")
