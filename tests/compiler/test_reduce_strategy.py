"""``mark_cross_warp_reductions`` (passes/reduce_strategy.py) and the two ways codegen/reduce.py combines the warps'
partials of a reduction to one value: golden IR of the tag, and the SASS of each way for a 16-warp row softmax."""
import collections

import pytest

import kernelc
from examples.kernels import softmax as S
from kernelc.compiler.passes.reduce_strategy import mark_cross_warp_reductions
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes

SIG = dict(output_ptr="*fp32", input_ptr="*fp32", input_row_stride="i32", output_row_stride="i32", n_rows="i32",
           n_cols="i32")


def test_the_tag_follows_the_knob(monkeypatch):
    monkeypatch.setenv("KERNELC_BLOCK_REDUCE", "gather")
    ir, fn, _ = _passes(S.softmax_kernel, SIG, dict(BLOCK_SIZE=4096, num_stages=2), num_warps=16,
                        div={k: 16 for k in SIG})
    filecheck(ir["mark_cross_warp_reductions"], """
        CHECK: reduce {{.*}}cross_warp='gather'
        CHECK: reduce {{.*}}cross_warp='gather'
    """)
    assert "cross_warp" not in ir["mark_register_budget"]
    mark_cross_warp_reductions(fn, "butterfly")
    assert not any("cross_warp" in op.attrs for op in fn.walk())


def _sass_ops(monkeypatch, mode):
    monkeypatch.setenv("KERNELC_BLOCK_REDUCE", mode)
    ck = kernelc.compile(S.softmax_kernel, SIG, dict(BLOCK_SIZE=4096, num_stages=2), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in SIG})
    from cubintools.sass import instructions
    return collections.Counter(i.opcode.split(".")[0] for i in instructions(ck.asm["cubin"]))


@pytest.mark.parametrize("mode", ["butterfly", "gather"])
def test_each_way_of_combining_sixteen_warps(monkeypatch, mode):
    c = _sass_ops(monkeypatch, mode)
    # two reductions (max, sum) of a 16-warp row; each has 5 shuffles within a warp
    if mode == "butterfly":   # + 4 across warps, one LDS each
        assert c["SHFL"] == 2 * (5 + 4) and c["LDS"] == 2
    else:                     # every thread reads the 16 partials (vectorised by ptxas), no shuffle across warps
        assert c["SHFL"] == 2 * 5 and c["LDS"] >= 2 * 4
