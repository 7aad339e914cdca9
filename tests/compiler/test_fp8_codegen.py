"""fp8 (e4m3fn / e5m2) on CPU: SASS of fp8 dots and conversions for sm_90a / sm_89 / sm_80, casts in the
interpreter bit for bit against torch, the sm_80 software conversions run on the host (llvmlite JIT of
the very LLVM IR the GPU gets), and fp8 dots in the interpreter against torch's fp32 matmul."""
import ctypes
import re
from collections import Counter

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc import CompilationError

torch = pytest.importorskip("torch")

from examples.kernels import matmul, matmul_fp8  # noqa: E402

FP8 = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}
# torch >= 2.12 saturates e4m3fn overflow to +-448 (older versions gave NaN); kernelc follows the new rule
TORCH_SATURATES_E4M3 = tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2]) >= (2, 12)
P = lambda t: "*" + t  # noqa: E731


def _ops(ck):
    return Counter(re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
                   for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l))


@kernelc.jit
def convert(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < n
    kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=m).to(y_ptr.dtype.element_ty), mask=m)


@kernelc.jit
def fp8_arith(x_ptr, y_ptr, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + offs)
    kl.store(y_ptr + offs, kl.where(x > 1.0, x * x + x, -kl.abs(x)))


@kernelc.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: kl.constexpr, N: kl.constexpr, K: kl.constexpr):
    rm, rn, rk = kl.arange(0, M), kl.arange(0, N), kl.arange(0, K)
    a = kl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = kl.load(b_ptr + rk[:, None] * N + rn[None, :])
    kl.store(c_ptr + rm[:, None] * N + rn[None, :], kl.dot(a, b))


@kernelc.jit
def dot_promoted(a_ptr, b_ptr, c_ptr, M: kl.constexpr, N: kl.constexpr, K: kl.constexpr, MNIA: kl.constexpr):
    rm, rn, rk = kl.arange(0, M), kl.arange(0, N), kl.arange(0, K)
    a = kl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = kl.load(b_ptr + rk[:, None] + rn[None, :] * K)
    kl.store(c_ptr + rm[:, None] * N + rn[None, :], kl.dot(a, b, max_num_imprecise_acc=MNIA))


def _matmul_fp8(a="fp8e4nv", b="fp8e4nv", target="sm_90a", col_b=True, num_warps=4, BM=128, BN=128, BK=128):
    sig = dict(a_ptr=P(a), b_ptr=P(b), c_ptr=P("bf16"), scale_a_ptr=P("fp32"), scale_b_ptr=P("fp32"), M="i32",
               N="i32", K="i32", stride_am="i32", stride_ak="i32", stride_bk="i32", stride_bn="i32",
               stride_cm="i32", stride_cn="i32")
    unit = ("stride_ak", "stride_bk" if col_b else "stride_bn", "stride_cn")
    return kernelc.compile(matmul_fp8.matmul_fp8_kernel, sig,
                           dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8), target=target,
                           num_warps=num_warps, num_stages=3, divisibility={n: 16 for n in sig}, equal_to_1=unit)


# ---------------------------------------------------------------------------------------------
# dot: SASS per target
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("a,b,sass_types", [("fp8e4nv", "fp8e4nv", "E4M3.E4M3"), ("fp8e5", "fp8e5", "E5M2.E5M2"),
                                            ("fp8e4nv", "fp8e5", "E4M3.E5M2")])
def test_fp8_matmul_sm90a_is_qgmma_fed_by_cp_async(a, b, sass_types):
    ck = _matmul_fp8(a, b)
    ops = _ops(ck)
    # nvdisasm prints fp8 wgmma as QGMMA (HGMMA is the 16-bit one), k32 per instruction
    assert ops[f"QGMMA.64x128x32.F32.{sass_types}"] == 128 // 32 * 2, sorted(ops)
    assert not any(o.startswith(("HGMMA", "HMMA")) for o in ops)
    # A and the column-major B both go global -> shared with 16-byte cp.async, K-major, no transposing stores;
    # the only shared stores are the bf16 epilogue's stmatrix (passes/coalesce.py: 16-byte global stores)
    assert ops["LDGSTS.E.BYPASS.128"] > 0 and not any(o.startswith("STS") and o != "STSM.16.M88.4" for o in ops), \
        sorted(ops)
    assert ops["STSM.16.M88.4"] == 128 * 128 // 128 // 8 and "STG.E.128" in ops
    d = ck.reports["dots"][0]
    assert (d["engine"], d["a_dtype"], d["b_dtype"], d["fp8_upcast"]) == ("wgmma", a, b, None)
    assert ck.n_spills == 0 and all("store converted to its coalesced layout" in n for n in ck.compile_log)


