"""KERNELC_CONSUMER_ORDER=stores_last (backend/consumer_order.py, passes/instruction_order.py): golden LLVM IR
before -> after, the tile IR mark, and rope's PTX and registers on CPU."""
from __future__ import annotations

import re

import pytest

import kernelc
from kernelc.compiler.backend.consumer_order import ATTRIBUTE, STORES_LAST, order_by_consumers
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.passes.instruction_order import mark_instruction_order

from examples.kernels import memory_bound as K

from .test_consumer_order import LOAD, OP_MAJOR, _module, _parses
from .test_fill_occupancy_step import SCALE_SIG, scale_rows, to_tile_ir

# every store's cone first, in consumer order, then the block's trailing stores in their own order
STORES_AFTER = f"""
%la = {LOAD.format(p='%a')}
%lb = {LOAD.format(p='%b')}
%a0 = extractvalue {{ i32, i32 }} %la, 0
%b0 = extractvalue {{ i32, i32 }} %lb, 0
%s0 = add i32 %a0, %b0
%m0 = mul i32 %s0, %s0
%a1 = extractvalue {{ i32, i32 }} %la, 1
%b1 = extractvalue {{ i32, i32 }} %lb, 1
%s1 = add i32 %a1, %b1
%m1 = mul i32 %s1, %s1
%p1 = getelementptr i32, ptr addrspace(1) %o, i64 1
store i32 %m0, ptr addrspace(1) %o
store i32 %m1, ptr addrspace(1) %p1
"""


def test_golden_op_major_to_stores_last():
    before = _module(OP_MAJOR, attrs=STORES_LAST)
    after = order_by_consumers(before)
    assert after == _module(STORES_AFTER, attrs=STORES_LAST)
    _parses(before)
    _parses(after)


def test_a_store_before_a_later_load_keeps_its_place():
    """Only the stores after the block's last other side effect move: a load after a store may read what it wrote."""
    body = f"""
    %la = {LOAD.format(p='%a')}
    %a0 = extractvalue {{ i32, i32 }} %la, 0
    store i32 %a0, ptr addrspace(1) %b
    %lb = {LOAD.format(p='%b')}
    %b0 = extractvalue {{ i32, i32 }} %lb, 0
    %s = add i32 %b0, 1
    store i32 %s, ptr addrspace(1) %o
    """
    after = order_by_consumers(_module(body, attrs=STORES_LAST))
    lines = [ln.strip() for ln in after.splitlines() if ln.startswith("  ")]
    assert lines[:3] == [LOAD.format(p="%a").join(["%la = ", ""]), "%a0 = extractvalue { i32, i32 } %la, 0",
                         "store i32 %a0, ptr addrspace(1) %b"]
    assert lines[3].startswith("%lb = ")
    assert lines[4:] == ["%b0 = extractvalue { i32, i32 } %lb, 0", "%s = add i32 %b0, 1",
                         "store i32 %s, ptr addrspace(1) %o", "ret void"]
    _parses(after)


def test_the_consumers_attribute_alone_keeps_stores_by_their_cones():
    assert STORES_LAST not in _module(OP_MAJOR) and ATTRIBUTE not in _module(OP_MAJOR, attrs=STORES_LAST)
    assert order_by_consumers(_module(OP_MAJOR)).count("store i32") == 2
    assert order_by_consumers(_module(OP_MAJOR)) != order_by_consumers(_module(OP_MAJOR, attrs=STORES_LAST))


def test_the_tile_pass_marks_stores_last():
    fn, _ = to_tile_ir(scale_rows, SCALE_SIG, dict(BLOCK=1024))
    before = print_function(fn)
    mark_instruction_order(fn, "stores_last")
    after = print_function(fn)
    assert after.splitlines()[1:] == before.splitlines()[1:]
    assert after.splitlines()[0] == (
        "kernel scale_rows(%x_ptr: *fp32, %y_ptr: *fp32, %n: i32) attributes "
        "{instruction_order='consumers_stores_last'} {  // constexprs: BLOCK=1024")


ROPE_SIG = dict(q_ptr="*bf16", q_row_stride="i32", cos_ptr="*fp32", sin_ptr="*fp32", cos_row_stride="i32",
                seq_len="i32", n_heads="i32", head_dim="i32")


def _rope(monkeypatch, mode):
    for k in ("KERNELC_ASSEMBLER", "KERNELC_NVJITLINK_LAUNCH_BOUND", "KERNELC_OCCUPANCY_STEP",
              "KERNELC_FILL_OCCUPANCY_STEP", "KERNELC_FILL_STEP_DOWN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("KERNELC_CONSUMER_ORDER", mode)
    monkeypatch.setenv("KERNELC_FILL_POLICY", "step")   # the unbounded (filled) build, not the launch bound's
    return kernelc.compile(K.rope_kernel, ROPE_SIG, dict(BLOCK_H=32, BLOCK_D=64), target="sm_90a",
                           divisibility={k: 16 for k in ROPE_SIG})


def test_rope_stores_after_its_arithmetic_and_fewer_registers(monkeypatch):
    """rope (32 heads x 64, 4 warps): in consumer order ptxas issues all eight 16-byte loads at once and takes 56
    registers (9 blocks per SM); with the stores last it keeps Triton's schedule, 48 registers and 10 blocks."""
    base = _rope(monkeypatch, "elementwise")
    last = _rope(monkeypatch, "stores_last")
    assert "instruction_order='consumers_stores_last'" in last.asm["tir"].splitlines()[0]
    ptx = last.asm["ptx"].splitlines()
    stores = [i for i, ln in enumerate(ptx) if "st.global" in ln]
    arith = [i for i, ln in enumerate(ptx) if re.search(r"\b(fma|mul|cvt)\.", ln)]
    assert len(stores) == 4 and max(arith) < min(stores)
    base_ptx = base.asm["ptx"].splitlines()
    assert min(i for i, ln in enumerate(base_ptx) if "st.global" in ln) < \
        max(i for i, ln in enumerate(base_ptx) if re.search(r"\b(fma|mul)\.", ln))
    assert base.n_regs > last.n_regs
    assert last.n_regs <= 48
