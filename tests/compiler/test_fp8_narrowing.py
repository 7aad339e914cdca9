"""fp32/fp16/bf16 -> fp8 narrowing on sm_89+ (``codegen/fp8.py: torch_fixup_pair``), bit for bit against torch's
algorithm (``compiler/fp8_reference.py``) on the host: the LLVM IR the lowering emits for a pair of values is run
over numpy arrays (``tests/compiler/fp8_ir_eval.py`` models the PTX instructions it uses), for every boundary of
both formats, every float around e5m2's overflow threshold, infinities, NaNs of both signs with payloads, all
65536 halves and random bit patterns; and the cost: instructions a pair in sm_90a SASS.
(tests/gpu/test_gpu_fp8.py checks the real instructions against torch.)"""
import re
from collections import Counter

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import fp8_reference as REF
from kernelc.compiler.codegen import fp8 as CG
from kernelc.compiler.codegen.emitter import Emitter
from kernelc.language.dtypes import FP8_FORMATS, dtype
from tests.compiler import fp8_ir_eval as EV

U64 = np.uint64
NAMES = ("fp8e4nv", "fp8e5")


def _f32_bits(x) -> np.ndarray:
    return np.ascontiguousarray(x, np.float32).view(np.uint32).astype(U64)


def f32_inputs() -> np.ndarray:
    """fp32 bit patterns: every float from e4m3's max to past e5m2's Inf threshold (both signs), every fp8 value
    of both formats with its neighbours and the midpoints between neighbours (+-1 ulp), zeros, subnormals,
    infinities, NaNs of both signs with many payloads, and random patterns."""
    rng = np.random.default_rng(7)
    parts = []
    lo, hi = _f32_bits([57344.0])[0] - 4096, _f32_bits([65536.0])[0] + 4096  # e5m2 max .. 2^16, dense
    dense = np.arange(lo, hi, dtype=U64)
    parts += [dense, dense | U64(1 << 31)]
    around = _f32_bits([448.0, 464.0, 480.0])[0:3]  # e4m3's max, its tie, its old NaN threshold
    parts += [(a + np.arange(-2048, 2048)).astype(U64) | s for a in around for s in (U64(0), U64(1 << 31))]
    for name in NAMES:
        v = REF.to_float(np.arange(256, dtype=np.uint8).view(REF.fp8_numpy_dtype(name)), name, np.float32)
        v = np.unique(v[np.isfinite(v)]).astype(np.float64)
        mid = ((v[1:] + v[:-1]) / 2).astype(np.float32)
        for f in (v.astype(np.float32), mid):
            b = _f32_bits(f)
            parts += [b, b + U64(1), b - U64(1), b ^ U64(1 << 31)]
    nan_payloads = np.concatenate([np.arange(1, 1 << 12), rng.integers(1, 1 << 23, 1 << 14), [(1 << 23) - 1, 1 << 22]])
    nan = U64(0x7F800000) | nan_payloads.astype(U64)
    parts += [nan, nan | U64(1 << 31)]
    parts.append(np.array([0, 1 << 31, 1, (1 << 31) | 1, 0x7F800000, 0xFF800000, 0x007FFFFF, 0x807FFFFF], U64))
    parts.append(rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64))
    return np.concatenate(parts).astype(U64) & U64(0xFFFFFFFF)


def _run_pair(emit, a: np.ndarray, b: np.ndarray, tys, nan_sign=False):
    e = Emitter("t", "t.py", 1)
    e.capability = (9, 0)
    y0, y1 = emit(e, "%a", "%b")
    env = EV.run(e.body, {"%a": (tys[0], a), "%b": (tys[1], b)}, nan_sign)
    return env[y0][1].astype(np.uint8), env[y1][1].astype(np.uint8), e.body


def _want(bits32: np.ndarray, name: str) -> np.ndarray:
    return REF.encode(bits32.astype(np.uint32).view(np.float32), FP8_FORMATS[name])


def _check(got, want, x):
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(hex(int(x[i])), hex(int(want[i])), hex(int(got[i]))) for i in bad[:8]]


