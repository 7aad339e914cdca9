"""Consumer order (backend/consumer_order.py, passes/instruction_order.py): golden LLVM IR before -> after, the
tile IR mark, and what it buys in SASS on CPU."""
from __future__ import annotations

import textwrap

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.backend.consumer_order import ATTRIBUTE, order_by_consumers
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.passes.instruction_order import broadcast_loads, is_elementwise_chain, mark_instruction_order

from examples.kernels import memory_bound as K

from .test_fill_occupancy_step import DOT_SIG, GEGLU_BWD_SIG, SCALE_SIG, scale_rows, tile_dot, to_tile_ir

LOAD = 'call {{ i32, i32 }} asm sideeffect "ld.global.v2.b32 {{$0, $1}}, [$2];", "=r,=r,l"(ptr addrspace(1) {p})'


def _module(body: str, attrs: str = ATTRIBUTE) -> str:
    return textwrap.dedent("""\
        define ptx_kernel void @k(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %o) #0 {
        entry:
        BODY
          ret void
        }

        declare float @llvm.nvvm.ex2.approx.f(float) #1
        declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32) #2

        attributes #0 = { ATTRS }
        attributes #1 = { nounwind memory(none) }
        attributes #2 = { convergent nounwind memory(inaccessiblemem: readwrite) }
        """).replace("BODY", textwrap.indent(textwrap.dedent(body).strip("\n"), "  ")).replace("ATTRS", attrs)


# op-major, as code generation lowers a tile op over a thread's two elements before the next op
OP_MAJOR = f"""
%la = {LOAD.format(p='%a')}
%lb = {LOAD.format(p='%b')}
%a0 = extractvalue {{ i32, i32 }} %la, 0
%a1 = extractvalue {{ i32, i32 }} %la, 1
%b0 = extractvalue {{ i32, i32 }} %lb, 0
%b1 = extractvalue {{ i32, i32 }} %lb, 1
%s0 = add i32 %a0, %b0
%s1 = add i32 %a1, %b1
%m0 = mul i32 %s0, %s0
%m1 = mul i32 %s1, %s1
%p1 = getelementptr i32, ptr addrspace(1) %o, i64 1
store i32 %m0, ptr addrspace(1) %o
store i32 %m1, ptr addrspace(1) %p1
"""

# each store's cone just before it, depth first; the loads keep their places
CONSUMER = f"""
%la = {LOAD.format(p='%a')}
%lb = {LOAD.format(p='%b')}
%a0 = extractvalue {{ i32, i32 }} %la, 0
%b0 = extractvalue {{ i32, i32 }} %lb, 0
%s0 = add i32 %a0, %b0
%m0 = mul i32 %s0, %s0
store i32 %m0, ptr addrspace(1) %o
%a1 = extractvalue {{ i32, i32 }} %la, 1
%b1 = extractvalue {{ i32, i32 }} %lb, 1
%s1 = add i32 %a1, %b1
%m1 = mul i32 %s1, %s1
%p1 = getelementptr i32, ptr addrspace(1) %o, i64 1
store i32 %m1, ptr addrspace(1) %p1
"""


def _parses(text: str) -> None:
    from kernelc.compiler.backend import llvm as kl
    kl.ensure_initialized()
    llvm = kl._llvm()
    llvm.parse_assembly(text, context=llvm.create_context()).verify()


def test_golden_op_major_to_consumer_order():
    before = _module(OP_MAJOR)
    after = order_by_consumers(before)
    assert after == _module(CONSUMER)
    _parses(before)
    _parses(after)


def test_a_function_without_the_attribute_is_left_alone():
    before = _module(OP_MAJOR, attrs="nounwind")
    assert order_by_consumers(before) == before


