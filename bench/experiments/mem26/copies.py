"""Pure streaming kernels with the memory traffic and the program shape of two issue-21 rows, to tell how far
those rows are from the bandwidth the same launch shape reaches (session 26, helper mem26).

- ``row_copy``: softmax fwd's shape: one program per row, ``BLOCK_SIZE = next_power_of_2(n_cols)``, the same
  warps rule (``memory_bound._warps``); reads the row once, writes it once to another tensor.
- ``rope_negate``: rope's shape: one program per token, the token's (n_heads, head_dim) tile read and written back
  in place (negated, so that no compiler can drop the store as a store of what was loaded), 4 warps as rope.

The same source runs under kernelc and under Triton (``triton_module`` swaps the imports, as bench/common.py's
``triton_twin``).
"""
import kernelc as triton
import kernelc.language as tl


@triton.jit
def row_copy_kernel(y_ptr, x_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0)
    tl.store(y_ptr + row * stride + cols, x, mask=mask)


@triton.jit
def rope_negate_kernel(q_ptr, q_row_stride, n_heads, head_dim, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    q_ptr += pid * q_row_stride
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    offs = h[:, None] * head_dim + d[None, :]
    mask = (h[:, None] < n_heads) & (d[None, :] < head_dim)
    x = tl.load(q_ptr + offs, mask=mask, other=0)
    tl.store(q_ptr + offs, -x, mask=mask)


def _warps(block):
    # memory_bound._warps (softmax fwd's rule), repeated here so this module stands alone under either compiler
    return 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4


def row_copy(y, x):
    n_rows, n_cols = x.shape
    bs = triton.next_power_of_2(n_cols)
    row_copy_kernel[(n_rows,)](y, x, x.stride(0), n_cols, BLOCK_SIZE=bs, num_warps=_warps(bs))
    return y


def rope_negate(q):
    bsz, seq_len, n_heads, head_dim = q.shape
    q2 = q.view(bsz * seq_len, n_heads * head_dim)
    rope_negate_kernel[(bsz * seq_len,)](q2, q2.stride(0), n_heads, head_dim,
                                         BLOCK_H=triton.next_power_of_2(n_heads),
                                         BLOCK_D=triton.next_power_of_2(head_dim))
    return q


def _load(path, name, swap):
    import importlib.util
    import os
    import tempfile
    src = open(path).read()
    if swap:
        src = src.replace("import kernelc as triton", "import triton").replace(
            "import kernelc.language as tl", "import triton.language as tl")
    p = os.path.join(tempfile.mkdtemp(prefix="mem26_copies_"), f"{name}.py")
    with open(p, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernelc_module():
    """This file loaded once more under kernelc, as its own module (its kernels compile apart)."""
    return _load(__file__, "mem26_copies_kernelc", False)


def triton_module():
    """This file compiled by real Triton (imports swapped)."""
    return _load(__file__, "mem26_copies_triton", True)
