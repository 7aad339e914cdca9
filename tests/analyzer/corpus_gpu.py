"""The analyzer corpus as launches: every case of ``bench/bench_analyzer_corpus.py`` (planted problems,
the memory-access corpus, issue #22's matmuls, the compile-only problems, the well-tuned kernels) with
inputs large enough to be hot on a GPU, plus example kernels the analyzer was never written against
(``unseen``: examples/kernels at their bench configs).  ``small=True`` gives sizes the CPU interpreter
runs in seconds (a dry run of the bench; the planted kernels and the unseen set have no small form).

Each :class:`GpuCase` builds its inputs with :meth:`GpuCase.build` and returns a callable that
launches the kernel once, with the same config the static corpus compiles.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional


@dataclass
class GpuCase:
    name: str
    group: str                         # planted | corpus | issue22 | more | well_tuned | unseen
    expected: Optional[str]            # diagnosis id; None: must raise no warning or error
    line: Optional[int]                # expected line (None: the id anywhere in the kernel)
    make: Callable[[str, bool], Callable[[], Any]]   # (device, small) -> launch()
    small_ok: bool = True              # runs at small sizes in the interpreter

    def build(self, device: str = "cuda", small: bool = False) -> Callable[[], Any]:
        return self.make(device, small)


def _rand(device, *shape, dtype="float32"):
    import torch
    return torch.randn(*shape, device=device, dtype=getattr(torch, dtype))


def _empty(device, *shape, dtype="float32"):
    import torch
    return torch.empty(*shape, device=device, dtype=getattr(torch, dtype))


def _launcher(kernel, grid, args, constexprs, num_warps, num_stages):
    def launch():
        kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, **constexprs)
    return launch


def _corpus_args(name: str, device: str, small: bool):
    """(args, grid) of a corpus case at GPU size (or interpreter size)."""
    r = lambda *s, dtype="float32": _rand(device, *s, dtype=dtype)    # noqa: E731
    e = lambda *s, dtype="float32": _empty(device, *s, dtype=dtype)   # noqa: E731
    if name == "transpose_store":
        n = 64 if small else 4096
        return (r(n, n), e(n, n), n, n, n, n), (n // 64, n // 64)
    if name == "column_walk":
        m, n = (128, 4) if small else (4096, 8192)
        return (r(m, n), e(n), m, n, n), (n,)
    if name in ("aos_field", "stride3"):
        n = 1024 if small else 1 << 23
        return (r((4 if name == "aos_field" else 3) * n), e(n), n), (n // 1024,)
    if name == "permute3d_store":       # B (8, 8, 32), s0 256: a program's y block spans B2 * s0 = 8192
        p = 1 if small else 4096
        return (r(p * 8192), e(p * 8192), 256, 32), (p,)
    if name == "gather":
        import torch
        n = 1024 if small else 1 << 22
        rows = n if small else 1 << 18      # random rows of a 64 MiB table, 4096 programs
        idx = torch.randint(0, rows, (n,), device=device, dtype=torch.int32)
        return (r(64 * rows), idx, e(n), n), (n // 1024,)
    if name == "fp16_stride4_store":
        n = 1024 if small else 1 << 23
        return (r(n, dtype="float16"), e(4 * n, dtype="float16"), n), (n // 1024,)
    if name == "swap_last_two_store":   # B (2, 64, 64), s0 4096: 8192 elements a program
        p = 1 if small else 4096
        return (r(p * 8192), e(p * 8192), 4096, 64), (p,)
    if name == "column_tiles":          # BM 64, BN 16, row pitch 16: columns 8 rows apart
        p = 1 if small else 8192
        m = p * 64
        return (r(m * 16 + 2048), e(m * 16), m, 16), (p,)
    if name == "row_gather_cols_ok":    # BM 64 rows of 16 contiguous floats
        p = 1 if small else 8192
        m = p * 64
        return (r(m, 16), e(16, m), m, 16, 16), (p,)
    if name == "transposed_tile_ok":    # x[n, m], BM 64 x BN 32
        m, n = (64, 32) if small else (4096, 4096)
        return (r(n, m), e(n, m), m, n, m, m), (m // 64, n // 32)
    if name == "copy2d_ok":
        m = 16 if small else 1 << 16
        return (r(m, 256), e(m, 256), m, 256, 256), (m // 16,)
    if name == "bias_add_ok":
        m = 32 if small else 1 << 17
        return (r(m, 128), r(128), e(m, 128), m, 128, 128), (m // 32,)
    if name == "copy3d_ok":             # B (4, 8, 64), s0 512: 2048 elements a program
        p = 1 if small else 8192
        return (r(p * 2048), e(p * 2048), 512, 64), (p,)
    if name == "half_rows_ok":
        m = 64 if small else 1 << 19
        return (r(m, 64, dtype="float16"), e(m, 64, dtype="float16"), m, 64), (m // 64,)
    raise KeyError(f"no GPU launch for corpus case {name!r}")


def _corpus_cases() -> List[GpuCase]:
    from .corpus import cases
    out = []
    for c in cases():
        def make(device, small, c=c):
            args, grid = _corpus_args(c.name, device, small)
            return _launcher(c.kernel, grid, args, c.constexprs, c.num_warps, c.num_stages)
        out.append(GpuCase(c.name, "corpus", c.expected, c.expected_line if c.expected else None, make))
    return out


def _planted_cases() -> List[GpuCase]:
    from .planted import PLANTED

    def make(device, small, p):
        args = p.make_args(device)
        return lambda: p.launch(args)
    return [GpuCase(p.name, "planted", p.expected, None, lambda d, s, p=p: make(d, s, p), small_ok=False)
            for p in PLANTED]


def mm_dot_line() -> int:
    from .corpus import mm
    src = open(mm.fn.__code__.co_filename).read().splitlines()
    return next(i for i, t in enumerate(src, 1) if "#: expect" in t and "kl.dot" in t)


def _mm_case(label, bm, bn, bk) -> GpuCase:
    from .corpus import mm

    def make(device, small):
        n = 128 if small else 4096
        a, b, c = _rand(device, n, n, dtype="float16"), _rand(device, n, n, dtype="float16"), \
            _empty(device, n, n, dtype="float16")
        return _launcher(mm, ((n // bm) * (n // bn),), (a, b, c, n, n, n, n, n, n),
                         {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, 4, 3)
    return GpuCase(label, "issue22", "small-tiles", mm_dot_line(), make)


def _more_cases() -> List[GpuCase]:
    from .corpus import copy2d, row_softmax, wide_tile_scale
    from .test_fp8_diagnostics import fp8_matmul

    def fp8(device, small, bk, col_b):
        import torch
        n = 128 if small else 4096
        a = _rand(device, n, n).to(torch.float8_e4m3fn)
        bnk = _rand(device, n, n).to(torch.float8_e4m3fn)
        b = bnk.t() if col_b else bnk            # column-major B: stride_bk == 1
        c = _empty(device, n, n, dtype="bfloat16")
        args = (a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0))
        return _launcher(fp8_matmul, ((n // 128) ** 2,), args,
                         {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": bk}, 4, 3)

    def wide(device, small):
        rows = 64 if small else 1 << 16
        return _launcher(wide_tile_scale, (rows // 64,), (_rand(device, rows, 512), _empty(device, rows, 512), 512),
                         {"BM": 64, "BN": 512}, 1, 1)

    def copy8(device, small):
        return _launcher(copy2d, (8,), (_rand(device, 128, 256), _empty(device, 128, 256), 128, 256, 256),
                         {"BM": 16, "BN": 256}, 4, 1)

    def softmax32(device, small):
        rows = 2 if small else 1 << 16
        return _launcher(row_softmax, (rows,), (_rand(device, rows, 512), _empty(device, rows, 512), 512),
                         {"BLOCK": 512}, 32, 1)
    return [
        GpuCase("fp8_k16_upcast", "more", "fp8-upcast", None, lambda d, s: fp8(d, s, 16, True)),
        GpuCase("fp8_row_major_b", "more", "fp8-transposed-operand", None, lambda d, s: fp8(d, s, 128, False)),
        GpuCase("wide_tile_one_warp", "more", "register-spills", None, wide),
        GpuCase("copy2d_8_programs", "more", "low-utilisation", None, copy8),
        GpuCase("softmax_32_warps", "more", "barrier-stalls", None, softmax32),
    ]


def _well_tuned_cases() -> List[GpuCase]:
    from examples.kernels import matmul as MM
    from examples.kernels import softmax as SM
    from examples.kernels import vector_add as VA
    out = []
    for i, cfg in enumerate(MM.get_configs()):
        def make(device, small, cfg=cfg):
            n = 256 if small else 4096
            a, b = _rand(device, n, n, dtype="float16"), _rand(device, n, n, dtype="float16")
            kw = dict(cfg.kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
            return lambda: MM.matmul(a, b, **kw)
        out.append(GpuCase(f"matmul[{i}]", "well_tuned", None, None, make))
    for cols in (1024, 4096):
        def make(device, small, cols=cols):
            x = _rand(device, 4 if small else (8192 if cols == 1024 else 4096), cols)
            return lambda: SM.softmax(x)
        out.append(GpuCase(f"softmax[{cols}]", "well_tuned", None, None, make))

    def vadd(device, small):
        n = 4096 if small else 1 << 26
        x, y = _rand(device, n), _rand(device, n)
        return lambda: VA.add(x, y)
    out.append(GpuCase("vector_add", "well_tuned", None, None, vadd))
    return out


def _unseen_cases() -> List[GpuCase]:
    """examples/kernels at bench/bench_kernels.py's and bench/bench_memory_bound.py's configs."""
    out = []

    def mm(device, small):
        from examples.kernels import matmul as MM
        a, b = _rand(device, 4096, 4096, dtype="float16"), _rand(device, 4096, 4096, dtype="float16")
        return lambda: MM.matmul(a, b)     # autotuned over get_configs()
    out.append(GpuCase("ex_matmul_fp16_4096", "unseen", None, None, mm, small_ok=False))

    def layernorm(device, small):
        from examples.kernels import layernorm as LN
        x = _rand(device, 4096, 8192, dtype="float16")
        w, b = _rand(device, 8192, dtype="float16"), _rand(device, 8192, dtype="float16")
        return lambda: LN.layer_norm(x, w, b)
    out.append(GpuCase("ex_layernorm_4096x8192_fp16", "unseen", None, None, layernorm, small_ok=False))

    def attention(device, small):
        from examples.kernels import attention as AT
        q, k, v = (_rand(device, 4, 32, 4096, 128, dtype="float16") for _ in range(3))
        return lambda: AT.attention(q, k, v, causal=False)
    out.append(GpuCase("ex_attention_4x32x4096x128_fp16", "unseen", None, None, attention, small_ok=False))

    def softmax(device, small):
        from examples.kernels import softmax as SM
        x = _rand(device, 4096, 4096)
        return lambda: SM.softmax(x)
    out.append(GpuCase("ex_softmax_4096x4096", "unseen", None, None, softmax, small_ok=False))

    for name in _memory_bound_names():
        def make(device, small, name=name):
            from bench.bench_memory_bound import cases as mb_cases
            from examples.kernels import memory_bound as K
            inputs, run, _ref, _nbytes = mb_cases()[name]
            args = inputs()
            return lambda: run(K, *args)
        out.append(GpuCase("ex_" + name.replace(" ", "_"), "unseen", None, None, make, small_ok=False))
    return out


def _memory_bound_names() -> List[str]:
    try:
        from bench.bench_memory_bound import cases as mb_cases
        return list(mb_cases())
    except Exception:   # torch missing: the set is listed where the bench can import it
        return []


def gpu_cases(groups=None) -> List[GpuCase]:
    out = (_planted_cases() + _corpus_cases() + [_mm_case("mm_128x64x32", 128, 64, 32),
                                                   _mm_case("mm_single_32x32x32", 32, 32, 32)]
           + _more_cases() + _well_tuned_cases() + _unseen_cases())
    return [c for c in out if not groups or c.group in groups]
