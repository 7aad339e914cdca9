"""Triton 3.6 language ops added for compatibility (sort, topk, flip, gather, histogram, interleave, ...):
the interpreter against numpy/torch, their errors, and their compilation to SASS on CPU."""
import functools
import re

import ml_dtypes
import numpy as np
import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc import CompilationError, InterpreterError

jit = functools.partial(kernelc.jit, interpret=True)
_rng = np.random.default_rng(3)


@jit
def _k2d(x_ptr, o_ptr, M: kl.constexpr, N: kl.constexpr, OM: kl.constexpr, ON: kl.constexpr, OP: kl.constexpr):
    x = kl.load(x_ptr + kl.arange(0, M)[:, None] * N + kl.arange(0, N)[None, :])
    kl.store(o_ptr + kl.arange(0, OM)[:, None] * ON + kl.arange(0, ON)[None, :], OP(x))


def run2d(x, op, out_shape=None, out_dtype=None):
    out = np.zeros(out_shape or x.shape, out_dtype or x.dtype)
    _k2d[(1,)](x, out, x.shape[0], x.shape[1], out.shape[0], out.shape[1], op)
    return out


def _floats(shape, dt=np.float32):
    x = _rng.standard_normal(shape).astype(dt)
    x.flat[::7] = x.flat[1]  # ties
    return x


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.int64])
def test_sort_and_topk_match_numpy_and_torch(dt):
    x = (_floats((4, 32)) * 40).astype(dt)
    ref = np.sort(x.astype(np.float64), -1).astype(dt)
    np.testing.assert_array_equal(run2d(x, kl.sort), ref)
    np.testing.assert_array_equal(run2d(x, lambda v: v.sort(descending=True)), ref[:, ::-1])
    top = run2d(x, lambda v: kl.topk(v, 8), (4, 8))
    want = torch.topk(torch.from_numpy(x.astype(np.float64)), 8, dim=-1).values.numpy().astype(dt)
    np.testing.assert_array_equal(top, want)


def test_sort_puts_nan_last_and_keeps_signed_zeros():
    x = np.array([[3.0, np.nan, -0.0, 0.0, -np.inf, 1.0, np.nan, -2.0]], np.float32)
    got = run2d(x, kl.sort)
    np.testing.assert_array_equal(got, np.sort(x, -1))
    assert np.isnan(got[0, -2:]).all()
    down = run2d(x, lambda v: kl.sort(v, dim=1, descending=True))
    assert np.isnan(down[0, :2]).all() and down[0, 2] == 3.0


def _bitonic_merge_ref(row, descending):
    row = list(row)
    n = len(row)
    s = n // 2
    while s:
        for p in range(n):
            if p & s == 0:
                a, b = row[p], row[p + s]
                if (a > b) != descending and a != b:
                    row[p], row[p + s] = b, a
        s //= 2
    return row


