"""Lowering of structured control flow and side-effecting debug ops."""
from __future__ import annotations

from typing import List, Optional

from ...language.dtypes import scalar_of, shape_of
from .elementwise import constant
from .emitter import llty
from .fp8_words import word_of_pairs, word_order
from .lowering import Lowering, Tile, rule


def _carried_layouts(lw: Lowering, values):
    return [lw.layout_of(v) if lw.is_tile(v) else None for v in values]


def _smem_in(region_ops) -> bool:
    names = {"reduce", "scan", "dot", "convert", "atomic_rmw", "atomic_cas", "local_store", "local_load",
             "async_copy", "async_wait"}
    return any(op.name in names or (op.regions and _smem_in([o for r in op.regions for o in r.ops]))
               for op in region_ops)


def _conservative_pending(lw: Lowering):
    # Accesses from a previous iteration / branch may still be in flight: the next conflicting access
    # must be preceded by a barrier.
    lw.smem.pending.append((0, 1 << 30, True))


@rule("scf.for")
def lower_for(lw: Lowering, op):
    e = lw.e
    body = op.regions[0]
    lb, ub, step = (lw.scalar(v) for v in op.operands[:3])
    iv_ty = llty(scalar_of(op.operands[0].type))
    inits = op.operands[3:]
    carried_args = body.args[1:]
    layouts = [lw.plan.get(a) if lw.is_tile(a) else None for a in carried_args]
    # the byte order of 8-bit carries (passes/narrow_carries.py: mark_fp8_carry_words)
    words8 = op.attrs.get("carry_words") == "a8"
    orders = [_word_order(L) if words8 else None for L in layouts]
    init_flat = []
    for v, L, o in zip(inits, layouts, orders):
        init_flat.append(_packed(lw, *lw.flat(v, L), order=o, pairs=words8))
    # 8-bit tiles that cross the back edge as words (_packed)
    packed = [ty == "i32" and llty(scalar_of(v.type)) == "i8" for v, (ty, _) in zip(inits, init_flat)]
    if op.attrs.get("exit_wait") is not None:
        return _lower_for_exit_wait(lw, op, lb, ub, step, iv_ty, init_flat, layouts, orders, packed, words8)
    pre = e.cur_label
    header, bodyl, exitl = e.label("for_head"), e.label("for_body"), e.label("for_exit")
    e.br(header)
    carried_phis, pending_before = _loop_blocks(lw, op, lb, ub, step, iv_ty, pre, init_flat, layouts, orders, packed,
                                                words8, header, bodyl, exitl)
    lw.smem.pending = pending_before + ([(0, 1 << 30, True)] if _smem_in(body.ops) else [])
    for r, L, names, pk, o in zip(op.results, layouts, carried_phis, packed, orders):
        lw.set_result(r, _unpacked(lw, names, o, words8) if pk else names if lw.is_tile(r) else names[0], L)