def test_fp8_matmul_sm90a_eight_warps_n256():
    ops = _ops(_matmul_fp8(num_warps=8, BN=256))
    assert ops["QGMMA.64x256x32.F32.E4M3.E4M3"] == 4


def test_fp8_matmul_row_major_b_is_staged_k_major():
    # an N-contiguous B cannot be copied as is (8-bit wgmma operands have no transpose bit): it is loaded
    # to registers and written K-major; A keeps the cp.async pipeline
    ck = _matmul_fp8(col_b=False)
    ops = _ops(ck)
    assert ops["QGMMA.64x128x32.F32.E4M3.E4M3"] == 8 and ops["LDGSTS.E.BYPASS.128"] > 0
    assert any(o.startswith("STS") for o in ops)


def test_fp8_matmul_sm89_is_mma_sync_k32():
    ck = _matmul_fp8(target="sm_89")
    ops = _ops(ck)
    assert any(o.startswith("QMMA.16832.F32.E4M3.E4M3") for o in ops), sorted(ops)
    assert ck.reports["dots"][0]["engine"] == "mma.sync" and ck.reports["dots"][0]["fp8_upcast"] is None


@pytest.mark.parametrize("a,b,fmts", [("fp8e4nv", "fp8e4nv", {"e4m3"}), ("fp8e5", "fp8e5", {"e5m2"}),
                                       ("fp8e4nv", "fp8e5", {"e4m3", "e5m2"})])
@pytest.mark.parametrize("num_warps,BM", [(2, 64), (4, 32)])
def test_fp8_mma_sync_on_sm90a_converts_fragments_and_accumulates_in_place(a, b, fmts, num_warps, BM):
    # sm_90 has no fp8 mma.sync unit: ptxas ran each m16n8k32 as fp16 HMMAs from zero plus 4 FADDs into the
    # accumulator (tutorial 03's 2-warp fp8 configs: 144 loop instructions against Triton's 95); converted
    # fragments and fp16 m16n8k16 MMAs accumulate in place
    ck = _matmul_fp8(a, b, num_warps=num_warps, BM=BM, BN=64, BK=64)
    ptx = ck.asm["ptx"]
    assert "m16n8k32" not in ptx and ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") > 0
    assert {m for m in re.findall(r"cvt\.rn\.f16x2\.(e4m3|e5m2)x2", ptx)} == fmts
    ops = _ops(ck)
    assert any(o.startswith("HMMA.16816.F32") for o in ops) and not any(o.startswith("FADD") for o in ops), sorted(ops)
    d = ck.reports["dots"][0]
    assert (d["engine"], d["fp8_upcast"], d["fp8_mma"], d["a_dtype"]) == ("mma.sync", None, "f16", a)
    assert any("sm_90 has no fp8 mma.sync" in line for line in ck.compile_log), ck.compile_log
    # wgmma dots and sm_89's native fp8 mma.sync are left as they were
    assert _matmul_fp8(a, b).reports["dots"][0]["fp8_mma"] is None
    assert _matmul_fp8(a, b, target="sm_89", num_warps=num_warps, BM=BM, BN=64, BK=64).reports["dots"][0]["fp8_mma"] is None


def test_fp8_matmul_sm80_upcasts_to_fp16_and_says_so():
    ck = _matmul_fp8(target="sm_80", BK=64)
    ops = _ops(ck)
    assert any(o.startswith("HMMA.16816.F32") for o in ops), sorted(ops)
    assert not any(o.startswith(("QMMA", "QGMMA")) or "E4M3" in o for o in ops)
    d = ck.reports["dots"][0]
    assert d["engine"] == "mma.sync" and d["a_dtype"] == "fp16"
    assert d["fp8_upcast"].startswith("fp8e4nv x fp8e4nv -> fp16: sm_80 has no fp8 tensor-core instructions")
    assert any("upcast to fp16" in line and "matmul_fp8.py" in line for line in ck.compile_log), ck.compile_log


def test_fp8_dot_with_k16_upcasts_on_hopper():
    ck = kernelc.compile(dot_kernel, {"a_ptr": P("fp8e4nv"), "b_ptr": P("fp8e4nv"), "c_ptr": P("fp32")},
                         {"M": 64, "N": 64, "K": 16}, target="sm_90a")
    assert "K=16 is not a multiple of 32" in ck.reports["dots"][0]["fp8_upcast"]
    assert any(o.startswith("HGMMA.64x64x16.F32") for o in _ops(ck))


