"""Register prefetch of plain loads in ``kl.range(..., num_stages>=2)`` loops (passes/pipeline_loads.py):
which loads are prefetched, the IR and SASS shape of the result, and IR-level semantics checked by
evaluating the tile IR before and after the pass on numpy memory that faults on any out-of-bounds
lane (so an unguarded prefetch past the last iteration, or before a zero-trip loop, fails)."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir import verify
from kernelc.compiler.passes.pipeline_loads import pipeline_loads
from kernelc.compiler.passes.simplify import simplify
from kernelc.language.dtypes import scalar_of
from kernelc.runtime.interpreter import numerics as N
from kernelc.runtime.interpreter.builder import InterpreterBuilder
from kernelc.runtime.interpreter.memory import Memory
from examples.kernels import layernorm, matmul, softmax

P = lambda t: "*" + t  # noqa: E731
SM_SIG = dict(output_ptr=P("fp32"), input_ptr=P("fp32"), input_row_stride="i32", output_row_stride="i32",
              n_rows="i32", n_cols="i32")
SM_DIV = {n: 16 for n in SM_SIG}


# -- kernels -----------------------------------------------------------------------------------------

@kernelc.jit
def rows_copy(x_ptr, y_ptr, stride, n_rows, n_cols, BLOCK: kl.constexpr, STAGES: kl.constexpr):
    for r in kl.range(kl.program_id(0), n_rows, kl.num_programs(0), num_stages=STAGES):
        offs = kl.arange(0, BLOCK)
        x = kl.load(x_ptr + r * stride + offs, mask=offs < n_cols, other=0.0)
        kl.store(y_ptr + r * stride + offs, x * 2.0 + 1.0, mask=offs < n_cols)


@kernelc.jit
def rows_plain_range(x_ptr, y_ptr, stride, n_rows, n_cols, BLOCK: kl.constexpr):
    for r in range(kl.program_id(0), n_rows, kl.num_programs(0)):
        offs = kl.arange(0, BLOCK)
        x = kl.load(x_ptr + r * stride + offs, mask=offs < n_cols, other=0.0)
        kl.store(y_ptr + r * stride + offs, x * 2.0 + 1.0, mask=offs < n_cols)


@kernelc.jit
def rows_inplace(x_ptr, stride, n_rows, n_cols, BLOCK: kl.constexpr):
    for r in kl.range(kl.program_id(0), n_rows, kl.num_programs(0), num_stages=2):
        offs = kl.arange(0, BLOCK)
        x = kl.load(x_ptr + r * stride + offs, mask=offs < n_cols)
        kl.store(x_ptr + r * stride + offs, x * 2.0, mask=offs < n_cols)


@kernelc.jit
def rows_store_via_select(x_ptr, y_ptr, stride, n_rows, n_cols, FLIP: kl.constexpr, BLOCK: kl.constexpr):
    # the store pointer may be x_ptr (a select of two arguments): must count as aliasing the load
    out = kl.where(n_cols > 0, y_ptr, x_ptr) if FLIP else y_ptr
    for r in kl.range(kl.program_id(0), n_rows, kl.num_programs(0), num_stages=2):
        offs = kl.arange(0, BLOCK)
        x = kl.load(x_ptr + r * stride + offs, mask=offs < n_cols)
        kl.store(out + r * stride + offs, x, mask=offs < n_cols)


@kernelc.jit
def rows_any_step(x_ptr, y_ptr, start, stop, step, n_cols, BLOCK: kl.constexpr):
    # runtime step of unknown sign; a scalar load and a tile load per row
    for r in kl.range(start, stop, step, num_stages=2):
        offs = kl.arange(0, BLOCK)
        s = kl.load(x_ptr + r * BLOCK)
        x = kl.load(x_ptr + r * BLOCK + offs, mask=offs < n_cols, other=1.0)
        kl.store(y_ptr + r * BLOCK + offs, x * s, mask=offs < n_cols)


@kernelc.jit
def rows_reverse(x_ptr, y_ptr, n_rows, BLOCK: kl.constexpr):
    for r in kl.range(n_rows - 1, -1, -1, num_stages=2):
        offs = kl.arange(0, BLOCK)
        x = kl.load(x_ptr + r * BLOCK + offs)
        kl.store(y_ptr + r * BLOCK + offs, kl.cumsum(x, 0))


@kernelc.jit
def blocked_sum(x_ptr, out_ptr, n, BLOCK: kl.constexpr):
    # the address comes from a carried pointer advanced by a loop-invariant amount
    acc = kl.zeros([BLOCK], dtype=kl.float32)
    ptrs = x_ptr + kl.arange(0, BLOCK)
    for off in kl.range(0, n, BLOCK, num_stages=2):
        x = kl.load(ptrs, mask=off + kl.arange(0, BLOCK) < n, other=0.0)
        acc += x
        ptrs += BLOCK
    kl.store(out_ptr + kl.arange(0, BLOCK), acc)


@kernelc.jit
def mm_bias(a_ptr, b_ptr, bias_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    offs_m = kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    offs_k = kl.arange(0, BK)
    acc = kl.zeros([BM, BN], dtype=kl.float32)
    for k in kl.range(0, K, BK, num_stages=3):
        a = kl.load(a_ptr + offs_m[:, None] * K + (k + offs_k)[None, :])
        b = kl.load(b_ptr + (k + offs_k)[:, None] * BN + offs_n[None, :])
        acc = kl.dot(a, b, acc)
        acc += kl.load(bias_ptr + (k // BK) * BN + offs_n)[None, :]
    kl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


ROWS_SIG = dict(x_ptr=P("fp32"), y_ptr=P("fp32"), stride="i32", n_rows="i32", n_cols="i32")
MMB_SIG = dict(a_ptr=P("fp16"), b_ptr=P("fp16"), bias_ptr=P("fp32"), c_ptr=P("fp32"), K="i32")
MMB_CX = dict(BM=64, BN=64, BK=32)


# -- helpers -----------------------------------------------------------------------------------------

def _ir(kernel, sig, cx, div=None, transform=True, num_warps=4):
    fn, _ = to_tile_ir(kernel, sig, cx, divisibility=div)
    notes = []
    if transform:
        fn = simplify(pipeline_loads(fn, num_warps, notes))
        verify(fn)
    return fn, notes


def _loop(fn):
    return next(o for o in fn.walk() if o.name == "scf.for")


def _defining(v):
    return v.op


def _sass_ops(ck):
    """(opcode with predicate, or label) per SASS line, in order."""
    out = []
    for line in ck.asm["sass"].splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", line)
        if m:
            out.append(m.group(1))
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(@!?U?P\w+\s+)?([A-Z][\w.]*)(.*)", line)
        if m:
            tgt = re.search(r"\((\.L_x_\d+)\)", m.group(3))
            out.append(m.group(2) + (" " + tgt.group(1) if tgt else ""))
    return out


def _loop_split(ops):
    """(instructions before the loop head, instructions of the loop) from the first backward branch."""
    for i, o in enumerate(ops):
        if o.startswith("BRA .L_x_"):
            label = o.split()[1]
            if label in ops[:i]:
                h = ops.index(label)
                return ops[:h], ops[h + 1:i + 1]
    raise AssertionError("no loop in the SASS")


# -- a tile-IR evaluator (the interpreter's op rules, the compiled loop semantics) -------------------

def _dummy():
    pass


def run_ir(fn, args, grid):
    """Run tile IR ``fn`` for programs 0..grid-1; numpy array arguments are updated in place."""
    mem = Memory()
    vals = []
    for a, v in zip(fn.arguments, args):
        if isinstance(v, np.ndarray):
            vals.append(np.array(mem.map(v, a.name, scalar_of(a.type).element_ty), np.int64))
        else:
            vals.append(np.array(v, N.np_dtype(a.type)))
    b = InterpreterBuilder(_dummy, (grid, 1, 1), mem, fn.name)
    with np.errstate(all="ignore"):
        for pid in range(grid):
            b.pid = (pid, 0, 0)
            _run_block(b, fn.body, {x.id: v for x, v in zip(fn.body.args, vals)})
    mem.write_back()


def _run_block(b, block, env):
    for op in block.ops:
        if op.name in ("scf.yield", "return", "reduce.return"):
            return [env[o.id] for o in op.operands]
        if op.name == "scf.for":
            body = op.regions[0]
            lb, ub, step = (int(env[o.id]) for o in op.operands[:3])
            cur = [env[o.id] for o in op.operands[3:]]
            iv = lb
            while (iv < ub) if step > 0 else (iv > ub):
                inner = dict(env)
                inner[body.args[0].id] = np.array(iv, N.np_dtype(op.operands[0].type))
                inner.update({a.id: v for a, v in zip(body.args[1:], cur)})
                cur = _run_block(b, body, inner)
                iv += step
            res = cur
        elif op.name == "scf.if":
            res = _run_block(b, op.regions[0 if bool(env[op.operands[0].id]) else 1], dict(env))
        elif op.name in ("reduce", "scan"):
            x = env[op.operands[0].id]
            if op.name == "reduce":
                res = [h for h, _ in b._reduce_fast([x], op.attrs["axis"], op.attrs["kind"])]
            else:
                res = [h for h, _ in b._scan_fast([x], op.attrs["axis"], op.attrs["kind"])]
        else:
            ty = op.results[0].type if op.results else None
            res = [b.create(op.name, [env[o.id] for o in op.operands], ty, **op.attrs)]
        for r, v in zip(op.results, res):
            env[r.id] = v
    return []


def _same_results(kernel, sig, cx, make_args, grid, div=None):
    """The pass changes nothing observable: outputs identical, no out-of-bounds lane."""
    outs = []
    for transform in (False, True):
        fn, _ = _ir(kernel, sig, cx, div, transform)
        args = make_args()
        run_ir(fn, args, grid)
        outs.append([a for a in args if isinstance(a, np.ndarray)])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
    return outs[1]


# -- (a) softmax: the row load is hoisted and prefetched ----------------------------------------------

def test_softmax_ir_prefetches_the_row_load():
    fn, notes = _ir(softmax.softmax_kernel, SM_SIG, dict(BLOCK_SIZE=1024, num_stages=2), SM_DIV)
    loop = _loop(fn)
    body = loop.regions[0]
    assert loop.attrs["prefetched"] == 1 and len(loop.results) == 1 and len(body.args) == 2
    # iteration 0's load before the loop, carried in
    first = _defining(loop.operands[3])
    assert first.name == "load" and first.block is not None and first in fn.body.ops
    # the body no longer loads the current row: the reductions read the carried tile
    loads = [o for o in body.ops if o.name == "load"]
    assert len(loads) == 1 and body.ops[-1].operands[0] is loads[0].results[0]
    red = next(o for o in body.ops if o.name == "reduce")
    assert red.operands[0] is body.args[1]
    assert body.ops.index(loads[0]) < body.ops.index(red)  # issued before this row's reductions
    # masks: original mask & (iteration exists); next iteration = iv + step, step = num_programs
    for ld, iv in ((first, loop.operands[0]), (loads[0], None)):
        m = _defining(ld.operands[1])
        assert m.name == "and"
        guard = _defining(_defining(m.operands[1]).operands[0])
        assert guard.name == "cmpi" and guard.attrs["pred"] == "slt" and guard.operands[1] is loop.operands[1]
        if iv is not None:
            assert guard.operands[0] is iv
        else:
            nxt = _defining(guard.operands[0])
            assert nxt.name == "add" and nxt.operands == [body.args[0], loop.operands[2]]
        assert _defining(m.operands[0]).name == "cmpi"  # col_offsets < n_cols
    assert any("load prefetched one iteration ahead" in n for n in notes)


def test_softmax_sass_issues_next_row_before_reductions(monkeypatch):
    cx = dict(BLOCK_SIZE=1024, num_stages=2)
    ck = kernelc.compile(softmax.softmax_kernel, SM_SIG, cx, target="sm_90a", num_warps=4, divisibility=SM_DIV)
    pre, loop = _loop_split(_sass_ops(ck))
    assert pre.count("LDG.E.128") == 2 and loop.count("LDG.E.128") == 2   # prologue + prefetch
    last_ldg = max(i for i, o in enumerate(loop) if o.startswith("LDG"))
    shfl = [i for i, o in enumerate(loop) if o.startswith("SHFL")]
    exps = [i for i, o in enumerate(loop) if o.startswith("MUFU.EX2")]
    assert last_ldg < shfl[-1] and last_ldg < exps[0]   # next row in flight during this row's exp and sum
    assert ck.n_spills == 0
    assert "prefetched=1" in ck.asm["tir"]
    assert any("prefetched one iteration ahead" in m for m in ck.compile_log)
    monkeypatch.setenv("KERNELC_PIPELINE_LOADS", "0")
    off = kernelc.compile(softmax.softmax_kernel, SM_SIG, cx, target="sm_90a", num_warps=4, divisibility=SM_DIV)
    pre0, loop0 = _loop_split(_sass_ops(off))
    assert not any(o.startswith("LDG") for o in pre0) and "prefetched" not in off.asm["tir"]
    # the carried tile keeps the load's layout: no extra shared-memory round trip or barrier
    assert loop.count("BAR.SYNC.DEFER_BLOCKING") == loop0.count("BAR.SYNC.DEFER_BLOCKING")
    assert ck.shared == off.shared


@kernelc.jit
def rows_from_zero(x_ptr, y_ptr, stride, n_rows, BLOCK: kl.constexpr):
    for r in kl.range(0, n_rows, 1, num_stages=2):
        offs = kl.arange(0, BLOCK)
        x = kl.load(x_ptr + r * stride + offs)
        kl.store(y_ptr + r * stride + offs, x + 1.0)


def test_prologue_and_prefetch_share_one_layout():
    # iteration 0's address (r = 0) is 16-byte aligned, the others are not: both loads must still get
    # the same (narrower) layout, or the carried tile would be converted through shared memory
    from kernelc.compiler.passes.axis_info import analyze
    from kernelc.compiler.passes.layout_assign import assign_layouts
    sig = dict(x_ptr=P("fp32"), y_ptr=P("fp32"), stride="i32", n_rows="i32")
    fn, _ = _ir(rows_from_zero, sig, dict(BLOCK=512), {"x_ptr": 16, "y_ptr": 16})
    axis = analyze(fn)
    plan = assign_layouts(fn, axis, 4, 9, "sm_90a")
    first, nxt = [o for o in fn.walk() if o.name == "load"]
    assert axis.get(first.operands[0]).divisibility != axis.get(nxt.operands[0]).divisibility
    assert plan.get(first.results[0]) == plan.get(nxt.results[0]) == plan.get(_loop(fn).regions[0].args[1])
    ck = kernelc.compile(rows_from_zero, sig, dict(BLOCK=512), target="sm_90a")
    assert ck.shared == 0 and "BAR.SYNC" not in ck.asm["sass"]


# -- (b) what is not prefetched ------------------------------------------------------------------------

@pytest.mark.parametrize("stages", [1, None])
def test_no_prefetch_without_num_stages(stages):
    if stages is None:
        fn, notes = _ir(rows_plain_range, ROWS_SIG, dict(BLOCK=256))
    else:
        fn, notes = _ir(rows_copy, ROWS_SIG, dict(BLOCK=256, STAGES=stages))
    loop = _loop(fn)
    assert len(loop.results) == 0 and "prefetched" not in loop.attrs and not notes
    assert [o.name for o in loop.regions[0].ops].count("load") == 1


def test_store_through_the_loaded_argument_blocks_prefetch():
    sig = dict(x_ptr=P("fp32"), stride="i32", n_rows="i32", n_cols="i32")
    fn, notes = _ir(rows_inplace, sig, dict(BLOCK=256))
    assert len(_loop(fn).results) == 0
    assert any("may alias" in n for n in notes)
    ck = kernelc.compile(rows_inplace, sig, dict(BLOCK=256), target="sm_90a")
    assert any("may alias" in m for m in ck.compile_log)


@pytest.mark.parametrize("flip,prefetched", [(False, True), (True, False)])
def test_alias_check_follows_pointer_derivations(flip, prefetched):
    fn, _ = _ir(rows_store_via_select, ROWS_SIG, dict(BLOCK=256, FLIP=flip))
    assert (len(_loop(fn).results) == 1) == prefetched


def test_dot_operand_loads_stay_with_the_cp_async_pipeline(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")  # on sm_90a, b's tile load would otherwise copy by TMA
    fn, _ = _ir(mm_bias, MMB_SIG, MMB_CX)
    loop = _loop(fn)
    assert len(loop.results) == 2  # acc + the bias tile
    body = loop.regions[0]
    dot = next(o for o in body.ops if o.name == "dot")
    assert all(_defining(v).name == "load" and _defining(v).block is body for v in dot.operands[:2])
    for target in ("sm_80", "sm_90a"):
        reps = []
        for env in ("1", "0"):
            monkeypatch.setenv("KERNELC_PIPELINE_LOADS", env)
            # K divisible by 16 as the runtime specialises it: the rows of a start 16-byte aligned only then
            ck = kernelc.compile(mm_bias, MMB_SIG, MMB_CX, target=target, num_warps=4, divisibility={"K": 16})
            reps.append(sorted((a["kind"], a["line"]) for a in ck.reports["memory_accesses"]
                               if "cp.async" in a["kind"]))
            assert "LDGSTS" in ck.asm["sass"] and ck.n_spills == 0
        assert len(reps[0]) == 2 and reps[0] == reps[1]


def test_register_budget_limits_prefetch():
    fn, notes = _ir(rows_copy, ROWS_SIG, dict(BLOCK=256, STAGES=2))
    assert len(_loop(fn).results) == 1
    fn2, _ = to_tile_ir(rows_copy, ROWS_SIG, dict(BLOCK=256, STAGES=2))
    notes = []
    pipeline_loads(fn2, 1, notes, max_regs=4)  # 256 fp32 over 32 threads = 8 registers
    assert len(_loop(fn2).results) == 0 and any("budget" in n for n in notes)


def test_pass_is_idempotent():
    fn, _ = _ir(softmax.softmax_kernel, SM_SIG, dict(BLOCK_SIZE=1024, num_stages=2), SM_DIV)
    before = str(fn)
    verify(simplify(pipeline_loads(fn, 4)))
    assert str(fn) == before


# -- (c) semantics: evaluate the tile IR before and after ---------------------------------------------

@pytest.mark.parametrize("n_rows,grid", [(7, 3), (5, 8), (0, 2), (4, 4)])
def test_softmax_semantics(n_rows, grid):
    n_cols = 200
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n_rows, n_cols)).astype(np.float32)

    def make():
        return [np.full_like(x, 7.0), x.copy(), n_cols, n_cols, n_rows, n_cols]

    y, _ = _same_results(softmax.softmax_kernel, SM_SIG, dict(BLOCK_SIZE=256, num_stages=2), make, grid)
    if n_rows:
        ref = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(y, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("start,stop,step", [(0, 9, 2), (8, -1, -3), (3, 3, 1), (5, 2, 1), (2, 6, -1)])
def test_runtime_step_of_either_sign(start, stop, step):
    sig = dict(x_ptr=P("fp32"), y_ptr=P("fp32"), start="i32", stop="i32", step="i32", n_cols="i32")
    fn, _ = _ir(rows_any_step, sig, dict(BLOCK=64))
    assert len(_loop(fn).results) == 2  # the scalar and the tile load
    x = np.arange(9 * 64, dtype=np.float32).reshape(9, 64)
    _, y = _same_results(rows_any_step, sig, dict(BLOCK=64),
                       lambda: [x.copy(), np.zeros_like(x), start, stop, step, 50], 1)
    rows = list(range(start, stop, step))
    assert np.count_nonzero(y.any(1)) == len([r for r in rows if r != 0])


def test_negative_constant_step():
    sig = dict(x_ptr=P("fp32"), y_ptr=P("fp32"), n_rows="i32")
    fn, _ = _ir(rows_reverse, sig, dict(BLOCK=32))
    loop = _loop(fn)
    assert len(loop.results) == 1
    guard = [o for o in loop.regions[0].ops if o.name == "cmpi"]
    assert any(g.attrs["pred"] == "sgt" for g in guard)
    x = np.random.default_rng(1).standard_normal((5, 32)).astype(np.float32)
    _, y = _same_results(rows_reverse, sig, dict(BLOCK=32), lambda: [x.copy(), np.zeros_like(x), 5], 1)
    np.testing.assert_allclose(y, np.cumsum(x, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [0, 100, 128, 1000])
def test_carried_pointer_induction(n):
    sig = dict(x_ptr=P("fp32"), out_ptr=P("fp32"), n="i32")
    fn, _ = _ir(blocked_sum, sig, dict(BLOCK=128))
    loop = _loop(fn)
    assert len(loop.results) == 3  # acc, ptrs, the prefetched tile
    x = np.arange(n, dtype=np.float32)
    xs = x if n else np.zeros(1, np.float32)  # keep one element mapped; n=0 must read none of it
    _, out = _same_results(blocked_sum, sig, dict(BLOCK=128), lambda: [xs.copy(), np.zeros(128, np.float32), n], 1)
    ref = np.zeros(128, np.float32)
    for off in range(0, n, 128):
        blk = x[off:off + 128]
        ref[:len(blk)] += blk
    np.testing.assert_array_equal(out, ref)


def test_dot_loop_semantics():
    rng = np.random.default_rng(2)
    K = 128
    a = rng.standard_normal((64, K)).astype(np.float16)
    b = rng.standard_normal((K, 64)).astype(np.float16)
    bias = rng.standard_normal((K // 32, 64)).astype(np.float32)
    _, _, _, c = _same_results(mm_bias, MMB_SIG, MMB_CX,
                               lambda: [a.copy(), b.copy(), bias.copy(), np.zeros((64, 64), np.float32), K], 1)
    ref = a.astype(np.float32) @ b.astype(np.float32) + bias.sum(0)[None, :]
    np.testing.assert_allclose(c, ref, rtol=1e-2, atol=1e-2)


# -- the tutorials still compile (verifier included) for both targets -------------------------------

LN_SIG = dict(X=P("fp16"), Y=P("fp16"), W=P("fp16"), B=P("fp16"), Mean=P("fp32"), Rstd=P("fp32"), stride="i32",
              N="i32", eps="fp32")
MM_SIG = dict(a_ptr=P("fp16"), b_ptr=P("fp16"), c_ptr=P("fp16"), M="i32", N="i32", K="i32", stride_am="i32",
              stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
MM_CX = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_tutorials_compile_and_dot_loads_are_unchanged(target, monkeypatch):
    sm = kernelc.compile(softmax.softmax_kernel, SM_SIG, dict(BLOCK_SIZE=1024, num_stages=2), target=target,
                         num_warps=4, divisibility=SM_DIV)
    assert "prefetched=1" in sm.asm["tir"] and sm.n_spills == 0
    ln = kernelc.compile(layernorm.layer_norm_fwd_kernel, LN_SIG, dict(BLOCK_SIZE=1024), target=target,
                         num_warps=4, divisibility={n: 16 for n in LN_SIG})
    assert "prefetched" not in ln.asm["tir"]  # plain range loops: untouched
    mm = []
    for env in ("1", "0"):
        monkeypatch.setenv("KERNELC_PIPELINE_LOADS", env)
        mm.append(kernelc.compile(matmul.matmul_kernel, MM_SIG, MM_CX, target=target, num_warps=4, num_stages=3,
                                  divisibility={n: 16 for n in MM_SIG},
                                  equal_to_1=("stride_ak", "stride_bn", "stride_cn")))
    assert mm[0].asm["ptx"] == mm[1].asm["ptx"]
    assert "LDGSTS.E.BYPASS.128" in mm[0].asm["sass"]