def test_calls_move_only_when_their_callee_touches_no_memory():
    body = """
    %x = bitcast i32 0 to float
    %e = call float @llvm.nvvm.ex2.approx.f(float %x)
    %s = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 0, i32 1, i32 31)
    %c = fadd float %e, %e
    store float %c, ptr addrspace(1) %o
    """
    after = order_by_consumers(_module(body))
    lines = [ln.strip() for ln in after.splitlines()]
    # the shuffle (inaccessible memory) keeps its place ahead of the store; the pure ex2 sinks to its use
    assert lines.index("%s = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 0, i32 1, i32 31)") < \
        lines.index("%x = bitcast i32 0 to float") < lines.index("%e = call float @llvm.nvvm.ex2.approx.f(float %x)")
    _parses(after)


def test_phis_terminators_and_numbered_values():
    text = textwrap.dedent(f"""\
        define ptx_kernel void @k(ptr addrspace(1) %a, i32 %n) #0 {{
        entry:
          %0 = add i32 %n, 1
          %1 = mul i32 %n, 3
          store i32 %1, ptr addrspace(1) %a
          br label %2

        2:                                                ; preds = %2, %entry
          %i = phi i32 [ 0, %entry ], [ %3, %2 ]
          %3 = add i32 %i, 1
          %4 = mul i32 %i, 7
          store i32 %4, ptr addrspace(1) %a
          %5 = icmp slt i32 %3, %0
          br i1 %5, label %2, label %6

        6:                                                ; preds = %2
          ret void
        }}

        attributes #0 = {{ {ATTRIBUTE} }}
        """)
    after = order_by_consumers(text)
    _parses(text)
    _parses(after)
    body = after.split("\n_2:")[1].split("\n_6:")[0].strip().splitlines()[1:]   # after the label line
    assert body[0].strip().startswith("%i = phi")
    assert body[-1].strip().startswith("br i1 %_5, label %_2, label %_6")
    # the store's cone first, then what only the branch reads
    assert [ln.split(" = ")[0].strip() for ln in body[1:-1]] == \
        ["%_4", "store i32 %_4, ptr addrspace(1) %a", "%_3", "%_5"]


@pytest.mark.parametrize("mode,marked", [("elementwise", True), ("off", False)])
def test_the_tile_pass_marks_elementwise_chains(mode, marked):
    fn, _ = to_tile_ir(scale_rows, SCALE_SIG, dict(BLOCK=1024))
    before = print_function(fn)
    mark_instruction_order(fn, mode)
    assert (fn.attrs.get("instruction_order") == "consumers") == marked
    after = print_function(fn)
    # golden: only the function's attribute line changes
    assert after.splitlines()[1:] == before.splitlines()[1:]
    assert after.splitlines()[0] == (
        "kernel scale_rows(%x_ptr: *fp32, %y_ptr: *fp32, %n: i32) attributes {instruction_order='consumers'} {  "
        "// constexprs: BLOCK=1024" if marked else before.splitlines()[0])


@pytest.mark.parametrize("kernel,sig,cx", [
    (tile_dot, DOT_SIG, dict(BM=64, BN=64, BK=32)),                       # a dot
    (K.softmax_fwd_kernel, dict(y_ptr="*fp16", x_ptr="*fp16", stride="i32", n_cols="i32"), dict(BLOCK_SIZE=1024)),
])
def test_kernels_with_dots_or_reductions_keep_op_order(kernel, sig, cx):
    fn, _ = to_tile_ir(kernel, sig, cx)
    assert not is_elementwise_chain(fn)
    mark_instruction_order(fn, "elementwise")
    assert "instruction_order" not in fn.attrs


def test_a_layout_conversion_keeps_op_order():
    """The coalescing pass's conversion (a transposed store) is visible to the pass, which runs after it."""
    ck = kernelc.compile(K.transpose_kernel, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32",
                                                  stride_ym="i32"), dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a",
                         divisibility={k: 16 for k in ("x_ptr", "y_ptr", "M", "N", "stride_xm", "stride_ym")})
    assert "convert_layout" in ck.asm["tir"]
    assert "instruction_order" not in ck.asm["tir"].splitlines()[0]
    assert ATTRIBUTE not in ck.asm["llir"]


