"""KERNELC_STORE_SMEM_DISCOUNT_SCOPE (passes/coalesce.py): golden IR of a row kernel that loads 16-bit values and
stores fp32 results from their layout (a norm backward's partial dW), with the discount applied to MMA layouts
only (default: the store keeps the load's layout, 32 bytes a lane in two 16-byte halves) and to every layout
(``all``: the store converts to 16-byte lanes through shared memory, as Triton's store does)."""
import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.ir.verifier import verify
from kernelc.compiler.passes.coalesce import coalesce, count_conversions
from tests.compiler.filecheck import filecheck


@kernelc.jit
def row_partial_kernel(x_ptr, out_ptr, n_cols, BLOCK: kl.constexpr):
    cols = kl.arange(0, BLOCK)
    mask = cols < n_cols
    x = kl.load(x_ptr + kl.program_id(0) * n_cols + cols, mask=mask, other=0).to(kl.float32)
    kl.store(out_ptr + kl.program_id(0) * n_cols + cols, x * x, mask=mask)


SIG = dict(x_ptr="*bf16", out_ptr="*fp32", n_cols="i32")
DIV = {k: 16 for k in SIG}


def _coalesced(scope):
    fn, _ = to_tile_ir(row_partial_kernel, SIG, dict(BLOCK=4096), divisibility=DIV)
    before = print_function(fn, show_loc=False)
    notes = []
    fn = coalesce_with_scope(fn, scope, notes)
    verify(fn)
    return before, print_function(fn, show_loc=False), fn, notes


def coalesce_with_scope(fn, scope, notes):
    from kernelc.compiler.passes.coalesce import coalesce_stores, make_conversions_explicit
    coalesce_stores(fn, 8, 9, "sm_90a", notes, discount_scope=scope)
    return make_conversions_explicit(fn, 8, 9, "sm_90a")


def test_fp32_store_from_a_bf16_layout_keeps_it_by_default():
    before, after, fn, notes = _coalesced("mma")
    filecheck(after, """
        CHECK: [[X:%\\d+]] = load {{%\\d+}}, [[MASK:%\\d+]], {{%\\d+}} : <4096xbf16>
        CHECK-NOT: convert_layout
        CHECK: store
        CHECK-NEXT: return
    """)
    assert count_conversions(fn) == 0 and not notes


def test_fp32_store_from_a_bf16_layout_converts_to_16_byte_lanes_with_scope_all():
    before, after, fn, notes = _coalesced("all")
    filecheck(before, """
        CHECK-NOT: convert_layout
        CHECK: store
    """)
    filecheck(after, """
        CHECK: [[X:%\\d+]] = load {{%\\d+}}, [[MASK:%\\d+]], {{%\\d+}} : <4096xbf16>
        CHECK-NOT: convert_layout
        CHECK: [[Y:%\\d+]] = convert_layout {{%\\d+}} {layout=#blocked<spt=[4], tpw=[32], wpc=[8], order=[0]>, smem={{.*}}} : <4096xfp32>
        CHECK-NEXT: store {{%\\d+}}, [[Y]], [[MASK]]
        CHECK-NEXT: return
    """)
    assert count_conversions(fn) == 1 and "fewer sectors per warp" in notes[0]


def test_scope_is_a_compile_option(monkeypatch):
    from kernelc import options
    assert options.compile_options().key()["store_smem_discount_scope"] == "mma"
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT_SCOPE", "all")
    assert options.compile_options().key()["store_smem_discount_scope"] == "all"
    ck = kernelc.compile(row_partial_kernel, SIG, dict(BLOCK=4096), target="sm_90a", num_warps=8, divisibility=DIV)
    assert ck.asm["tir"].count("convert_layout") == 1 and "STG.E.128" in ck.asm["sass"]
