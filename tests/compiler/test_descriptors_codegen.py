"""Block pointers and tensor descriptors compiled on CPU: the kernels assemble (nvJitLink) for sm_80
and sm_90a, the fp16 matmuls reach tensor cores with 128-bit cp.async copies, aligned descriptor
copies vectorise, the lowering is a plain pass (with the TMA hook), and mistakes point at their line.

These are the *generic* lowering's tests: KERNELC_TMA=0 keeps Hopper TMA (codegen/tma.py, tested on
its own) from taking the descriptor ops on sm_90a; one test compiles with the default lowering too."""
import re

import pytest

import kernelc
from kernelc import CompilationError
from kernelc.compiler.abi import descriptor_fields, flat_divisibility, machine_params, pack_expressions
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.passes.lower_descriptors import lower_descriptors
from kernelc.compiler.passes.simplify import simplify
from kernelc.language.dtypes import parse_type
from tests import block_kernels as KS

TARGETS = ["sm_80", "sm_90a"]
MM = dict(BM=128, BN=128, BK=64)
BP_SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
              stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
BP_UNIT = ("stride_ak", "stride_bn", "stride_cn")
DESC_SIG = dict(a_desc="tensordesc<fp16[128, 64]>", b_desc="tensordesc<fp16[64, 128]>",
                c_desc="tensordesc<fp16[128, 128]>")
DEV_SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32")
MMA = {"sm_80": "HMMA.16816.F32", "sm_90a": "HGMMA.64x128x16.F32"}


@pytest.fixture(autouse=True)
def _generic_lowering(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA", "0")


def _ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


def _compile_matmul(which, target, aligned=True):
    if which == "block_ptr":
        return kernelc.compile(KS.bp_matmul, BP_SIG, MM, target=target, num_warps=4, num_stages=3,
                               divisibility={n: 16 for n in BP_SIG} if aligned else {}, equal_to_1=BP_UNIT)
    if which == "host_desc":
        return kernelc.compile(KS.desc_matmul, DESC_SIG, MM, target=target, num_warps=4, num_stages=3,
                               divisibility={n: 16 for n in DESC_SIG} if aligned else {})
    return kernelc.compile(KS.dev_desc_matmul, DEV_SIG, MM, target=target, num_warps=4, num_stages=3,
                           divisibility={n: 16 for n in DEV_SIG} if aligned else {})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("which", ["block_ptr", "host_desc", "device_desc"])
def test_fp16_matmuls_use_tensor_cores_and_128_bit_copies(which, target):
    ck = _compile_matmul(which, target)
    ops = _ops(ck)
    assert any(o.startswith(MMA[target]) for o in ops), sorted(set(ops))
    assert "LDGSTS.E.BYPASS.128" in ops  # the cp.async pipeline, 16-byte copies
    assert ck.reports["dots"][0]["engine"] == ("wgmma" if target == "sm_90a" else "mma.sync")
    assert ck.n_spills == 0
    marker = "BP_DOT" if which == "block_ptr" else ("DESC_DOT" if which == "host_desc" else None)
    if marker:  # the tensor-core instructions map back to the dot's line
        lines = {ck.source_map.pc_to_line(i.pc)[1] for i in ck.artifacts.instructions
                 if i.opcode.startswith(MMA[target].split(".")[0]) and ck.source_map.pc_to_line(i.pc)}
        assert lines == {KS.line_of(marker)}


def test_unaligned_block_pointer_matmul_still_compiles_without_wide_copies():
    ck = _compile_matmul("block_ptr", "sm_80", aligned=False)
    ops = _ops(ck)
    assert any(o.startswith("HMMA") for o in ops) and "LDGSTS.E.BYPASS.128" not in ops


def _copy_kernels():
    d = lambda t, s: f"tensordesc<{t}{s}>"  # noqa: E731
    return [
        (KS.desc_copy, dict(in_desc=d("fp16", [64, 64]), out_desc=d("fp16", [64, 64])), dict(BM=64, BN=64)),
        (KS.desc_transpose, dict(x_desc=d("fp32", [32, 64]), y_desc=d("fp32", [64, 32])), dict(BM=32, BN=64)),
        (KS.desc_copy3, dict(x_desc=d("fp32", [2, 8, 32]), y_desc=d("fp32", [2, 8, 32])), dict(B0=2, B1=8, B2=32)),
        (KS.dev_desc_pad, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", off_m="i32", off_n="i32"),
         dict(BM=16, BN=16, PAD="nan")),
        (KS.bp_load_store, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", off_m="i32",
                                off_n="i32"), dict(BM=16, BN=16, CHECK=(0, 1), PAD="nan")),
        (KS.bp_store_checked, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_ym="i32", off_m="i32",
                                   off_n="i32"), dict(BM=16, BN=16)),
        (KS.bp_ifelse, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", flag="i32"), dict(BM=16, BN=16)),
        (KS.bp_while_sum, dict(x_ptr="*fp32", out_ptr="*fp32", N="i32"), dict(BN=32)),
        (KS.bp_nested_sum, dict(x_ptr="*fp32", out_ptr="*fp32", M="i32", N="i32"), dict(BM=16, BN=32)),
        (KS.bp_from_device_function, dict(x_ptr="*fp32", out_ptr="*fp32", flag="i32"), dict(BN=16)),
        (KS.desc_attrs, dict(x_desc=d("fp16", [8, 16]), out_ptr="*i64"), {}),
    ]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel,sig,cx", _copy_kernels(), ids=[k.__name__ for k, _, _ in _copy_kernels()])