def test_bitonic_merge_sorts_bitonic_rows_and_follows_the_network_otherwise():
    up = np.sort(_rng.standard_normal((2, 8)), -1)
    bitonic = np.concatenate([up, np.sort(_rng.standard_normal((2, 8)), -1)[:, ::-1]], -1).astype(np.float32)
    np.testing.assert_array_equal(run2d(bitonic, kl.bitonic_merge), np.sort(bitonic, -1))
    np.testing.assert_array_equal(run2d(bitonic, lambda v: kl.bitonic_merge(v, descending=True)),
                                  np.sort(bitonic, -1)[:, ::-1])
    rand = _floats((2, 16))
    want = np.array([_bitonic_merge_ref(r, False) for r in rand], np.float32)
    np.testing.assert_array_equal(run2d(rand, kl.bitonic_merge), want)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_flip(axis):
    x = _floats((4, 8))
    got = run2d(x, lambda v: kl.flip(v, axis) if axis is not None else v.flip())
    np.testing.assert_array_equal(got, np.flip(x, 1 if axis is None else axis))


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_matches_torch_gather(axis):
    x = _floats((8, 16))
    shape = (4, 16) if axis == 0 else (8, 5)
    idx = _rng.integers(0, x.shape[axis], shape).astype(np.int32)

    @jit
    def k(x_ptr, i_ptr, o_ptr, M: kl.constexpr, N: kl.constexpr, IM: kl.constexpr, IN: kl.constexpr,
          AX: kl.constexpr):
        x = kl.load(x_ptr + kl.arange(0, M)[:, None] * N + kl.arange(0, N)[None, :])
        offs = kl.arange(0, IM)[:, None] * IN + kl.arange(0, IN)[None, :]
        kl.store(o_ptr + offs, kl.gather(x, kl.load(i_ptr + offs), AX))

    IN = 8 if axis == 1 else 16
    idx_p = np.zeros((shape[0], IN), np.int32)
    idx_p[:, :shape[1]] = idx
    out = np.zeros(idx_p.shape, np.float32)
    k[(1,)](x, idx_p, out, 8, 16, shape[0], IN, axis)
    want = torch.gather(torch.from_numpy(x), axis, torch.from_numpy(idx_p.astype(np.int64))).numpy()
    np.testing.assert_array_equal(out, want)


def test_gather_index_out_of_range_is_an_error_with_the_kernel_line():
    x = _floats((4, 8))
    with pytest.raises(InterpreterError) as ei:
        run2d(x, lambda v: kl.gather(v, kl.full((4, 8), 8, kl.int32), 1))
    assert "out-of-range gather index" in str(ei.value) and "outside 0..7" in str(ei.value)
    with pytest.raises(CompilationError, match="same rank"):
        run2d(x, lambda v: kl.gather(v, kl.arange(0, 8), 1))


def test_histogram_counts_in_range_unmasked_values():
    @jit
    def k(x_ptr, o_ptr, n, N: kl.constexpr, BINS: kl.constexpr):
        r = kl.arange(0, N)
        x = kl.load(x_ptr + r)
        kl.store(o_ptr + kl.arange(0, BINS), kl.histogram(x, BINS, mask=r < n))

    x = _rng.integers(-3, 20, 64).astype(np.int32)
    out = np.zeros(16, np.int32)
    k[(1,)](x, out, 50, 64, 16)
    v = x[:50]
    np.testing.assert_array_equal(out, np.bincount(v[(v >= 0) & (v < 16)], minlength=16))
    assert out.sum() < 50  # out-of-range values were present and not counted


