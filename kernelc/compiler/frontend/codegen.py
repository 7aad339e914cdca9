"""Python AST -> tile IR.

Constexpr values stay Python values and fold as Python; runtime values are ``kl.tensor``s whose
handles are IR values. Calls into ``kernelc.language`` run the language's semantics against the IR
builder; calls to ``@jit`` device functions are inlined from their source. ``if``/``for``/``while``
on runtime values become structured ops with explicit carried values.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import operator
import types
from typing import Any, Dict, List, Optional, Tuple

from ... import language as kl
from ...errors import CompilationError
from ...language import semantic, syntax
from ...language.syntax import MAX_INLINE_DEPTH
from ...language.core import DeviceFunction, aggregate, builder_scope, constexpr, static_range, tensor
from ...language.dtypes import base_type, tensor_descriptor_type
from ..ir.core import Argument, Block, Function, Loc, Op
from .deps import Dependencies, is_user_function
from .ir_builder import IRBuilder

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_,
    ast.MatMult: None,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


class _Undefined:
    """Marker for a name defined on only one path (e.g. inside one branch of a runtime if)."""

    def __init__(self, why):
        self.why = why


def _is_runtime(v) -> bool:
    return isinstance(v, tensor)


def _contains_return(node) -> bool:
    return any(isinstance(n, ast.Return) for n in ast.walk(node))


def _terminates(stmts) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _terminates(last.body) and _terminates(last.orelse)
    return False


def _assigned_names(stmts) -> List[str]:
    """Names stored anywhere in ``stmts`` (in order of first store)."""
    out: List[str] = []
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
                out.append(n.id)
    return out


class CodeGenerator(ast.NodeVisitor):
    """Generates IR for one function body (kernel or inlined device function)."""

    def __init__(self, fn: DeviceFunction, builder: IRBuilder, scope: Dict[str, Any], *, kernel_name: str,
                 depth: int = 0, used_globals: Optional[Dependencies] = None):
        self.fn = fn
        self.builder = builder
        self.scope = scope
        self.kernel_name = kernel_name
        self.depth = depth
        self.used_globals = used_globals if used_globals is not None else Dependencies()
        self.returned = False
        self.ret_value: Any = None
        self.file = fn.file
        self.cur_node: Optional[ast.AST] = None
        try:
            self.closure = inspect.getclosurevars(fn.fn).nonlocals
        except (TypeError, ValueError):
            self.closure = {}

    # -- locations and errors -----------------------------------------------------------------
    def loc_of(self, node) -> Loc:
        return Loc(self.file, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), self.fn.__name__)

    def visit(self, node):
        prev_node, prev_loc = self.cur_node, self.builder.loc
        if hasattr(node, "lineno"):
            self.cur_node = node
            self.builder.loc = self.loc_of(node)
        try:
            return super().visit(node)
        except CompilationError:
            raise
        except RecursionError:
            raise
        except Exception as e:
            raise self.error(node, _message(e)) from e
        finally:
            self.cur_node, self.builder.loc = prev_node, prev_loc

    def error(self, node, msg) -> CompilationError:
        node = node if hasattr(node, "lineno") else self.cur_node
        return CompilationError(msg, self.file, getattr(node, "lineno", 0), getattr(node, "col_offset", None),
                                self.fn.__name__)

    def generic_visit(self, node):
        raise self.error(node, syntax.unsupported(node))  # syntax.check rejects these first

    # -- names --------------------------------------------------------------------------------
    def lookup(self, name, node):
        if name in self.scope:
            v = self.scope[name]
            if isinstance(v, _Undefined):
                raise self.error(node, f"name {name!r} is not defined here: {v.why}")
            return v
        if name in self.closure:  # closure cells are in the kernel's fingerprint (runtime/cache.py)
            return self._global_value(name, self.closure[name], node, None)
        g = self.fn.__globals__
        if name in g:
            return self._global_value(name, g[name], node, self.fn.__module__)
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name {name!r} is not defined")

    def _global_value(self, name, v, node, module):
        # Plain data (numbers, strings, and lists/tuples/dicts of them) is folded as constants: recorded
        # with its value, so that the disk cache rebuilds when it changes.
        self.used_globals.add_global(module, name, v)
        if isinstance(v, constexpr) or isinstance(v, (bool, int, float, str, type(None), tuple)):
            return v.value if isinstance(v, constexpr) else v
        if isinstance(v, tensor):
            raise self.error(node, f"global {name!r} is a tensor; pass it as an argument")
        if hasattr(v, "data_ptr") or type(v).__module__.startswith("numpy"):
            raise self.error(node, f"global {name!r} is an array; kernels can only read arrays passed as arguments")
        return v

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            if isinstance(value, DeviceFunction) or not isinstance(value, (list,)):
                self.scope[target.id] = value
            else:
                self.scope[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            vals = value
            if isinstance(vals, tensor):
                raise self.error(node, "cannot unpack a tile; use kl.split for a last dimension of size 2")
            try:
                vals = tuple(vals)
            except TypeError:
                raise self.error(node, f"cannot unpack a value of type {type(value).__name__}") from None
            if len(vals) != len(target.elts):
                raise self.error(node, f"cannot unpack {len(vals)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, vals):
                self.assign(t, v, node)
            return
        if isinstance(target, ast.Subscript):
            raise self.error(target, syntax.SUBSCRIPT_ASSIGN)
        raise self.error(target, f"cannot assign to {type(target).__name__}")

    # -- statements ---------------------------------------------------------------------------
    def visit_block(self, stmts):
        for i, stmt in enumerate(stmts):
            if self.returned:
                break
            rest = stmts[i + 1:]
            if isinstance(stmt, ast.If) and rest and _contains_return(stmt):
                # `if c: ...; return` followed by more code: the rest runs on the non-returning path.
                body = stmt.body + ([] if _terminates(stmt.body) else rest)
                orelse = stmt.orelse + ([] if _terminates(stmt.orelse) else rest)
                new = ast.If(test=stmt.test, body=body, orelse=orelse)
                ast.copy_location(new, stmt)
                self.visit(new)
                return
            self.visit(stmt)

    def visit_Module(self, node):
        self.visit_block(node.body)

    def visit_Pass(self, node):
        pass

    def visit_Expr(self, node):
        self.visit(node.value)

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for t in node.targets:
            self.assign(t, value, node)

    def visit_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.visit(node.value)
        ann = None
        try:
            ann = self.visit(node.annotation)
        except CompilationError:
            pass
        if ann is constexpr and _is_runtime(value):
            raise self.error(node, f"{ast.unparse(node.target)} is annotated kl.constexpr but its value is a runtime tensor")
        self.assign(node.target, value, node)

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "augmented assignment is only supported on plain names")
        lhs = self.lookup(node.target.id, node)
        rhs = self.visit(node.value)
        self.scope[node.target.id] = self._binop(node.op, lhs, rhs, node)

    def visit_Return(self, node):
        self.ret_value = self.visit(node.value) if node.value is not None else None
        self.returned = True

    def visit_Assert(self, node):
        cond = self.visit(node.test)
        msg = self.visit(node.msg) if node.msg is not None else ""
        if _is_runtime(cond):
            kl.device_assert(cond, str(msg) if not _is_runtime(msg) else "")
        elif not cond:
            raise self.error(node, f"assertion failed: {msg}" if msg else f"assertion failed: {ast.unparse(node.test)}")

    # -- if -----------------------------------------------------------------------------------
    def visit_If(self, node):
        cond = self.visit(node.test)
        if not _is_runtime(cond):
            self.visit_block(node.body if cond else node.orelse)
            return
        cond = self._scalar_condition(cond, node.test)
        before = dict(self.scope)
        then = self._branch(node.body, before)
        other = self._branch(node.orelse, before)
        if then.returned or other.returned:
            self._if_with_return(node, cond, then, other)
            return
        names = [n for n in dict.fromkeys(list(then.scope) + list(other.scope))]
        merged, results = [], []
        targets, aggs = [], []  # per merged value: (name, part index or None); aggregates to rebuild
        for name in names:
            tv, ov = then.scope.get(name, _MISSING), other.scope.get(name, _MISSING)
            if tv is _MISSING or ov is _MISSING or isinstance(tv, _Undefined) or isinstance(ov, _Undefined):
                if name in before and not isinstance(before[name], _Undefined):
                    continue
                self.scope[name] = _Undefined(f"it is assigned in only one branch of the `if` at line {node.lineno}")
                continue
            if tv is ov:
                self.scope[name] = tv
                continue
            if isinstance(tv, aggregate) or isinstance(ov, aggregate):
                diff = self._aggregate_diff(name, tv, ov, node)
                if not diff:
                    self.scope[name] = tv
                    continue
                aggs.append((name, tv))
                for j, a, b in diff:
                    merged.append(f"{name} (part {j})")
                    results.append((a, b))
                    targets.append((name, j))
                continue
            if not (_is_runtime(tv) or _is_runtime(ov) or _is_number(tv) and _is_number(ov)):
                if tv == ov:
                    self.scope[name] = tv
                    continue
                raise self.error(node, f"{name!r} gets different compile-time values in the two branches of a "
                                       f"runtime `if` ({tv!r} vs {ov!r})")
            merged.append(name)
            results.append((tv, ov))
            targets.append((name, None))
        tvals, ovals = self._unify_branch_values(merged, results, then, other, node)
        op = self._emit_if(cond, then.block, other.block, tvals, ovals)
        new_parts: Dict[str, Dict[int, tensor]] = {}
        for (name, j), r in zip(targets, op.results):
            if j is None:
                self.scope[name] = tensor(r, r.type)
            else:
                new_parts.setdefault(name, {})[j] = tensor(r, r.type)
        for name, tv in aggs:
            parts = list(tv._kc_parts())
            for j, t in new_parts[name].items():
                parts[j] = t
            self.scope[name] = tv._kc_rebuild(parts)

    def _aggregate_diff(self, name, tv, ov, node):
        """The parts (index, then-value, else-value) in which two aggregates from the branches of an
        ``if`` differ; they must have one structure (e.g. block pointers of one block shape)."""
        if not (isinstance(tv, aggregate) and isinstance(ov, aggregate)) or tv._kc_structure() != ov._kc_structure():
            raise self.error(node, f"{name!r} is {_what(tv)} in the then-branch but {_what(ov)} in the else-branch "
                                   f"of a runtime `if`; give it one kind (and block shape) on both paths")
        diff = [(j, a, b) for j, (a, b) in enumerate(zip(tv._kc_parts(), ov._kc_parts())) if a.handle is not b.handle]
        if diff and not tv._kc_carriable:
            raise self.error(node, f"the {tv._kc_what} {name!r} differs between the branches of a runtime `if`; "
                                   f"compiled code must see where it is made: use one {tv._kc_what} per branch "
                                   f"where it is used")
        return diff

    def _scalar_condition(self, cond, node):
        if cond.type.is_block():
            raise self.error(node, f"`if` needs a scalar condition, got a tile of shape {cond.shape}; "
                                   f"use kl.where for elementwise selection")
        return semantic._to_bool(cond)

    def _branch(self, stmts, before):
        gen = _Branch(self, stmts, before)
        return gen.run()

    def _unify_branch_values(self, names, pairs, then, other, node):
        tvals, ovals = [], []
        for name, (tv, ov) in zip(names, pairs):
            ty = _common_type(tv, ov)
            if ty is None:
                raise self.error(node, f"{name!r} has type {_type_name(tv)} in the then-branch but "
                                       f"{_type_name(ov)} in the else-branch; cast one of them")
            tvals.append(self._materialize_in(then.block, tv, ty))
            ovals.append(self._materialize_in(other.block, ov, ty))
        return tvals, ovals

    def _materialize_in(self, block, value, ty):
        self.builder.push(block)
        try:
            t = semantic.to_tensor(value)
            if t.type != ty:
                t = semantic.cast(t, ty.scalar) if t.type.scalar != ty.scalar else t
                if t.type != ty:
                    t = semantic.broadcast_to(t, ty.shape) if ty.is_block() else t
            return t
        finally:
            self.builder.pop()

    def _emit_if(self, cond, then_block, else_block, tvals, evals):
        for block, vals in ((then_block, tvals), (else_block, evals)):
            self.builder.push(block)
            self.builder.create("scf.yield", [v.handle for v in vals], None)
            self.builder.pop()
        op = Op("scf.if", [cond.handle], [v.type for v in tvals], regions=[then_block, else_block],
                loc=self.builder.loc)
        self.builder.append(op)
        return op

    def _if_with_return(self, node, cond, then, other):
        # Both paths end the function: the `if` yields the return values.
        tv = then.ret_value if then.returned else None
        ov = other.ret_value if other.returned else None
        tvs = list(tv) if isinstance(tv, tuple) else ([] if tv is None else [tv])
        ovs = list(ov) if isinstance(ov, tuple) else ([] if ov is None else [ov])
        if len(tvs) != len(ovs) or isinstance(tv, tuple) != isinstance(ov, tuple):
            what = "returns a value on one path and nothing on the other" if (tv is None) != (ov is None) \
                else "returns different numbers of values on its paths"
            raise self.error(node, f"{self.fn.__name__} {what}")
        names, pairs, slots = [], [], []  # slots: (return value index, aggregate part index or None)
        for i, (a, b) in enumerate(zip(tvs, ovs)):
            if isinstance(a, aggregate) or isinstance(b, aggregate):
                for j, x, y in ([] if a is b else self._aggregate_diff(f"return value {i}", a, b, node)):
                    names.append(f"return value {i} (part {j})")
                    pairs.append((x, y))
                    slots.append((i, j))
            else:
                names.append(f"return value {i}")
                pairs.append((a, b))
                slots.append((i, None))
        tvals, ovals = self._unify_branch_values(names, pairs, then, other, node)
        op = self._emit_if(cond, then.block, other.block, tvals, ovals)
        outs, parts = list(tvs), {}
        for (i, j), r in zip(slots, op.results):
            if j is None:
                outs[i] = tensor(r, r.type)
            else:
                parts.setdefault(i, {})[j] = tensor(r, r.type)
        for i, new in parts.items():
            p = list(outs[i]._kc_parts())
            for j, t in new.items():
                p[j] = t
            outs[i] = outs[i]._kc_rebuild(p)
        self.returned = True
        self.ret_value = tuple(outs) if isinstance(tv, tuple) else (outs[0] if outs else None)

    # -- loops ---------------------------------------------------------------------------------
    def visit_For(self, node):
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported")
        if _contains_return(ast.Module(body=node.body, type_ignores=[])):
            raise self.error(node, syntax.RETURN_IN_LOOP)
        it = node.iter
        iterable = self.visit(it.func) if isinstance(it, ast.Call) else None
        if isinstance(it, ast.Call) and (iterable is static_range or iterable is builtins.range or iterable is kl.range):
            args = [self.visit(a) for a in it.args]
            kwargs = {k.arg: self.visit(k.value) for k in it.keywords}
            if iterable is static_range:
                for v in static_range(*args, **kwargs):
                    self.assign(node.target, v, node)
                    self.visit_block(node.body)
                return
            rng = kl.range(*args, **kwargs) if iterable is kl.range else kl.range(*args)
            self._scf_for(node, rng)
            return
        seq = self.visit(it)
        if isinstance(seq, (tuple, list)):
            for v in seq:  # a tuple of constants unrolls, like static_range
                self.assign(node.target, v, node)
                self.visit_block(node.body)
            return
        raise self.error(it, "for-loops must iterate over range(...), kl.range(...), kl.static_range(...) or a tuple")

    def _scf_for(self, node, rng):
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a single name")
        bounds = [semantic.to_tensor(v) for v in (rng.start, rng.end, rng.step)]
        for b in bounds:
            if not b.dtype.is_int() or b.type.is_block():
                raise self.error(node.iter, f"range() bounds must be scalar integers, got {b.type}")
        step = rng.step
        if not _is_runtime(step) and step == 0:
            raise self.error(node.iter, "range() step must not be zero")
        iv_ty = kl.int64 if any(b.dtype.int_bitwidth == 64 for b in bounds) else kl.int32
        bounds = [semantic.cast(b, iv_ty) for b in bounds]
        target = node.target.id
        carried = [n for n in _assigned_names(node.body) if n in self.scope and n != target
                   and not isinstance(self.scope[n], _Undefined)]
        init_vals = [self.scope[n] for n in carried]
        carry = _Carry(*self._carriable(carried, init_vals, node))

        def body(block_args):
            self.scope[target] = tensor(block_args[0], iv_ty)
            carry.bind(self.scope, [tensor(a, a.type) for a in block_args[1:]])
            self.visit_block(node.body)

        attrs = {}
        if rng.num_stages is not None:
            attrs["num_stages"] = int(rng.num_stages)
        if rng.loop_unroll_factor is not None:
            attrs["unroll"] = int(rng.loop_unroll_factor)
        for name in ("warp_specialize", "async_tail", "refill_top"):
            v = getattr(rng, name, None)
            if v is not None and not isinstance(v, (bool, int)):
                raise self.error(node.iter, f"range({name}=...) must be a compile-time True or False, got {v!r}")
        if getattr(rng, "warp_specialize", None) is not None:
            attrs["warp_specialize"] = bool(rng.warp_specialize)
        if getattr(rng, "flatten", False):
            attrs["flatten"] = True  # a request: passes/flatten_loops.py decides
        if getattr(rng, "async_tail", None) is not None:
            attrs["async_tail"] = bool(rng.async_tail)  # a request: passes/schedule.py (_async_tail) decides
        if getattr(rng, "refill_top", None) is not None:
            attrs["refill_top"] = bool(rng.refill_top)  # a request: passes/rings.py (_refill_top) decides
        results = self._loop(node, "scf.for", carry, body, [b.handle for b in bounds], [iv_ty], attrs)
        self.scope.pop(target, None)
        carry.bind(self.scope, results)

    def visit_While(self, node):
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported")
        if _contains_return(ast.Module(body=node.body, type_ignores=[])):
            raise self.error(node, syntax.RETURN_IN_LOOP)
        carried = [n for n in _assigned_names(node.body) if n in self.scope and not isinstance(self.scope[n], _Undefined)]
        init_vals = [self.scope[n] for n in carried]
        carry = _Carry(*self._carriable(carried, init_vals, node))
        before_block_holder = {}

        def before(block_args):
            carry.bind(self.scope, [tensor(a, a.type) for a in block_args])
            cond = self.visit(node.test)
            cond = semantic.to_tensor(cond)
            cond = self._scalar_condition(cond, node.test)
            self.builder.create("scf.condition", [cond.handle] + list(block_args), None)

        def body(block_args):
            carry.bind(self.scope, [tensor(a, a.type) for a in block_args])
            self.visit_block(node.body)

        before_block_holder["fn"] = before
        results = self._loop(node, "scf.while", carry, body, [], [], {}, before=before)
        carry.bind(self.scope, results)

    def _carriable(self, names, vals, node):
        out_n, out_v = [], []
        for n, v in zip(names, vals):
            if _is_runtime(v) or _is_number(v) or isinstance(v, aggregate):
                out_n.append(n)
                out_v.append(v)
            # Other Python objects (dtypes, functions) reassigned in the loop are not supported.
        return out_n, out_v

    def _loop(self, node, opname, carry, body_fn, lead_operands, lead_types, attrs, before=None):
        """Generate a loop op, discovering carried types by a dry run of the body first."""
        saved_scope = dict(self.scope)
        init_vals = carry.live_inits
        types = [v.type if _is_runtime(v) else semantic.literal_type(v) for v in init_vals]
        literal = [not _is_runtime(v) for v in init_vals]
        for attempt in range(3):
            carried = carry.live_names
            outs, dry_args = self._run_body(body_fn, lead_types + types, carry, before, dry=True)
            self.scope = dict(saved_scope)
            new_types = []
            changed = False
            for n, t, o, lit in zip(carried, types, outs, literal):
                if isinstance(o, _Undefined):
                    ot = t
                else:
                    ot = o.type if _is_runtime(o) else semantic.literal_type(o)
                if ot != t:
                    if lit or (not _is_runtime(o) and not isinstance(o, _Undefined)):
                        # A literal initial value takes the type the loop gives it (`acc = 0` then `acc += x`).
                        new_types.append(ot if lit else t)
                        changed = changed or lit
                        continue
                    raise self.error(node, f"loop-carried variable {n!r} has type {t} before the loop but "
                                           f"{ot} after one iteration; give it the final type before the loop")
                new_types.append(t)
            types = new_types
            if not changed:
                break
        # aggregate parts the body leaves as they were are not carried (see _Carry.fix_invariant)
        kept = carry.fix_invariant(outs, dry_args[len(lead_types):])
        types = [types[i] for i in kept]
        init_vals = carry.live_inits
        carry.check_carriable(lambda msg: self.error(node, msg))
        self.scope = dict(saved_scope)
        inits = []
        for v, t in zip(init_vals, types):
            x = semantic.to_tensor(v)
            if x.type != t:
                x = semantic.cast(x, t.scalar)
                if t.is_block():
                    x = semantic.broadcast_to(x, t.shape)
            inits.append(x)
        regions, outs = self._run_body(body_fn, lead_types + types, carry, before, dry=False, types=types)
        self.scope = dict(saved_scope)
        op = Op(opname, lead_operands + [x.handle for x in inits], types, attrs, regions=regions,
                loc=self.loc_of(node))
        self.builder.append(op)
        return [tensor(r, r.type) for r in op.results]

    def _run_body(self, body_fn, block_types, carry, before, dry, types=None):
        regions = []
        if before is not None:
            bblock = Block(block_types)
            self.builder.push(bblock)
            try:
                before(bblock.args)
            finally:
                self.builder.pop()
            regions.append(bblock)
        block = Block(block_types)
        self.builder.push(block)
        try:
            body_fn(block.args)
            outs = carry.gather(self.scope, lambda msg: self.error(self.cur_node, msg))
            if dry:
                return outs, block.args
            carried = carry.live_names
            vals = []
            for n, o, t in zip(carried, outs, types):
                if isinstance(o, _Undefined):
                    raise self.error(self.cur_node, f"loop-carried variable {n!r} is undefined at the end of the loop body")
                x = semantic.to_tensor(o)
                if x.type != t:
                    if x.type.scalar != t.scalar:
                        x = semantic.cast(x, t.scalar)
                    if x.type != t and t.is_block():
                        x = semantic.broadcast_to(x, t.shape)
                    if x.type != t:
                        raise self.error(self.cur_node, f"loop-carried variable {n!r} changes type from {t} to {x.type} in the loop body")
                vals.append(x)
            self.builder.create("scf.yield", [v.handle for v in vals], None)
        finally:
            self.builder.pop()
        regions.append(block)
        return regions, outs

    # -- expressions --------------------------------------------------------------------------
    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        return self.lookup(node.id, node)

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node):
        return [self.visit(e) for e in node.elts]

    def visit_JoinedStr(self, node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                val = self.visit(v.value)
                if _is_runtime(val):
                    parts.append(f"<{val.type}>")
                else:
                    spec = self.visit(v.format_spec) if v.format_spec else ""
                    parts.append(format(val, spec))
        return "".join(parts)

    def visit_FormattedValue(self, node):
        return self.visit(node.value)

    def visit_Attribute(self, node):
        obj = self.visit(node.value)
        try:
            v = getattr(obj, node.attr)
            if isinstance(obj, types.ModuleType):  # cfg.TABLE: folded like a global of that module
                self.used_globals.add_global(obj.__name__, node.attr, v)
            return v
        except AttributeError:
            what = "a tile" if _is_runtime(obj) else f"{type(obj).__name__}"
            raise self.error(node, f"{what} has no attribute {node.attr!r}") from None

    def visit_Subscript(self, node):
        obj = self.visit(node.value)
        idx = self.visit(node.slice)
        if _is_runtime(obj):
            return obj[idx]
        if _is_runtime(idx):
            raise self.error(node, "a compile-time sequence cannot be indexed with a runtime value")
        return obj[idx]

    def visit_Slice(self, node):
        return slice(self.visit(node.lower) if node.lower else None, self.visit(node.upper) if node.upper else None,
                     self.visit(node.step) if node.step else None)

    def visit_BinOp(self, node):
        return self._binop(node.op, self.visit(node.left), self.visit(node.right), node)

    def _binop(self, op, lhs, rhs, node):
        fn = _BINOPS.get(type(op))
        if fn is None:
            raise self.error(node, syntax.MATMUL)
        lhs, rhs = _unwrap(lhs), _unwrap(rhs)
        try:
            return fn(lhs, rhs)
        except ZeroDivisionError:
            raise self.error(node, "division by zero in a compile-time expression") from None

    def visit_UnaryOp(self, node):
        v = _unwrap(self.visit(node.operand))
        if isinstance(node.op, ast.Not):
            return semantic.logical_not(v) if _is_runtime(v) else (not v)
        return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](v)

    def visit_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        result = None
        for i, e in enumerate(node.values):
            v = _unwrap(self.visit(e))
            if i == 0:
                result = v
            elif _is_runtime(result) or _is_runtime(v):
                result = semantic.logical_and(result, v) if is_and else semantic.logical_or(result, v)
            else:
                result = (result and v) if is_and else (result or v)
            # Python short-circuit on compile-time values.
            if not _is_runtime(result) and ((is_and and not result) or (not is_and and result)):
                return result
        return result

    def visit_Compare(self, node):
        left = _unwrap(self.visit(node.left))
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = _unwrap(self.visit(comp))
            r = _CMPOPS[type(op)](left, right)
            result = r if result is None else (semantic.logical_and(result, r) if (_is_runtime(result) or _is_runtime(r)) else (result and r))
            left = right
        return result

    def visit_IfExp(self, node):
        cond = _unwrap(self.visit(node.test))
        if not _is_runtime(cond):
            return self.visit(node.body) if cond else self.visit(node.orelse)
        return semantic.where(cond, self.visit(node.body), self.visit(node.orelse))

    def visit_Call(self, node):
        fn = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit(a.value))
            else:
                args.append(self.visit(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.visit(k.value))
            else:
                kwargs[k.arg] = self.visit(k.value)
        self.builder.loc = self.loc_of(node)
        if isinstance(fn, DeviceFunction):
            return self.call_function(fn, args, kwargs, node)
        special = _BUILTIN_CALLS.get(fn) if _hashable(fn) else None
        if special is not None:
            return special(self, args, kwargs, node)
        if fn is builtins.range or fn is kl.range or fn is static_range:
            raise self.error(node, "range() can only be used as the iterable of a for-loop")
        if not callable(fn):
            raise self.error(node, f"{_type_name(fn)} is not callable")
        if is_user_function(fn):  # a plain Python helper runs on the tiles: its code is part of the build
            self.used_globals.add_function(fn)
        return fn(*args, **kwargs)

    def call_function(self, fn: DeviceFunction, args, kwargs, node):
        if self.depth >= MAX_INLINE_DEPTH:
            raise self.error(node, syntax.TOO_DEEP)
        syntax.check(fn)
        if not (fn.__module__ or "").startswith("kernelc."):  # reached by any route (a dict, an argument)
            self.used_globals.add_function(fn)
        try:
            bound = fn.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise self.error(node, f"{fn.__name__}(): {e}") from None
        bound.apply_defaults()
        scope = {}
        for name, v in bound.arguments.items():
            # a kl.constexpr annotation on a device function's parameter only matters for values known
            # at compile time: a runtime tensor passes through as a value (Triton does the same, and its
            # tutorial 06 passes `offs_m` so)
            scope[name] = _unwrap(v) if isinstance(v, constexpr) else v
        gen = CodeGenerator(fn, self.builder, scope, kernel_name=self.kernel_name, depth=self.depth + 1,
                            used_globals=self.used_globals)
        gen.visit_block(fn.parse().body)
        return gen.ret_value


_MISSING = object()


def _what(v) -> str:
    if isinstance(v, aggregate):
        return f"a {v._kc_what} ({v!r})"
    if _is_runtime(v):
        return f"a {v.type} value"
    return _type_name(v)


class _Carry:
    """Loop-carried names as a flat list of leaves: a tensor or number is one leaf, an aggregate
    (block pointer, tensor descriptor) one leaf per runtime part. Aggregate parts that the dry run
    of the body leaves as they were (a block pointer's base, shape and strides under ``advance``)
    are *fixed*: bound to their value from before the loop instead of carried, so what the compiler
    knows about them (constants, divisibility) holds inside the loop too."""

    def __init__(self, names, values):
        self.names, self.values = list(names), list(values)
        self.slots: List[Tuple[int, Optional[int]]] = []  # (name index, part index or None)
        self.inits: List[Any] = []
        for i, v in enumerate(self.values):
            if isinstance(v, aggregate):
                for j, part in enumerate(v._kc_parts()):
                    self.slots.append((i, j))
                    self.inits.append(part)
            else:
                self.slots.append((i, None))
                self.inits.append(v)
        self.fixed: Dict[int, Any] = {}  # slot -> value

    @property
    def live(self) -> List[int]:
        return [k for k in range(len(self.slots)) if k not in self.fixed]

    @property
    def live_inits(self) -> list:
        return [self.inits[k] for k in self.live]

    @property
    def live_names(self) -> List[str]:
        out = []
        for k in self.live:
            i, j = self.slots[k]
            out.append(self.names[i] if j is None else f"{self.names[i]} (part {j} of the {self.values[i]._kc_what})")
        return out

    def bind(self, scope, leaves) -> None:
        """Set each name from the live leaves (block arguments, loop results) and the fixed ones."""
        vals = dict(self.fixed)
        vals.update(zip(self.live, leaves))
        parts: Dict[int, list] = {}
        for k, (i, j) in enumerate(self.slots):
            if j is None:
                scope[self.names[i]] = vals[k]
            else:
                parts.setdefault(i, []).append(vals[k])
        for i, ps in parts.items():
            init = self.values[i]
            mine = [k for k, (a, _) in enumerate(self.slots) if a == i]
            scope[self.names[i]] = init if all(k in self.fixed for k in mine) else init._kc_rebuild(ps)

    def gather(self, scope, error) -> list:
        """The live leaves of each name at the end of the body (``_Undefined`` for a missing plain name)."""
        outs: Dict[Tuple[int, Optional[int]], Any] = {}
        for i, n in enumerate(self.names):
            v, init = scope.get(n, _Undefined("")), self.values[i]
            if isinstance(init, aggregate):
                if not isinstance(v, aggregate) or v._kc_structure() != init._kc_structure():
                    raise error(f"loop-carried variable {n!r} is {_what(init)} before the loop but "
                                f"{_what(v) if not isinstance(v, _Undefined) else 'undefined'} after one "
                                f"iteration; keep its kind (and block shape) in the loop")
                for j, part in enumerate(v._kc_parts()):
                    outs[(i, j)] = part
            elif isinstance(v, aggregate):
                raise error(f"loop-carried variable {n!r} is {_what(init)} before the loop but {_what(v)} after "
                            f"one iteration; make it a {v._kc_what} before the loop")
            else:
                outs[(i, None)] = v
        return [outs[self.slots[k]] for k in self.live]

    def fix_invariant(self, outs, block_args) -> List[int]:
        """Fix the aggregate parts whose end-of-body value is their own block argument; returns the
        positions (among the previously live leaves) that stay carried."""
        kept = []
        for pos, (k, o, a) in enumerate(zip(self.live, outs, block_args)):
            if self.slots[k][1] is not None and _is_runtime(o) and o.handle is a:
                self.fixed[k] = self.inits[k]
            else:
                kept.append(pos)
        return kept

    def check_carriable(self, error) -> None:
        for k in self.live:
            i, j = self.slots[k]
            v = self.values[i]
            if j is not None and not v._kc_carriable:
                raise error(f"the {v._kc_what} {self.names[i]!r} is reassigned inside the loop; compiled code must "
                            f"see where a {v._kc_what} is made: make it before the loop and keep it, or make "
                            f"it inside the loop body where it is used")


class _Branch:
    """Runs one branch of a runtime ``if`` in its own block and scope."""

    def __init__(self, gen: CodeGenerator, stmts, before):
        self.gen, self.stmts, self.before = gen, stmts, before

    def run(self):
        g = self.gen
        saved_scope, saved_ret, saved_val = g.scope, g.returned, g.ret_value
        g.scope, g.returned, g.ret_value = dict(self.before), False, None
        self.block = Block()
        g.builder.push(self.block)
        try:
            g.visit_block(self.stmts)
        finally:
            g.builder.pop()
        self.scope, self.returned, self.ret_value = g.scope, g.returned, g.ret_value
        g.scope, g.returned, g.ret_value = saved_scope, saved_ret, saved_val
        return self


def _unwrap(v):
    return v.value if isinstance(v, constexpr) else v


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float))


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _type_name(v) -> str:
    if _is_runtime(v):
        return str(v.type)
    if _is_number(v):
        return f"{type(v).__name__} constant"
    return type(v).__name__


def _common_type(a, b) -> Optional[base_type]:
    ta = a.type if _is_runtime(a) else None
    tb = b.type if _is_runtime(b) else None
    if ta is not None and tb is not None:
        if ta == tb:
            return ta
        if ta.is_block() != tb.is_block() and ta.scalar == tb.scalar:
            return ta if ta.is_block() else tb
        return None
    if ta is None and tb is None:  # two different literals
        la, lb = semantic.literal_type(a), semantic.literal_type(b)
        return la if la == lb else semantic.computation_type(la, False, lb, False, False)
    t = ta or tb
    return t  # a literal takes the tensor's type


def _message(e: Exception) -> str:
    msg = str(e) or type(e).__name__
    if isinstance(e, (TypeError, ValueError, AssertionError, NotImplementedError, NameError, AttributeError,
                      KeyError, IndexError, RuntimeError)):
        return msg
    return f"{type(e).__name__}: {msg}"


# -- Python builtins inside kernels ------------------------------------------------------------


def _minmax(which):
    def call(gen, args, kwargs, node):
        vals = [_unwrap(a) for a in (args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args)]
        if not any(_is_runtime(v) for v in vals):
            return (builtins.min if which == "min" else builtins.max)(*vals, **kwargs)
        acc = vals[0]
        for v in vals[1:]:
            acc = kl.minimum(acc, v) if which == "min" else kl.maximum(acc, v)
        return acc
    return call


def _print(gen, args, kwargs, node):
    if any(_is_runtime(a) for a in args):
        prefix = args[0] if args and isinstance(args[0], str) else ""
        rest = args[1:] if prefix else args
        return kl.device_print(prefix, *rest)
    return kl.static_print(*args, **kwargs)


def _isinstance(gen, args, kwargs, node):
    return builtins.isinstance(*args)


def _len(gen, args, kwargs, node):
    v = args[0]
    if _is_runtime(v):
        if not v.type.is_block():
            raise gen.error(node, "len() of a scalar")
        return v.shape[0]
    return len(v)


def _int_float(kind):
    def call(gen, args, kwargs, node):
        v = _unwrap(args[0]) if args else 0
        if _is_runtime(v):
            return v.to(kl.int32 if kind is builtins.int else kl.float32)
        return kind(v)
    return call


_BUILTIN_CALLS = {
    builtins.min: _minmax("min"),
    builtins.max: _minmax("max"),
    builtins.print: _print,
    builtins.isinstance: _isinstance,
    builtins.len: _len,
    builtins.int: _int_float(builtins.int),
    builtins.float: _int_float(builtins.float),
}


# -- entry point ----------------------------------------------------------------------------------


def _host_descriptor(name, ty, func, index, arch):
    """The descriptor value of host descriptor parameter ``name`` from its machine arguments."""
    from ...language.blocks import host_descriptor
    from ..abi import flat_params
    parts: Dict[str, list] = {}
    for mname, mty, field in flat_params(name, ty, arch):
        parts.setdefault(field.role, []).append(tensor(func.body.args[index[mname]], mty))
    return host_descriptor(ty, parts["base"][0], parts["shape"], parts.get("stride", []), name)


def generate_ir(fn: DeviceFunction, signature: Dict[str, Any], constexprs: Dict[str, Any],
                divisibility: Optional[Dict[str, int]] = None, equal_to_1: Tuple[str, ...] = (),
                name: Optional[str] = None, arch: Optional[str] = None,
                num_warps: Optional[int] = None) -> Tuple[Function, Dict[str, Any]]:
    """Build the tile IR of kernel ``fn``.

    ``signature`` maps each runtime argument to its type (``"*fp32"``, ``"i32"``,
    ``"tensordesc<fp16[64, 64]>"``, a kl type); ``constexprs`` maps constexpr (and None) arguments to
    their values; ``divisibility`` gives the known byte alignment of pointers / divisor of integers
    (16-byte specialisation), per machine parameter. A tensor descriptor argument becomes several
    function arguments (see ``kernelc/compiler/abi.py``; ``arch`` may add fields) and one
    ``make_tensor_descriptor`` op.
    Returns the IR function and what it read from the Python world (:class:`Dependencies`).
    """
    from ...language.dtypes import parse_type
    from ..abi import flat_divisibility, flat_params
    divisibility = divisibility or {}
    params = fn.arg_names
    unknown = [k for k in list(signature) + list(constexprs) if k not in params]
    if unknown:
        raise CompilationError(f"{fn.__name__} has no parameter(s) {', '.join(map(repr, unknown))}; "
                               f"its parameters are {', '.join(params)}", fn.file, fn.first_line, None, fn.__name__)
    missing = [p for p in params if p not in signature and p not in constexprs
               and fn.signature.parameters[p].default is inspect.Parameter.empty]
    if missing:
        raise CompilationError(f"{fn.__name__} needs a type or value for parameter(s) {', '.join(map(repr, missing))}",
                               fn.file, fn.first_line, None, fn.__name__)
    args, scope = [], {}
    types = {p: parse_type(signature[p]) for p in params if p in signature}
    divisibility = flat_divisibility(types, divisibility)
    for p in params:
        if p in signature:
            for mname, mty, _ in flat_params(p, types[p], arch):
                args.append(Argument(mname, mty, divisibility.get(mname, 1), mname in equal_to_1))
    func = Function(name or fn.__name__, args, fn.file, fn.first_line,
                    {k: v for k, v in constexprs.items()})
    used_globals = Dependencies()
    builder = IRBuilder(trace_function=None)
    builder.arch = arch  # kl.target_info
    builder.num_warps = num_warps  # kl.extra.cuda.num_warps()
    if arch:
        from ..target_rules import arch_has_tma, tma_enabled
        builder.block_pointers_as_descriptors = arch_has_tma(arch) and tma_enabled()
    gen_holder = {}

    def trace(combine_fn, targs):
        gen = gen_holder["gen"]
        if not isinstance(combine_fn, DeviceFunction):
            raise TypeError(f"combine_fn must be a @kernelc.jit function, got {combine_fn!r}")
        return gen.call_function(combine_fn, targs, {}, gen.cur_node)

    builder._trace = trace
    index = {a.name: i for i, a in enumerate(args)}
    descriptors = []
    for p in params:
        if p in signature:
            if isinstance(types[p], tensor_descriptor_type):
                descriptors.append(p)  # made from its flattened arguments in the body, below
                continue
            v = func.body.args[index[p]]
            scope[p] = 1 if p in equal_to_1 else tensor(v, v.type)
        elif p in constexprs:
            scope[p] = _unwrap(constexprs[p])
        else:
            scope[p] = _unwrap(fn.signature.parameters[p].default)
    gen = CodeGenerator(fn, builder, scope, kernel_name=func.name, used_globals=used_globals)
    gen_holder["gen"] = gen
    builder.push(func.body)
    with builder_scope(builder):
        builder.loc = Loc(fn.file, fn.first_line, 0, fn.__name__)
        for p in descriptors:
            scope[p] = _host_descriptor(p, types[p], func, index, arch)
        syntax.check(fn)
        gen.visit_block(fn.parse().body)
        if gen.ret_value is not None:
            raise CompilationError(syntax.RETURN_VALUE, fn.file, fn.first_line, None, fn.__name__)
        builder.loc = Loc(fn.file, fn.first_line, 0, fn.__name__)
        builder.create("return", [], None)
    builder.pop()
    return func, used_globals