def test_kernels_assemble(kernel, sig, cx, target):
    ck = kernelc.compile(kernel, sig, cx, target=target, divisibility={n: 16 for n in sig})
    assert ck.asm["cubin"] and "EXIT" in _ops(ck)
    assert not re.search(r"descriptor", ck.asm["tir"])  # lowered to plain loads and stores


@pytest.mark.parametrize("kernel,sig,cx", _copy_kernels()[:3], ids=[k.__name__ for k, _, _ in _copy_kernels()[:3]])
def test_descriptor_kernels_assemble_with_the_default_lowering(kernel, sig, cx, monkeypatch):
    monkeypatch.delenv("KERNELC_TMA", raising=False)  # sm_90a: TMA may take aligned descriptors
    ck = kernelc.compile(kernel, sig, cx, target="sm_90a", divisibility={n: 16 for n in sig})
    assert ck.asm["cubin"] and "EXIT" in _ops(ck)


def test_aligned_descriptor_copy_is_128_bit_and_unaligned_is_not():
    kernel, sig, cx = _copy_kernels()[0]
    aligned = _ops(kernelc.compile(kernel, sig, cx, target="sm_90a", divisibility={"in_desc": 16, "out_desc": 16}))
    assert "LDG.E.128" in aligned and "STG.E.128" in aligned
    # shapes not known divisible by 16: the mask varies per element, no vectors (as for plain pointers)
    plain = _ops(kernelc.compile(kernel, sig, cx, target="sm_90a"))
    assert "LDG.E.128" not in plain and "STG.E.128" not in plain


def test_signature_flattens_descriptor_arguments():
    kernel, sig, cx = _copy_kernels()[0]
    ck = kernelc.compile(kernel, sig, cx, target="sm_80", divisibility={"in_desc.shape1": 16})
    assert ck.signature == sig  # one entry per parameter, as given
    assert ck.arg_names == ["in_desc.base", "in_desc.shape0", "in_desc.shape1", "in_desc.stride0",
                            "out_desc.base", "out_desc.shape0", "out_desc.shape1", "out_desc.stride0"]
    assert [str(t) for t in ck.arg_types] == ["*fp16", "i32", "i32", "i64"] * 2
    head = ck.asm["tir_initial"].splitlines()[0]
    assert "%in_desc.base: *fp16 {div=16}" in head and "%in_desc.shape1: i32 {div=16}" in head
    assert "%in_desc.shape0: i32," in head  # not claimed divisible
    assert "make_tensor_descriptor" in ck.asm["tir_initial"] and "host_arg='in_desc'" in ck.asm["tir_initial"]
    assert [m for m, _, _ in machine_params(ck.signature, ck.target.arch)] == ck.arg_names


