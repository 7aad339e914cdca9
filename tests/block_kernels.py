"""Kernels with block pointers and tensor descriptors, shared by the interpreter, codegen and GPU tests
(tests/language/test_block_ptr_interpreter.py, tests/compiler/test_descriptors_codegen.py,
tests/gpu/test_gpu_descriptors.py)."""
import kernelc
import kernelc.language as kl


@kernelc.jit
def bp_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
              BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    pid_m = kl.program_id(0)
    pid_n = kl.program_id(1)
    a_bp = kl.make_block_ptr(a_ptr, shape=(M, K), strides=(stride_am, stride_ak), offsets=(pid_m * BM, 0),
                             block_shape=(BM, BK), order=(1, 0))
    b_bp = kl.make_block_ptr(b_ptr, shape=(K, N), strides=(stride_bk, stride_bn), offsets=(0, pid_n * BN),
                             block_shape=(BK, BN), order=(1, 0))
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, kl.cdiv(K, BK), num_stages=3):
        a = kl.load(a_bp, boundary_check=(0, 1), padding_option="zero")
        b = kl.load(b_bp, boundary_check=(0, 1), padding_option="zero")
        acc = kl.dot(a, b, acc)  # BP_DOT
        a_bp = kl.advance(a_bp, (0, BK))
        b_bp = kl.advance(b_bp, (BK, 0))
    c_bp = kl.make_block_ptr(c_ptr, shape=(M, N), strides=(stride_cm, stride_cn), offsets=(pid_m * BM, pid_n * BN),
                             block_shape=(BM, BN), order=(1, 0))
    kl.store(c_bp, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


@kernelc.jit
def bp_load_store(x_ptr, y_ptr, M, N, stride_xm, off_m, off_n, BM: kl.constexpr, BN: kl.constexpr,
                  CHECK: kl.constexpr, PAD: kl.constexpr):
    """y[BM, BN] = the block of x at (off_m, off_n), with boundary_check=CHECK and padding PAD."""
    x_bp = kl.make_block_ptr(x_ptr, (M, N), (stride_xm, 1), (off_m, off_n), (BM, BN), (1, 0))
    y_bp = kl.make_block_ptr(y_ptr, (BM, BN), (BN, 1), (0, 0), (BM, BN), (1, 0))
    kl.store(y_bp, kl.load(x_bp, boundary_check=CHECK, padding_option=PAD))


@kernelc.jit
def bp_store_checked(x_ptr, y_ptr, M, N, stride_ym, off_m, off_n, BM: kl.constexpr, BN: kl.constexpr):
    """The block x[BM, BN] stored into y at (off_m, off_n); out-of-bounds elements are dropped."""
    x_bp = kl.make_block_ptr(x_ptr, (BM, BN), (BN, 1), (0, 0), (BM, BN), (1, 0))
    y_bp = kl.make_block_ptr(y_ptr, (M, N), (stride_ym, 1), (off_m, off_n), (BM, BN), (1, 0))
    kl.store(y_bp, kl.load(x_bp), boundary_check=(0, 1))


@kernelc.jit
def bp_ifelse(x_ptr, y_ptr, M, N, flag, BM: kl.constexpr, BN: kl.constexpr):
    p = kl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(0, 0), block_shape=(BM, BN), order=(1, 0))
    if flag > 0:
        p = kl.advance(p, (BM, 0))
    else:
        p = kl.advance(p, (0, BN))
    t = kl.load(p, boundary_check=(0, 1), padding_option="nan")
    q = kl.make_block_ptr(y_ptr, shape=(BM, BN), strides=(BN, 1), offsets=(0, 0), block_shape=(BM, BN), order=(1, 0))
    kl.store(q, t)


@kernelc.jit
def bp_while_sum(x_ptr, out_ptr, N, BN: kl.constexpr):
    p = kl.make_block_ptr(x_ptr, shape=(N,), strides=(1,), offsets=(0,), block_shape=(BN,), order=(0,))
    acc = kl.zeros((BN,), dtype=kl.float32)
    i = 0
    while i < N:
        acc += kl.load(p, boundary_check=(0,))
        p = kl.advance(p, (BN,))
        i += BN
    kl.store(out_ptr + kl.arange(0, BN), acc)


@kernelc.jit
def bp_nested_sum(x_ptr, out_ptr, M, N, BM: kl.constexpr, BN: kl.constexpr):
    """out[BM, BN] = the sum of all (BM, BN) blocks of x (zero-padded), walking it with nested loops."""
    p = kl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for i in range(0, kl.cdiv(M, BM)):
        q = p
        for j in range(0, kl.cdiv(N, BN)):
            acc += kl.load(q, boundary_check=(0, 1))
            q = kl.advance(q, (0, BN))
        p = kl.advance(p, (BM, 0))
    kl.store(kl.make_block_ptr(out_ptr, (BM, BN), (BN, 1), (0, 0), (BM, BN), (1, 0)), acc)


@kernelc.jit
def pick(p, q, flag):
    if flag > 0:
        return p
    else:
        return q


@kernelc.jit
def bp_from_device_function(x_ptr, out_ptr, flag, BN: kl.constexpr):
    p = kl.make_block_ptr(x_ptr, (64,), (1,), (0,), (BN,), (0,))
    r = pick(p, kl.advance(p, (BN,)), flag)
    kl.store(out_ptr + kl.arange(0, BN), kl.load(r))


@kernelc.jit
def desc_copy(in_desc, out_desc, BM: kl.constexpr, BN: kl.constexpr):
    pm = kl.program_id(0) * BM
    pn = kl.program_id(1) * BN
    out_desc.store([pm, pn], in_desc.load([pm, pn]))