@pytest.mark.parametrize("mnia,fadd_groups", [(None, 0), (128, 1), (64, 2), (32, 4)])
def test_fp8_max_num_imprecise_acc_adds_partial_sums_in_fp32(mnia, fadd_groups):
    sig = {"a_ptr": P("fp8e4nv"), "b_ptr": P("fp8e4nv"), "c_ptr": P("fp32")}
    ck = kernelc.compile(dot_promoted, sig, {"M": 64, "N": 64, "K": 128, "MNIA": mnia}, target="sm_90a")
    ops = _ops(ck)
    assert ops["QGMMA.64x64x32.F32.E4M3.E4M3"] == 4
    # one partial accumulator of 32 fp32 values per thread per group, added with FADD after a full wait
    assert ops["FADD"] >= 32 * fadd_groups and ops["WARPGROUP.DEPBAR.LE"] == max(1, fadd_groups)


def test_fp8_max_num_imprecise_acc_above_k_is_an_error():
    @kernelc.jit(interpret=True)
    def k(a_ptr, c_ptr):
        r = kl.arange(0, 32)
        a = kl.load(a_ptr + r[:, None] * 32 + r[None, :])
        kl.store(c_ptr + r[:, None] * 32 + r[None, :], kl.dot(a, a, max_num_imprecise_acc=64))

    with pytest.raises(CompilationError, match=r"max_num_imprecise_acc \(64\) must be <= K \(32\)"):
        k[(1,)](torch.zeros(32, 32, dtype=torch.float8_e4m3fn), torch.zeros(32, 32))


# ---------------------------------------------------------------------------------------------
# conversions, loads and stores: SASS per target
# ---------------------------------------------------------------------------------------------

CAST_PAIRS = [("fp32", "fp8e4nv"), ("fp32", "fp8e5"), ("fp8e4nv", "fp32"), ("fp8e5", "fp32"), ("fp16", "fp8e4nv"),
              ("bf16", "fp8e5"), ("fp8e4nv", "bf16"), ("fp8e5", "fp16"), ("fp8e4nv", "fp8e5"), ("fp8e5", "fp8e4nv"),
              ("fp64", "fp8e4nv"), ("fp8e5", "fp64"), ("i32", "fp8e4nv"), ("fp8e4nv", "i32")]


@pytest.mark.parametrize("target", ["sm_90a", "sm_89", "sm_80"])
@pytest.mark.parametrize("src,dst", CAST_PAIRS)
def test_fp8_conversions_assemble(target, src, dst):
    ck = kernelc.compile(convert, {"x_ptr": P(src), "y_ptr": P(dst), "n": "i32"}, {"BLOCK": 1024}, target=target)
    ops = _ops(ck)
    hw = [o for o in ops if o.startswith("F2FP") and ("E4M3" in o or "E5M2" in o)]
    assert bool(hw) == (target != "sm_80"), sorted(ops)  # sm_80: the integer fallback, no fp8 cvt


def test_fp8_loads_and_stores_move_16_values_per_access():
    sig = {"x_ptr": P("fp8e4nv"), "y_ptr": P("fp8e5"), "n": "i32"}
    ck = kernelc.compile(convert, sig, {"BLOCK": 2048}, target="sm_90a", divisibility={"n": 16})
    ops = _ops(ck)
    assert ops["LDG.E.128"] == 1 and ops["STG.E.128"] == 1, sorted(ops)
    # two values per conversion instruction: 16 values = 8 unpacks + 8 packs
    assert ops["F2FP.F16.E4M3.UNPACK_B"] == 8 and ops["F2FP.SATFINITE.E5M2.F32.PACK_AB_MERGE_C"] == 8
    acc = ck.reports["memory_accesses"]
    assert [(a["kind"], a["vector_elems"], a["vector_bytes"]) for a in acc] == [("load", 16, 16), ("store", 16, 16)]


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_fp8_arithmetic_is_computed_in_fp32(target):
    ck = kernelc.compile(fp8_arith, {"x_ptr": P("fp8e4nv"), "y_ptr": P("fp8e4nv")}, {"BLOCK": 256}, target=target)
    assert ck.n_regs > 0


