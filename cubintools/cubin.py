"""What a cubin says about its functions: names, registers, shared/local memory, and the line table.

Read with pyelftools (sections) plus a little ``struct`` (symbols' raw ``st_other``, the ``.nv.info`` records).

Where each number comes from (checked against ptxas's ``-v`` report on nvJitLink 13.0 cubins):

* **registers**: ``EIATTR_REGCOUNT`` (0x2f) in the global ``.nv.info`` section, a record ``(symbol index,
  count)``.  The ``.text.<fn>`` section's ``sh_info`` holds only the symbol index on these cubins (older toolchains
  kept the count in its top byte, as sm_80 cubins still do), and ``st_other`` holds only the entry flag, so
  ``.nv.info`` is the reliable
  source.
* **local memory / stack**: ``EIATTR_FRAME_SIZE`` (0x11, ptxas's "bytes stack frame") and ``EIATTR_MIN_STACK_SIZE``
  (0x12), also in ``.nv.info``.
* **static shared memory**: the size of the ``SHT_NOBITS`` section ``.nv.shared.<fn>``, less the 1 KB the
  driver reserves at the start of each block's shared memory on sm_90 cubins.  Those cubins declare the
  undefined symbol ``.nv.reservedSmem.offset0``, and their ``.nv.shared.<fn>`` is 1024 bytes larger than the
  kernel's variables (checked: a kernel with 4096 bytes of ``__shared__`` data has a 5120-byte section on sm_90a
  and a 4096-byte one on sm_80/sm_89; the driver agrees, docs/performance.md).
* **entry functions** (kernels): symbols of type ``STT_FUNC`` with ``STO_CUDA_ENTRY`` (0x10) in ``st_other``.
* **spills** are not recorded in the cubin; they come from ptxas's report (see :mod:`.ptxas`).  The frame size is
  the local memory a thread uses, spills included.

``.nv.info`` records are ``u8 format, u8 attribute`` followed, for format ``EIFMT_SVAL`` (4), by a ``u16`` size and
that many bytes, for ``EIFMT_HVAL`` (3) by a ``u16`` value, for ``EIFMT_BVAL`` (2) by a byte and a pad byte, and for
``EIFMT_NVAL`` (1) by a ``u16`` that is ignored.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .debugline import LineSequence, decode_debug_line

__all__ = ["FunctionInfo", "CubinInfo", "inspect_cubin", "line_sequences", "EIATTR"]

#: ``.nv.info`` attribute codes used here.
EIATTR = {
    "PARAM_CBANK": 0x0A,
    "FRAME_SIZE": 0x11,
    "MIN_STACK_SIZE": 0x12,
    "KPARAM_INFO": 0x17,
    "CBANK_PARAM_SIZE": 0x19,
    "MAXREG_COUNT": 0x1B,
    "EXIT_INSTR_OFFSETS": 0x1C,
    "REGCOUNT": 0x2F,
}
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
STO_CUDA_ENTRY = 0x10
#: Shared memory at the start of ``.nv.shared.<fn>`` that sm_90 cubins reserve for the driver.
RESERVED_SHARED_BYTES = 1024
STT_FUNC, STT_SECTION = 2, 3


@dataclass
class FunctionInfo:
    """One function of a cubin."""
    name: str
    is_entry: bool
    symbol_index: int
    code_size: int = 0
    n_regs: int = 0
    shared: int = 0          # static shared memory, bytes (as the driver reports it)
    shared_section: int = 0  # size of .nv.shared.<fn>, the driver's reserved prefix included
    frame_size: int = 0      # local memory (stack frame) per thread, bytes
    stack_size: int = 0      # EIATTR_MIN_STACK_SIZE
    max_reg_count: Optional[int] = None
    attributes: Dict[int, List[bytes]] = field(default_factory=dict, repr=False)   # raw .nv.info.<fn> records


@dataclass
class CubinInfo:
    sm: int                  # SM version from e_flags, e.g. 90 (sm_90 and sm_90a alike)
    functions: Dict[str, FunctionInfo]

    @property
    def kernels(self) -> List[str]:
        return [f.name for f in self.functions.values() if f.is_entry]

    def kernel(self, name: Optional[str] = None) -> FunctionInfo:
        """The kernel ``name``, or the only kernel of the cubin."""
        if name is not None:
            try:
                return self.functions[name]
            except KeyError:
                raise KeyError(f"no function {name!r} in the cubin (has {', '.join(self.functions)})") from None
        kernels = self.kernels
        if len(kernels) != 1:
            raise KeyError(f"the cubin has {len(kernels)} kernels ({', '.join(kernels)}); name one")
        return self.functions[kernels[0]]


# ----------------------------------------------------------------------------------------------- ELF reading
class _Elf:
    """The few pieces of a cubin's ELF this module needs."""

    def __init__(self, cubin: bytes):
        from elftools.elf.elffile import ELFFile
        self.elf = ELFFile(io.BytesIO(cubin))
        if self.elf["e_machine"] != "EM_CUDA":
            raise ValueError(f"not a cubin (e_machine={self.elf['e_machine']})")
        self.sections = list(self.elf.iter_sections())
        self.by_name = {s.name: s for s in self.sections}
        symtab = self.by_name.get(".symtab")
        self.symbols: List[Tuple[str, int, int, int, int, int]] = []   # name, type, other, shndx, value, size
        if symtab is not None:
            raw = symtab.data()
            strtab = self.sections[symtab["sh_link"]].data()
            for off in range(0, len(raw) - 23, 24):
                st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", raw, off)
                end = strtab.index(b"\x00", st_name)
                self.symbols.append((strtab[st_name:end].decode("utf-8", "replace"), st_info & 0xF, st_other,
                                     st_shndx, st_value, st_size))

    def func_symbols(self):
        for i, (name, typ, other, shndx, value, size) in enumerate(self.symbols):
            if typ == STT_FUNC and 0 < shndx < len(self.sections):
                yield i, name, other, shndx, value, size