def test_abi_flattening_helpers():
    ty = parse_type("tensordesc<bf16[8, 16, 32], padding=nan>")
    assert str(ty) == "tensordesc<bf16[8, 16, 32], padding=nan>" and ty.padding == "nan"
    assert [f.name("d") for f in descriptor_fields(ty)] == ["d.base", "d.shape0", "d.shape1", "d.shape2",
                                                           "d.stride0", "d.stride1"]
    assert pack_expressions(["x", "d"], ["x", "d.base", "d.shape0", "d.stride0"]) == \
        ["v0", "v1.base.data_ptr()", "v1.shape[0]", "v1.strides[0]"]
    sig = {"d": parse_type("tensordesc<fp16[64, 64]>"), "n": parse_type("i32")}
    assert flat_divisibility(sig, {"d": 16, "n": 16}) == {"n": 16, "d.base": 16, "d.shape0": 16, "d.shape1": 16,
                                                          "d.stride0": 16}
    assert flat_divisibility(sig, {"d.stride0": 16}, base_default=16) == {"d.stride0": 16, "d.base": 16}


def _ir(kernel, sig, cx):
    fn, _ = generate_ir(kernel, sig, cx, {n: 16 for n in sig})
    return fn


def test_lower_descriptors_rewrites_unless_the_tma_hook_claims():
    kernel, sig, cx = _copy_kernels()[0]
    fn = _ir(kernel, sig, cx)
    names = [op.name for op in fn.walk()]
    assert names.count("descriptor_load") == 1 and names.count("descriptor_store") == 1
    claimed = simplify(lower_descriptors(_ir(kernel, sig, cx), "sm_90a", claim=lambda op, arch: arch == "sm_90a"))
    names = [op.name for op in claimed.walk()]
    assert names.count("descriptor_load") == 1 and names.count("make_tensor_descriptor") == 2
    load = next(op for op in claimed.walk() if op.name == "descriptor_load")
    assert load.attrs["block_shape"] == (64, 64) and load.operands[0].op.attrs["host_arg"] == "in_desc"
    generic = simplify(lower_descriptors(_ir(kernel, sig, cx), "sm_80"))
    names = [op.name for op in generic.walk()]
    assert not any(n.startswith(("descriptor", "make_tensor")) for n in names)
    assert names.count("load") == 1 and names.count("store") == 1


def test_block_pointer_loop_carries_only_the_offsets_it_advances():
    fn = simplify(_ir(KS.bp_matmul, BP_SIG, MM))
    loop = next(op for op in fn.walk() if op.name == "scf.for")
    # the accumulator, A's column offset, B's row offset: base, shape, strides and the fixed offsets stay outside
    assert [str(r.type) for r in loop.results] == ["<128x128xfp32>", "i32", "i32"]


@pytest.mark.parametrize("kernel,marker,text,message", KS.ERROR_CASES, ids=[c[1] for c in KS.ERROR_CASES])
def test_mistakes_point_at_the_kernel_line(kernel, marker, text, message):
    with pytest.raises(CompilationError) as ei:
        kernelc.compile(kernel, dict(x_ptr="*fp32", M="i32", N="i32"), {}, target="sm_80")
    e = ei.value
    assert (e.file, e.line, e.col) == (KS.__file__, KS.line_of(marker), KS.col_of(marker, text))
    assert message in str(e) and f"block_kernels.py:{e.line}:{e.col + 1}" in str(e)
    assert "\n" + " " * (4 + e.col) + "^" in str(e)


@kernelc.jit
def desc_reassigned_in_loop(x_ptr, M, N):
    d = kernelc.language.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [16, 16])
    for i in range(3):  # REASSIGNED
        d = kernelc.language.make_tensor_descriptor(x_ptr + i, [M, N], [N, 1], [16, 16])
        d.store([0, 0], d.load([0, 0]))


@kernelc.jit
def block_ptr_kinds_differ(x_ptr, M, N, flag):
    p = kernelc.language.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (16, 16), (1, 0))
    if flag > 0:  # KINDS
        p = kernelc.language.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (16, 32), (1, 0))
    kernelc.language.store(p, 1.0)


@pytest.mark.parametrize("kernel,text", [
    (desc_reassigned_in_loop, "the tensor descriptor 'd' is reassigned inside the loop"),
    (block_ptr_kinds_differ, "'p' is a block pointer (block_pointer<fp32[16, 32]>) in the then-branch but a block pointer "
                               "(block_pointer<fp32[16, 16]>) in the else-branch"),
])
def test_control_flow_mistakes(kernel, text):
    sig = dict(x_ptr="*fp32", M="i32", N="i32", **({"flag": "i32"} if "flag" in kernel.arg_names else {}))
    with pytest.raises(CompilationError, match=re.escape(text)):
        kernelc.compile(kernel, sig, {}, target="sm_80")