def test_interleave_swizzle2d_reduce_or_and_arithmetic_functions():
    x = _floats((4, 8))
    got = run2d(x, lambda v: kl.interleave(v, -v), (4, 16))
    np.testing.assert_array_equal(got, np.stack([x, -x], -1).reshape(4, 16))
    np.testing.assert_array_equal(run2d(x, lambda v: kl.add(v, 2.0)), x + 2)
    np.testing.assert_array_equal(run2d(x, lambda v: kl.sub(v, v * 3, sanitize_overflow=False)), x - 3 * x)
    np.testing.assert_array_equal(run2d(x, lambda v: kl.mul(v, v)), x * x)
    bits = _rng.integers(0, 2**31, (4, 8)).astype(np.int32)
    got = run2d(bits, lambda v: kl.broadcast_to(kl.reduce_or(v, 1, keep_dims=True), (4, 8)))
    np.testing.assert_array_equal(got[:, 0], np.bitwise_or.reduce(bits, 1))

    si, sj, sg = 5, 3, 2
    grid = np.zeros((8, 4), np.int32)
    got = run2d(grid, lambda v: _swz(v, si, sj, sg))
    seen = set()
    for pid in range(si * sj):  # groups of sg rows, walked column by column
        i, j = divmod(pid, sj)
        g = pid // (sg * sj)
        rows = min(si - g * sg, sg)
        t = pid - g * sg * sj
        want = (g * sg + t % rows, t // rows)
        assert (got[i, j] // 100, got[i, j] % 100) == want
        seen.add(want)
    assert len(seen) == si * sj


def _swz(v, si, sj, sg):
    i = kl.arange(0, 8)[:, None] + kl.zeros((8, 4), kl.int32)
    j = kl.arange(0, 4)[None, :] + kl.zeros((8, 4), kl.int32)
    ni, nj = kl.swizzle2d(i, j, si, sj, sg)
    return ni * 100 + nj


@kernelc.jit
def _leaky(a):
    if a > 0:  # branches on the value: map_elementwise calls it per element in the interpreter
        return a
    return a * 0.25


def test_map_elementwise_calls_a_branching_function_per_element():
    x = _floats((4, 8))
    np.testing.assert_array_equal(run2d(x, lambda v: kl.map_elementwise(_leaky, v)),
                                  np.where(x > 0, x, x * np.float32(0.25)))


@kernelc.jit
def _pick(a, b):
    if a > b:
        return a * 2.0, a
    return b - a, b


@kernelc.jit
def _map_kernel(x_ptr, y_ptr, o_ptr, N: kl.constexpr):
    r = kl.arange(0, N)
    u, w = kl.map_elementwise(_pick, kl.load(x_ptr + r), kl.load(y_ptr + r))
    kl.store(o_ptr + r, u + w)


def test_map_elementwise_with_branches_compiles_to_per_element_branches():
    x, y = _floats(256), _floats(256)[::-1].copy()
    out = np.zeros(256, np.float32)
    kernelc.jit(_map_kernel.fn, interpret=True)[(1,)](x, y, out, 256)
    np.testing.assert_array_equal(out, np.where(x > y, x * 2 + x, (y - x) + y))
    ck = kernelc.compile(_map_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "o_ptr": "*fp32"}, {"N": 256},
                         target="sm_90a")
    llir = ck.asm["llir"]
    # 2 elements per thread: the function's `if` is one branch and one phi pair per element
    assert llir.count("br i1") == 2 and llir.count("= phi float") == 4


def test_unsupported_names_raise_errors_that_name_them():
    x = _floats((4, 8))
    with pytest.raises(CompilationError) as ei:
        run2d(x, lambda v: v.to(kl.float8e4b15))
    assert "tl.float8e4b15 is not supported by kernelc" in str(ei.value) and "test_language_ops.py" in str(ei.value)
    with pytest.raises(CompilationError, match="e2m1 operands are packed two per uint8"):
        run2d(x, lambda v: kl.dot_scaled(v, None, "e2m1", v, None, "e2m1"))
    with pytest.raises(CompilationError, match="lhs_k_pack=False .* is not supported by kernelc"):
        run2d(x, lambda v: kl.dot_scaled(v, None, "fp16", v, None, "fp16", lhs_k_pack=False))
    with pytest.raises(InterpreterError, match="inline assembly cannot run in the interpreter"):
        run2d(x, lambda v: kl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [v], kl.float32, True, 1))
    with pytest.raises(CompilationError, match="pack=4 is not supported by kernelc"):
        run2d(x, lambda v: kl.inline_asm_elementwise("", "=r,r", [v], kl.float32, True, 4))