@pytest.mark.parametrize("nan_sign", [False, True])  # satfinite's NaN: 0x7F, or 0x7F with the input's sign
@pytest.mark.parametrize("name", NAMES)
def test_fp32_pairs_narrow_like_torch(name, nan_sign):
    x = f32_inputs()
    x1 = np.roll(x, 12345)  # the two values of a pair differ in kind
    y0, y1, body = _run_pair(lambda e, a, b: CG.cast_pair(e, dtype("fp32"), dtype(name), a, b), x, x1,
                             ("float", "float"), nan_sign)
    _check(y0, _want(x, name), x)
    _check(y1, _want(x1, name), x1)
    # one cvt a pair, and no compare, select or branch: the fix-up is on the packed pair
    assert sum("cvt.rn.satfinite" in ln for ln in body) == 1
    assert not any(re.search(r"= (fcmp|icmp|select|phi)\b", ln) for ln in body)


@pytest.mark.parametrize("name", NAMES)
def test_one_value_narrows_like_torch(name):
    x = f32_inputs()
    e = Emitter("t", "t.py", 1)
    e.capability = (9, 0)
    y = CG.cast_one(e, dtype("fp32"), dtype(name), "%a")
    env = EV.run(e.body, {"%a": ("float", x)})
    _check(env[y][1].astype(np.uint8), _want(x, name), x)


@pytest.mark.parametrize("name", NAMES)
def test_exp2_results_skip_the_sign_and_keep_the_overflow(name):
    """``nan_positive`` (passes/fp_contract.py: an exp2 result): no sign permute; e5m2 still gets +-Inf."""
    x = f32_inputs()
    x = x[(x < U64(0x7F800001)) | (x > U64(0x7FFFFFFF))]  # no negative NaN: positive NaNs and every number
    x = np.where(x > U64(0xFF800000), x & U64(0x7FFFFFFF), x)
    x1 = np.roll(x, 777)
    y0, y1, body = _run_pair(lambda e, a, b: CG.cast_pair(e, dtype("fp32"), dtype(name), a, b, nan_positive=True),
                             x, x1, ("float", "float"))
    _check(y0, _want(x, name), x)
    _check(y1, _want(x1, name), x1)
    assert not any("prmt" in ln and ", i32 115)" in ln for ln in body)
    assert sum("sub.f32" in ln for ln in body) == (2 if name == "fp8e5" else 0)
    if name == "fp8e4nv":  # nothing to fix: the cvt alone
        assert [ln for ln in body if "asm" in ln] == [ln for ln in body if "cvt.rn.satfinite" in ln]


@pytest.mark.parametrize("src,ty", [("fp16", "half"), ("bf16", "bfloat")])
@pytest.mark.parametrize("name", NAMES)
def test_every_16_bit_float_narrows_like_torch(name, src, ty):
    """All 65536 halves / bfloat16s; a half NaN's sign is read from its bits (the widening drops it)."""
    h = np.arange(1 << 16, dtype=U64)
    h1 = np.roll(h, 4099)
    y0, y1, _ = _run_pair(lambda e, a, b: CG.cast_pair(e, dtype(src), dtype(name), a, b), h, h1, (ty, ty))
    if src == "fp16":
        wide = lambda v: v.astype(np.uint16).view(np.float16).astype(np.float32)  # noqa: E731  (keeps NaN signs)
    else:
        wide = lambda v: (v << U64(16)).astype(np.uint32).view(np.float32)  # noqa: E731
    for got, v in ((y0, h), (y1, h1)):
        _check(got, REF.encode(wide(v), FP8_FORMATS[name]), v)


def test_the_model_agrees_with_torch_where_torch_is_the_reference():
    """The reference the tests above compare with is torch's cast (finite values, infinities, overflow)."""
    torch = pytest.importorskip("torch")
    x = f32_inputs()
    f = x.astype(np.uint32).view(np.float32)
    keep = ~np.isnan(f)  # NaN payloads/signs: compiler/fp8_reference.py documents torch's rule
    for name, dt in (("fp8e5", torch.float8_e5m2), ("fp8e4nv", torch.float8_e4m3fn)):
        got = torch.from_numpy(f[keep]).to(dt).view(torch.uint8).numpy()
        if name == "fp8e4nv":  # torch < 2.12 gave NaN for e4m3fn overflow; compare in range only
            inside = np.abs(f[keep]) < 480
            assert (got[inside] == _want(x[keep], name)[inside]).all()
        else:
            assert (got == _want(x[keep], name)).all()


# -- cost in SASS ---------------------------------------------------------------------------------------


@kernelc.jit
def _narrow(x_ptr, y_ptr, BLOCK: kl.constexpr, EXP2: kl.constexpr):
    i = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + i)
    if EXP2:
        x = kl.math.exp2(x)
    kl.store(y_ptr + i, x.to(y_ptr.dtype.element_ty))