def _loop_blocks(lw: Lowering, op, lb, ub, step, iv_ty, pre, init_flat, layouts, orders, packed, words8,
                 header, bodyl, exitl):
    """The loop itself, entered from block ``pre`` into ``header``: the induction variable's and the carried
    values' phis, the test at the top, the body, the latch; ends in ``exitl``. Returns the carried values' phis (the
    values on the exit edge) and the shared-memory accesses pending before the loop."""
    e = lw.e
    body = op.regions[0]
    carried_args = body.args[1:]
    e.start_block(header)
    iv = e.fresh("iv")
    e.body.append(f"  {iv} = phi {iv_ty} [ {lb}, %{pre} ], [ __NEXT_IV__, %__LATCH__ ]")
    phi_lines = [len(e.body) - 1]
    carried_phis: List[List[str]] = []
    for (ty, regs) in init_flat:
        names = []
        for r in regs:
            p = e.fresh("phi")
            e.body.append(f"  {p} = phi {ty} [ {r}, %{pre} ], [ __Y{len(phi_lines)}__, %__LATCH__ ]")
            phi_lines.append(len(e.body) - 1)
            names.append(p)
        carried_phis.append(names)
    e.cond_br(_in_range(lw, op, iv, ub, step, iv_ty), bodyl, exitl)
    e.start_block(bodyl)
    lw.push_scope()
    lw.scalars[body.args[0].id] = iv
    for a, L, names, pk, o in zip(carried_args, layouts, carried_phis, packed, orders):
        lw.set_result(a, _unpacked(lw, names, o, words8) if pk else names if lw.is_tile(a) else names[0], L)
    pending_before = list(lw.smem.pending)
    if _smem_in(body.ops):
        _conservative_pending(lw)
    lw.lower_block(body)  # ends with scf.yield: values collected below
    yld = body.ops[-1]
    yflat = [_packed(lw, *lw.flat(v, L), order=o, pairs=words8)[1] for v, L, o in zip(yld.operands, layouts, orders)]
    nxt = e.val(f"add {iv_ty} {iv}, {step}")
    latch = e.cur_label
    e.br(header)
    lw.pop_scope()
    # patch the phis with the latch values
    flat_y = [x for regs in yflat for x in regs]
    e.body[phi_lines[0]] = e.body[phi_lines[0]].replace("__NEXT_IV__", nxt).replace("__LATCH__", latch)
    for i, line_idx in enumerate(phi_lines[1:], start=1):
        e.body[line_idx] = e.body[line_idx].replace(f"__Y{i}__", flat_y[i - 1]).replace("__LATCH__", latch)
    e.start_block(exitl)
    return carried_phis, pending_before

def _in_range(lw: Lowering, op, iv: str, ub: str, step: str, iv_ty: str) -> str:
    """``iv`` is before ``ub`` in the direction of the loop's step."""
    e = lw.e
    step_c = _const_int(op.operands[2], lw)
    if step_c is not None and step_c < 0:
        return e.val(f"icmp sgt {iv_ty} {iv}, {ub}")
    if step_c is not None:
        return e.val(f"icmp slt {iv_ty} {iv}, {ub}")
    pos = e.val(f"icmp sgt {iv_ty} {step}, 0")
    c1 = e.val(f"icmp slt {iv_ty} {iv}, {ub}")
    c2 = e.val(f"icmp sgt {iv_ty} {iv}, {ub}")
    return e.val(f"select i1 {pos}, i1 {c1}, i1 {c2}")


def _lower_for_exit_wait(lw: Lowering, op, lb, ub, step, iv_ty, init_flat, layouts, orders, packed, words8):
    """An ``scf.for`` with ``exit_wait`` (passes/wgmma_waits.py: the carried values at those indices are wgmma
    accumulators still in flight when the loop ends): a guard, the body as a bottom-tested loop, and
    ``wgmma.wait_group 0`` on the edge that leaves it, taking those values through; the path that skips the loop
    joins after the wait. (With the wait after the join, ptxas took the skipping path's copies of the initial values
    into the same registers as writes into the group's pipeline stage and serialised every wgmma, C7515.)"""
    from .wgmma import tie_through_wait
    e = lw.e
    body = op.regions[0]
    waited = set(op.attrs["exit_wait"])
    # constant initial values of those accumulators (zeros) put in registers once, before the guard (an asm LLVM
    # cannot fold back into a constant): both edges then start from the same registers, where a constant was copied
    # in on each edge and ptxas took the copies on the skipping edge as writes into a group's stage (C7515)
    init_flat = [(ty, [_in_register(e, ty, r) for r in regs]) if k in waited else (ty, regs)
                 for k, (ty, regs) in enumerate(init_flat)]
    pre = e.cur_label
    header, bodyl = e.label("for_head"), e.label("for_body")
    exitl, joinl = e.label("for_exit"), e.label("for_join")
    # the guard; then the loop in the usual form, tested at the top (LLVM rotates it and drops the test it repeats)
    e.cond_br(_in_range(lw, op, lb, ub, step, iv_ty), header, joinl)
    carried_phis, pending_before = _loop_blocks(lw, op, lb, ub, step, iv_ty, pre, init_flat, layouts, orders, packed,
                                                words8, header, bodyl, exitl)
    regs = [r for k in sorted(waited) for r in carried_phis[k]]
    new = iter(tie_through_wait(lw, 0, regs))
    out_flat = [[next(new) for _ in carried_phis[k]] if k in waited else carried_phis[k]
                for k in range(len(carried_phis))]
    e.br(joinl)
    e.start_block(joinl)
    lw.smem.pending = pending_before + ([(0, 1 << 30, True)] if _smem_in(body.ops) else [])
    joined = [[e.val(f"phi {ty} [ {a}, %{pre} ], [ {b}, %{exitl} ]") for a, b in zip(init, outs)]
              for (ty, init), outs in zip(init_flat, out_flat)]  # every phi first, then the unpacking
    for r, L, names, pk, o in zip(op.results, layouts, joined, packed, orders):
        lw.set_result(r, _unpacked(lw, names, o, words8) if pk else names if lw.is_tile(r) else names[0], L)


