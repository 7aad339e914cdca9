"""The builder that records tile-IR ops (the compiler's side of the language's builder contract)."""
from __future__ import annotations

from typing import List, Optional

from ...language.core import tensor
from ...language.dtypes import block_type, scalar_of, shape_of
from ..ir.core import Block, Loc, Op, UNKNOWN_LOC


class IRBuilder:
    """Appends ops at an insertion point; ``loc`` is set by the frontend before each expression."""

    is_interpreter = False
    # set by the frontend for targets with TMA: block pointers whose accesses check every dim become
    # tensor-descriptor ops (language/blocks.py ``_as_descriptor``)
    block_pointers_as_descriptors = False

    def __init__(self, trace_function):
        # trace_function(fn, args: list[tensor]) -> list[tensor]: inlines a device function (combine
        # regions of reduce/scan); provided by the frontend so this module needs no AST knowledge.
        self._trace = trace_function
        self.blocks: List[Block] = []
        self.loc: Loc = UNKNOWN_LOC

    # -- insertion point --------------------------------------------------------------------
    @property
    def block(self) -> Block:
        return self.blocks[-1]

    def push(self, block: Block) -> Block:
        self.blocks.append(block)
        return block

    def pop(self) -> Block:
        return self.blocks.pop()

    def append(self, op: Op) -> Op:
        return self.block.append(op)

    # -- builder contract -------------------------------------------------------------------
    def create(self, name, operands, ty, **attrs):
        op = self.append(Op(name, operands, [] if ty is None else [ty], attrs, loc=self.loc))
        return op.results[0] if op.results else None

    def create_multi(self, name, operands, tys, **attrs):
        op = self.append(Op(name, operands, list(tys), attrs, loc=self.loc))
        return list(op.results)

    def constant(self, value, ty):
        return self.create("constant", [], ty, value=value)

    def _combine_region(self, inputs: List[tensor], combine_fn, what: str) -> (Block, list):
        elts = [scalar_of(i.type) for i in inputs]
        region = Block(elts * 2)
        self.push(region)
        try:
            outs = self._trace(combine_fn, [tensor(a, a.type) for a in region.args])
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            if len(outs) != len(inputs):
                raise TypeError(f"{what} combine function returned {len(outs)} values for {len(inputs)} inputs")
            from ...language import semantic
            outs = [semantic.to_tensor(o) for o in outs]
            for o, e in zip(outs, elts):
                if o.type.is_block():
                    raise TypeError(f"{what} combine function must return scalars, got a tile {o.type}")
                if o.type != e:
                    raise TypeError(f"{what} combine function returns {o.type} for an input of {e}; "
                                    f"cast inside the combine function")
            self.create("reduce.return", [o.handle for o in outs], None)
        finally:
            self.pop()
        return region, elts

    def reduce(self, inputs, axis, combine_fn, kind):
        region, elts = self._combine_region(inputs, combine_fn, "reduce")
        shape = list(shape_of(inputs[0].type))
        out_shape = shape[:axis] + shape[axis + 1:]
        tys = [block_type(e, out_shape) if out_shape else e for e in elts]
        op = self.append(Op("reduce", [i.handle for i in inputs], tys, {"axis": axis, "kind": kind},
                            regions=[region], loc=self.loc))
        return [(r, e) for r, e in zip(op.results, elts)]

    def scan(self, inputs, axis, combine_fn, kind, reverse):
        region, elts = self._combine_region(inputs, combine_fn, "associative_scan")
        tys = [i.type for i in inputs]
        op = self.append(Op("scan", [i.handle for i in inputs], tys,
                            {"axis": axis, "reverse": reverse, "kind": kind}, regions=[region], loc=self.loc))
        return [(r, e) for r, e in zip(op.results, elts)]

    def map_elementwise(self, fn, inputs: List[tensor], shape):
        """``fn`` traced once on scalars into a region applied per element (it may branch on values)."""
        elts = [scalar_of(i.type) for i in inputs]
        region = Block(list(elts))
        self.push(region)
        try:
            outs = self._trace(fn, [tensor(a, a.type) for a in region.args])
            single = not isinstance(outs, (tuple, list))
            from ...language import semantic
            outs = [semantic.to_tensor(o) for o in ([outs] if single else outs)]
            for o in outs:
                if o.type.is_block():
                    raise TypeError(f"map_elementwise() function must return scalars, got a tile {o.type}")
            self.create("reduce.return", [o.handle for o in outs], None)
        finally:
            self.pop()
        tys = [block_type(o.type, shape) if shape else o.type for o in outs]
        op = self.append(Op("map_elementwise", [i.handle for i in inputs], tys, {}, regions=[region], loc=self.loc))
        res = [tensor(r, t) for r, t in zip(op.results, tys)]
        return res[0] if single else tuple(res)
