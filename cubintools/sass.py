"""SASS from a cubin with nvdisasm (PyPI ``nvidia-cuda-nvdisasm``; runs without a GPU).

One ``nvdisasm -c -g`` run gives the SASS text with ``//## File "...", line N`` annotations; :func:`parse_sass`
turns that text into :class:`Instr` records (a line annotation is printed only where the line changes, so it is
carried forward to the following instructions of the same function).

Why the text and not ``nvdisasm -json``: nvdisasm 13.2's JSON output carries opcode and operands but no source
lines, with or without ``-g``/``-gi`` (checked), so a JSON run would still need a second run or the
``.debug_line`` decoder for lines.  nvdisasm costs ~0.2-0.25 s per call whatever the cubin size (its own start-up),
so the backend runs it at most once per kernel, lazily; the assembler's fill policy, which weighs two or
three builds of a kernel, reads its measure (:func:`cubin_loads_in_flight`) from the instruction words instead
where :mod:`.sm90_fields` covers them.

Since nvdisasm's cost is its start-up, not the cubin, a disassembly is kept by content: in memory (the last
64) and on disk under ``$KERNELC_SASS_CACHE_DIR`` (default ``<kernel cache>/sass``; ``off`` disables it), keyed
by the cubin's bytes, the flags and the nvdisasm binary (path, size, mtime).  An entry that does not read back
whole is ignored and rewritten; entries are written to a temporary file and renamed into place.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, List, Optional, Tuple

__all__ = ["Instr", "nvdisasm_path", "disassemble", "parse_sass", "instructions", "disassemble_with_instructions",
           "DisassemblyError", "mean_loads_in_flight", "cubin_loads_in_flight", "encoded_loads_in_flight",
           "loads_in_flight", "loads_before_first_use", "cubin_loads_before_first_use"]


class DisassemblyError(RuntimeError):
    """nvdisasm is missing or failed."""


@dataclass(frozen=True)
class Instr:
    """One SASS instruction.  ``pc`` is the byte offset in its function; ``opcode`` keeps its modifiers
    (``LDG.E.128``, ``HMMA.16816.F32``); ``predicate`` is e.g. ``@P0`` or ``@!PT`` (or '')."""
    pc: int
    opcode: str
    operands: str
    text: str
    file: Optional[str] = None
    line: Optional[int] = None
    function: str = ""
    predicate: str = ""

    @property
    def index(self) -> int:
        """Index of the instruction within its function (16-byte instructions)."""
        return self.pc // 16


@lru_cache(maxsize=None)
def nvdisasm_path() -> str:
    """Path of the nvdisasm binary: ``$KERNELC_NVDISASM``, cuda.pathfinder, then ``site-packages/nvidia/cu13/bin``."""
    # KERNELC_NVDISASM is documented in kernelc's options table; read here directly (cubintools imports no kernelc)
    env = os.environ.get("KERNELC_NVDISASM", "").strip()
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"KERNELC_NVDISASM={env!r}: no such file (unset it to use the installed nvdisasm)")
        return env
    try:
        from cuda import pathfinder
        path = pathfinder.find_nvidia_binary_utility("nvdisasm")
        if path:
            return path
    except Exception:
        pass
    try:
        import nvidia
        for root in nvidia.__path__:
            for sub in ("cu13", "cu12", "cuda_nvdisasm"):
                cand = os.path.join(root, sub, "bin", "nvdisasm")
                if os.path.isfile(cand) and os.access(cand, os.X_OK):
                    return cand
    except ImportError:
        pass
    raise DisassemblyError("nvdisasm not found: install the PyPI package nvidia-cuda-nvdisasm "
                           "or set KERNELC_NVDISASM")


def disassemble(cubin: bytes, *, line_info: bool = True, extra: Tuple[str, ...] = ()) -> str:
    """SASS text of ``cubin`` (``nvdisasm -c [-g]``), from the content cache when this cubin was seen."""
    tool = nvdisasm_path()
    flags = ["-c"] + (["-g"] if line_info else []) + ([] if _dataflow() else ["-ndf"]) + list(extra)
    key = _cache_key(cubin, tool, flags)
    with _MEMO_LOCK:
        text = _MEMO.get(key)
        if text is not None:
            _MEMO.move_to_end(key)
            return text
    text = _disk_read(key)
    if text is None:
        text = _run_nvdisasm(cubin, [tool] + flags)
        _disk_write(key, text)
    with _MEMO_LOCK:
        _MEMO[key] = text
        while len(_MEMO) > _MEMO_MAX:
            _MEMO.popitem(last=False)
    return text


def _dataflow() -> bool:
    """Whether nvdisasm runs its dataflow analysis (``KERNELC_NVDISASM_DATAFLOW``, on by default; in kernelc's options
    table, read here since cubintools imports no kernelc). Its only mark in the text is the ``(*"SpillRefill"*)``
    note on spill stores and loads; without it a disassembly takes about a quarter less time (the test suite)."""
    raw = os.environ.get("KERNELC_NVDISASM_DATAFLOW", "").strip().lower()
    if raw in ("", "1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"KERNELC_NVDISASM_DATAFLOW={raw!r}: expected one of 1, true, yes, on, 0, false, no, off")


def _run_nvdisasm(cubin: bytes, args: List[str]) -> str:
    fd, path = tempfile.mkstemp(suffix=".cubin", prefix="kernelc-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        proc = subprocess.run(args + [path], capture_output=True, text=True)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if proc.returncode != 0:
        raise DisassemblyError(f"nvdisasm failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout[-2000:]}")
    return proc.stdout


_MEMO: "OrderedDict[str, str]" = OrderedDict()
_MEMO_MAX = 64
_MEMO_LOCK = threading.Lock()
_HEADER = "kernelc-sass 1"


def _cache_key(cubin: bytes, tool: str, flags: List[str]) -> str:
    try:
        st = os.stat(tool)
        ident = f"{os.path.realpath(tool)}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        ident = tool
    h = hashlib.sha256()
    for part in (ident, " ".join(flags)):
        h.update(part.encode())
        h.update(b"\0")
    h.update(cubin)
    return h.hexdigest()


def sass_cache_dir() -> Optional[str]:
    """Where disassemblies are kept on disk, or None when ``KERNELC_SASS_CACHE_DIR=off``."""
    # KERNELC_SASS_CACHE_DIR / KERNELC_CACHE_DIR are in kernelc's options table; read here (cubintools imports no kernelc)
    env = os.environ.get("KERNELC_SASS_CACHE_DIR", "").strip()
    if env.lower() in ("off", "0", "none", "no", "false"):
        return None
    if env:
        return env
    base = os.environ.get("KERNELC_CACHE_DIR", "").strip() or os.path.join(os.path.expanduser("~"), ".cache", "kernelc")
    return os.path.join(base, "sass")


def _disk_read(key: str) -> Optional[str]:
    root = sass_cache_dir()
    if root is None:
        return None
    try:
        with open(os.path.join(root, key[:2], key + ".sass"), encoding="utf-8") as f:
            head, _, body = f.read().partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    if head != f"{_HEADER} {key} {len(body)}":
        return None       # torn or foreign: run nvdisasm again and rewrite it
    return body


def _disk_write(key: str, text: str) -> None:
    root = sass_cache_dir()
    if root is None:
        return
    sub = os.path.join(root, key[:2])
    try:
        os.makedirs(sub, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=sub)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{_HEADER} {key} {len(text)}\n{text}")
        os.replace(tmp, os.path.join(sub, key + ".sass"))
    except OSError:
        pass              # a read-only or full disk costs the next run a disassembly, nothing more


_SECTION_RE = re.compile(r"^//-+ \.text\.(\S+)\s")
_LINE_RE = re.compile(r'^\s*//## File "(.*)", line (\d+)')
_INSTR_RE = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;?\s*$")


def parse_sass(text: str) -> List[Instr]:
    """:class:`Instr` records from ``nvdisasm -c -g`` output."""
    out: List[Instr] = []
    func = ""
    file: Optional[str] = None
    line: Optional[int] = None
    for raw in text.splitlines():
        m = _INSTR_RE.match(raw)
        if m:
            body = m.group(2).rstrip(" ;")
            pred = ""
            rest = body
            if rest.startswith("@"):
                pred, _, rest = rest.partition(" ")
                rest = rest.lstrip()
            opcode, _, operands = rest.partition(" ")
            out.append(Instr(int(m.group(1), 16), opcode, operands.strip(), body, file, line, func, pred))
            continue
        m = _LINE_RE.match(raw)
        if m:
            file, line = m.group(1), int(m.group(2))
            continue
        m = _SECTION_RE.match(raw)
        if m:
            func, file, line = m.group(1), None, None
    return out


def disassemble_with_instructions(cubin: bytes) -> Tuple[str, List[Instr]]:
    """SASS text and its instructions from a single nvdisasm run."""
    text = disassemble(cubin, line_info=True)
    return text, parse_sass(text)


def instructions(cubin: bytes) -> List[Instr]:
    """The SASS instructions of every function of ``cubin`` with their source lines."""
    return disassemble_with_instructions(cubin)[1]


_REG = re.compile(r"\bR(\d+)\b")
# opcodes whose first register operand is read, not written
_NO_DEST = ("ST", "RED", "BAR", "BRA", "EXIT", "RET", "CALL", "SYNCS", "MEMBAR", "ISETP", "FSETP")


def loads_in_flight(ops: Iterable[Tuple[bool, int, List[int], bool]]) -> float:
    """The measure of :func:`mean_loads_in_flight` over ``(is_global_load, width, registers, first_is_read)`` per
    instruction in program order: ``registers`` are the ``R<n>`` operands as printed (RZ left out), the first one
    written unless ``first_is_read``; a load's ``width`` is how many registers from its first it writes."""
    pending, total, n = {}, 0, 0
    for is_load, width, regs, first_is_read in ops:
        sources = set(regs if first_is_read else regs[1:])
        for k in [k for k, rs in pending.items() if rs & sources]:
            del pending[k]
        if is_load and regs:
            pending[n] = set(range(regs[0], regs[0] + width))
        total += len(pending)
        n += 1
    return round(total / n, 2) if n else 0.0


