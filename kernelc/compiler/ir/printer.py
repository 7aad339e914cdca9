"""Readable text form of the tile IR (``compiled.asm["tir"]``).

Example::

    kernel add_kernel(%x_ptr: *fp32 {div=16}, %y_ptr: *fp32 {div=16}, %n: i32) {
      %0 = program_id {axis=0} : i32                          # add.py:5
      %1 = arange {start=0, end=1024} : <1024xi32>            # add.py:6
      ...
    }
"""
from __future__ import annotations

import os
from typing import Dict, List

from .core import Block, Function, Op, Value

_SKIP_ATTRS = {"types"}


class _Namer:
    def __init__(self):
        self.names: Dict[int, str] = {}
        self.n = 0

    def __call__(self, v: Value) -> str:
        name = self.names.get(v.id)
        if name is None:
            if v.name:
                base = v.name
                name = f"%{base}"
                if name in self.names.values():
                    name = f"%{base}_{self.n}"
                    self.n += 1
            else:
                name = f"%{self.n}"
                self.n += 1
            self.names[v.id] = name
        return name


def _fmt_attr(v) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(_fmt_attr(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, dict):  # structured attributes (the schedule): {key=value, ...}
        return "{" + ", ".join(f"{k}={_fmt_attr(x)}" for k, x in v.items()) + "}"
    return str(v)


def _print_block(block: Block, namer: _Namer, indent: int, out: List[str], show_loc: bool):
    pad = "  " * indent
    for op in block.ops:
        res = ", ".join(namer(r) for r in op.results)
        lhs = f"{res} = " if res else ""
        args = ", ".join(namer(o) for o in op.operands)
        attrs = {k: v for k, v in op.attrs.items()
                 if k not in _SKIP_ATTRS and v is not None and v is not False and v != ""}
        attr_s = (" {" + ", ".join(f"{k}={_fmt_attr(v)}" for k, v in attrs.items()) + "}") if attrs else ""
        tys = ", ".join(str(r.type) for r in op.results)
        line = f"{pad}{lhs}{op.name}{(' ' + args) if args else ''}{attr_s}{(' : ' + tys) if tys else ''}"
        if show_loc and op.loc.line:
            line = f"{line:<72} # {os.path.basename(op.loc.file)}:{op.loc.line}"
        out.append(line)
        for i, region in enumerate(op.regions):
            bargs = ", ".join(f"{namer(a)}: {a.type}" for a in region.args)
            label = {"scf.if": ("then", "else"), "scf.while": ("before", "after")}.get(op.name, ("body",) * 4)[i]
            out.append(f"{pad}  ^{label}({bargs}):")
            _print_block(region, namer, indent + 2, out, show_loc)


def print_function(fn: Function, show_loc: bool = True) -> str:
    namer = _Namer()
    args = []
    for a, v in zip(fn.arguments, fn.body.args):
        extra = []
        if a.divisibility > 1:
            extra.append(f"div={a.divisibility}")
        if a.equal_to_1:
            extra.append("equal_to_1")
        args.append(f"{namer(v)}: {a.type}" + (" {" + ", ".join(extra) + "}" if extra else ""))
    cx = ""
    if fn.constexprs:
        cx = "  // constexprs: " + ", ".join(f"{k}={v!r}" for k, v in fn.constexprs.items())
    attrs = {k: v for k, v in fn.attrs.items() if v is not None and v is not False and v != ""}
    attr_s = (" attributes {" + ", ".join(f"{k}={_fmt_attr(v)}" for k, v in attrs.items()) + "}") if attrs else ""
    out = [f"kernel {fn.name}({', '.join(args)}){attr_s} {{{cx}"]
    _print_block(fn.body, namer, 1, out, show_loc)
    out.append("}")
    return "\n".join(out)


def print_op(op: Op) -> str:
    b = Block()
    b.ops = [op]
    out: List[str] = []
    _print_block(b, _Namer(), 0, out, True)
    return "\n".join(out)
