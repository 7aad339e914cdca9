"""The tile-IR pipeline as data (kernelc/compiler/pass_manager.py): named passes in order, IR dumps
after each (compile option and KERNELC_DUMP_IR), per-pass timings, verification naming the pass."""
import pytest

import kernelc
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir.core import Op
from kernelc.compiler.ir.verifier import VerificationError
from kernelc.compiler.pass_manager import PassContext, TilePass, pass_names, run_passes
from tests.compiler.filecheck import filecheck
from tests.compiler.transpose_kernels import transpose_kernel

T_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32", stride_ym="i32")
T_DIV = {k: 16 for k in T_SIG}
CX = dict(BLOCK_M=64, BLOCK_N=64)


def test_the_pipeline_is_a_list_of_named_passes():
    ctx = PassContext("sm_90a", (9, 0), 4)
    assert pass_names(C.FRONTEND_PASSES, ctx) == ["pointer_tiles_to_descriptors", "hoist_descriptors",
                                                  "lower_descriptors"]
    assert pass_names(C.TILE_PASSES, ctx) == ["simplify", "upcast_fp8_dots", "pipeline_loads", "simplify",
                                              "coalesce"]
    ctx.pipeline_loads = False
    assert pass_names(C.TILE_PASSES, ctx) == ["simplify", "upcast_fp8_dots", "coalesce"]


def test_compile_dumps_the_ir_after_every_pass_and_times_each():
    dumps = []
    ck = kernelc.compile(transpose_kernel, T_SIG, CX, target="sm_90a", divisibility=T_DIV,
                         dump_ir=lambda name, text: dumps.append((name, text)))
    assert [n for n, _ in dumps] == ["pointer_tiles_to_descriptors", "hoist_descriptors", "lower_descriptors",
                                     "simplify", "upcast_fp8_dots", "pipeline_loads", "simplify", "coalesce"]
    assert all("convert_layout" not in t for _, t in dumps[:-1])
    filecheck(dumps[-1][1], """
        CHECK: kernel transpose_kernel(
        CHECK: = convert_layout
        CHECK-NEXT: store
    """)
    assert dumps[-1][1].split("\n", 1)[1] == ck.asm["tir"].split("\n", 1)[1]
    assert {"pass.simplify", "pass.coalesce", "pass.lower_descriptors"} <= set(ck.timings)


def test_kernelc_dump_ir_env_prints_to_stderr(monkeypatch, capfd):
    monkeypatch.setenv("KERNELC_DUMP_IR", "1")
    fn, _ = to_tile_ir(transpose_kernel, T_SIG, CX, divisibility=T_DIV)
    run_passes(fn, C.TILE_PASSES, PassContext("sm_90a", (9, 0), 4), dump=C.dump_ir_requested())
    err = capfd.readouterr().err
    assert err.count("// -----// IR after ") == 5 and "// -----// IR after coalesce //----- //" in err


def test_a_pass_that_breaks_the_ir_is_named():
    def corrupt(fn, ctx):
        ld = next(o for o in fn.walk() if o.name == "load")
        ld.attrs.pop("cache")  # a required attribute
        return fn
    fn, _ = to_tile_ir(transpose_kernel, T_SIG, CX, divisibility=T_DIV)
    with pytest.raises(VerificationError, match=r"^after pass corrupt_loads: "):
        run_passes(fn, [TilePass("simplify", lambda f, c: f), TilePass("corrupt_loads", corrupt)],
                   PassContext("sm_90a", (9, 0), 4))
