"""cubintools.sass keeps disassemblies by content: a second disassembly of the same cubin runs no nvdisasm,
from memory or from disk, and a torn or foreign disk entry is disassembled again and rewritten."""
import os
import stat

import pytest

import kernelc
import kernelc.language as tl
from cubintools import sass


@kernelc.jit
def _copy(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """A wrapper nvdisasm that counts its runs, a fresh disk cache and an empty memory cache."""
    log = tmp_path / "runs"
    tool = tmp_path / "nvdisasm"
    tool.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec "{sass.nvdisasm_path()}" "$@"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    sass.nvdisasm_path.cache_clear()
    monkeypatch.setenv("KERNELC_NVDISASM", str(tool))
    monkeypatch.setenv("KERNELC_SASS_CACHE_DIR", str(tmp_path / "sass"))
    monkeypatch.setattr(sass, "_MEMO", type(sass._MEMO)())
    yield lambda: len(log.read_text().split()) if log.exists() else 0
    sass.nvdisasm_path.cache_clear()


def _cubin(block=128):
    return kernelc.compile(_copy, dict(x="*fp32", y="*fp32", n="i32"), dict(BLOCK=block), target="sm_90a").asm["cubin"]


def test_same_cubin_runs_nvdisasm_once_in_memory_and_on_disk(counted, tmp_path):
    cubin = _cubin()
    first = sass.disassemble(cubin)
    assert counted() == 1 and "EXIT" in first
    assert sass.disassemble(cubin) == first and counted() == 1           # memory
    sass._MEMO.clear()
    assert sass.disassemble(cubin) == first and counted() == 1           # disk
    assert sass.disassemble(cubin, line_info=False) != first and counted() == 2   # other flags, other entry
    assert sass.disassemble(_cubin(256)) != first and counted() == 3      # other cubin, other entry


def test_a_torn_entry_is_disassembled_again_and_rewritten(counted, tmp_path):
    cubin = _cubin()
    text = sass.disassemble(cubin)
    (entry,) = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "sass") for f in fs]
    with open(entry, "r+") as f:
        f.truncate(os.path.getsize(entry) // 2)
    sass._MEMO.clear()
    assert sass.disassemble(cubin) == text and counted() == 2
    sass._MEMO.clear()
    assert sass.disassemble(cubin) == text and counted() == 2           # the rewritten entry reads back


def test_off_keeps_nothing_on_disk(counted, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELC_SASS_CACHE_DIR", "off")
    cubin = _cubin()
    sass.disassemble(cubin)
    sass._MEMO.clear()
    sass.disassemble(cubin)
    assert counted() == 2 and not (tmp_path / "sass").exists()


def test_dataflow_knob_picks_nvdisasms_flag_and_its_own_entry(counted, tmp_path, monkeypatch):
    # the flag reaches nvdisasm (the wrapper logs its arguments) and the two texts are kept apart
    tool = tmp_path / "nvdisasm"
    tool.write_text(tool.read_text().replace('echo run >>', 'echo "$@" >> "' + str(tmp_path / "args") + '"\necho run >>'))
    cubin = _cubin()
    monkeypatch.setenv("KERNELC_NVDISASM_DATAFLOW", "1")
    with_df = sass.disassemble(cubin)
    monkeypatch.setenv("KERNELC_NVDISASM_DATAFLOW", "off")
    without = sass.disassemble(cubin)
    assert counted() == 2 and "EXIT" in without
    first, second = (tmp_path / "args").read_text().splitlines()
    assert "-ndf" not in first.split() and "-ndf" in second.split()
    assert [l for l in with_df.splitlines() if "SpillRefill" not in l] == without.splitlines()  # no spills here
    monkeypatch.setenv("KERNELC_NVDISASM_DATAFLOW", "maybe")
    with pytest.raises(ValueError, match="KERNELC_NVDISASM_DATAFLOW='maybe'"):
        sass.disassemble(cubin)
