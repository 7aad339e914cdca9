"""A small LLVM IR text builder for NVPTX kernels, with source locations on every instruction.

Text is built directly (not through llvmlite.ir objects) because it is several times faster for the
thousands of per-thread instructions a tile kernel expands to; llvmlite parses and optimises it.
Debug info uses ``emissionKind: DebugDirectivesOnly`` so PTX gets ``.loc`` lines while ptxas still
optimises fully (see TOOLCHAIN.md).
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ...language.dtypes import dtype, pointer_type

# LLVM types of kernelc element types (fp8 travels as i8 bits).
LLVM_TYPE = {
    "int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "i8", "uint16": "i16", "uint32": "i32", "uint64": "i64",
    "fp8e4nv": "i8", "fp8e5": "i8", "fp16": "half", "bf16": "bfloat", "fp32": "float", "fp64": "double",
}
GLOBAL_PTR = "ptr addrspace(1)"
SHARED_PTR = "ptr addrspace(3)"


def llty(t) -> str:
    if isinstance(t, pointer_type):
        return GLOBAL_PTR
    return LLVM_TYPE[t.name]


def float_literal(x: float, ty: str) -> str:
    """LLVM spells float constants as exact hex doubles (half/bfloat as their own hex forms)."""
    import struct
    if ty == "half":
        import numpy as np
        return "0xH%04X" % int(np.array(x, dtype=np.float16).view(np.uint16))
    if ty == "bfloat":
        import ml_dtypes
        import numpy as np
        return "0xR%04X" % int(np.array(x, dtype=ml_dtypes.bfloat16).view(np.uint16))
    if ty == "float":
        x = struct.unpack("f", struct.pack("f", float(x)))[0] if x == x and abs(x) != float("inf") else x
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(x)))[0]


class Emitter:
    """Builds one module with one kernel function."""

    def __init__(self, kernel_name: str, file: str, line: int):
        self.kernel = kernel_name
        self.body: List[str] = []
        self.allocas: List[str] = []
        self.decls: Dict[str, str] = {}
        self.globals: List[str] = []
        self.n = 0
        self.nlabel = 0
        self.cur_label = "entry"
        # debug metadata
        self.meta: List[str] = []
        self.nmeta = 0
        self.files: Dict[str, int] = {}
        self.scopes: Dict[str, int] = {}
        self.locs: Dict[Tuple[int, int, str], int] = {}
        self.cur_dbg: Optional[int] = None
        self.main_file = file
        self._init_debug(file, line)

    # -- metadata ------------------------------------------------------------------------------
    def _md(self, text: str) -> int:
        i = self.nmeta
        self.nmeta += 1
        self.meta.append(f"!{i} = {text}")
        return i

    def _file(self, path: str) -> int:
        i = self.files.get(path)
        if i is None:
            d, b = os.path.split(path)
            i = self._md(f'!DIFile(filename: "{_esc(b)}", directory: "{_esc(d)}")')
            self.files[path] = i
        return i

    def _init_debug(self, file, line):
        f = self._file(file)
        self.cu = self._md(f'distinct !DICompileUnit(language: DW_LANG_Python, file: !{f}, producer: "kernelc", '
                           f'isOptimized: true, runtimeVersion: 0, emissionKind: DebugDirectivesOnly)')
        st = self._md("!DISubroutineType(types: !{})")
        self.sp = self._md(f'distinct !DISubprogram(name: "{self.kernel}", linkageName: "{self.kernel}", scope: !{f}, '
                           f'file: !{f}, line: {line}, type: !{st}, scopeLine: {line}, '
                           f'spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !{self.cu})')
        self.scopes[file] = self.sp

    def _scope(self, file: str) -> int:
        s = self.scopes.get(file)
        if s is None:  # lines of an inlined helper in another file
            s = self._md(f"distinct !DILexicalBlockFile(scope: !{self.sp}, file: !{self._file(file)}, discriminator: 0)")
            self.scopes[file] = s
        return s

    def set_loc(self, file: str, line: int, col: int = 0) -> None:
        if not line:
            self.cur_dbg = None
            return
        key = (line, col, file)
        i = self.locs.get(key)
        if i is None:
            i = self._md(f"!DILocation(line: {line}, column: {col + 1}, scope: !{self._scope(file)})")
            self.locs[key] = i
        self.cur_dbg = i

    # -- instructions --------------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        self.n += 1
        return f"%{prefix}{self.n}"

    def label(self, prefix: str = "bb") -> str:
        self.nlabel += 1
        return f"{prefix}{self.nlabel}"

    def _dbg(self) -> str:
        return f", !dbg !{self.cur_dbg}" if self.cur_dbg is not None else ""

    def emit(self, text: str) -> None:
        """An instruction without a result (store, br, call void...)."""
        self.body.append(f"  {text}{self._dbg()}")

    def val(self, text: str, prefix: str = "v") -> str:
        """An instruction with a result; returns its SSA name."""
        name = self.fresh(prefix)
        self.body.append(f"  {name} = {text}{self._dbg()}")
        return name

    def start_block(self, label: str) -> None:
        self.body.append(f"{label}:")
        self.cur_label = label

    def br(self, label: str) -> None:
        self.emit(f"br label %{label}")

    def cond_br(self, cond: str, t: str, f: str) -> None:
        self.emit(f"br i1 {cond}, label %{t}, label %{f}")

    def declare(self, name: str, signature: str) -> None:
        self.decls.setdefault(name, signature)

    def call(self, ret: str, name: str, args: List[Tuple[str, str]], signature: Optional[str] = None) -> Optional[str]:
        argtxt = ", ".join(f"{t} {v}" for t, v in args)
        if signature is None:
            signature = f"declare {ret} @{name}({', '.join(t for t, _ in args)})"
        self.declare(name, signature)
        if ret == "void":
            self.emit(f"call void @{name}({argtxt})")
            return None
        return self.val(f"call {ret} @{name}({argtxt})")

    def asm(self, ret: str, code: str, constraints: str, args: List[Tuple[str, str]], side_effects=True) -> Optional[str]:
        argtxt = ", ".join(f"{t} {v}" for t, v in args)
        se = " sideeffect" if side_effects else ""
        code = code.replace("\\", "\\\\").replace('"', '\\22').replace("\n", "\\0A")
        text = f'call {ret} asm{se} "{code}", "{constraints}"({argtxt})'
        if ret == "void":
            self.emit(text)
            return None
        return self.val(text)

    def add_global(self, text: str) -> None:
        self.globals.append(text)

    # -- module --------------------------------------------------------------------------------
    def module(self, params: List[Tuple[str, str]], attrs: str = "", maxntid: Optional[int] = None) -> str:
        ptxt = ", ".join(f"{t} {a} %{n}" if a else f"{t} %{n}" for t, n, a in
                         [(p[0], p[1], p[2] if len(p) > 2 else "") for p in params])
        lines = ['target datalayout = "e-p:64:64:64-p3:32:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"',
                 'target triple = "nvptx64-nvidia-cuda"', ""]
        lines += self.globals
        lines.append("")
        lines.append(f"define ptx_kernel void @{self.kernel}({ptxt}) #0 !dbg !{self.sp} {{")
        lines.append("entry:")
        lines += self.allocas
        lines += self.body
        lines.append("}")
        lines.append("")
        lines += sorted(self.decls.values())
        lines.append("")
        nvvm = []
        kattrs = [f'"nvvm.maxntid"="{maxntid}"'] if maxntid else []
        lines.append(f"attributes #0 = {{ {' '.join(kattrs)} {attrs} }}")
        lines.append("")
        lines.append(f"!llvm.dbg.cu = !{{!{self.cu}}}")
        flag_v = self._md('!{i32 2, !"Debug Info Version", i32 3}')
        flag_d = self._md('!{i32 2, !"Dwarf Version", i32 2}')
        lines.append(f"!llvm.module.flags = !{{!{flag_v}, !{flag_d}}}")
        lines += nvvm
        lines += self.meta
        return "\n".join(lines) + "\n"


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\22')
