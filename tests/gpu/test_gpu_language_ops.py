"""The Triton-compatibility language ops on the GPU against the interpreter: the shared-memory lowerings
(sort, topk, bitonic_merge, flip, gather, histogram, join/split/cat/interleave), every libdevice
function, inline assembly and the kl.extra.cuda helpers."""
import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.language.extra import cuda as kcuda
from kernelc.language.extra import libdevice as ld

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():  # pragma: no cover - CPU machines
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


def _both(kernel, grid, inputs, outputs, **kw):
    g_out = [t.clone().cuda() for t in outputs]
    kernel[grid](*[t.cuda() for t in inputs], *g_out, **kw)
    torch.cuda.synchronize()
    c_out = [t.clone() for t in outputs]
    kernelc.jit(kernel.fn, interpret=True)[grid](*[t.clone() for t in inputs], *c_out, **kw)
    return [t.cpu() for t in g_out], c_out


@kernelc.jit
def _rows(x_ptr, o_ptr, M: kl.constexpr, N: kl.constexpr, OM: kl.constexpr, ON: kl.constexpr, OP: kl.constexpr):
    x = kl.load(x_ptr + kl.arange(0, M)[:, None] * N + kl.arange(0, N)[None, :])
    kl.store(o_ptr + kl.arange(0, OM)[:, None] * ON + kl.arange(0, ON)[None, :], OP(x))


def _sort_desc(v):
    return kl.sort(v, descending=True)


def _topk16(v):
    return kl.topk(v, 16)


def _merge(v):
    return kl.bitonic_merge(v)


def _flip0(v):
    return kl.flip(v, 0)


def _flip1(v):
    return kl.flip(v, 1)


def _interleave(v):
    return kl.interleave(v, v * 2)


def _join_split_cat(v):
    a, b = kl.split(kl.join(v, v + 1))
    return kl.cat(b, a)


@kernelc.jit
def _branchy(a):
    if a > 0:
        return a * 3
    return a - 1


def _mapped(v):
    return kl.map_elementwise(_branchy, v)


CASES = [(_mapped, None), (kl.sort, None), (_sort_desc, None), (_topk16, 16), (_merge, None), (_flip0, None), (_flip1, None),
         (_interleave, "x2"), (_join_split_cat, "rows2")]