@kernelc.jit
def desc_transpose(x_desc, y_desc, BM: kl.constexpr, BN: kl.constexpr):
    pm = kl.program_id(0) * BM
    pn = kl.program_id(1) * BN
    t = x_desc.load([pm, pn])
    y_desc.store([pn, pm], kl.trans(t))


@kernelc.jit
def desc_copy3(x_desc, y_desc, B0: kl.constexpr, B1: kl.constexpr, B2: kl.constexpr):
    o = [kl.program_id(0) * B0, kl.program_id(1) * B1, kl.program_id(2) * B2]
    y_desc.store(o, x_desc.load(o))


@kernelc.jit
def desc_matmul(a_desc, b_desc, c_desc, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    pid_m = kl.program_id(0)
    pid_n = kl.program_id(1)
    K = a_desc.shape[1]
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, kl.cdiv(K, BK), num_stages=3):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([k * BK, pid_n * BN])
        acc = kl.dot(a, b, acc)  # DESC_DOT
    c_desc.store([pid_m * BM, pid_n * BN], acc)


@kernelc.jit
def dev_desc_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    a_desc = kl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = kl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    c_desc = kl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    pid_m = kl.program_id(0)
    pid_n = kl.program_id(1)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, kl.cdiv(K, BK), num_stages=3):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([k * BK, pid_n * BN])
        acc = kl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc)


@kernelc.jit
def dev_desc_pad(x_ptr, y_ptr, M, N, off_m, off_n, BM: kl.constexpr, BN: kl.constexpr, PAD: kl.constexpr):
    """y[BM, BN] = the tile of x (M x N, contiguous) at (off_m, off_n), padded with PAD."""
    d = kl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN], padding_option=PAD)
    r = kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :]
    kl.store(y_ptr + r, d.load([off_m, off_n]))


@kernelc.jit
def desc_attrs(x_desc, out_ptr):
    kl.static_assert(x_desc.dtype == kl.float16)
    kl.static_assert(x_desc.block_shape == [8, 16])
    kl.store(out_ptr + 0, x_desc.shape[0].to(kl.int64))
    kl.store(out_ptr + 1, x_desc.shape[1].to(kl.int64))
    kl.store(out_ptr + 2, x_desc.strides[0])
    kl.store(out_ptr + 3, x_desc.strides[1])
    kl.store(out_ptr + 4, x_desc.block_shape[0] * 100 + x_desc.block_shape[1])


# -- mistakes: each must be a CompilationError at the marked line, with a caret ---------------------------


@kernelc.jit
def bad_offsets(x_ptr, M, N):
    d = kl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [16, 16])
    t = d.load([0])  # BAD_OFFSETS
    d.store([0, 0], t)


@kernelc.jit
def bad_advance(x_ptr, M, N):
    p = kl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (16, 16), (1, 0))
    p = kl.advance(p, (16,))  # BAD_ADVANCE
    kl.store(p, kl.load(p))


@kernelc.jit
def bad_block_shape(x_ptr, M, N):
    p = kl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (16, 24), (1, 0))  # BAD_BLOCK_SHAPE
    kl.store(p, kl.load(p))


@kernelc.jit
def bad_desc_block_shape(x_ptr, M, N):
    d = kl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [12, 16])  # BAD_DESC_BLOCK_SHAPE
    d.store([0, 0], d.load([0, 0]))


@kernelc.jit
def bad_stride(x_ptr, M, N):
    d = kl.make_tensor_descriptor(x_ptr, [M, N], [N, 2], [16, 16])  # BAD_STRIDE
    d.store([0, 0], d.load([0, 0]))


@kernelc.jit
def bad_boundary(x_ptr, M, N):
    p = kl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (16, 16), (1, 0))
    kl.store(p, kl.load(p, boundary_check=(0, 2)))  # BAD_BOUNDARY


@kernelc.jit
def bad_padding(x_ptr, M, N):
    p = kl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (16, 16), (1, 0))
    kl.store(p, kl.load(p, boundary_check=(0, 1), padding_option="inf"))  # BAD_PADDING


# one row per mistake: kernel, the marker on its line, the column of the caret's text, what the message says
ERROR_CASES = [
    (bad_offsets, "BAD_OFFSETS", "d.load", "got 1 offset for a 2-D block"),
    (bad_advance, "BAD_ADVANCE", "kl.advance", "advance() got 1 offset for a 2-D block pointer"),
    (bad_block_shape, "BAD_BLOCK_SHAPE", "kl.make_block_ptr", "block_shape must be powers of two, got [16, 24]"),
    (bad_desc_block_shape, "BAD_DESC_BLOCK_SHAPE", "kl.make_tensor_descriptor",
     "block_shape must be powers of two, got [12, 16]"),
    (bad_stride, "BAD_STRIDE", "kl.make_tensor_descriptor", "last stride to be the constant 1"),
    (bad_boundary, "BAD_BOUNDARY", "kl.load", "boundary_check dimension 2 is out of range for a 2-D block pointer"),
    (bad_padding, "BAD_PADDING", "kl.load", "padding_option must be one of ['', 'zero', 'nan'], got 'inf'"),
]


def line_of(marker):
    for i, line in enumerate(open(__file__), 1):
        if line.rstrip().endswith(f"# {marker}"):
            return i
    raise AssertionError(marker)


def col_of(marker, text):
    return open(__file__).read().splitlines()[line_of(marker) - 1].index(text)