def test_extra_cuda_target_info_and_compat_names_in_the_interpreter():
    from kernelc.language.extra import cuda

    @jit
    def k(o_ptr):
        kl.store(o_ptr + 0, cuda.num_warps())
        kl.store(o_ptr + 1, cuda.num_threads())
        kl.store(o_ptr + 2, cuda.smid())
        t = cuda.globaltimer()
        kl.store(o_ptr + 3, (t > 0).to(kl.int32))
        cuda.gdc_wait()
        cuda.gdc_launch_dependents()
        kl.store(o_ptr + 4, kl.target_info.current_target().arch)
        kl.store(o_ptr + 5, kl.TRITON_MAX_TENSOR_NUMEL // 1024)
        pair = kl.tuple([kl.full((), 3, kl.int32), kl.full((), 4, kl.int32)])
        kl.store(o_ptr + 6, pair[0] * pair[1])
        i = 0
        while kl.condition(i < 5):
            i += 1
        kl.store(o_ptr + 7, i)

    out = np.zeros(8, np.int32)
    k[(1,)](out, num_warps=8)
    assert out[:4].tolist() == [8, 256, 0, 1]
    assert out[4] >= 70 and out[5:].tolist() == [1024, 12, 5]
    assert kl.str_to_ty("*fp16", None) == kl.pointer_type(kl.float16) and kl.pi32_t == kl.pointer_type(kl.int32)
    assert kl.constexpr_type(3) == kl.constexpr_type(3) and isinstance(kl.tuple([1, 2]), tuple)


def test_tensor_methods_and_descriptor_functions():
    @jit
    def k(x_ptr, o_ptr, N: kl.constexpr):
        r = kl.arange(0, N)
        x = kl.load(x_ptr + r)
        (o_ptr + r).store(x.flip().cdiv(2))
        desc = kl.make_tensor_descriptor(x_ptr, shape=[N], strides=[1], block_shape=[N])
        kl.store_tensor_descriptor(kl.make_tensor_descriptor(o_ptr + N, shape=[N], strides=[1], block_shape=[N]),
                                   [0], kl.load_tensor_descriptor(desc, [0]).logical_and(x > 3).to(kl.int32))
        (o_ptr + 2 * N).atomic_add(x.reduce(0, _add_combine).item())

    x = _rng.integers(0, 9, 16).astype(np.int32)
    out = np.zeros(33, np.int32)
    k[(1,)](x, out, 16)
    np.testing.assert_array_equal(out[:16], (x[::-1] + 1) // 2)
    np.testing.assert_array_equal(out[16:32], ((x != 0) & (x > 3)).astype(np.int32))
    assert out[32] == x.sum()


@kernelc.jit
def _add_combine(a, b):
    return a + b


# -- compiled on CPU (sm_90a): lowering through shared memory ---------------------------------------


@kernelc.jit
def _moves(x_ptr, i_ptr, y_ptr, h_ptr, B: kl.constexpr):
    r = kl.arange(0, B)
    x = kl.load(x_ptr + r)
    a, b = kl.split(kl.join(x, x + 1))
    c = kl.flip(kl.cat(a, b), 0)
    s = kl.sort(c) + kl.bitonic_merge(c, descending=True)
    kl.store(y_ptr + kl.arange(0, 2 * B), s)
    kl.store(y_ptr + 2 * B + r, kl.gather(x, kl.load(i_ptr + r), 0))
    kl.store(y_ptr + 3 * B + kl.arange(0, 8), kl.topk(x, 8))
    kl.store(y_ptr + 3 * B + 8 + kl.arange(0, 2 * B), kl.interleave(x, x))
    kl.store(h_ptr + kl.arange(0, 16), kl.histogram(kl.load(i_ptr + r), 16, mask=r < 100))


def test_data_movement_ops_compile_to_sass_through_shared_memory():
    ck = kernelc.compile(_moves, {"x_ptr": "*fp32", "i_ptr": "*i32", "y_ptr": "*fp32", "h_ptr": "*i32"},
                         {"B": 128}, target="sm_90a")
    ptx = ck.asm["ptx"]
    assert re.search(r"\batom\.shared(\.\w+)*\.add", ptx) or re.search(r"\bred\.shared(\.\w+)*\.add", ptx)
    assert "bar.sync" in ptx and "st.shared" in ptx and "ld.shared" in ptx
    assert ck.n_spills == 0


def test_inline_asm_and_cuda_helpers_compile():
    from kernelc.language.extra import cuda

    @kernelc.jit
    def k(x_ptr, o_ptr):
        r = kl.arange(0, 128)
        x = kl.load(x_ptr + r)
        cuda.gdc_wait()
        y = kl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $1, 3;", "=r,r", [x], kl.int32, True, 1)
        kl.store(o_ptr + r, y + cuda.smid() + cuda.globaltimer().to(kl.int32))
        kl.store(o_ptr + 128 + kl.arange(0, cuda.num_warps()), cuda.num_threads())  # constexprs, as in Triton
        cuda.gdc_launch_dependents()

    ptx = kernelc.compile(k, {"x_ptr": "*i32", "o_ptr": "*i32"}, target="sm_90a", num_warps=8).asm["ptx"]
    for needle in ("shf.l.wrap.b32", "%smid", "%globaltimer", "griddepcontrol.wait",
                   "griddepcontrol.launch_dependents"):
        assert needle in ptx, needle
    assert re.search(r"\b256;", ptx)  # num_threads() folded to 32 * 8


def test_softmax_takes_tritons_dim_and_keep_dims():
    x = _floats((4, 8))
    got = run2d(x, lambda v: kl.softmax(v, dim=1, keep_dims=True))
    np.testing.assert_allclose(got, torch.softmax(torch.from_numpy(x), 1).numpy(), rtol=1e-6, atol=1e-7)
    got0 = run2d(x, kl.softmax)
    np.testing.assert_allclose(got0, torch.softmax(torch.from_numpy(x), 0).numpy(), rtol=1e-6, atol=1e-7)


def test_fast_tanhf_and_libdevice_paths():
    from kernelc.language.extra import libdevice
    from kernelc.language.extra.cuda import libdevice as cuda_libdevice
    x = _floats((4, 8))
    np.testing.assert_allclose(run2d(x, libdevice.fast_tanhf), np.tanh(x), rtol=1e-6, atol=1e-7)
    assert cuda_libdevice.asin is libdevice.asin and kl.extra.libdevice.fast_tanhf is libdevice.fast_tanhf


# -- dot_scaled -------------------------------------------------------------------------------------

_FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float64)


@jit
def _dot_scaled_k(a_ptr, sa_ptr, b_ptr, sb_ptr, o_ptr, M: kl.constexpr, N: kl.constexpr, K: kl.constexpr,
                  KA: kl.constexpr, KB: kl.constexpr, FA: kl.constexpr, FB: kl.constexpr):
    rm, rn = kl.arange(0, M), kl.arange(0, N)
    a = kl.load(a_ptr + rm[:, None] * KA + kl.arange(0, KA)[None, :])
    b = kl.load(b_ptr + kl.arange(0, KB)[:, None] * N + rn[None, :])
    sa = kl.load(sa_ptr + rm[:, None] * (K // 32) + kl.arange(0, K // 32)[None, :])
    sb = kl.load(sb_ptr + rn[:, None] * (K // 32) + kl.arange(0, K // 32)[None, :])
    kl.store(o_ptr + rm[:, None] * N + rn[None, :], kl.dot_scaled(a, sa, FA, b, sb, FB))


@pytest.mark.parametrize("fa,fb", [("e2m1", "e2m1"), ("e4m3", "e2m1"), ("e5m2", "bf16"), ("fp16", "e4m3")])
def test_dot_scaled_matches_a_numpy_reference(fa, fb):
    M, N, K = 16, 16, 64
    sa = _rng.integers(120, 134, (M, K // 32)).astype(np.uint8)
    sb = _rng.integers(120, 134, (N, K // 32)).astype(np.uint8)

    def operand(fmt, shape, packed_axis):
        if fmt == "e2m1":
            codes = _rng.integers(0, 16, shape).astype(np.uint8)
            even, odd = (codes[:, 0::2], codes[:, 1::2]) if packed_axis == 1 else (codes[0::2], codes[1::2])
            return (even | (odd << 4)).astype(np.uint8), _FP4[codes]
        vals = _rng.standard_normal(shape)
        dt = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "bf16": ml_dtypes.bfloat16,
              "fp16": np.float16}[fmt]
        arr = vals.astype(dt)
        return arr, arr.astype(np.float64)

    a, av = operand(fa, (M, K), 1)
    b, bv = operand(fb, (K, N), 0)
    fa_ = np.repeat(np.ldexp(1.0, sa.astype(np.int64) - 127), 32, axis=1)
    fb_ = np.repeat(np.ldexp(1.0, sb.astype(np.int64) - 127), 32, axis=1).T
    want = (av * fa_) @ (bv * fb_)
    out = np.zeros((M, N), np.float32)
    _dot_scaled_k[(1,)](a, sa, b, sb, out, M, N, K, a.shape[1], b.shape[0], fa, fb)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_dot_scaled_compiles_to_tensor_cores():
    ck = kernelc.compile(kernelc.jit(_dot_scaled_k.fn),
                         {"a_ptr": "*u8", "sa_ptr": "*u8", "b_ptr": "*u8", "sb_ptr": "*u8", "o_ptr": "*fp32"},
                         {"M": 64, "N": 64, "K": 64, "KA": 32, "KB": 32, "FA": "e2m1", "FB": "e2m1"}, target="sm_90a")
    assert re.search(r"\b(HMMA|HGMMA)\.\S*TF32", ck.asm["sass"]), "no TF32 tensor-core instruction"


def test_dtype_predicates_constexpr_logic_and_descriptor_gaps():
    assert kl.int8.get_int_max_value() == 127 and kl.uint16.get_int_max_value() == 65535
    assert kl.int32.get_int_min_value() == -2**31 and kl.uint8.get_int_min_value() == 0
    assert kl.int32.is_int32() and not kl.int32.is_int64() and kl.uint64.is_uint64() and kl.float8e4nv.is_fp8e4nv()
    assert kl.float8e5.is_fp8e5() and not kl.float16.is_fp8e4b15() and kl.dtype.is_dtype("fp32")
    assert not kl.dtype.is_dtype("fp4") and "fp8e4b15" in kl.dtype.FP_TYPES
    assert kl.constexpr(True).logical_and(False).value is False and kl.constexpr(0).logical_or(3).value == 3

    @jit
    def k(x_ptr, N: kl.constexpr):
        desc = kl.make_tensor_descriptor(x_ptr, shape=[N], strides=[1], block_shape=[N])
        desc.atomic_max([0], kl.zeros([N], kl.float32))  # atomic_add is supported (tests/compiler/test_bulk_reductions.py)

    with pytest.raises(CompilationError, match="tensor_descriptor.atomic_min/max/and/or/xor is not supported by kernelc"):
        k[(1,)](np.zeros(16, np.float32), 16)


@kernelc.jit
def _target_branch(o_ptr, n):
    pair = kl.tuple([kl.program_id(0), n])
    i = 0
    while kl.condition(i < n, disable_licm=True):
        i += 1
    kl.store(o_ptr + 0, pair[0] * pair[1] + i)
    if kl.target_info.cuda_capability_geq(9, 0):
        kl.store(o_ptr + 1, kl.target_info.current_target().arch)


def test_target_info_answers_for_the_compilation_target():
    def stores(arch):
        ptx = kernelc.compile(_target_branch, {"o_ptr": "*i32", "n": "i32"}, target=arch).asm["ptx"]
        return len(re.findall(r"\bst\.global", ptx)), ptx
    n90, ptx90 = stores("sm_90a")
    n80, _ = stores("sm_80")
    assert (n90, n80) == (2, 1) and re.search(r"\b90;", ptx90)


def test_extra_hip_names_say_they_are_not_supported():
    with pytest.raises(AttributeError, match="tl.extra.hip.libdevice is not supported by kernelc"):
        kl.extra.hip.libdevice