@pytest.mark.parametrize("op,out", CASES, ids=lambda c: getattr(c, "__name__", str(c)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,num_warps", [(8, 64, 1), (8, 64, 4), (1, 512, 8), (256, 16, 8), (2, 32, 8)])
def test_data_movement_ops_gpu_equal_interpreter(op, out, dtype, M, N, num_warps):
    x = (torch.randn(M, N) * 50).to(dtype)
    x[:, ::9] = x[:, 1:2]  # ties
    if dtype.is_floating_point:
        x[0, 3] = float("nan")
    OM, ON = {None: (M, N), 16: (M, 16), "x2": (M, 2 * N), "rows2": (2 * M, N)}[out]
    o = torch.zeros(OM, ON, dtype=dtype)
    (g,), (c,) = _both(_rows, (1,), [x], [o], M=M, N=N, OM=OM, ON=ON, OP=op, num_warps=num_warps)
    assert torch.equal(g.isnan(), c.isnan()) if dtype.is_floating_point else True
    assert torch.equal(torch.nan_to_num(g.double()), torch.nan_to_num(c.double())), (g, c)


@kernelc.jit
def _gather_hist(x_ptr, i_ptr, o_ptr, h_ptr, M: kl.constexpr, N: kl.constexpr, BINS: kl.constexpr):
    offs = kl.arange(0, M)[:, None] * N + kl.arange(0, N)[None, :]
    x = kl.load(x_ptr + offs)
    i = kl.load(i_ptr + offs)
    kl.store(o_ptr + offs, kl.gather(x, i % N, 1) + kl.gather(x, i % M, 0))
    flat = kl.reshape(i, (M * N,))
    r = kl.arange(0, M * N)
    kl.store(h_ptr + kl.arange(0, BINS), kl.histogram(flat, BINS, mask=r < M * N - 7))


def test_gather_and_histogram_gpu_equal_interpreter():
    x = torch.randn(16, 32)
    i = torch.randint(-4, 40, (16, 32), dtype=torch.int32).abs()
    (g, gh), (c, ch) = _both(_gather_hist, (1,), [x, i], [torch.zeros(16, 32), torch.zeros(32, dtype=torch.int32)],
                             M=16, N=32, BINS=32)
    assert torch.equal(g, c) and torch.equal(gh, ch)


_ARG = {"fp32": 0, "fp64": 1, "int32": 2, "int64": 3, "uint32": 4, "uint64": 5}
ROWS = [(name, sig) for name, rows in ld.TABLE.items() for sig in rows]


def _store_all(xs, o_ptr, r):
    for k, (name, sig) in enumerate(ROWS):
        kl.store(o_ptr + k * 32 + r, getattr(ld, name)(*[xs[_ARG[t]] for t in sig]).to(kl.float64))


@kernelc.jit
def _all_libdevice(f_ptr, d_ptr, i_ptr, l_ptr, u_ptr, ul_ptr, o_ptr, OP: kl.constexpr):
    r = kl.arange(0, 32)
    xs = (kl.load(f_ptr + r), kl.load(d_ptr + r), kl.load(i_ptr + r), kl.load(l_ptr + r), kl.load(u_ptr + r),
          kl.load(ul_ptr + r))
    OP(xs, o_ptr, r)


_EXACT = ("add_", "sub_", "mul_", "div_", "rcp_", "fma_", "sqrt_", "2float", "2double", "2int", "2uint", "2ll",
          "2ull", "as_", "hiint", "loint", "hiloint", "clz", "popc", "brev", "ffs", "mulhi", "mul24", "hadd", "sad",
          "byte_perm", "isnan", "isinf", "finite", "signbit", "ilogb", "llr", "floor", "ceil", "trunc", "rint",
          "round", "copysign", "nextafter", "ldexp", "scalbn", "abs", "fdim", "fmod", "saturatef")


def test_every_libdevice_function_gpu_equal_interpreter():
    g = torch.Generator().manual_seed(0)
    f = torch.rand(32, generator=g) * 0.8 + 0.1  # inside every function's domain but acosh's (NaN both)
    ins = [f, f.double(), torch.randint(0, 8, (32,), dtype=torch.int32, generator=g),
           torch.randint(-2**40, 2**40, (32,), dtype=torch.int64, generator=g),
           torch.randint(0, 2**31, (32,), dtype=torch.int32, generator=g).to(torch.uint32),
           torch.randint(0, 2**62, (32,), dtype=torch.int64, generator=g).to(torch.uint64)]
    out = torch.zeros(len(ROWS) * 32, dtype=torch.float64)
    (gpu,), (cpu,) = _both(_all_libdevice, (1,), ins, [out], OP=_store_all)
    bad = []
    for k, (name, sig) in enumerate(ROWS):
        a, b = gpu[k * 32:(k + 1) * 32], cpu[k * 32:(k + 1) * 32]
        ret = ld.TABLE[name][sig][1]
        if any(name.startswith(p) or p in name for p in _EXACT) and not name.startswith("fast_"):
            ok = torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)) and torch.equal(a.isnan(), b.isnan())
        else:
            tol = 1e-4 if name.startswith("fast_") else (1e-5 if ret == "fp32" or "fp32" in sig else 1e-12)
            atol = tol
            if name in ("j0", "j1", "y0", "y1", "jn", "yn"):  # CUDA documents absolute error bounds here
                atol = 2e-5 if "fp32" in sig else 1e-11
            if name == "rcp64h":  # rcp.approx.ftz.f64: about 20 correct mantissa bits
                tol = atol = 2.0 ** -19
            ok = bool((torch.isclose(a, b, rtol=tol, atol=atol) | (a.isnan() & b.isnan())).all())
        if not ok:
            bad.append(f"{name}{sig}: gpu {a[:4].tolist()} interp {b[:4].tolist()}")
    assert not bad, f"{len(bad)} of {len(ROWS)} differ:\n" + "\n".join(bad)


@kernelc.jit
def _cuda_helpers(x_ptr, o_ptr):
    r = kl.arange(0, 128)
    x = kl.load(x_ptr + r)
    kcuda.gdc_wait()
    y = kl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $1, 3;", "=r,r", [x], kl.int32, True, 1)
    kl.store(o_ptr + r, y)
    kl.store(o_ptr + 128, kcuda.num_warps())
    kl.store(o_ptr + 129, kcuda.num_threads())
    kl.store(o_ptr + 130, kcuda.smid())
    kl.store(o_ptr + 131, (kcuda.globaltimer() > 0).to(kl.int32))
    kcuda.gdc_launch_dependents()


def test_inline_asm_and_cuda_helpers_on_gpu():
    x = torch.randint(-2**31, 2**31 - 1, (128,), dtype=torch.int32)
    o = torch.zeros(132, dtype=torch.int32).cuda()
    _cuda_helpers[(1,)](x.cuda(), o, num_warps=8)
    o = o.cpu()
    u = x.to(torch.int64) & 0xFFFFFFFF
    rot = (((u << 3) | (u >> 29)) & 0xFFFFFFFF).to(torch.int64)
    assert torch.equal(o[:128].to(torch.int64) & 0xFFFFFFFF, rot)
    assert o[128].item() == 8 and o[129].item() == 256 and o[131].item() == 1
    assert 0 <= o[130].item() < torch.cuda.get_device_properties(0).multi_processor_count