def _records(data: bytes):
    """``(attribute, format, payload)`` for each ``.nv.info`` record."""
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr, val = data[pos], data[pos + 1], struct.unpack_from("<H", data, pos + 2)[0]
        pos += 4
        if fmt == EIFMT_SVAL:
            yield attr, fmt, data[pos:pos + val]
            pos += val
        elif fmt in (EIFMT_HVAL, EIFMT_BVAL, EIFMT_NVAL):
            yield attr, fmt, data[pos - 2:pos]
        else:           # unknown format: stop rather than misread
            return


def inspect_cubin(cubin: bytes) -> CubinInfo:
    """Functions of ``cubin`` with their registers, shared and local memory (see the module docstring)."""
    e = _Elf(cubin)
    funcs: Dict[str, FunctionInfo] = {}
    by_index: Dict[int, FunctionInfo] = {}
    for i, name, other, shndx, value, size in e.func_symbols():
        info = FunctionInfo(name=name, is_entry=bool(other & STO_CUDA_ENTRY), symbol_index=i, code_size=size)
        funcs[name] = info
        by_index[i] = info
    nv_info = e.by_name.get(".nv.info")
    if nv_info is not None:
        for attr, fmt, payload in _records(nv_info.data()):
            if fmt != EIFMT_SVAL or len(payload) < 8:
                continue
            sym, value = struct.unpack_from("<II", payload)
            f = by_index.get(sym)
            if f is None:
                continue
            if attr == EIATTR["REGCOUNT"]:
                f.n_regs = value
            elif attr == EIATTR["FRAME_SIZE"]:
                f.frame_size = value
            elif attr == EIATTR["MIN_STACK_SIZE"]:
                f.stack_size = value
    reserved = RESERVED_SHARED_BYTES if any(sym[0].startswith(".nv.reservedSmem") for sym in e.symbols) else 0
    for name, f in funcs.items():
        shared = e.by_name.get(f".nv.shared.{name}")
        if shared is not None:
            f.shared_section = shared["sh_size"]
            f.shared = max(0, shared["sh_size"] - reserved)
        sec = e.by_name.get(f".nv.info.{name}")
        if sec is not None:
            for attr, fmt, payload in _records(sec.data()):
                f.attributes.setdefault(attr, []).append(payload)
                if attr == EIATTR["MAXREG_COUNT"] and fmt == EIFMT_HVAL:
                    f.max_reg_count = struct.unpack("<H", payload)[0]
    sm = (e.elf["e_flags"] >> 8) & 0xFF
    return CubinInfo(sm=sm, functions=funcs)


def line_sequences(cubin: bytes) -> List[LineSequence]:
    """The cubin's ``.debug_line`` sequences with function-relative pcs (empty without line info)."""
    e = _Elf(cubin)
    sec = e.by_name.get(".debug_line")
    if sec is None:
        return []
    # Function start (value) per section index, to turn relocations against section symbols into functions.
    func_at: Dict[int, List[Tuple[int, str]]] = {}
    for _, name, _, shndx, value, _ in e.func_symbols():
        func_at.setdefault(shndx, []).append((value, name))
    relocs: Dict[int, Tuple[Optional[str], int]] = {}
    data = sec.data()
    # sm_90 cubins carry RELA relocations; sm_8x cubins REL ones, whose addend sits in the section
    # data at the relocated offset (the DW_LNE_set_address operand).
    for rel_name, explicit in ((".rela.debug_line", True), (".rel.debug_line", False)):
        rela = e.by_name.get(rel_name)
        if rela is None:
            continue
        for r in rela.iter_relocations():
            sym_i = r["r_info_sym"]
            if sym_i >= len(e.symbols):
                continue
            name, typ, _, shndx, value, _ = e.symbols[sym_i]
            addend = r["r_addend"] if explicit else int.from_bytes(data[r["r_offset"]:r["r_offset"] + 8], "little")
            target = value + addend
            if typ == STT_FUNC:
                relocs[r["r_offset"]] = (name, addend)
            elif shndx in func_at:
                starts = [fv for fv in sorted(func_at[shndx]) if fv[0] <= target]
                if starts:
                    fstart, fname = starts[-1]
                    relocs[r["r_offset"]] = (fname, target - fstart)
    return decode_debug_line(sec.data(), relocs)
