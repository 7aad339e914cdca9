"""Code generation checked on CPU, down to SASS: vector widths, tensor-core instructions, the FMA
fallback, and the line table mapping instructions back to kernel lines."""
import os
import re

import pytest

import kernelc
import kernelc.language as kl
from examples.kernels import attention, matmul, softmax, vector_add

P = lambda t: "*" + t  # noqa: E731
MM_SIG = dict(a_ptr=P("fp16"), b_ptr=P("fp16"), c_ptr=P("fp16"), M="i32", N="i32", K="i32", stride_am="i32",
              stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
MM_CX = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)
UNIT_STRIDES = ("stride_ak", "stride_bn", "stride_cn")


def _ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


def _line_of(path, text):
    for i, line in enumerate(open(path), 1):
        if text in line:
            return i
    raise AssertionError(text)


def _lines_of(ck, opcode_prefix):
    """Kernel lines the source map attributes to instructions starting with ``opcode_prefix``."""
    out = set()
    for ins in ck.artifacts.instructions:
        if ins.opcode.startswith(opcode_prefix):
            loc = ck.source_map.pc_to_line(ins.pc)
            if loc:
                out.add((os.path.basename(loc[0]), loc[1]))
    return out


def test_vector_add_uses_128_bit_accesses_and_lines():
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32", "n_elements": "i32"}
    ck = kernelc.compile(vector_add.add_kernel, sig, {"BLOCK_SIZE": 1024}, target="sm_90a",
                         divisibility={"n_elements": 16})
    ops = _ops(ck)
    assert ops.count("LDG.E.128") == 4 and ops.count("STG.E.128") == 2, ops
    src = vector_add.__file__
    want = {("vector_add.py", _line_of(src, "x = tl.load(x_ptr")), ("vector_add.py", _line_of(src, "y = tl.load(y_ptr"))}
    assert _lines_of(ck, "LDG") == want
    assert _lines_of(ck, "STG") == {("vector_add.py", _line_of(src, "tl.store(output_ptr"))}
    # without divisibility of n the mask varies per element: no 128-bit vectors (as in Triton)
    ck2 = kernelc.compile(vector_add.add_kernel, sig, {"BLOCK_SIZE": 1024}, target="sm_90a")
    assert "LDG.E.128" not in _ops(ck2)


@pytest.mark.parametrize("target,mma", [("sm_80", "HMMA.16816.F32"), ("sm_90a", "HGMMA.64x128x16.F32")])
def test_fp16_matmul_uses_tensor_cores_on_the_dot_line(target, mma):
    ck = kernelc.compile(matmul.matmul_kernel, MM_SIG, MM_CX, target=target, num_warps=4, num_stages=3,
                         divisibility={n: 16 for n in MM_SIG}, equal_to_1=UNIT_STRIDES)
    ops = _ops(ck)
    assert any(o.startswith(mma) for o in ops), sorted(set(ops))
    assert "LDGSTS.E.BYPASS.128" in ops           # cp.async pipeline, 16-byte copies
    dot_line = ("matmul.py", _line_of(matmul.__file__, "accumulator = tl.dot(a, b, accumulator)"))
    assert _lines_of(ck, mma.split(".")[0]) == {dot_line}
    assert ck.reports["dots"][0]["engine"] == ("wgmma" if target == "sm_90a" else "mma.sync")
    assert ck.n_spills == 0


