"""``enable_fp_fusion`` (Triton's default: on): float a*b+c may contract into fma.

Checked on CPU down to PTX and SASS: the IR mark (passes/fp_contract.py), the PTX it lowers to, the
option's three spellings (compile argument, launch/warmup keyword, KERNELC_DEFAULT_FP_FUSION), and
the FFMA count of a library layer-norm backward against Triton 3.6's on the same source
(docs/triton-tutorials.md records how that number was taken)."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc import options
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir import print_function
from kernelc.compiler.passes.fp_contract import mark_fp_contraction


@kernelc.jit
def axpb_sum(X, W, B, Y, S, N, BLOCK: kl.constexpr):
    cols = kl.arange(0, BLOCK)
    mask = cols < N
    x = kl.load(X + cols, mask=mask, other=0.0)
    w = kl.load(W + cols, mask=mask, other=0.0)
    b = kl.load(B + cols, mask=mask, other=0.0)
    kl.store(Y + cols, x * w + b, mask=mask)
    kl.store(S, kl.sum(x * w, axis=0))


SIG = dict(X="*fp32", W="*fp32", B="*fp32", Y="*fp32", S="*fp32", N="i32")


def _ptx_ops(ptx):
    return re.findall(r"^\s*(?:@%p\d+\s+)?((?:mul|add|fma)(?:\.rn)?\.f32)\b", ptx, re.M)


def _sass_count(ck, opcode):
    return len(re.findall(rf"\b{opcode}\b", ck.asm["sass"]))


def test_pass_marks_float_arithmetic_in_regions_too():
    fn, _ = generate_ir(_base_function(axpb_sum), SIG, dict(BLOCK=256), {}, (), None, arch="sm_90a", num_warps=4)
    text = print_function(mark_fp_contraction(fn), show_loc=False)
    arith = re.findall(r"= (fadd|fmul)\b.*", text)
    assert len(arith) >= 3 and all("contract=True" in line for line in re.findall(r"= f(?:add|mul)\b.*", text))
    # the reduction's combine region is marked as well, and clearing takes every mark away
    red = next(op for op in fn.walk() if op.name == "reduce")
    assert red.regions[0].ops[0].name == "fadd" and red.regions[0].ops[0].attrs.get("contract") is True
    assert "contract" not in print_function(mark_fp_contraction(fn, False), show_loc=False)


def test_fusion_emits_fma_and_unfused_stays_rounded():
    fused = kernelc.compile(axpb_sum, SIG, dict(BLOCK=256), target="sm_90a", num_warps=4)
    plain = kernelc.compile(axpb_sum, SIG, dict(BLOCK=256), target="sm_90a", num_warps=4, enable_fp_fusion=False)
    f, p = _ptx_ops(fused.asm["ptx"]), _ptx_ops(plain.asm["ptx"])
    # x*w + b: two elements per thread -> two fma.rn; nothing rounded on its own that could have fused
    assert f.count("fma.rn.f32") >= 2 and "mul.rn.f32" not in f and "add.rn.f32" not in f, f
    assert "fma.rn.f32" not in p and "mul.rn.f32" in p and "add.rn.f32" in p, p
    assert _sass_count(fused, "FFMA") >= 2 and _sass_count(plain, "FFMA") == 0
    assert "contract=True" in fused.asm["tir"] and "contract" not in plain.asm["tir"]


def test_launch_option_and_environment_default(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path))
    torch = pytest.importorskip("torch")
    args = [torch.zeros(256) for _ in range(4)] + [torch.zeros(1), 200]
    interp = kernelc.jit(axpb_sum.fn, interpret=True)   # warmup compiles offline (no GPU needed)
    on = interp.warmup(*args, BLOCK=256, num_warps=4)
    off = interp.warmup(*args, BLOCK=256, num_warps=4, enable_fp_fusion=False)
    assert "fma.rn.f32" in on.asm["ptx"] and "fma.rn.f32" not in off.asm["ptx"]
    # the environment's default, and the option in the cache key (both spellings of "off" share one entry)
    monkeypatch.setenv("KERNELC_DEFAULT_FP_FUSION", "0")
    assert options.compile_options().enable_fp_fusion is False
    env_off = kernelc.compile(axpb_sum, SIG, dict(BLOCK=256), target="sm_90a", num_warps=4)
    assert "fma.rn.f32" not in env_off.asm["ptx"]
    assert "fma.rn.f32" in interp.warmup(*args, BLOCK=256, num_warps=4, enable_fp_fusion=True).asm["ptx"]
    from kernelc.runtime.cache import cache_key
    fn = _base_function(axpb_sum)
    k = lambda fusion: cache_key(fn, SIG, dict(BLOCK=256), {}, (), 4, 3, "sm_90a", fusion)  # noqa: E731
    assert k(None) == k(False) != k(True)
    monkeypatch.setenv("KERNELC_DEFAULT_FP_FUSION", "maybe")
    with pytest.raises(options.OptionError, match="KERNELC_DEFAULT_FP_FUSION"):
        options.compile_options()


@kernelc.jit
def neg_exp(X, Y, N, BLOCK: kl.constexpr):
    cols = kl.arange(0, BLOCK)
    x = kl.load(X + cols, mask=cols < N, other=0.0)
    kl.store(Y + cols, kl.exp(-(x * 3.0)) * x + x, mask=cols < N)


def test_negation_folded_into_a_multiply_keeps_contraction():
    # LLVM folds -(3x) into one multiply; the fold keeps only the flags both ops carry
    ck = kernelc.compile(neg_exp, dict(X="*fp32", Y="*fp32", N="i32"), dict(BLOCK=256), target="sm_90a", num_warps=4)
    ops = _ptx_ops(ck.asm["ptx"])
    assert "mul.rn.f32" not in ops and "add.rn.f32" not in ops and "fma.rn.f32" in ops, ops
