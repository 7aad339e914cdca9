"""Planted kernels for the analyzer: each has one performance problem that a diagnostic must find.

Every :class:`Planted` case names its kernel, the diagnostic id it must trigger, a CPU compile spec
(signature, constexprs, options, specialisation: what ``kernelc.compile`` needs without a GPU) and a
GPU workload (``make_args``/``grid``), so that the same case serves the CPU tests
(``tests/analyzer``) and the GPU benchmark (``bench/bench_analyzer.py``).

The well-tuned kernels (``WELL_TUNED``) come from ``examples/kernels``: the analyzer must not raise
a warning or an error on them.

Sizes are chosen so that every tile divides the problem (no masks where none are needed) and so
that each kernel runs for a measurable time on an H100/H200 (tens of microseconds or more).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import kernelc
import kernelc.language as kl

# ---------------------------------------------------------------------------------------------
# 1. Missing tensor cores: fp32 inputs with input_precision="ieee" -> FFMA.


@kernelc.jit
def fp32_ieee_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr, BLOCK_K: kl.constexpr):
    pid = kl.program_id(0)
    num_n = kl.cdiv(N, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    offs_m = pid_m * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + kl.arange(0, BLOCK_N)
    offs_k = kl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = kl.zeros((BLOCK_M, BLOCK_N), dtype=kl.float32)
    for k in range(0, kl.cdiv(K, BLOCK_K)):
        a = kl.load(a_ptrs)
        b = kl.load(b_ptrs)
        acc += kl.dot(a, b, input_precision="ieee")
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    kl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc)


# 1b. Missing tensor cores: an fp16 dot on 8x8x8 tiles (below the 16x8x16 tensor-core minimum).


@kernelc.jit
def tiny_tile_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr, BLOCK_K: kl.constexpr):
    pid = kl.program_id(0)
    num_n = kl.cdiv(N, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    offs_m = pid_m * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + kl.arange(0, BLOCK_N)
    offs_k = kl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = kl.zeros((BLOCK_M, BLOCK_N), dtype=kl.float32)
    for k in range(0, kl.cdiv(K, BLOCK_K)):
        a = kl.load(a_ptrs)
        b = kl.load(b_ptrs)
        acc += kl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    kl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(kl.float16))


# 2. Hopper under-use: an fp16 dot with 2 warps compiles to mma.sync (HMMA) where wgmma applies
#    with 4 or 8 warps.


@kernelc.jit
def hmma_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr, BLOCK_K: kl.constexpr):
    pid = kl.program_id(0)
    num_n = kl.cdiv(N, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    offs_m = pid_m * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + kl.arange(0, BLOCK_N)
    offs_k = kl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = kl.zeros((BLOCK_M, BLOCK_N), dtype=kl.float32)
    for k in range(0, kl.cdiv(K, BLOCK_K)):
        a = kl.load(a_ptrs)
        b = kl.load(b_ptrs)
        acc += kl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    kl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(kl.float16))


# 3a. Low utilisation: each program walks a CHUNK of the vector, so a 4M-element vector gets 4 programs.


@kernelc.jit
def few_programs_scale(x_ptr, y_ptr, n, CHUNK: kl.constexpr, BLOCK: kl.constexpr):
    start = kl.program_id(0) * CHUNK
    for off in range(start, start + CHUNK, BLOCK):
        offs = off + kl.arange(0, BLOCK)
        mask = offs < n
        x = kl.load(x_ptr + offs, mask=mask)
        kl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)


# 3b. Low occupancy from registers: one warp per program holding 2 x 4096 fp32 elements (~230 registers;
# 2 x 2048 took ~150 relocatable through nvJitLink but 116 as a whole program, kernelc's default assembler).


@kernelc.jit
def reg_heavy_add(x_ptr, y_ptr, out_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    mask = offs < n
    x = kl.load(x_ptr + offs, mask=mask)
    y = kl.load(y_ptr + offs, mask=mask)
    kl.store(out_ptr + offs, x * y + x, mask=mask)


# 4. Uncoalesced global access: every program reads a strided column (STRIDE elements apart).


@kernelc.jit
def strided_gather(x_ptr, y_ptr, n, STRIDE: kl.constexpr, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    mask = offs < n
    x = kl.load(x_ptr + offs * STRIDE, mask=mask)
    kl.store(y_ptr + offs, x * 2.0, mask=mask)


# 5. Register spills: a whole 16K-element row normalised by one warp (512 live values per thread).


@kernelc.jit
def spilling_rownorm(x_ptr, y_ptr, n_cols, BLOCK: kl.constexpr):
    row = kl.program_id(0)
    offs = kl.arange(0, BLOCK)
    mask = offs < n_cols
    x = kl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
    s = kl.sum(x * x, axis=0)
    m = kl.max(kl.abs(x), axis=0)
    kl.store(y_ptr + row * n_cols + offs, x / kl.sqrt(s + 1e-6) + m, mask=mask)


# 6. Latency-bound loop: a tensor-core matmul with num_stages=1 (no cp.async pipelining).


@kernelc.jit
def unpipelined_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                       BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr, BLOCK_K: kl.constexpr):
    pid = kl.program_id(0)
    num_n = kl.cdiv(N, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    offs_m = pid_m * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + kl.arange(0, BLOCK_N)
    offs_k = kl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = kl.zeros((BLOCK_M, BLOCK_N), dtype=kl.float32)
    for k in range(0, kl.cdiv(K, BLOCK_K)):
        a = kl.load(a_ptrs)
        b = kl.load(b_ptrs)
        acc += kl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    kl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(kl.float16))


# 7. Barrier-bound reductions: 256-element rows reduced by 16 warps (every reduction crosses warps
#    through shared memory and barriers while each thread holds half an element).


@kernelc.jit
def barrier_rowsum(x_ptr, y_ptr, n_cols, BLOCK: kl.constexpr):
    row = kl.program_id(0)
    offs = kl.arange(0, BLOCK)
    mask = offs < n_cols
    x = kl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
    mean = kl.sum(x, axis=0) / n_cols
    d = kl.where(mask, x - mean, 0.0)
    var = kl.sum(d * d, axis=0) / n_cols
    mx = kl.max(kl.abs(d), axis=0)
    kl.store(y_ptr + row * n_cols + offs, d / kl.sqrt(var + 1e-5) + mx, mask=mask)


# ---------------------------------------------------------------------------------------------
# Cases


@dataclass
class Planted:
    """One case: a kernel, its launch configuration, and what the analyzer must report."""
    name: str
    kernel: Any
    expected: str                      # the diagnostic id that must be found
    signature: Dict[str, str]
    constexprs: Dict[str, Any]
    num_warps: int = 4
    num_stages: int = 3
    divisibility: Dict[str, int] = field(default_factory=dict)
    equal_to_1: Tuple[str, ...] = ()
    grid: Optional[Callable[[Dict[str, Any]], Tuple[int, ...]]] = None  # META -> grid
    make_args: Optional[Callable[[str], Tuple[Any, ...]]] = None          # device -> runtime arguments
    reference: Optional[Callable[[Tuple[Any, ...]], Any]] = None          # args -> expected output
    output_index: int = -1                                                # which argument is the output
    tolerance: float = 1e-2
    description: str = ""
    config_fix: bool = True           # whether a config change (not a code change) can fix it
    samples: Optional[Dict[int, Dict[str, int]]] = None  # synthetic stalls for CPU fixtures: line offset -> stalls

    @property
    def kernel_name(self) -> str:
        return self.kernel.__name__

    def compile(self, target: str = "sm_90a", **overrides):
        cx = dict(self.constexprs)
        nw, ns = self.num_warps, self.num_stages
        for k, v in overrides.items():
            if k == "num_warps":
                nw = v
            elif k == "num_stages":
                ns = v
            else:
                cx[k] = v
        return kernelc.compile(self.kernel, signature=self.signature, constexprs=cx, target=target,
                               num_warps=nw, num_stages=ns, divisibility=self.divisibility,
                               equal_to_1=self.equal_to_1)

    def launch(self, args, **config):
        """Launch on the GPU with the case's config, replaced by ``config`` (constexprs/num_warps/num_stages)."""
        cfg = dict(self.constexprs, num_warps=self.num_warps, num_stages=self.num_stages)
        cfg.update(config)
        self.kernel[self.grid](*args, **cfg)
        return args


_MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
_MM_DIV = {"M": 16, "N": 16, "K": 16, "stride_am": 16, "stride_bk": 16, "stride_cm": 16}


def _mm_grid(M, N):
    return lambda META: (kernelc.cdiv(M, META["BLOCK_M"]) * kernelc.cdiv(N, META["BLOCK_N"]),)


def _mm_args(M, N, K, dtype_name):
    def make(device):
        import torch
        dtype = getattr(torch, dtype_name)
        g = torch.Generator(device="cpu").manual_seed(0)
        a = (torch.randn(M, K, generator=g) / 8).to(dtype).to(device)
        b = (torch.randn(K, N, generator=g) / 8).to(dtype).to(device)
        c = torch.empty(M, N, dtype=torch.float32 if dtype_name == "float32" else dtype, device=device)
        return (a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    return make


def _mm_ref(args):
    a, b, c = args[:3]
    return (a.float() @ b.float()).to(c.dtype)


def _vec_args(n, n_in, n_out=1, stride=1):
    def make(device):
        import torch
        g = torch.Generator(device="cpu").manual_seed(0)
        ins = [torch.randn(n * stride, generator=g).to(device) for _ in range(n_in)]
        outs = [torch.empty(n, device=device) for _ in range(n_out)]
        return tuple(ins + outs + [n])
    return make


def _rows_args(rows, cols):
    def make(device):
        import torch
        g = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(rows, cols, generator=g).to(device)
        return (x, torch.empty_like(x), cols)
    return make


def _rownorm_ref(args):
    import torch
    x = args[0]
    return x / torch.sqrt((x * x).sum(1, keepdim=True) + 1e-6) + x.abs().amax(1, keepdim=True)


def _rowstat_ref(args):
    import torch
    x = args[0]
    d = x - x.mean(1, keepdim=True)
    var = (d * d).mean(1, keepdim=True)
    return d / torch.sqrt(var + 1e-5) + d.abs().amax(1, keepdim=True)


MM = 4096  # matmul problem size (M = N = K)

PLANTED: List[Planted] = [
    Planted("fp32_ieee_dot", fp32_ieee_matmul, "no-tensor-cores",
            signature=dict(_MM_SIG, a_ptr="*fp32", b_ptr="*fp32", c_ptr="*fp32"),
            constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 16}, num_warps=4, num_stages=3,
            divisibility=_MM_DIV, grid=_mm_grid(2048, 2048), make_args=_mm_args(2048, 2048, 2048, "float32"),
            reference=_mm_ref, output_index=2, tolerance=1e-2, config_fix=False,
            description="fp32 dot with input_precision='ieee' runs on FFMA"),
    Planted("tiny_tile_dot", tiny_tile_matmul, "no-tensor-cores", signature=_MM_SIG,
            constexprs={"BLOCK_M": 8, "BLOCK_N": 8, "BLOCK_K": 8}, num_warps=1, num_stages=3,
            divisibility=_MM_DIV, grid=_mm_grid(2048, 2048), make_args=_mm_args(2048, 2048, 2048, "float16"),
            reference=_mm_ref, output_index=2, tolerance=2e-2,
            description="fp16 dot on 8x8x8 tiles: below the tensor-core minimum"),
    Planted("hmma_on_hopper", hmma_matmul, "hopper-no-wgmma", signature=_MM_SIG,
            constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=2, num_stages=3,
            divisibility=_MM_DIV, grid=_mm_grid(MM, MM), make_args=_mm_args(MM, MM, MM, "float16"),
            reference=_mm_ref, output_index=2, tolerance=2e-2,
            description="fp16 64x64 dot with 2 warps: mma.sync where wgmma applies with 4"),
    Planted("few_programs", few_programs_scale, "low-utilisation",
            signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
            constexprs={"CHUNK": 1 << 22, "BLOCK": 1024}, num_warps=4, num_stages=1,
            divisibility={"n": 16}, grid=lambda META: (kernelc.cdiv(1 << 24, META["CHUNK"]),),
            make_args=_vec_args(1 << 24, 1), reference=lambda args: args[0] * 2.0 + 1.0, output_index=1,
            description="4 programs on a GPU with 132 SMs"),
    Planted("register_occupancy", reg_heavy_add, "low-occupancy",
            signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
            constexprs={"BLOCK": 4096}, num_warps=1, num_stages=1, divisibility={"n": 16},
            grid=lambda META: (kernelc.cdiv(1 << 26, META["BLOCK"]),), make_args=_vec_args(1 << 26, 2),
            reference=lambda args: args[0] * args[1] + args[0], output_index=2,
            description="one warp per program holding 8192 fp32 values: registers cap occupancy"),
    Planted("strided_load", strided_gather, "uncoalesced-access",
            signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
            constexprs={"STRIDE": 16, "BLOCK": 1024}, num_warps=4, num_stages=1, divisibility={"n": 16},
            grid=lambda META: (kernelc.cdiv(1 << 22, META["BLOCK"]),), make_args=_vec_args(1 << 22, 1, stride=16),
            reference=lambda args: args[0][::16] * 2.0, output_index=1, config_fix=False,
            description="reads every 16th fp32 element: one 32-byte sector per 4 bytes used"),
    Planted("register_spills", spilling_rownorm, "register-spills",
            signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n_cols": "i32"},
            constexprs={"BLOCK": 16384}, num_warps=1, num_stages=1, divisibility={"n_cols": 16},
            grid=lambda META: (4096,), make_args=_rows_args(4096, 16384), reference=_rownorm_ref, output_index=1,
            tolerance=1e-3, description="16384-element rows on one warp: 512 values per thread spill"),
    Planted("unpipelined_dot", unpipelined_matmul, "latency-bound-loop", signature=_MM_SIG,
            constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=1,
            divisibility=_MM_DIV, grid=_mm_grid(MM, MM), make_args=_mm_args(MM, MM, MM, "float16"),
            reference=_mm_ref, output_index=2, tolerance=2e-2,
            description="tensor-core loop with num_stages=1: every iteration waits for its loads"),
    Planted("barrier_reduce", barrier_rowsum, "barrier-stalls",
            signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n_cols": "i32"},
            constexprs={"BLOCK": 256}, num_warps=16, num_stages=1, divisibility={"n_cols": 16},
            grid=lambda META: (1 << 16,), make_args=_rows_args(1 << 16, 256), reference=_rowstat_ref,
            output_index=1, tolerance=1e-3,
            description="three reductions of 256 elements across 16 warps per row"),
]