def test_bf16_matmul_hmma_bf16():
    sig = dict(MM_SIG, a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16")
    ck = kernelc.compile(matmul.matmul_kernel, sig, MM_CX, target="sm_80", num_warps=4,
                         divisibility={n: 16 for n in sig}, equal_to_1=UNIT_STRIDES)
    assert "HMMA.16816.F32.BF16" in _ops(ck)


@kernelc.jit
def fp32_dot(a_ptr, b_ptr, c_ptr, PREC: kl.constexpr):
    r = kl.arange(0, 32)
    a = kl.load(a_ptr + r[:, None] * 32 + r[None, :])
    b = kl.load(b_ptr + r[:, None] * 32 + r[None, :])
    kl.store(c_ptr + r[:, None] * 32 + r[None, :], kl.dot(a, b, input_precision=PREC))


def test_fp32_ieee_dot_has_no_tensor_core_instruction_and_says_why():
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}
    ieee = kernelc.compile(fp32_dot, sig, {"PREC": "ieee"}, target="sm_90a")
    ops = _ops(ieee)
    assert not any(o.startswith(("HMMA", "HGMMA", "IMMA")) for o in ops)
    assert "FFMA" in ops
    assert any("runs on FMA, not tensor cores" in m and "ieee" in m for m in ieee.compile_log)
    tf32 = kernelc.compile(fp32_dot, sig, {"PREC": "tf32"}, target="sm_90a")
    assert any(o.startswith("HMMA.1688.F32.TF32") for o in _ops(tf32))


def test_softmax_reductions_use_shuffles_and_fast_exp():
    sig = dict(output_ptr=P("fp32"), input_ptr=P("fp32"), input_row_stride="i32", output_row_stride="i32",
               n_rows="i32", n_cols="i32")
    ck = kernelc.compile(softmax.softmax_kernel, sig, dict(BLOCK_SIZE=1024, num_stages=2), target="sm_90a",
                         num_warps=4, divisibility={n: 16 for n in sig})
    ops = _ops(ck)
    assert "SHFL.BFLY" in ops and "MUFU.EX2" in ops and "LDG.E.128" in ops


def test_attention_feeds_p_from_registers():
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), Out=P("fp16"), sm_scale="fp32", H="i32", N_CTX="i32",
               **{f"stride_{a}{b}": "i32" for a in "qkvo" for b in ("z", "h", "m" if a in "qo" else "n", "k")})
    ck = kernelc.compile(attention.attn_fwd_kernel, sig, dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, CAUSAL=False),
                         target="sm_90a", num_warps=4, num_stages=2, divisibility={n: 16 for n in sig},
                         equal_to_1=("stride_qk", "stride_kk", "stride_vk", "stride_ok"))
    ops = _ops(ck)
    assert sum(o.startswith("HGMMA") for o in ops) >= 2 and ck.n_spills == 0
    assert [d["engine"] for d in ck.reports["dots"]] == ["wgmma", "wgmma"]


def test_too_much_shared_memory_is_a_clear_error(monkeypatch):
    """... raised before LLVM and ptxas run: the dynamic shared memory is known after lowering."""
    import kernelc.compiler.backend as backend

    def no_backend(*a, **k):
        raise AssertionError("compile_llir ran for a kernel that cannot fit")
    monkeypatch.setattr(backend, "compile_llir", no_backend)
    with pytest.raises(kernelc.OutOfResources, match=r"needs \d+ bytes of shared memory but the device allows 232448"):
        kernelc.compile(matmul.matmul_kernel, MM_SIG, dict(MM_CX, BLOCK_SIZE_M=256, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128),
                        target="sm_90a", num_warps=8, num_stages=4, divisibility={n: 16 for n in MM_SIG},
                        equal_to_1=UNIT_STRIDES)


def test_compile_listener_and_stage_breakdown():
    seen = []
    from kernelc.compiler.compiler import add_compile_listener, remove_compile_listener
    cb = lambda name, stage, secs: seen.append((name, stage))  # noqa: E731
    add_compile_listener(cb)
    try:
        ck = kernelc.compile(vector_add.add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32",
                                                     "n_elements": "i32"}, {"BLOCK_SIZE": 256}, target="sm_80")
    finally:
        remove_compile_listener(cb)
    stages = {s for _, s in seen}
    assert {"frontend", "tile_passes", "lower_to_llvm", "llvm_opt", "ptxas"} <= stages
    assert set(ck.asm.keys()) >= {"tir", "llir", "ptx", "cubin", "sass"}


def test_compile_accepts_the_autotuner():
    ck = kernelc.compile(matmul.matmul_autotuned, MM_SIG, MM_CX, target="sm_90a", num_warps=4,
                         divisibility={n: 16 for n in MM_SIG}, equal_to_1=UNIT_STRIDES)
    assert ck.name == "matmul_kernel"