def test_the_compile_pipeline_writes_it_into_the_llvm_function(monkeypatch):
    ck = kernelc.compile(scale_rows, SCALE_SIG, dict(BLOCK=1024), target="sm_90a")
    assert "instruction_order='consumers'" in ck.asm["tir"].splitlines()[0]
    assert ATTRIBUTE in ck.asm["llir"]
    monkeypatch.setenv("KERNELC_CONSUMER_ORDER", "off")
    ck = kernelc.compile(scale_rows, SCALE_SIG, dict(BLOCK=1024), target="sm_90a")
    assert "instruction_order" not in ck.asm["tir"].splitlines()[0]
    assert ATTRIBUTE not in ck.asm["llir"]


def _geglu_bwd_loads_in_flight():
    from cubintools import inspect_cubin, instructions
    from cubintools.sass import mean_loads_in_flight
    ck = kernelc.compile(K.geglu_bwd_kernel, GEGLU_BWD_SIG, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in GEGLU_BWD_SIG})
    cub = ck.asm["cubin"]
    f = inspect_cubin(cub).kernel(None)
    return mean_loads_in_flight([i for i in instructions(cub) if i.function == f.name]), f.n_regs


def test_geglu_bwd_keeps_more_loads_in_flight(monkeypatch):
    for k in ("KERNELC_ASSEMBLER", "KERNELC_NVJITLINK_LAUNCH_BOUND", "KERNELC_FILL_POLICY", "KERNELC_FILL_OCCUPANCY_STEP"):
        monkeypatch.delenv(k, raising=False)   # the defaults
    """Measured on CPU (ptxas via nvJitLink, sm_90a, 2026-11-28): 4.29 loads in flight a thread at 77 registers in
    consumer order, 2.70 at 104 in op order; Triton 3.6's PTX of the same source: 4.28 at 77."""
    lif, regs = _geglu_bwd_loads_in_flight()
    assert lif >= 4.0 and regs <= 96
    monkeypatch.setenv("KERNELC_CONSUMER_ORDER", "off")
    lif_off, _ = _geglu_bwd_loads_in_flight()
    assert lif_off < 3.0


@pytest.mark.parametrize("kernel,regs_at_most,blocks_at_least", [
    ("geglu_fwd_kernel", 64, 2), ("swiglu_fwd_kernel", 64, 2), ("swiglu_bwd_kernel", 64, 2), ("geglu_bwd_kernel", 96, 1)])
def test_elementwise_rows_in_consumer_order_keep_their_blocks(kernel, regs_at_most, blocks_at_least, monkeypatch):
    """The defaults' builds of the gated activations (16384-wide rows, 16 warps). On an H100 (call H10, 2026-11-28)
    they ran at 1.010, 1.012, 0.992 and 1.015 of Triton with 51, 64, 64 and 76 registers (op order: 1.007, 1.002,
    0.996, 0.985); more registers than that would cost a block per SM, which the fill policy measured as a loss
    (geglu fwd at 93 registers and one block: 0.87x)."""
    from cubintools.target import ARCH_LIMITS
    from kernelc.compiler.backend import ptxas as P
    for k in ("KERNELC_ASSEMBLER", "KERNELC_NVJITLINK_LAUNCH_BOUND", "KERNELC_FILL_POLICY", "KERNELC_FILL_OCCUPANCY_STEP",
              "KERNELC_CONSUMER_ORDER"):
        monkeypatch.delenv(k, raising=False)
    ck = kernelc.compile(getattr(K, kernel), GEGLU_BWD_SIG if "bwd" in kernel else
                         dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32"),
                         dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in ("a_ptr", "b_ptr", "c_ptr", "dc_ptr", "da_ptr", "db_ptr",
                                                       "stride", "n_cols")})
    assert "instruction_order='consumers'" in ck.asm["tir"].splitlines()[0]
    assert ck.n_spills == 0 and ck.n_regs <= regs_at_most
    assert P.blocks_per_sm(ck.n_regs, 512, ck.shared, ARCH_LIMITS[90]) >= blocks_at_least