def loads_before_first_use(ops: Iterable[Tuple[bool, int, List[int], bool]]) -> Tuple[int, int]:
    """``(issued, total)`` over the op tuples of :func:`loads_in_flight`: the global loads issued before any
    instruction reads a register one of them writes, and all global loads of the program."""
    pending, issued, total, first_read = set(), 0, 0, False
    for is_load, width, regs, first_is_read in ops:
        sources = set(regs if first_is_read else regs[1:])
        if not first_read and pending & sources:
            first_read = True
        if is_load and regs:
            total += 1
            if not first_read:
                issued += 1
                pending.update(range(regs[0], regs[0] + width))
    return issued, total


def cubin_loads_before_first_use(cubin: bytes) -> Tuple[int, int]:
    """:func:`loads_before_first_use` of ``cubin`` (one function), from its instruction words where the sm_90
    decoder reads them, else from nvdisasm's text."""
    from .sm90_fields import decode_sm90
    try:
        ops = decode_sm90(cubin, _NO_DEST)
    except Exception:
        ops = None
    return loads_before_first_use(ops if ops is not None else _text_ops(instructions(cubin)))


def _text_ops(instrs: Iterable[Instr]):
    for i in instrs:
        load = i.opcode.startswith("LDG")
        regs = [int(r) for r in _REG.findall(i.operands)]
        width = (4 if ".128" in i.opcode else 2 if ".64" in i.opcode else 1) if load and regs else 1
        yield load, width, regs, i.opcode.startswith(_NO_DEST)


