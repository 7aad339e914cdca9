"""Memory-access corpus for the analyzer: kernels whose expected diagnosis (id and line) is known, and
access patterns that must raise nothing.  Each case runs on the CPU in the interpreter (one program,
so the sector oracle can read its addresses) and compiles for sm_90a (the static analysis).

The expected line is the one marked ``#: expect`` in the kernel's source.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import kernelc
import kernelc.language as kl


@kernelc.jit
def transpose(x_ptr, y_ptr, M, N, stride_xm, stride_yn, BM: kl.constexpr, BN: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.program_id(1) * BN + kl.arange(0, BN)
    x = kl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :])
    kl.store(y_ptr + offs_n[None, :] * stride_yn + offs_m[:, None], x)  #: expect


@kernelc.jit
def column_sum(x_ptr, y_ptr, M, N, stride_m, BLOCK: kl.constexpr):
    col = kl.program_id(0)
    acc = kl.zeros((BLOCK,), dtype=kl.float32)
    for start in range(0, M, BLOCK):
        rows = start + kl.arange(0, BLOCK)
        acc += kl.load(x_ptr + rows * stride_m + col)  #: expect
    kl.store(y_ptr + col, kl.sum(acc, axis=0))


@kernelc.jit
def aos_field(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    v = kl.load(x_ptr + offs * 4 + 1)  #: expect
    kl.store(y_ptr + offs, v)


@kernelc.jit
def stride3_scale(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    v = kl.load(x_ptr + offs * 3)  #: expect
    kl.store(y_ptr + offs, v * 2.0)


@kernelc.jit
def transposed_tile_load(x_ptr, y_ptr, M, N, stride_xn, stride_ym, BM: kl.constexpr, BN: kl.constexpr):
    # x is column-major: memory is contiguous along dim 0 of the tile; the layout follows it
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.program_id(1) * BN + kl.arange(0, BN)
    x = kl.load(x_ptr + offs_m[:, None] + offs_n[None, :] * stride_xn)
    kl.store(y_ptr + offs_m[:, None] + offs_n[None, :] * stride_ym, x + 1.0)


@kernelc.jit
def copy2d(x_ptr, y_ptr, M, N, stride_m, BM: kl.constexpr, BN: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    x = kl.load(x_ptr + offs_m[:, None] * stride_m + offs_n[None, :])
    kl.store(y_ptr + offs_m[:, None] * stride_m + offs_n[None, :], x)


@kernelc.jit
def bias_add(x_ptr, b_ptr, y_ptr, M, N, stride_m, BM: kl.constexpr, BN: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    b = kl.load(b_ptr + offs_n)
    x = kl.load(x_ptr + offs_m[:, None] * stride_m + offs_n[None, :])
    kl.store(y_ptr + offs_m[:, None] * stride_m + offs_n[None, :], x + b[None, :])


@kernelc.jit
def copy3d(x_ptr, y_ptr, s0, s1, B0: kl.constexpr, B1: kl.constexpr, B2: kl.constexpr):
    blk = kl.program_id(0) * (B0 * s0)      # each program its own block (a GPU-sized launch)
    i = kl.arange(0, B0)
    j = kl.arange(0, B1)
    k = kl.arange(0, B2)
    off = blk + i[:, None, None] * s0 + j[None, :, None] * s1 + k[None, None, :]
    kl.store(y_ptr + off, kl.load(x_ptr + off) * 2.0)


@kernelc.jit
def permute3d(x_ptr, y_ptr, s0, s1, B0: kl.constexpr, B1: kl.constexpr, B2: kl.constexpr):
    blk = kl.program_id(0) * (B2 * s0)      # each program its own block (y's span is B2 * s0)
    i = kl.arange(0, B0)
    j = kl.arange(0, B1)
    k = kl.arange(0, B2)
    x = kl.load(x_ptr + blk + i[:, None, None] * s0 + j[None, :, None] * s1 + k[None, None, :])
    kl.store(y_ptr + blk + k[None, None, :] * s0 + j[None, :, None] * s1 + i[:, None, None], x)  #: expect


@kernelc.jit
def half_rows(x_ptr, y_ptr, M, stride_m, BM: kl.constexpr, BN: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    x = kl.load(x_ptr + offs_m[:, None] * stride_m + offs_n[None, :])
    kl.store(y_ptr + offs_m[:, None] * stride_m + offs_n[None, :], x)


@kernelc.jit
def row_gather_cols(x_ptr, y_ptr, M, N, stride_m, BM: kl.constexpr, BN: kl.constexpr):
    # rows along the tile's last dim, columns contiguous in memory: the compiler's layout follows memory
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    x = kl.load(x_ptr + offs_n[:, None] + offs_m[None, :] * stride_m)
    kl.store(y_ptr + offs_n[:, None] * M + offs_m[None, :], x)


@kernelc.jit
def gather_rows(x_ptr, idx_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    i = kl.load(idx_ptr + offs)
    kl.store(y_ptr + offs, kl.load(x_ptr + i * 64))  #: expect


@kernelc.jit
def half_stride4_store(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    v = kl.load(x_ptr + offs)
    kl.store(y_ptr + offs * 4, v)  #: expect


@kernelc.jit
def swap_last_two(x_ptr, y_ptr, s0, s1, B0: kl.constexpr, B1: kl.constexpr, B2: kl.constexpr):
    blk = kl.program_id(0) * (B0 * s0)      # each program its own block
    i = kl.arange(0, B0)
    j = kl.arange(0, B1)
    k = kl.arange(0, B2)
    x = kl.load(x_ptr + blk + i[:, None, None] * s0 + j[None, :, None] * s1 + k[None, None, :])
    kl.store(y_ptr + blk + i[:, None, None] * s0 + k[None, None, :] * s1 + j[None, :, None], x)  #: expect


@kernelc.jit
def col_tiles(x_ptr, y_ptr, M, stride_m, BM: kl.constexpr, BN: kl.constexpr):
    # a tile of BN columns whose stride is the row pitch along both dims: every element its own row
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    x = kl.load(x_ptr + offs_m[:, None] * stride_m + offs_n[None, :] * (stride_m * 8))  #: expect
    kl.store(y_ptr + offs_m[:, None] * BN + offs_n[None, :], x)


@kernelc.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
       BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr, BLOCK_K: kl.constexpr):
    pid = kl.program_id(0)
    num_n = kl.cdiv(N, BLOCK_N)
    offs_m = (pid // num_n) * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = (pid % num_n) * BLOCK_N + kl.arange(0, BLOCK_N)
    offs_k = kl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = kl.zeros((BLOCK_M, BLOCK_N), dtype=kl.float32)
    for k in range(0, kl.cdiv(K, BLOCK_K)):
        acc += kl.dot(kl.load(a_ptrs), kl.load(b_ptrs))  #: expect
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    kl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(kl.float16))


# the autotuned fp16 matmul: two small configs
mm_autotuned = kernelc.autotune(configs=[
    kernelc.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    kernelc.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
], key=["M", "N", "K"])(mm)

MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
          "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
MM_DIV = {"M": 16, "N": 16, "K": 16, "stride_am": 16, "stride_bk": 16, "stride_cm": 16}


@dataclass
class Case:
    name: str
    kernel: Any
    expected: Optional[str]                     # diagnostic id, None: must raise nothing
    signature: Dict[str, str]
    constexprs: Dict[str, Any]
    make_args: Callable[[], Tuple[Any, ...]]    # CPU tensors + scalars, in signature order
    grid: Tuple[int, ...] = (1,)                # the launch grid analysed (the oracle runs program 0 only)
    num_warps: int = 4
    divisibility: Dict[str, int] = field(default_factory=dict)
    description: str = ""
    num_stages: int = 1
    equal_to_1: Tuple[str, ...] = ()

    @property
    def expected_line(self) -> Optional[int]:
        src, first = inspect.getsourcelines(self.kernel.fn)
        for i, text in enumerate(src):
            if "#: expect" in text:
                return first + i
        return None

    def compile(self, target: str = "sm_90a", **kw):
        return kernelc.compile(self.kernel, signature=self.signature, constexprs=self.constexprs, target=target,
                               num_warps=kw.get("num_warps", self.num_warps), num_stages=self.num_stages,
                               divisibility=self.divisibility)

    def scalar_args(self) -> Dict[str, int]:
        args = self.make_args()
        return {n: v for n, v in zip(self.signature, args) if isinstance(v, int)}

    def run_program0(self):
        args = self.make_args()
        self.kernel[(1,)](*args, num_warps=self.num_warps, **self.constexprs)


def _t(*shape, dtype="float32"):
    import torch
    return torch.zeros(*shape, dtype=getattr(torch, dtype))


F32 = {"x_ptr": "*fp32", "y_ptr": "*fp32"}
D16 = 16


def cases():
    M = N = 512
    return [
        # the three element-wise transposed stores below are converted to their coalesced layout by the
        # compiler (passes/coalesce.py): the right report is the layout-conversion info with its cost
        Case("transpose_store", transpose, "layout-conversion",
             dict(F32, M="i32", N="i32", stride_xm="i32", stride_yn="i32"), {"BM": 64, "BN": 64},
             lambda: (_t(M, N), _t(N, M), M, N, N, M), grid=(64, 64),
             divisibility={"M": D16, "N": D16, "stride_xm": D16, "stride_yn": D16},
             description="transpose: the store walks dim 1, memory is contiguous along dim 0"),
        Case("column_walk", column_sum, "uncoalesced-access", dict(F32, M="i32", N="i32", stride_m="i32"),
             {"BLOCK": 128}, lambda: (_t(M, N), _t(N), M, N, N), grid=(8192,),
             divisibility={"M": D16, "N": D16, "stride_m": D16}, description="a column read with the row stride"),
        Case("aos_field", aos_field, "uncoalesced-access", dict(F32, n="i32"), {"BLOCK": 1024},
             lambda: (_t(4 * 4096), _t(4096), 4096), grid=(8192,), divisibility={"n": D16},
             description="one float of a 16-byte struct per element"),
        Case("stride3", stride3_scale, "uncoalesced-access", dict(F32, n="i32"), {"BLOCK": 1024},
             lambda: (_t(3 * 4096), _t(4096), 4096), grid=(8192,), divisibility={"n": D16},
             description="every third float"),
        Case("permute3d_store", permute3d, "layout-conversion", dict(F32, s0="i32", s1="i32"),
             {"B0": 8, "B1": 8, "B2": 32}, lambda: (_t(8 * 8 * 32 * 4), _t(8 * 8 * 32 * 4), 256, 32), grid=(8192,),
             divisibility={"s0": D16, "s1": D16}, description="a (0, 2) permutation written element-wise"),
        Case("gather", gather_rows, "uncoalesced-access", {"x_ptr": "*fp32", "idx_ptr": "*i32", "y_ptr": "*fp32",
                                                           "n": "i32"}, {"BLOCK": 1024},
             lambda: (_t(64 * 4096), _t(4096, dtype="int32"), _t(4096), 4096), grid=(8192,), divisibility={"n": D16},
             description="rows gathered through loaded indices (no static address form)"),
        Case("fp16_stride4_store", half_stride4_store, "uncoalesced-access", {"x_ptr": "*fp16", "y_ptr": "*fp16",
                                                                              "n": "i32"}, {"BLOCK": 1024},
             lambda: (_t(4096, dtype="float16"), _t(4 * 4096, dtype="float16"), 4096), grid=(8192,),
             divisibility={"n": D16}, description="every fourth fp16 written"),
        Case("swap_last_two_store", swap_last_two, "layout-conversion", dict(F32, s0="i32", s1="i32"),
             {"B0": 2, "B1": 64, "B2": 64}, lambda: (_t(2 * 64 * 64), _t(2 * 64 * 64), 4096, 64), grid=(8192,),
             divisibility={"s0": D16, "s1": D16}, description="a (0, 2, 1) permutation written element-wise"),
        Case("column_tiles", col_tiles, "uncoalesced-access", dict(F32, M="i32", stride_m="i32"),
             {"BM": 64, "BN": 16}, lambda: (_t(64 * 16 * 8 * 16), _t(64 * 16), 64, 16), grid=(8192,),
             divisibility={"M": D16, "stride_m": D16}, description="no dim of the tile has unit stride"),
        Case("row_gather_cols_ok", row_gather_cols, None,
             dict(F32, M="i32", N="i32", stride_m="i32"), {"BM": 64, "BN": 16},
             lambda: (_t(M, N), _t(16, M), M, N, N), divisibility={"M": D16, "N": D16, "stride_m": D16},
             grid=(4096,), description="rows on the tile's last dim, columns contiguous: the layout follows memory"),
        Case("transposed_tile_ok", transposed_tile_load, None,
             dict(F32, M="i32", N="i32", stride_xn="i32", stride_ym="i32"), {"BM": 64, "BN": 32},
             lambda: (_t(N, M), _t(N, M), M, N, M, M), grid=(64, 128),
             divisibility={"M": D16, "N": D16, "stride_xn": D16, "stride_ym": D16},
             description="column-major tile read along its contiguous dim"),
        Case("copy2d_ok", copy2d, None, dict(F32, M="i32", N="i32", stride_m="i32"), {"BM": 16, "BN": 256},
             lambda: (_t(M, 256), _t(M, 256), M, 256, 256), grid=(4096,),
             divisibility={"M": D16, "N": D16, "stride_m": D16}),
        Case("bias_add_ok", bias_add, None, {"x_ptr": "*fp32", "b_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32",
                                             "N": "i32", "stride_m": "i32"}, {"BM": 32, "BN": 128},
             lambda: (_t(M, 128), _t(128), _t(M, 128), M, 128, 128), grid=(4096,),
             divisibility={"M": D16, "N": D16, "stride_m": D16}),
        Case("copy3d_ok", copy3d, None, dict(F32, s0="i32", s1="i32"), {"B0": 4, "B1": 8, "B2": 64},
             lambda: (_t(4 * 8 * 64), _t(4 * 8 * 64), 512, 64), grid=(8192,), divisibility={"s0": D16, "s1": D16}),
        Case("half_rows_ok", half_rows, None, {"x_ptr": "*fp16", "y_ptr": "*fp16", "M": "i32", "stride_m": "i32"},
             {"BM": 64, "BN": 64}, lambda: (_t(M, 64, dtype="float16"), _t(M, 64, dtype="float16"), M, 64),
             grid=(4096,), divisibility={"M": D16, "stride_m": D16}),
    ]


@kernelc.jit
def wide_tile_scale(x_ptr, y_ptr, stride_m, BM: kl.constexpr, BN: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    x = kl.load(x_ptr + offs_m[:, None] * stride_m + offs_n[None, :])
    s = kl.sum(x, axis=1)
    kl.store(y_ptr + offs_m[:, None] * stride_m + offs_n[None, :], x / s[:, None] + kl.max(x, axis=1)[:, None])


@kernelc.jit
def row_softmax(x_ptr, y_ptr, n_cols, BLOCK: kl.constexpr):
    row = kl.program_id(0)
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + row * n_cols + offs)
    e = kl.exp(x - kl.max(x, axis=0))
    kl.store(y_ptr + row * n_cols + offs, e / kl.sum(e, axis=0))


def compile_only_problems():
    """More problems for the bench (compile-only, static): (name, expected id, compile() -> ck, grid,
    arg_values, function)."""
    from .test_fp8_diagnostics import _compile as fp8_compile, fp8_matmul
    f32 = {"x_ptr": "*fp32", "y_ptr": "*fp32"}
    out = [
        ("fp8_k16_upcast", "fp8-upcast", lambda: fp8_compile(BLOCK_SIZE_K=16), (1024,), {}, fp8_matmul),
        ("fp8_row_major_b", "fp8-transposed-operand", lambda: fp8_compile(col_b=False), (1024,), {}, fp8_matmul),
        ("wide_tile_one_warp", "register-spills",
         lambda: kernelc.compile(wide_tile_scale, dict(f32, stride_m="i32"), {"BM": 64, "BN": 512}, target="sm_90a",
                                 num_warps=1, num_stages=1, divisibility={"stride_m": 16}), (1024,), {}, None),
        ("copy2d_8_programs", "low-utilisation",
         lambda: kernelc.compile(copy2d, dict(f32, M="i32", N="i32", stride_m="i32"), {"BM": 16, "BN": 256},
                                 target="sm_90a", num_warps=4, num_stages=1, divisibility={"M": 16, "stride_m": 16}),
         (8,), {"M": 128, "N": 256, "stride_m": 256}, None),
        ("softmax_32_warps", "barrier-stalls",
         lambda: kernelc.compile(row_softmax, dict(f32, n_cols="i32"), {"BLOCK": 512}, target="sm_90a", num_warps=32,
                                 num_stages=1, divisibility={"n_cols": 16}), (65536,), {"n_cols": 512}, None),
    ]
    return out
