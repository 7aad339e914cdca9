"""Block pointers on Hopper: on sm_90a a block-pointer access that checks every dimension, with a
contiguous last dimension, becomes tensor-descriptor ops (language/blocks.py ``_as_descriptor``), whose
``make_tensor_descriptor`` is hoisted out of the loop and merged (passes/hoist_descriptors.py), so the
copies go by TMA through a map built at the kernel's entry. Anything else keeps the block pointer's
own masked-load lowering; other targets are unchanged."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.passes.hoist_descriptors import hoist_descriptors
from tests import block_kernels as KS

BP_SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
              stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
UNIT = ("stride_ak", "stride_bn", "stride_cn")
DIV = {n: 16 for n in BP_SIG if n not in UNIT}


def _ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


def _bp_matmul(target="sm_90a", equal_to_1=UNIT, divisibility=DIV):
    return kernelc.compile(KS.bp_matmul, BP_SIG, dict(BM=128, BN=128, BK=64), target=target, num_warps=4,
                           num_stages=3, divisibility=divisibility, equal_to_1=equal_to_1)


def test_block_pointer_matmul_copies_by_tma_on_sm_90a():
    ck = _bp_matmul()
    ops = _ops(ck)
    assert "UTMALDG.2D" in ops and "UTMASTG.2D" in ops and any(o.startswith("HGMMA.64x128x16") for o in ops)
    assert not any(o.startswith("LDGSTS") for o in ops)  # no cp.async left
    assert ck.global_scratch_bytes == 3 * 128  # a, b (made once, before the loop) and c
    tir = ck.asm["tir_initial"]
    # made at the top level, before the K loop, one per block pointer
    assert tir.count("make_tensor_descriptor") == 3
    assert tir.index("make_tensor_descriptor") < tir.index("scf.for")
    assert ck.n_spills == 0


@pytest.mark.parametrize("why,kw", [
    ("sm_80 has no TMA", dict(target="sm_80")),
    ("the last stride is a runtime value", dict(equal_to_1=())),
])
def test_block_pointer_matmul_keeps_cp_async_elsewhere(why, kw):
    ck = _bp_matmul(**kw)
    assert "descriptor" not in ck.asm["tir_initial"], why
    ops = _ops(ck)
    assert not any(o.startswith("UTMA") for o in ops) and ck.global_scratch_bytes == 0
    assert any(o.startswith(("HMMA", "HGMMA")) for o in ops)


def test_unaligned_block_pointer_takes_the_generic_descriptor_lowering():
    ck = _bp_matmul(divisibility={})  # nothing known 16-byte aligned: no map, masked loads as before
    assert ck.global_scratch_bytes == 0 and "UTMALDG" not in " ".join(_ops(ck))
    assert any(o.startswith("HGMMA") for o in _ops(ck))


def test_kernelc_tma_0_keeps_block_pointers(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA", "0")
    assert "descriptor" not in _bp_matmul().asm["tir_initial"]


@pytest.mark.parametrize("check,converted", [((0, 1), True), ((0,), False), ((), False)])
def test_only_accesses_checking_every_dim_become_descriptors(check, converted, monkeypatch):
    # the frontend's conversion alone (auto-TMA would take the unchecked access's plain load too)
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", off_m="i32", off_n="i32")
    ck = kernelc.compile(KS.bp_load_store, sig, dict(BM=16, BN=32, CHECK=check, PAD="nan"), target="sm_90a",
                         divisibility={n: 16 for n in sig})
    tir = ck.asm["tir_initial"]
    assert ("descriptor_load" in tir) == converted
    # the y block pointer's unchecked store stays a plain store either way
    assert "descriptor_store" not in tir


@kernelc.jit
def _two_loads_in_a_loop(x_ptr, out_ptr, M, N, BM: kl.constexpr, BN: kl.constexpr):
    p = kl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for i in range(0, 4):
        acc += kl.load(p, boundary_check=(0, 1))
        acc += kl.load(kl.advance(p, (0, BN)), boundary_check=(0, 1))
        p = kl.advance(p, (BM, 0))
    kl.store(out_ptr + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :], acc)


def test_hoist_moves_descriptors_out_of_loops_and_merges_copies():
    sig = dict(x_ptr="*fp32", out_ptr="*fp32", M="i32", N="i32")
    fn, _ = generate_ir(_two_loads_in_a_loop, sig, dict(BM=16, BN=32), {"x_ptr": 16, "out_ptr": 16, "N": 16},
                        (), arch="sm_90a")
    makes = lambda: [op for op in fn.walk() if op.name == "make_tensor_descriptor"]  # noqa: E731
    assert len(makes()) == 2 and all(op.block is not fn.body for op in makes())  # one per load, in the loop
    hoist_descriptors(fn)
    assert len(makes()) == 1 and makes()[0].block is fn.body
    loads = [op for op in fn.walk() if op.name == "descriptor_load"]
    assert len(loads) == 2 and all(op.operands[0] is makes()[0].results[0] for op in loads)
    ck = kernelc.compile(_two_loads_in_a_loop, sig, dict(BM=16, BN=32), target="sm_90a",
                         divisibility={"x_ptr": 16, "out_ptr": 16, "N": 16})
    assert ck.global_scratch_bytes == 128 and "UTMALDG.2D" in _ops(ck)


@pytest.mark.parametrize("kernel,sig,cx", [
    (KS.bp_ifelse, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", flag="i32"), dict(BM=16, BN=16)),
    (KS.bp_while_sum, dict(x_ptr="*fp32", out_ptr="*fp32", N="i32"), dict(BN=32)),
    (KS.bp_nested_sum, dict(x_ptr="*fp32", out_ptr="*fp32", M="i32", N="i32"), dict(BM=16, BN=32)),
    (KS.bp_store_checked, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_ym="i32", off_m="i32",
                               off_n="i32"), dict(BM=16, BN=16)),
], ids=lambda x: getattr(x, "__name__", ""))
def test_block_pointer_kernels_assemble_with_tma(kernel, sig, cx):
    ck = kernelc.compile(kernel, sig, cx, target="sm_90a", divisibility={n: 16 for n in sig})
    assert ck.asm["cubin"] and "EXIT" in _ops(ck)
    assert "descriptor_" in ck.asm["tir_initial"]