def test_fp8_constants_fold_like_torch():
    from kernelc.compiler.codegen.elementwise import constant
    assert constant(1000.0, kl.float8e4nv) == str(0x7E)          # e4m3fn saturates
    assert constant(-1e6, kl.float8e5) == str(0xFC - 256)        # e5m2 keeps -Inf (i8 literal)
    assert constant(float("nan"), kl.float8e4nv) == str(0x7F)
    assert constant(0.3, kl.float8e5) == str(int(torch.tensor(0.3).to(torch.float8_e5m2).view(torch.uint8)))


# ---------------------------------------------------------------------------------------------
# language rules
# ---------------------------------------------------------------------------------------------


def test_fp8_with_integer_tiles_is_a_type_error():
    @kernelc.jit(interpret=True)
    def k(x_ptr, i_ptr, o_ptr):
        r = kl.arange(0, 4)
        kl.store(o_ptr + r, kl.load(x_ptr + r) + kl.load(i_ptr + r))

    with pytest.raises(CompilationError, match="fp8 tiles only combine with floats"):
        k[(1,)](torch.zeros(4, dtype=torch.float8_e4m3fn), torch.zeros(4, dtype=torch.int32),
                torch.zeros(4, dtype=torch.float16))


def test_fp8_rounding_is_rtne_only():
    @kernelc.jit(interpret=True)
    def k(x_ptr, o_ptr):
        r = kl.arange(0, 4)
        kl.store(o_ptr + r, kl.load(x_ptr + r).to(kl.float8e4nv, fp_downcast_rounding="rtz"))

    with pytest.raises(CompilationError, match="round to nearest even only"):
        k[(1,)](torch.zeros(4), torch.zeros(4, dtype=torch.float8_e4m3fn))


def test_fp8_promotion_follows_triton():
    seen = {}

    @kernelc.jit(interpret=True)
    def k(a_ptr, b_ptr, h_ptr, o_ptr):
        r = kl.arange(0, 4)
        a, b, h = kl.load(a_ptr + r), kl.load(b_ptr + r), kl.load(h_ptr + r)
        seen.update(same=(a + a).dtype, mixed=(a + b).dtype, half=(a + h).dtype, lit=(a * 2).dtype)
        kl.store(o_ptr + r, a * a)

    a = torch.tensor([1.0, 2.0, 3.0, 20.0]).to(torch.float8_e4m3fn)
    o = torch.zeros(4, dtype=torch.float8_e4m3fn)
    k[(1,)](a, a.to(torch.float8_e5m2), torch.zeros(4, dtype=torch.float16), o)
    assert seen == {"same": kl.float8e4nv, "mixed": kl.float16, "half": kl.float16, "lit": kl.float8e4nv}
    # computed in fp32, rounded once: 20 * 20 = 400 -> 384 (e4m3 spacing is 32 there)
    assert o.float().tolist() == [1.0, 4.0, 9.0, 384.0]


# ---------------------------------------------------------------------------------------------
# interpreter casts, bit for bit against torch
# ---------------------------------------------------------------------------------------------


def fp32_sweep() -> torch.Tensor:
    """Normal values at many scales, every fp8 value, the midpoints between neighbours and the floats just
    beside them (rounding ties), subnormals, overflow, infinities, NaNs with payloads, random bit patterns."""
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal(20000).astype(np.float32) * s for s in (1e-7, 1e-4, 1e-2, 1.0, 40.0, 500.0, 7e4)]
    parts.append(rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32))
    for dt in FP8.values():
        v = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt).float().numpy()
        v = np.unique(v[np.isfinite(v)])
        mid = ((v[1:].astype(np.float64) + v[:-1]) / 2).astype(np.float32)
        parts += [v, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))]
    parts.append(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, 448.0, 464.0, 465.0,
                           480.0, 1e4, 57344.0, 61439.0, 61440.0, 65536.0, 3e38, -3e38], np.float32))
    parts.append(np.array([0x7FC00001, 0xFF800001, 0x7FFFFFFF], np.uint32).view(np.float32))  # NaN payloads
    return torch.from_numpy(np.concatenate(parts))


def _interp_convert(x: torch.Tensor, dst_dtype) -> torch.Tensor:
    y = torch.zeros(x.shape, dtype=dst_dtype)
    k = kernelc.jit(convert.fn, interpret=True)
    k[(kernelc.cdiv(x.numel(), 8192),)](x, y, x.numel(), BLOCK=8192)
    return y


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).numpy()