def _sass_ops(src, name, exp2):
    ck = kernelc.compile(_narrow, dict(x_ptr="*" + src, y_ptr="*" + name), dict(BLOCK=4096, EXP2=exp2),
                         target="sm_90a", num_warps=4)
    lines = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).rstrip(" ;")
             for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]
    ops = Counter(ln.split(" ")[0] for ln in lines)
    # an F2FP that merges its pair into a register's other half does the store packing's PRMT too: nvJitLink
    # 13.0.88 (the GPU hosts') folds 8 of the base's 24 PRMTs so, 13.5 none (docs/performance.md, "nvj27")
    ops["F2FP.merge"] = sum(ln.startswith("F2FP") and "MERGE_C" in ln.split(" ")[0] and not ln.endswith(", RZ")
                            for ln in lines)
    return ops


@pytest.mark.parametrize("name,exp2,per_pair", [
    ("fp8e5", False, 6),   # 2 FADD + PRMT + LOP3 (overflow), PRMT + LOP3 (NaN sign); main had ~20
    ("fp8e5", True, 4),    # exp2 result: the overflow part only
    ("fp8e4nv", False, 2),  # the NaN sign only
    ("fp8e4nv", True, 0),
])
def test_fixup_instructions_a_pair(name, exp2, per_pair):
    """2026-11-27: 32 values a thread (16 cvt pairs) stored as fp8. The fix-up's instructions are the total minus
    the same kernel's e4m3 narrowing of an exp2 result, which has none; neither compares nor selects."""
    ops = _sass_ops("fp32", name, exp2)
    base = _sass_ops("fp32", "fp8e4nv", True)
    pairs = 16
    assert sum(o.startswith("F2FP.SATFINITE") for o in ops.elements()) == pairs
    # counted with their merges: the fix-up's own instructions, whichever of the base's PRMTs the assembler folds
    extra = sum(ops.values()) - sum(base.values()) + (0 if exp2 else base["MUFU.EX2"])
    assert extra <= per_pair * pairs, (extra, ops)
    assert ops["FSETP.GE.AND"] == ops["ISETP.GT.U32.AND"] == ops["SEL"] == 0


# -- casts with an overflow bound (passes/fp8_bounds.py): the fix-up only where a warp's bound reaches 61440 -------


def _bounded(x: np.ndarray, bound: np.ndarray, nan_positive: bool, words: bool):
    """``x``: [lanes, 16] fp32 bits, ``bound``: [lanes] fp32 bits (one row sum a lane, broadcast as the pass does:
    the same register for all 16). Runs ``cast_many`` with the bound (and the fp8 A operand's word order)."""
    from kernelc.compiler.codegen.fp8_words import a8_fragment_order
    e = Emitter("t", "t.py", 1)
    e.capability = (9, 0)
    xs = [f"%x{i}" for i in range(16)]
    order = a8_fragment_order(64, 32, 4) if words else None  # 16 registers: one row block, one 32-column step
    ys = CG.cast_many(e, dtype("fp32"), dtype("fp8e5"), xs, nan_positive, ["%b"] * 16, order)
    env = {f"%x{i}": ("float", x[:, i]) for i in range(16)}
    env["%b"] = ("float", bound)
    env = EV.run(e.body, env)
    return np.stack([env[y][1].astype(np.uint8) for y in ys], axis=1), e.body


@pytest.mark.parametrize("words", [False, True])
@pytest.mark.parametrize("nan_positive", [False, True])
def test_bounded_cast_is_exact_wherever_the_bound_holds(nan_positive, words):
    """Warps of 32 lanes, 16 values a lane. The bound is each lane's sum of magnitudes (what the row sum of
    exp2 results is), so it holds; some warps hold values past 61440 or NaN/Inf sums, most hold none: every
    byte is torch's either way."""
    rng = np.random.default_rng(3)
    lanes = 32 * 64
    v = rng.standard_normal((lanes, 16)).astype(np.float32) * np.float32(3000.0)
    v[32 * 3 + 5, 7] = 61440.0                      # exactly the threshold: Inf
    v[32 * 4 + 1, 2] = 61439.996                    # just below: max
    v[32 * 5 + 9, 0] = np.inf
    v[32 * 6 + 2, 11] = -70000.0
    v[32 * 7 + 0, 3] = np.nan
    if nan_positive:
        v = np.abs(v)
    else:
        v[32 * 8 + 3, 4] = -np.nan
    x = _f32_bits(v).reshape(lanes, 16)
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.abs(v).astype(np.float64).sum(axis=1).astype(np.float32)
    s[32 * 9 + 4] = np.nan                          # a NaN bound proves nothing
    got, body = _bounded(x, _f32_bits(s), nan_positive, words)
    _check(got.reshape(-1), _want(x.reshape(-1), "fp8e5"), x.reshape(-1))
    assert sum("cvt.rn.satfinite" in ln for ln in body) == 8 and sum("vote.any" in ln for ln in body) == 1
    assert sum("fcmp uge" in ln for ln in body) == 1  # one register, broadcast: one test