def _in_register(e, ty: str, v: str) -> str:
    """``v`` as it is when already an SSA value, else (a constant) through a ``mov`` LLVM cannot fold."""
    if v.startswith("%") or ty not in ("float", "i32"):
        return v
    c = "f" if ty == "float" else "r"
    return e.asm(ty, "mov.b32 $0, $1;", f"={c},{c}", [(ty, v)])


def _word_order(L) -> Optional[List[int]]:
    """How an 8-bit tile of layout ``L`` is grouped into words across a back edge: in an MMA accumulator
    layout of one warp column, as the fp8 wgmma A fragments take it (``fp8_words.py: word_order``: P V then
    reads the phis as they are, where register order took a byte permute per word, 16 a key block in fp8
    attention); else in register order (None)."""
    return word_order(L)


def _packed(lw: Lowering, ty: str, regs: List[str], order: Optional[List[int]] = None, pairs: bool = False):
    """8-bit registers of a carried tile cross the back edge four to an i32: one phi per word, not per
    byte (PTX has no 8-bit registers; a byte per phi took ~8 instructions per word to put back together
    for an fp8 wgmma A operand), grouped by ``order`` (:func:`_word_order`) or in register order. Other
    carries as they are."""
    if ty != "i8" or len(regs) < 4 or len(regs) % 4:
        return ty, regs
    if order is not None:
        regs = [regs[i] for i in order]
    e = lw.e
    words = []
    for i in range(0, len(regs), 4):
        if pairs:
            words.append(word_of_pairs(e, regs[i:i + 4]))
            continue
        w = None
        for j in range(4):
            x = e.val(f"zext i8 {regs[i + j]} to i32")
            x = e.val(f"shl i32 {x}, {8 * j}") if j else x
            w = x if w is None else e.val(f"or i32 {w}, {x}")
        words.append(w)
    return "i32", words


def _unpacked(lw: Lowering, names: List[str], order: Optional[List[int]] = None, pairs: bool = False) -> List[str]:
    """The bytes of :func:`_packed`'s words, in register order."""
    e = lw.e
    if not pairs:
        out = [e.val(f"trunc i32 {e.val(f'lshr i32 {w}, {8 * j}') if j else w} to i8") for w in names for j in range(4)]
    else:
        out = []
        for w in names:
            v = e.val(f"bitcast i32 {w} to <2 x i16>")
            for h in range(2):
                x = e.val(f"extractelement <2 x i16> {v}, i32 {h}")
                out += [e.val(f"trunc i16 {x} to i8"), e.val(f"trunc i16 {e.val(f'lshr i16 {x}, 8')} to i8")]
    if order is None:
        return out
    regs = [None] * len(out)
    for k, i in enumerate(order):
        regs[i] = out[k]
    return regs


def _const_int(v, lw):
    op = lw.defs.get(v.id)
    if op is not None and op.name == "constant":
        return int(op.attrs["value"])
    return None


@rule("scf.yield", "scf.condition", "reduce.return")
def lower_terminator(lw: Lowering, op):
    pass  # consumed by the parent op