def _expected_fp8(x: torch.Tensor, dt) -> np.ndarray:
    """torch's cast (>= 2.12 semantics: e4m3fn saturates); on older torch the reference algorithm."""
    if TORCH_SATURATES_E4M3 or dt == torch.float8_e5m2:
        return _bits(x.to(dt))
    from kernelc.compiler import fp8_reference as fp8
    name = "fp8e4nv" if dt == torch.float8_e4m3fn else "fp8e5"
    return fp8.from_float(x.float().numpy(), name).view(np.uint8)


@pytest.mark.parametrize("name", list(FP8))
def test_interpreter_fp32_to_fp8_matches_torch_bitwise(name):
    x = fp32_sweep()
    got, want = _bits(_interp_convert(x, FP8[name])), _expected_fp8(x, FP8[name])
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(x[i]), hex(int(want[i])), hex(int(got[i]))) for i in bad[:8]]


@pytest.mark.parametrize("name", list(FP8))
@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16])
def test_interpreter_every_16_bit_float_to_fp8_matches_torch(name, src):
    x = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(src)
    assert (_bits(_interp_convert(x, FP8[name])) == _expected_fp8(x.float(), FP8[name])).all()


def test_interpreter_fp64_to_fp8_rounds_through_fp32_as_torch_does():
    x = torch.tensor([1.0625 + 2**-40, -1.0625 - 2**-40, 2.0**-10 * 1.5000001, 1e300], dtype=torch.float64)
    for dt in FP8.values():
        got = _bits(_interp_convert(x, dt))
        assert (got == _expected_fp8(x.float(), dt)).all()
        assert (got[:3] == _bits(x[:3].to(dt))).all()  # torch's double -> fp8 also rounds to fp32 first


@pytest.mark.parametrize("name", list(FP8))
@pytest.mark.parametrize("dst", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.float8_e4m3fn,
                                 torch.float8_e5m2])
def test_interpreter_all_256_fp8_values_widen_like_torch(name, dst):
    x = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(FP8[name])
    # torch has no direct fp8 -> fp8 cast (it goes through fp32); a cast to the same type is the identity
    want = x if dst == x.dtype else torch.from_numpy(_expected_fp8(x.float(), dst)).view(dst) \
        if dst in FP8.values() else x.to(dst)
    assert (_bits(_interp_convert(x, dst)) == _bits(want)).all()  # NaN signs and payloads included


# ---------------------------------------------------------------------------------------------
# the sm_80 software conversions, run on the host (LLVM JIT)
# ---------------------------------------------------------------------------------------------


def _jit(build, argty, retty, cfunc):
    """Host-compile the LLVM IR that ``build(emitter, "%x")`` emits for the GPU; return a ctypes function."""
    import llvmlite.binding as llvm
    from kernelc.compiler.codegen.emitter import Emitter
    e = Emitter("host", __file__, 1)
    e.capability = (8, 0)
    args = ", ".join(f"{t} %{n}" for t, n in zip(argty, "xy"))
    r = build(e)
    body = "\n".join(e.body)
    ir = "\n".join(e.decls.values()) + f"\ndefine {retty} @f({args}) {{\n{body}\n  ret {retty} {r}\n}}\n"
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(ir)
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(features="+f16c,+avx")
    ee = llvm.create_mcjit_compiler(mod, tm)
    ee.finalize_object()
    f = cfunc(ee.get_function_address("f"))
    f._keep = ee
    return f


def _host_has_f16c() -> bool:
    try:
        return " f16c" in open("/proc/cpuinfo").read()
    except OSError:
        return False


@pytest.mark.parametrize("name", list(FP8))
def test_sm80_software_fp32_to_fp8_matches_torch(name):
    from kernelc.compiler.codegen import fp8 as CG
    f = _jit(lambda e: CG.from_f32_soft(e, name, "%x"), ["float"], "i8",
             ctypes.CFUNCTYPE(ctypes.c_uint8, ctypes.c_float))
    x = fp32_sweep()[::7].contiguous()
    got = np.array([f(float(v)) for v in x.numpy()], np.uint8)
    assert (got == _expected_fp8(x, FP8[name])).all()


@pytest.mark.skipif(not _host_has_f16c(), reason="the host JIT needs F16C for half arithmetic")
@pytest.mark.parametrize("name", list(FP8))
def test_sm80_software_fp8_to_fp16_matches_torch(name):
    from kernelc.compiler.codegen import fp8 as CG
    f = _jit(lambda e: e.val(f"bitcast half {CG.to_f16_soft(e, name, '%x')} to i16"), ["i8"], "i16",
             ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_uint8))
    got = np.array([f(i) for i in range(256)], np.uint16)
    want = _bits(torch.arange(256, dtype=torch.int32).to(torch.uint8).view(FP8[name]).half()).view(np.uint16)
    assert (got == want).all()


