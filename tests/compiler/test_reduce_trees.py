"""``mark_reduce_trees`` (passes/reduce_trees.py): exactly associative reductions combine a thread's registers as a
few chains and a tree (golden IR), and fp8 attention's row max stops being a 33-deep FMNMX chain on sm_90a;
the fp16 pointer forward that a full tree made spill does not."""
import re

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck
from tests.compiler.test_fp8_attention import _fa3_fp8


@kernelc.jit
def reductions_kernel(x_ptr, i_ptr, out_ptr, iout_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r[:, None] * BLOCK + r[None, :])
    i = kl.load(i_ptr + r[:, None] * BLOCK + r[None, :])
    kl.store(out_ptr + r, kl.max(x, 1) + kl.min(x, 1) + kl.sum(x, 1))  # float sum: keeps its order
    kl.store(iout_ptr + r, kl.sum(i, 1) + kl.max(i, 1))


def _ir_around(monkeypatch, knob):
    monkeypatch.setenv("KERNELC_REDUCE_TREE", knob)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_reduce_trees")
    fn, _ = generate_ir(_base_function(reductions_kernel), dict(x_ptr="*fp32", i_ptr="*i32", out_ptr="*fp32",
                                                                iout_ptr="*i32"), dict(BLOCK=64), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_exactly_associative_reductions_are_marked_golden(monkeypatch):
    before, after = _ir_around(monkeypatch, "1")
    assert "tree" not in before
    filecheck(after, """
        CHECK: reduce {{%\\d+}} {axis=1, kind='max', tree=4} : <64xfp32>
        CHECK: reduce {{%\\d+}} {axis=1, kind='min', tree=4} : <64xfp32>
        CHECK: reduce {{%\\d+}} {axis=1, kind='add'} : <64xfp32>
        CHECK: reduce {{%\\d+}} {axis=1, kind='add', tree=4} : <64xi32>
        CHECK: reduce {{%\\d+}} {axis=1, kind='max', tree=4} : <64xi32>
    """)
    assert after.replace(", tree=4", "") == before


def test_knob_off_leaves_the_ir(monkeypatch):
    before, after = _ir_around(monkeypatch, "0")
    assert before == after and "tree" not in after


def _longest_fmnmx_chain(ops_lines):
    depth, best = {}, 0
    for b in ops_lines:
        m = re.search(r"FMNMX\s+(R\d+),\s*(R\d+),\s*(R\d+)", b)
        if m:
            d, a, c = m.groups()
            depth[d] = 1 + max(depth.get(a, 0), depth.get(c, 0))
            best = max(best, depth[d])
        elif m := re.search(r"^\s*/\*[0-9a-f]+\*/\s*(?:@\S+\s+)?\S+\s+(R\d+)", b):
            depth.pop(m.group(1), None)  # overwritten by something else
    return best


def _key_loop_lines(sass):
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = lines[labels[m.group(1)]:i + 1]
            if sum("WARPGROUP.ARRIVE" in b for b in body) == 2:
                return body
    raise AssertionError("no key loop")


def test_fp8_attention_row_max_is_a_tree(monkeypatch):
    """2026-11-27 (H100 Nsight Compute of the fp8 FA3-order forward at D=128): the row max's 64 FMNMX a thread ran
    as two chains 33 deep, 21% of the key loop's stall samples. In 4 chains and a tree: the same 68 FMNMX, at
    most 12 deep (8 + 2 in the thread, 2 shuffles, the running max)."""
    monkeypatch.setenv("KERNELC_EXP2_POLY", "0")
    monkeypatch.setenv("KERNELC_REDUCE_TREE", "0")
    chain = _key_loop_lines(_fa3_fp8(128, False).asm["sass"])
    monkeypatch.setenv("KERNELC_REDUCE_TREE", "1")
    ck = _fa3_fp8(128, False)
    tree = _key_loop_lines(ck.asm["sass"])
    assert ck.n_spills == 0
    assert sum("FMNMX" in b for b in tree) == sum("FMNMX" in b for b in chain) == 68
    assert _longest_fmnmx_chain(chain) >= 30
    assert _longest_fmnmx_chain(tree) <= 12


def test_the_forward_that_a_full_tree_spilled_does_not(monkeypatch):
    from tests.compiler.test_attention_kernels import compile_fwd
    monkeypatch.setenv("KERNELC_REDUCE_TREE", "1")   # off by default since the final call of 2026-11-27
    ck = compile_fwd(128, True)
    assert ck.n_spills == 0 and "tree=4" in ck.asm["tir"]