@rule("scf.if")
def lower_if(lw: Lowering, op):
    e = lw.e
    cond = lw.scalar(op.operands[0])
    layouts = [lw.plan.get(r) if lw.is_tile(r) else None for r in op.results]
    thenl, elsel, mergel = e.label("if_then"), e.label("if_else"), e.label("if_end")
    e.cond_br(cond, thenl, elsel)
    pending = list(lw.smem.pending)
    ends = []
    for label, region in ((thenl, op.regions[0]), (elsel, op.regions[1])):
        e.start_block(label)
        lw.push_scope()
        lw.smem.pending = list(pending)
        lw.lower_block(region)
        vals = [lw.flat(v, L)[1] for v, L in zip(region.ops[-1].operands, layouts)]
        ends.append((e.cur_label, vals, list(lw.smem.pending)))
        e.br(mergel)
        lw.pop_scope()
    e.start_block(mergel)
    lw.smem.pending = ends[0][2] + ends[1][2]
    for i, (r, L) in enumerate(zip(op.results, layouts)):
        ty = llty(scalar_of(r.type))
        names = []
        for j in range(len(ends[0][1][i])):
            p = e.val(f"phi {ty} [ {ends[0][1][i][j]}, %{ends[0][0]} ], [ {ends[1][1][i][j]}, %{ends[1][0]} ]")
            names.append(p)
        lw.set_result(r, names if lw.is_tile(r) else names[0], L)


@rule("scf.while")
def lower_while(lw: Lowering, op):
    e = lw.e
    before, after = op.regions
    layouts = [lw.plan.get(a) if lw.is_tile(a) else None for a in before.args]
    init_flat = [lw.flat(v, L) for v, L in zip(op.operands, layouts)]
    pre = e.cur_label
    head, bodyl, exitl = e.label("while_head"), e.label("while_body"), e.label("while_exit")
    e.br(head)
    e.start_block(head)
    lw.push_scope()
    phis, lines = [], []
    for ty, regs in init_flat:
        names = []
        for r in regs:
            p = e.fresh("phi")
            e.body.append(f"  {p} = phi {ty} [ {r}, %{pre} ], [ __W{len(lines)}__, %__LATCH__ ]")
            lines.append(len(e.body) - 1)
            names.append(p)
        phis.append(names)
    for a, L, names in zip(before.args, layouts, phis):
        lw.set_result(a, names if lw.is_tile(a) else names[0], L)
    if _smem_in(before.ops) or _smem_in(after.ops):
        _conservative_pending(lw)
    lw.lower_block(before)
    cond_op = before.ops[-1]
    cond = lw.scalar(cond_op.operands[0])
    passed = [lw.flat(v, L)[1] for v, L in zip(cond_op.operands[1:], layouts)]
    e.cond_br(cond, bodyl, exitl)
    e.start_block(bodyl)
    lw.push_scope()
    for a, L, regs in zip(after.args, layouts, passed):
        lw.set_result(a, regs if lw.is_tile(a) else regs[0], L)
    lw.lower_block(after)
    yflat = [lw.flat(v, L)[1] for v, L in zip(after.ops[-1].operands, layouts)]
    latch = e.cur_label
    e.br(head)
    lw.pop_scope()
    lw.pop_scope()
    flat_y = [x for regs in yflat for x in regs]
    for i, idx in enumerate(lines):
        e.body[idx] = e.body[idx].replace(f"__W{i}__", flat_y[i]).replace("__LATCH__", latch)
    e.start_block(exitl)
    for r, L, regs in zip(op.results, layouts, passed):
        lw.set_result(r, regs if lw.is_tile(r) else regs[0], L)


@rule("return")
def lower_return(lw: Lowering, op):
    lw.e.emit("ret void")


@rule("barrier")
def lower_barrier(lw: Lowering, op):
    lw.barrier()


