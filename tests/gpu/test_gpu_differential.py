"""GPU vs interpreter, op by op and on random cases.

Every case is a small kernel generated from a template (an expression over loaded tiles), run once
compiled on the GPU and once in the CPU interpreter on the same inputs; results must agree (exactly
for integers, within the documented approximation error for fast-math floats). The randomized test
draws shapes, dtypes, masks and block sizes and reports how many cases ran and how many differed.
"""
import importlib.util
import itertools
import os
import random
import sys
import tempfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

_MOD = {}


def _make_kernel(src: str, name: str):
    """Write ``src`` to a module file (kernels need real source files) and return ``name`` from it."""
    key = src
    if key not in _MOD:
        d = tempfile.mkdtemp(prefix="kc_diff_")
        path = os.path.join(d, f"gen_{len(_MOD)}.py")
        with open(path, "w") as f:
            f.write("import kernelc\nimport kernelc.language as kl\n\n" + src)
        spec = importlib.util.spec_from_file_location(f"gen_{len(_MOD)}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MOD[key] = mod
    return getattr(_MOD[key], name)


def _run_both(kernel, grid, inputs, outputs, **cx):
    """Run on GPU and in the interpreter; return (gpu outputs, interpreter outputs) as numpy."""
    import kernelc
    g_in = [t.cuda() for t in inputs]
    g_out = [t.clone().cuda() for t in outputs]
    kernel[grid](*g_in, *g_out, **cx)
    torch.cuda.synchronize()
    interp = kernelc.jit(kernel.fn, interpret=True)
    c_in = [t.clone().cpu() for t in inputs]
    c_out = [t.clone().cpu() for t in outputs]
    interp[grid](*c_in, *c_out, **cx)
    return [t.cpu() for t in g_out], c_out


def _close(a, b, dtype, approx=False):
    if not dtype.is_floating_point:
        return torch.equal(a, b)
    a, b = a.double(), b.double()
    tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5 if not approx else 2e-5,
           torch.float64: 1e-12 if not approx else 1e-6}[dtype]
    both_nan = torch.isnan(a) & torch.isnan(b)
    ok = torch.isclose(a, b, rtol=tol, atol=tol) | both_nan | (a == b)
    return bool(ok.all())


TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64,
         "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}


def _rand(shape, dt, positive=False):
    t = TORCH[dt]
    if t.is_floating_point:
        x = torch.randn(shape, dtype=torch.float32)
        if positive:
            x = x.abs() + 0.1
        return x.to(t)
    lo, hi = (1, 100) if positive else (-100, 100)
    if dt == "u8":
        lo, hi = (1, 250) if positive else (0, 250)
    return torch.randint(lo, hi, shape, dtype=torch.int64).to(t)


# -- elementwise ---------------------------------------------------------------------------------

BINARY = {
    "add": "x + y", "sub": "x - y", "mul": "x * y", "div": "x / y", "floordiv": "x // y", "mod": "x % y",
    "max": "kl.maximum(x, y)", "min": "kl.minimum(x, y)", "lt": "(x < y).to(kl.int32)",
    "eq": "(x == y).to(kl.int32)", "where": "kl.where(x > y, x, y)",
}
INT_ONLY = {"and": "x & y", "or": "x | y", "xor": "x ^ y", "shl": "x << (y & 7)", "shr": "x >> (y & 7)"}
UNARY_FLOAT = {
    "exp": "kl.exp(x)", "exp2": "kl.exp2(x)", "log": "kl.log(kl.abs(x) + 1)", "log2": "kl.log2(kl.abs(x) + 1)",
    "sqrt": "kl.sqrt(kl.abs(x))", "rsqrt": "kl.rsqrt(kl.abs(x) + 1)", "sin": "kl.sin(x)", "cos": "kl.cos(x)",
    "abs": "kl.abs(x)", "floor": "kl.floor(x)", "ceil": "kl.ceil(x)", "sigmoid": "kl.sigmoid(x)",
    "erf": "kl.erf(x)", "neg": "-x", "fma": "kl.fma(x, x, x)", "clamp": "kl.clamp(x, -0.5, 0.5)",
}
APPROX = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "div", "sin", "cos"}

EW_TEMPLATE = """
@kernelc.jit
def k(x_ptr, y_ptr, out_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < n
    x = kl.load(x_ptr + offs, mask=m, other=1)
    y = kl.load(y_ptr + offs, mask=m, other=1)
    kl.store(out_ptr + offs, {expr}, mask=m)
"""