def test_bounded_cast_skips_the_fixup_where_the_bound_is_below():
    """The test above could pass with the fix-up always on: here the bound lies (1.0 for values of 70000), and
    the warp gets satfinite's 0x7B, not torch's Inf -- the fast path really is the bare cvt; one lane with a
    bound of 61440 sends its whole warp through the fix-up."""
    x = np.tile(_f32_bits(np.full(16, 70000.0, np.float32)), (64, 1))
    bound = np.full(64, 1.0, np.float32)
    bound[40] = 61440.0
    got, _ = _bounded(x, _f32_bits(bound), True, True)
    assert (got[:32] == 0x7B).all() and (got[32:] == 0x7C).all()


# -- casts that bound themselves (passes/fp8_bounds.py: overflow_bound='self', KERNELC_FP8_SELF_BOUND) ------------


def _self_bounded(x: np.ndarray, words: bool, nan_sign: bool = False):
    """``x``: [lanes, 16] fp32 bits; ``cast_many`` with the values as their own bound."""
    from kernelc.compiler.codegen.fp8_words import a8_fragment_order
    e = Emitter("t", "t.py", 1)
    e.capability = (9, 0)
    xs = [f"%x{i}" for i in range(16)]
    order = a8_fragment_order(64, 32, 4) if words else None
    ys = CG.cast_many(e, dtype("fp32"), dtype("fp8e5"), xs, False, None, order, self_bound=True)
    env = EV.run(e.body, {f"%x{i}": ("float", x[:, i]) for i in range(16)}, nan_sign)
    return np.stack([env[y][1].astype(np.uint8) for y in ys], axis=1), e.body


@pytest.mark.parametrize("words,nan_sign", [(False, True), (True, False)])
def test_self_bounded_cast_is_exact_on_both_paths(words, nan_sign):
    """A sample of f32_inputs (NaNs of both signs, the overflow threshold, infinities: those warps take the fix-up
    branch), then as many warps of ordinary values (the bare cvts): every byte is torch's."""
    special = f32_inputs()
    special = np.random.default_rng(9).permutation(special)[:1 << 16].reshape(-1, 16)
    rng = np.random.default_rng(5)
    plain = _f32_bits(rng.standard_normal(special.shape).astype(np.float32) * np.float32(4000.0)).reshape(special.shape)
    x = np.concatenate([special, plain])
    f = x.astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        slow = ~(np.abs(f) < 61440).reshape(-1, 32 * 16).all(axis=1)  # warps with a NaN or a value past it
    assert slow.any() and not slow.all()
    got, body = _self_bounded(x, words, nan_sign)
    _check(got.reshape(-1), _want(x.reshape(-1), "fp8e5"), x.reshape(-1))
    assert sum("cvt.rn.satfinite" in ln for ln in body) == 8 and sum("vote.any" in ln for ln in body) == 1
    assert sum("fcmp uge" in ln for ln in body) == 16  # each value tested (its own bound)


def test_self_bounded_cast_fixes_up_only_in_its_branch():
    """The path taken when no lane holds a NaN or a value past the threshold is the bare cvts: every sub.f32 (the
    overflow fix-up) and every prmt (overflow and NaN signs) sits between the branch's two labels."""
    _, body = _self_bounded(np.zeros((32, 16), np.uint64), False)
    text = "\n".join(body)
    head, branch, tail = re.split(r"\n\s*fp8_(?:overflow|narrowed)\d+:", text)
    assert "sub.f32" not in head + tail and "prmt" not in head + tail
    assert branch.count("sub.f32") == 16 and branch.count("prmt.b32") == 16