ROPE_SIG = dict(q_ptr="*bf16", q_row_stride="i32", cos_ptr="*fp32", sin_ptr="*fp32", cos_row_stride="i32",
                seq_len="i32", n_heads="i32", head_dim="i32")
ROPE_CX = dict(BLOCK_H=32, BLOCK_D=64)


@kernelc.jit
def add_bias_rows(x_ptr, b_ptr, y_ptr, BM: kl.constexpr, BN: kl.constexpr, BROADCAST: kl.constexpr):
    rows = kl.arange(0, BM)[:, None] * BN
    cols = kl.arange(0, BN)[None, :]
    x = kl.load(x_ptr + rows + cols)
    if BROADCAST:   # one bias row for every row of the tile
        b = kl.load(b_ptr + kl.arange(0, BN))[None, :]
    else:           # a bias element for every element
        b = kl.load(b_ptr + rows + cols)
    kl.store(y_ptr + rows + cols, x + b)


@pytest.mark.parametrize("broadcast", [False, True])
def test_a_broadcast_load_keeps_op_order(broadcast):
    """Golden: a bias row broadcast against the tile leaves the kernel unmarked (every store's cone needs all of a
    thread's elements of the row); the same kernel with an element-wise bias is marked. Only the header changes."""
    fn, _ = to_tile_ir(add_bias_rows, dict(x_ptr="*fp32", b_ptr="*fp32", y_ptr="*fp32"),
                       dict(BM=32, BN=64, BROADCAST=broadcast))
    assert is_elementwise_chain(fn)
    assert len(broadcast_loads(fn)) == (1 if broadcast else 0)
    before = print_function(fn)
    mark_instruction_order(fn, "elementwise")
    after = print_function(fn)
    assert after.splitlines()[1:] == before.splitlines()[1:]
    assert ("instruction_order='consumers'" in after.splitlines()[0]) == (not broadcast)


def test_rope_keeps_op_order_and_gets_tritons_schedule(monkeypatch):
    """rope's cos/sin rows are broadcast over 32 heads: op order. On CPU (nvJitLink, sm_90a, the defaults) its build
    is then Triton's shape: 48 registers, 5 of its 8 loads before the first use, the 4 stores together at the end
    (consumer order: 56 registers, all 8 loads first, one store 25 instructions before the others;
    docs/performance.md, "rope: what in kernelc's PTX costs 3%")."""
    from cubintools import inspect_cubin, instructions
    for k in ("KERNELC_ASSEMBLER", "KERNELC_NVJITLINK_LAUNCH_BOUND", "KERNELC_FILL_POLICY", "KERNELC_FILL_OCCUPANCY_STEP",
              "KERNELC_CONSUMER_ORDER", "KERNELC_UNIFORM_MASKS", "KERNELC_FILL_KEEP_BLOCKS"):
        monkeypatch.delenv(k, raising=False)
    fn, _ = to_tile_ir(K.rope_kernel, ROPE_SIG, ROPE_CX, divisibility={k: 16 for k in ROPE_SIG})
    assert len(broadcast_loads(fn)) == 2
    ck = kernelc.compile(K.rope_kernel, ROPE_SIG, ROPE_CX, target="sm_90a", num_warps=4,
                         divisibility={k: 16 for k in ROPE_SIG})
    assert "instruction_order" not in ck.asm["tir"].splitlines()[0]
    cub = ck.asm["cubin"]
    f = inspect_cubin(cub).kernel(None)
    ins = [i for i in instructions(cub) if i.function == f.name]
    ops = [i.opcode.split(".")[0] for i in ins]
    stores = [n for n, o in enumerate(ops) if o == "STG"]
    assert f.n_regs <= 48 and ops.count("LDG") == 8 and len(stores) == 4
    first_use = next(n for n, i in enumerate(ins) if i.opcode.startswith(("SHF", "IMAD.U32", "PRMT", "FMUL"))
                     and n > ops.index("LDG"))   # the first unpack of a loaded bf16 pair or product
    assert ops[:first_use].count("LDG") == 5
    assert stores[-1] - stores[0] <= 8   # together at the end