def _ew_case(expr, dt, n, block, positive_y=False):
    kern = _make_kernel(EW_TEMPLATE.format(expr=expr), "k")
    x, y = _rand((n,), dt), _rand((n,), dt, positive=positive_y)
    # output dtype follows the expression: probe with the interpreter on a tiny launch
    out_dt = _out_dtype(kern, dt)
    out = torch.zeros(n, dtype=out_dt)
    (g,), (c,) = _run_both(kern, ((n + block - 1) // block,), [x, y], [out], n=n, BLOCK=block)
    return g, c, out_dt


def _out_dtype(kern, dt):
    # all templates store into memory typed like their inputs unless the expression is a comparison
    # or an integer true division (fp32: storing it into ints would make fast-division rounding visible)
    src = kern.src
    if ".to(kl.int32)" in src:
        return torch.int32
    if "x / y" in src and not TORCH[dt].is_floating_point:
        return torch.float32
    return TORCH[dt]


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dt", ["fp32", "fp16", "bf16", "i32", "i8", "i64", "fp64"])
def test_binary_ops(op, dt):
    if op in ("floordiv", "mod") and dt in ("fp16", "bf16"):
        pytest.skip("float // and % follow Python's rules only approximately in fp16")
    expr = BINARY[op]
    if op in ("div",) and not TORCH[dt].is_floating_point:
        pass
    g, c, out_dt = _ew_case(expr, dt, 3000, 256, positive_y=op in ("div", "floordiv", "mod"))
    if op == "div" and not TORCH[dt].is_floating_point:
        out_dt = torch.float32
    assert _close(g, c, out_dt if out_dt.is_floating_point else out_dt, approx=op in APPROX), (op, dt, g[:8], c[:8])


@pytest.mark.parametrize("op", list(INT_ONLY))
@pytest.mark.parametrize("dt", ["i32", "i8", "i64", "u8"])
def test_int_ops(op, dt):
    g, c, out_dt = _ew_case(INT_ONLY[op], dt, 2000, 512)
    assert torch.equal(g, c), (op, dt)


@pytest.mark.parametrize("op", list(UNARY_FLOAT))
@pytest.mark.parametrize("dt", ["fp32", "fp16", "fp64"])
def test_unary_float(op, dt):
    g, c, out_dt = _ew_case(UNARY_FLOAT[op], dt, 4096, 1024)
    assert _close(g, c, TORCH[dt], approx=op in APPROX), (op, dt, (g - c).abs().max())


CAST_TEMPLATE = """
@kernelc.jit
def k(x_ptr, out_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < n
    kl.store(out_ptr + offs, kl.load(x_ptr + offs, mask=m).to(out_ptr.dtype.element_ty), mask=m)
"""


@pytest.mark.parametrize("src,dst", list(itertools.permutations(["fp32", "fp16", "bf16", "i32", "i8", "i64", "fp64"], 2)))
def test_casts(src, dst):
    kern = _make_kernel(CAST_TEMPLATE, "k")
    x = _rand((1000,), src) * (3 if TORCH[src].is_floating_point else 1)
    out = torch.zeros(1000, dtype=TORCH[dst])
    (g,), (c,) = _run_both(kern, (4,), [x], [out], n=1000, BLOCK=256)
    assert _close(g, c, TORCH[dst]), (src, dst)


# -- reductions, scans, shapes -------------------------------------------------------------------

RED_TEMPLATE = """
@kernelc.jit
def k(x_ptr, out_ptr, R: kl.constexpr, C: kl.constexpr, AXIS: kl.constexpr):
    r = kl.arange(0, R)
    c = kl.arange(0, C)
    x = kl.load(x_ptr + r[:, None] * C + c[None, :])
    y = {expr}
    if AXIS == 0:
        kl.store(out_ptr + c, y)
    else:
        kl.store(out_ptr + r, y)
"""
REDUCTIONS = {"sum": "kl.sum(x, axis=AXIS)", "max": "kl.max(x, axis=AXIS)", "min": "kl.min(x, axis=AXIS)",
              "argmax": "kl.argmax(x, axis=AXIS)", "argmin": "kl.argmin(x, axis=AXIS)",
              "xor_sum": "kl.xor_sum(x, axis=AXIS)"}


@pytest.mark.parametrize("red", list(REDUCTIONS))
@pytest.mark.parametrize("dt", ["fp32", "i32"])
@pytest.mark.parametrize("R,C,axis,nw", [(64, 128, 1, 4), (64, 128, 0, 4), (8, 1024, 1, 8), (256, 16, 0, 8), (1, 64, 1, 1)])
def test_reductions(red, dt, R, C, axis, nw):
    if red == "xor_sum" and dt == "fp32":
        pytest.skip("xor_sum is integer-only")
    kern = _make_kernel(RED_TEMPLATE.format(expr=REDUCTIONS[red]), "k")
    x = _rand((R, C), dt)
    if red in ("argmax", "argmin") and dt == "i32":
        x = x % 7  # plenty of ties: tie-breaking must agree
    n_out = C if axis == 0 else R
    out_dt = torch.int32 if red in ("argmax", "argmin") else TORCH[dt]
    out = torch.zeros(n_out, dtype=out_dt)
    (g,), (c,) = _run_both(kern, (1,), [x], [out], R=R, C=C, AXIS=axis, num_warps=nw)
    assert _close(g, c, out_dt, approx=True), (red, dt, R, C, axis, g[:8], c[:8])


SCAN_TEMPLATE = """
@kernelc.jit
def k(x_ptr, out_ptr, R: kl.constexpr, C: kl.constexpr, AXIS: kl.constexpr, REV: kl.constexpr):
    r = kl.arange(0, R)
    c = kl.arange(0, C)
    offs = r[:, None] * C + c[None, :]
    x = kl.load(x_ptr + offs)
    kl.store(out_ptr + offs, {expr})
"""


@pytest.mark.parametrize("expr", ["kl.cumsum(x, axis=AXIS, reverse=REV)", "kl.cumprod(x, axis=AXIS, reverse=REV)"])
@pytest.mark.parametrize("R,C,axis,rev,nw", [(4, 256, 1, False, 4), (4, 256, 1, True, 4), (128, 8, 0, False, 4),
                                             (2, 2048, 1, False, 8), (64, 64, 0, True, 2)])
def test_scans(expr, R, C, axis, rev, nw):
    kern = _make_kernel(SCAN_TEMPLATE.format(expr=expr), "k")
    x = torch.randint(-3, 4, (R, C), dtype=torch.int32)
    if "cumprod" in expr:
        x = torch.where(torch.rand(R, C) < 0.9, torch.ones_like(x), x)
    out = torch.zeros(R, C, dtype=torch.int32)
    (g,), (c,) = _run_both(kern, (1,), [x], [out], R=R, C=C, AXIS=axis, REV=rev, num_warps=nw)
    assert torch.equal(g, c), (expr, R, C, axis, rev)


SHAPE_TEMPLATE = """
@kernelc.jit
def k(x_ptr, out_ptr, R: kl.constexpr, C: kl.constexpr):
    r = kl.arange(0, R)
    c = kl.arange(0, C)
    x = kl.load(x_ptr + r[:, None] * C + c[None, :])
    y = {expr}
    ro = kl.arange(0, {OR})
    co = kl.arange(0, {OC})
    kl.store(out_ptr + ro[:, None] * {OC} + co[None, :], y)
"""


@pytest.mark.parametrize("expr,oshape", [("kl.trans(x)", "CR"), ("x.T + 1", "CR"), ("kl.reshape(x, (C, R))", "CR"),
                                        ("x * kl.sum(x, axis=1)[:, None]", "RC"),
                                        ("x + kl.max(x, axis=0, keep_dims=True)", "RC")])
@pytest.mark.parametrize("R,C,nw", [(32, 64, 4), (128, 32, 8), (16, 16, 1)])
def test_shape_ops(expr, oshape, R, C, nw):
    OR, OC = (C, R) if oshape == "CR" else (R, C)
    kern = _make_kernel(SHAPE_TEMPLATE.format(expr=expr, OR=OR, OC=OC), "k")
    x = torch.randint(-50, 50, (R, C), dtype=torch.int32)
    out = torch.zeros(OR, OC, dtype=torch.int32)
    (g,), (c,) = _run_both(kern, (1,), [x], [out], R=R, C=C, num_warps=nw)
    assert torch.equal(g, c), expr


DOT_TEMPLATE = """
@kernelc.jit
def k(a_ptr, b_ptr, out_ptr, M: kl.constexpr, N: kl.constexpr, K: kl.constexpr, PREC: kl.constexpr):
    m = kl.arange(0, M)
    n = kl.arange(0, N)
    kk = kl.arange(0, K)
    a = kl.load(a_ptr + m[:, None] * K + kk[None, :])
    b = kl.load(b_ptr + kk[:, None] * N + n[None, :])
    kl.store(out_ptr + m[:, None] * N + n[None, :], kl.dot(a, b, input_precision=PREC))
"""


@pytest.mark.parametrize("dt,prec", [("fp16", "tf32"), ("bf16", "tf32"), ("fp32", "tf32"), ("fp32", "ieee"), ("i8", "tf32")])
@pytest.mark.parametrize("M,N,K,nw", [(16, 16, 16, 1), (64, 32, 32, 4), (128, 128, 64, 8), (32, 64, 128, 2), (8, 8, 8, 1)])
def test_dot(dt, prec, M, N, K, nw):
    if dt == "i8" and K < 32:
        K = 32
    kern = _make_kernel(DOT_TEMPLATE, "k")
    a, b = _rand((M, K), dt), _rand((K, N), dt)
    out_dt = torch.int32 if dt == "i8" else torch.float32
    out = torch.zeros(M, N, dtype=out_dt)
    (g,), (c,) = _run_both(kern, (1,), [a, b], [out], M=M, N=N, K=K, PREC=prec, num_warps=nw)
    if out_dt == torch.int32:
        assert torch.equal(g, c)
    else:
        rel = ((g.double() - c.double()).norm() / c.double().norm()).item()
        assert rel < (3e-3 if prec == "tf32" and dt == "fp32" else 1e-5), rel


ATOMIC_TEMPLATE = """
@kernelc.jit
def k(idx_ptr, val_ptr, out_ptr, old_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < n
    i = kl.load(idx_ptr + offs, mask=m, other=0)
    v = kl.load(val_ptr + offs, mask=m, other=0)
    old = {expr}
    kl.store(old_ptr + offs, old, mask=m)
"""


@pytest.mark.parametrize("expr,dt", [("kl.atomic_add(out_ptr + i, v, mask=m)", "i32"),
                                     ("kl.atomic_max(out_ptr + i, v, mask=m)", "i32"),
                                     ("kl.atomic_min(out_ptr + i, v, mask=m)", "i32"),
                                     ("kl.atomic_max(out_ptr + i, v, mask=m)", "fp32"),
                                     ("kl.atomic_add(out_ptr + i, v, mask=m)", "fp32")])
def test_atomics_totals(expr, dt):
    kern = _make_kernel(ATOMIC_TEMPLATE.format(expr=expr), "k")
    n = 5000
    idx = torch.randint(0, 17, (n,), dtype=torch.int32)
    val = _rand((n,), dt)
    out = torch.zeros(17, dtype=TORCH[dt])
    old = torch.zeros(n, dtype=TORCH[dt])
    (g_out, g_old), (c_out, c_old) = _run_both(kern, (20,), [idx, val], [out, old], n=n, BLOCK=256)
    # totals are order-independent (up to float rounding); the old values depend on the GPU's order
    assert _close(g_out, c_out, TORCH[dt], approx=True)


def test_atomic_cas_lock():
    src = """
@kernelc.jit
def k(lock_ptr, counter_ptr):
    while kl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    c = kl.load(counter_ptr, volatile=True)
    kl.store(counter_ptr, c + 1)
    kl.atomic_xchg(lock_ptr, 0)
"""
    import kernelc
    kern = _make_kernel(src, "k")
    lock = torch.zeros(1, dtype=torch.int32, device="cuda")
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    kern[(64,)](lock, counter, num_warps=1)
    assert counter.item() == 64


# -- randomized differential testing ----------------------------------------------------------------

RANDOM_TEMPLATE = """
@kernelc.jit
def k(x_ptr, y_ptr, out_ptr, R, C, BR: kl.constexpr, BC: kl.constexpr):
    r = kl.program_id(0) * BR + kl.arange(0, BR)
    c = kl.program_id(1) * BC + kl.arange(0, BC)
    m = (r[:, None] < R) & (c[None, :] < C)
    offs = r[:, None] * C + c[None, :]
    x = kl.load(x_ptr + {x_offs}, mask=m, other={other})
    y = kl.load(y_ptr + offs, mask=m, other={other})
    z = {expr}
    kl.store(out_ptr + {out_offs}, z, mask=m)
"""
RANDOM_EXPRS = [
    "x + y * 2", "kl.maximum(x, y) - kl.minimum(x, y)", "kl.where(x > y, x - y, y - x)",
    "x * kl.sum(y, axis=1)[:, None]", "x - kl.max(x, axis=0)[None, :]", "(x + y) * (x - y)",
    "kl.where(m, x, y)", "x + kl.cumsum(y, axis=1)",
]
# Where x is read from and z written to. "rows": both row-major (R, C), as y. "tstore": z goes to a (C, R)
# tensor, so the store's addresses run along the tile's first dimension and the coalescing pass gives it its
# own layout through a convert_layout (issue 21); "tload": x comes from a (C, R) tensor, the same for a load.
RANDOM_LAYOUTS = {"rows": ("offs", "offs"), "tstore": ("offs", "c[None, :] * R + r[:, None]"),
                  "tload": ("c[None, :] * R + r[:, None]", "offs")}
RANDOM_SEED, RANDOM_CASES = 1234, 120              # the row-major cases, drawn as before the layouts existed
RANDOM_T_SEED, RANDOM_T_CASES = 4321, 40           # transposed loads or stores
RANDOM_CHUNKS = 8                                  # one test per chunk, so pytest-xdist spreads the compiles


def _random_cases():
    """Every case as (layout, expr, dtype, R, C, BR, BC, num_warps), from fixed seeds: a failure names its case
    and reruns alone."""
    def draw(rng):
        dt = rng.choice(["fp32", "i32", "fp16"])
        expr = rng.choice(RANDOM_EXPRS)
        if "cumsum" in expr and dt == "fp16":
            dt = "i32"
        BR, BC = rng.choice([1, 2, 4, 16, 32, 64]), rng.choice([1, 8, 32, 128, 256])
        if BR * BC > 8192:
            BC = 8192 // BR
        R, C = rng.randint(1, 150), rng.randint(1, 300)
        nw = rng.choice([1, 2, 4, 8])
        return expr, dt, R, C, BR, BC, nw
    rng = random.Random(RANDOM_SEED)
    cases = [("rows",) + draw(rng) for _ in range(RANDOM_CASES)]
    trng = random.Random(RANDOM_T_SEED)
    for _ in range(RANDOM_T_CASES):
        layout = trng.choice(["tstore", "tload"])
        cases.append((layout,) + draw(trng))
    return cases


def _random_case(i, layout, expr, dt, R, C, BR, BC, nw):
    """Run case ``i`` on the GPU and in the interpreter; True when they agree."""
    x_offs, out_offs = RANDOM_LAYOUTS[layout]
    other = "0" if dt != "fp16" else "0.0"
    kern = _make_kernel(RANDOM_TEMPLATE.format(expr=expr, other=other, x_offs=x_offs, out_offs=out_offs), "k")
    torch.manual_seed(i)
    x = _rand((C, R) if layout == "tload" else (R, C), dt)
    y = _rand((R, C), dt)
    out = torch.zeros((C, R) if layout == "tstore" else (R, C), dtype=TORCH[dt])
    grid = ((R + BR - 1) // BR, (C + BC - 1) // BC)
    (g,), (c,) = _run_both(kern, grid, [x, y], [out], R=R, C=C, BR=BR, BC=BC, num_warps=nw)
    ok = _close(g, c, TORCH[dt], approx=True)
    if not ok and dt == "fp16" and "sum" in expr:
        # an fp16 row sum rounds at every add: the GPU's tree order and numpy's order differ by
        # up to ~n ulp of the sum, so compare at the sum's own precision
        ok = bool(torch.isclose(g.double(), c.double(), rtol=1e-2, atol=1e-2 * c.double().abs().max()).all())
    return ok


def test_random_cases_are_fixed():
    # the chunks below must cover every case exactly once, and the row-major cases keep the old draw
    cases = _random_cases()
    assert len(cases) == RANDOM_CASES + RANDOM_T_CASES
    assert sum(len(range(k, len(cases), RANDOM_CHUNKS)) for k in range(RANDOM_CHUNKS)) == len(cases)
    assert {c[0] for c in cases[RANDOM_CASES:]} == {"tstore", "tload"}
    assert cases == _random_cases()


@pytest.mark.parametrize("chunk", range(RANDOM_CHUNKS))
def test_random_differential(chunk, capsys):
    cases = _random_cases()
    ran = differed = 0
    failures = []
    for i in range(chunk, len(cases), RANDOM_CHUNKS):
        ran += 1
        if not _random_case(i, *cases[i]):
            differed += 1
            failures.append((i,) + cases[i])
    with capsys.disabled():
        print(f"\nrandom differential chunk {chunk}/{RANDOM_CHUNKS} (seeds {RANDOM_SEED}, {RANDOM_T_SEED}): "
              f"{ran} cases ran, {differed} differed")
    assert differed == 0, failures[:5]