# the sm_89+ narrowing (cvt.rn.satfinite and the fix-up on the packed pair) is run on the host over numpy arrays in
# tests/compiler/test_fp8_narrowing.py


# ---------------------------------------------------------------------------------------------
# dots in the interpreter
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("an,bn", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"), ("fp8e4nv", "fp8e5")])
def test_interpreter_fp8_dot_matches_torch_fp32_matmul(an, bn):
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(32, 64, generator=g) * 3).to(FP8[an])
    b = torch.randn(64, 16, generator=g).to(FP8[bn])
    c = torch.zeros(32, 16)
    kernelc.jit(dot_kernel.fn, interpret=True)[(1,)](a, b, c, M=32, N=16, K=64)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-6, atol=1e-6)


def test_interpreter_scaled_fp8_matmul_example_with_ragged_edges(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    g = torch.Generator().manual_seed(2)
    M, N, K = 50, 70, 96
    a = torch.randn(M, K, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(N, K, generator=g).to(torch.float8_e4m3fn).t()  # column-major, as torch._scaled_mm takes it
    sa, sb = torch.tensor(0.5), torch.tensor(3.0)
    out = matmul_fp8.matmul_fp8(a, b, sa, sb, torch.float32, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32,
                                GROUP_SIZE_M=2)
    torch.testing.assert_close(out, (a.float() @ b.float()) * 1.5, rtol=1e-6, atol=1e-5)


def test_fp16_matmul_example_still_uses_hgmma():
    # fp8 support must not change the 16-bit paths
    sig = dict(a_ptr=P("fp16"), b_ptr=P("fp16"), c_ptr=P("fp16"), M="i32", N="i32", K="i32", stride_am="i32",
               stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
    ck = kernelc.compile(matmul.matmul_kernel, sig, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                                                         GROUP_SIZE_M=8), target="sm_90a",
                         divisibility={n: 16 for n in sig}, equal_to_1=("stride_ak", "stride_bn", "stride_cn"))
    assert _ops(ck)["HGMMA.64x128x16.F32"] == 8


def test_fp8_descriptor_matmul_sm90a_is_qgmma_fed_by_tma():
    """The descriptor form (maps built in the kernel): A and b_nk tiles come by TMA (no cp.async), the
    transposed b_nk tile is K-major as fp8 wgmma needs, and C leaves by a TMA store."""
    sig = dict(a_ptr=P("fp8e4nv"), b_ptr=P("fp8e4nv"), c_ptr=P("bf16"), scale_a_ptr=P("fp32"), scale_b_ptr=P("fp32"),
               M="i32", N="i32", K="i32", stride_am="i32", stride_bn="i32", stride_cm="i32")
    ck = kernelc.compile(matmul_fp8.matmul_fp8_tma_kernel, sig,
                         dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=8), target="sm_90a",
                         num_warps=8, num_stages=3, divisibility={n: 16 for n in sig})
    ops = _ops(ck)
    assert ops["QGMMA.64x256x32.F32.E4M3.E4M3"] == 128 // 32 and ops["UTMALDG.2D"] >= 2 and ops["UTMASTG.2D"] >= 1
    assert not any(o.startswith(("LDGSTS", "HGMMA", "HMMA")) for o in ops), sorted(ops)
    assert ck.global_scratch_bytes == 3 * 128 and ck.n_spills == 0
    assert ck.reports["dots"][0]["engine"] == "wgmma"


def test_interpreter_fp8_descriptor_matmul_with_ragged_edges(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    g = torch.Generator().manual_seed(3)
    M, N, K = 50, 72, 96  # rows of a, b_nk and the fp32 c are 16-byte multiples: the descriptor kernel runs
    a = torch.randn(M, K, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(N, K, generator=g).to(torch.float8_e4m3fn).t()
    assert matmul_fp8._tma_ready(a, b.t(), torch.empty(M, N))
    sa, sb = torch.tensor(0.5), torch.tensor(3.0)
    out = matmul_fp8.matmul_fp8(a, b, sa, sb, torch.float32, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32,
                                GROUP_SIZE_M=2)
    torch.testing.assert_close(out, (a.float() @ b.float()) * 1.5, rtol=1e-6, atol=1e-5)
