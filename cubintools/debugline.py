"""Decoder for the DWARF ``.debug_line`` section of a cubin (the SASS pc -> source line table).

ptxas turns the PTX ``.loc`` directives into a DWARF (version 2) line program in ``.debug_line``, one sequence per
function, each starting with ``DW_LNE_set_address`` whose operand is relocated (``.rela.debug_line``) against the
function's symbol.  pyelftools cannot apply ``EM_CUDA`` relocations and a cubin has no ``.debug_info`` to hang the
line program on, so this module decodes the line program itself and resolves each sequence's function from the
relocation, giving function-relative pcs (the same offsets CUPTI's PC sampling reports).

Only the line-number program is decoded (DWARF 2-4 headers; a DWARF 5 header yields no sequences).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

__all__ = ["LineSequence", "decode_debug_line"]

DW_LNS_copy, DW_LNS_advance_pc, DW_LNS_advance_line, DW_LNS_set_file = 1, 2, 3, 4
DW_LNS_set_column, DW_LNS_negate_stmt, DW_LNS_set_basic_block, DW_LNS_const_add_pc = 5, 6, 7, 8
DW_LNS_fixed_advance_pc = 9
DW_LNE_end_sequence, DW_LNE_set_address, DW_LNE_define_file = 1, 2, 3


@dataclass
class LineSequence:
    """One sequence of the line program: rows ``(pc, file, line)`` for ``function`` and the pc where it ends."""
    function: Optional[str]
    rows: List[Tuple[int, str, int]] = field(default_factory=list)
    end: int = 0


def _uleb(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, pos


def _sleb(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if b & 0x40:
                result -= 1 << shift
            return result, pos


def _cstr(data: bytes, pos: int) -> Tuple[str, int]:
    end = data.index(b"\x00", pos)
    return data[pos:end].decode("utf-8", "replace"), end + 1


def decode_debug_line(data: bytes, relocations: Optional[Dict[int, Tuple[Optional[str], int]]] = None
                      ) -> List[LineSequence]:
    """Decode a ``.debug_line`` section.

    ``relocations`` maps an offset in the section (a ``DW_LNE_set_address`` operand) to ``(function, delta)``: the
    function whose code the relocated symbol points into, and what the relocation adds to the stored address,
    minus that function's start (symbol value + addend - function start).  The returned addresses are thus
    relative to the function's start.
    """
    relocations = relocations or {}
    sequences: List[LineSequence] = []
    off = 0
    while off + 4 <= len(data):
        unit_length = struct.unpack_from("<I", data, off)[0]
        if unit_length == 0xFFFFFFFF:                       # 64-bit DWARF
            unit_length = struct.unpack_from("<Q", data, off + 4)[0]
            hdr, offsize = off + 12, 8
        else:
            hdr, offsize = off + 4, 4
        unit_end = hdr + unit_length
        if unit_length == 0 or unit_end > len(data):
            break
        version = struct.unpack_from("<H", data, hdr)[0]
        if version < 2 or version > 4:
            off = unit_end
            continue
        pos = hdr + 2
        header_length = int.from_bytes(data[pos:pos + offsize], "little")
        pos += offsize
        program_start = pos + header_length
        min_inst = data[pos]
        pos += 1
        if version >= 4:
            pos += 1                                          # maximum_operations_per_instruction
        # data[pos] is default_is_stmt (not needed: every row is kept)
        line_base = struct.unpack_from("<b", data, pos + 1)[0]
        line_range = data[pos + 2]
        opcode_base = data[pos + 3]
        pos += 4
        std_lengths = list(data[pos:pos + opcode_base - 1])
        pos += opcode_base - 1
        dirs = [""]
        while data[pos] != 0:
            d, pos = _cstr(data, pos)
            dirs.append(d)
        pos += 1
        files = [""]

        def add_file(name: str, dir_index: int) -> None:
            d = dirs[dir_index] if dir_index < len(dirs) else ""
            files.append(name if os.path.isabs(name) or not d else d.rstrip("/") + "/" + name)

        while data[pos] != 0:
            name, pos = _cstr(data, pos)
            dir_index, pos = _uleb(data, pos)
            _, pos = _uleb(data, pos)                         # mtime
            _, pos = _uleb(data, pos)                         # length
            add_file(name, dir_index)
        pos = program_start

        # state machine
        address, file_i, line, func = 0, 1, 1, None
        seq = LineSequence(None)

        def emit() -> None:
            fname = files[file_i] if 0 < file_i < len(files) else ""
            seq.rows.append((address, fname, line))

        while pos < unit_end:
            op = data[pos]
            pos += 1
            if op >= opcode_base:
                adj = op - opcode_base
                address += (adj // line_range) * min_inst
                line += line_base + adj % line_range
                emit()
            elif op == 0:
                length, pos = _uleb(data, pos)
                sub = data[pos]
                operand = pos + 1
                pos += length
                if sub == DW_LNE_end_sequence:
                    seq.function = func
                    seq.end = address
                    sequences.append(seq)
                    seq = LineSequence(None)
                    address, file_i, line, func = 0, 1, 1, None
                elif sub == DW_LNE_set_address:
                    address = int.from_bytes(data[operand:pos], "little")
                    reloc = relocations.get(operand)
                    if reloc is not None:
                        func, delta = reloc
                        address += delta
                elif sub == DW_LNE_define_file:
                    name, p = _cstr(data, operand)
                    dir_index, p = _uleb(data, p)
                    add_file(name, dir_index)
            elif op == DW_LNS_copy:
                emit()
            elif op == DW_LNS_advance_pc:
                v, pos = _uleb(data, pos)
                address += v * min_inst
            elif op == DW_LNS_advance_line:
                v, pos = _sleb(data, pos)
                line += v
            elif op == DW_LNS_set_file:
                file_i, pos = _uleb(data, pos)
            elif op == DW_LNS_const_add_pc:
                address += ((255 - opcode_base) // line_range) * min_inst
            elif op == DW_LNS_fixed_advance_pc:
                address += struct.unpack_from("<H", data, pos)[0]
                pos += 2
            else:                                             # column, stmt, basic block, prologue, isa, ...
                for _ in range(std_lengths[op - 1] if op - 1 < len(std_lengths) else 0):
                    _, pos = _uleb(data, pos)
        off = unit_end
    return sequences