@rule("assert")
def lower_assert(lw: Lowering, op):
    """device_assert: a failing lane prints the message with file:line and traps the kernel."""
    e = lw.e
    v = op.operands[0]
    regs = lw.get(v).regs if lw.is_tile(v) else [lw.scalar(v)]
    ok = regs[0]
    for r in regs[1:]:
        ok = e.val(f"and i1 {ok}, {r}")
    fail, cont = e.label("assert_fail"), e.label("assert_ok")
    e.cond_br(ok, cont, fail)
    e.start_block(fail)
    msg = f"{op.loc.file}:{op.loc.line}: device_assert failed: {op.attrs.get('msg', '')}"
    _printf(lw, msg + "\n", [])
    e.call("void", "llvm.trap", [])
    e.emit("unreachable")
    e.start_block(cont)


_str_id = [0]


def _printf(lw: Lowering, fmt: str, args):
    e = lw.e
    _str_id[0] += 1
    data = fmt.encode() + b"\0"
    name = f"@.str{_str_id[0]}"
    lit = "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\' else f"\\{b:02X}" for b in data)
    e.add_global(f'{name} = private unnamed_addr addrspace(1) constant [{len(data)} x i8] c"{lit}", align 1')
    gptr = e.val(f"addrspacecast ptr addrspace(1) {name} to ptr")
    if args:
        fields = ", ".join(t for t, _ in args)
        buf = e.fresh("pbuf")
        e.allocas.append(f"  {buf} = alloca {{ {fields} }}, align 8")
        for i, (t, v) in enumerate(args):
            p = e.val(f"getelementptr {{ {fields} }}, ptr {buf}, i32 0, i32 {i}")
            e.emit(f"store {t} {v}, ptr {p}, align 8")
        ptr = buf
    else:
        ptr = "null"
    e.call("i32", "vprintf", [("ptr", gptr), ("ptr", ptr)])


@rule("print")
def lower_print(lw: Lowering, op):
    """device_print: one line per element, ``pid (x, y, z) idx (i, j) prefix value``."""
    e = lw.e
    pids = [e.call("i32", f"llvm.nvvm.read.ptx.sreg.ctaid.{a}", []) for a in "xyz"]
    prefix = op.attrs.get("prefix", "")
    hexfmt = op.attrs.get("hex", False)
    if not op.operands:
        _printf(lw, "pid (%u, %u, %u) " + prefix + "\n", [("i32", p) for p in pids])
        return
    # print each operand in its own layout; elements owned once (replicas skipped)
    for v in op.operands:
        t = scalar_of(v.type)
        if lw.is_tile(v):
            tile = lw.get(v)
            coords = lw.coords(tile.layout)
            own = lw.owner_predicate(tile.layout)
            items = list(zip(tile.regs, coords))
        else:
            tile = None
            own = e.val(f"icmp eq i32 {lw.tid}, 0")
            items = [(lw.scalar(v), [])]
        skip, body = e.label("print_skip"), e.label("print_do")
        if own is not None:
            e.cond_br(own, body, skip)
            e.start_block(body)
        for val, crd in items:
            fmt_v, arg = _fmt_value(lw, t, val, hexfmt)
            idx = "(" + ", ".join("%d" for _ in crd) + ")" if crd else "()"
            _printf(lw, f"pid (%u, %u, %u) idx {idx} {prefix}{fmt_v}\n",
                    [("i32", p) for p in pids] + [("i32", c) for c in crd] + [arg])
        if own is not None:
            e.br(skip)
            e.start_block(skip)


def _fmt_value(lw, t, val, hexfmt):
    e = lw.e
    ty = llty(t)
    if t.is_floating():
        if ty != "double":
            val = e.val(f"fpext {ty} {val} to double") if ty in ("float", "half", "bfloat") else val
        return ("%a" if hexfmt else "%f"), ("double", val)
    if ty == "i64":
        return ("0x%llx" if hexfmt else ("%llu" if t.is_int_unsigned() else "%lld")), ("i64", val)
    if ty != "i32":
        val = e.val(f"{'zext' if t.is_int_unsigned() else 'sext'} {ty} {val} to i32")
    return ("0x%x" if hexfmt else ("%u" if t.is_int_unsigned() else "%d")), ("i32", val)