def mean_loads_in_flight(instrs: List[Instr]) -> float:
    """Global loads a thread has issued and not yet read, averaged over the program's instructions (a load
    counts from its issue to the first instruction that reads one of its registers): how much of the program
    runs with memory requests outstanding, in program order (not cycles)."""
    return loads_in_flight(_text_ops(instrs))


def encoded_loads_in_flight(cubin: bytes) -> Optional[float]:
    """:func:`mean_loads_in_flight` of the whole cubin read from its instruction words (:mod:`.sm90_fields`, no
    process), or None where that decoder gives up (another arch, a form its table does not hold)."""
    from .sm90_fields import decode_sm90
    try:
        ops = decode_sm90(cubin, _NO_DEST)
    except Exception:   # not a cubin that reader understands: let nvdisasm say
        return None
    return None if ops is None else loads_in_flight(ops)


def cubin_loads_in_flight(cubin: bytes) -> float:
    """:func:`mean_loads_in_flight` over every function of ``cubin``: from the instruction encodings where
    :func:`encoded_loads_in_flight` answers, else from nvdisasm's text (raises :class:`DisassemblyError` without
    nvdisasm)."""
    fast = encoded_loads_in_flight(cubin)
    return fast if fast is not None else mean_loads_in_flight(instructions(cubin))