BY_NAME = {p.name: p for p in PLANTED}


# ---------------------------------------------------------------------------------------------
# Well-tuned kernels from examples/kernels: no warning or error allowed.


@dataclass
class WellTuned:
    name: str
    kernel: Any
    signature: Dict[str, str]
    constexprs: Dict[str, Any]
    num_warps: int
    num_stages: int
    divisibility: Dict[str, int] = field(default_factory=dict)
    equal_to_1: Tuple[str, ...] = ()
    grid: Optional[Tuple[int, ...]] = None   # a typical launch grid (for the utilisation check)

    @property
    def kernel_name(self) -> str:
        return self.kernel.__name__

    def compile(self, target: str = "sm_90a"):
        return kernelc.compile(self.kernel, signature=self.signature, constexprs=self.constexprs, target=target,
                               num_warps=self.num_warps, num_stages=self.num_stages,
                               divisibility=self.divisibility, equal_to_1=self.equal_to_1)


def well_tuned() -> List[WellTuned]:
    from examples.kernels.matmul import get_configs, matmul_kernel
    from examples.kernels.softmax import softmax_kernel
    from examples.kernels.vector_add import add_kernel
    mm_sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
              "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32",
              "stride_cn": "i32"}
    mm_div = {"M": 16, "N": 16, "K": 16, "stride_am": 16, "stride_bk": 16, "stride_cm": 16}
    out = []
    for i, cfg in enumerate(get_configs()):
        cx = dict(cfg.kwargs, ACTIVATION="")
        grid = (kernelc.cdiv(4096, cx["BLOCK_SIZE_M"]) * kernelc.cdiv(4096, cx["BLOCK_SIZE_N"]), 1, 1)
        out.append(WellTuned(f"matmul[{i}]", matmul_kernel, mm_sig, cx, cfg.num_warps, cfg.num_stages, mm_div,
                             ("stride_ak", "stride_bn", "stride_cn"), grid))
    sm_sig = {"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32", "output_row_stride": "i32",
              "n_rows": "i32", "n_cols": "i32"}
    sm_div = {"input_row_stride": 16, "output_row_stride": 16, "n_rows": 16, "n_cols": 16}
    out.append(WellTuned("softmax[1024]", softmax_kernel, sm_sig, {"BLOCK_SIZE": 1024, "num_stages": 2}, 4, 3,
                         sm_div, (), (528, 1, 1)))
    out.append(WellTuned("softmax[4096]", softmax_kernel, sm_sig, {"BLOCK_SIZE": 4096, "num_stages": 2}, 16, 3,
                         sm_div, (), (528, 1, 1)))
    out.append(WellTuned("vector_add", add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32",
                                                   "n_elements": "i32"}, {"BLOCK_SIZE": 1024}, 4, 3,
                         {"n_elements": 16}, (), (262144, 1, 1)))
    return out
