"""Warpgroup MMAs (HGMMA/QGMMA) get their dot's line in kernelc's source map, from the PTX, although ptxas's
line table gives them the line of whatever it scheduled before them (kernelc/compiler/backend/mma_lines.py)."""
import os

import pytest

import kernelc
from cubintools.cubin import _Elf, line_sequences
from cubintools.sourcemap import SourceMap
from examples.kernels import matmul
from kernelc.compiler.backend.mma_lines import place_wgmma_lines, ptx_wgmma_lines, wgmma_pcs

SIG16 = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
             stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
SIG8 = dict(SIG16, a_ptr="*fp8e5", b_ptr="*fp8e5")
CX = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)


def _mm(sig, ones, monkeypatch, cx=CX, warps=4, stages=3, wgmma_async=None):
    if wgmma_async is not None:
        monkeypatch.setenv("KERNELC_WGMMA_ASYNC", wgmma_async)
    return kernelc.compile(matmul.matmul_kernel, sig, cx, target="sm_90a", num_warps=warps, num_stages=stages,
                           divisibility={n: 16 for n in sig}, equal_to_1=ones)


def _dot_line():
    for i, line in enumerate(open(matmul.__file__), 1):
        if "accumulator = tl.dot(a, b, accumulator)" in line:
            return os.path.basename(matmul.__file__), i
    raise AssertionError("no dot line")


@pytest.mark.parametrize("dtype,mma", [("fp16", "HGMMA"), ("fp8", "QGMMA")])
def test_wgmma_opcodes_found_in_the_binary_are_nvdisasms(dtype, mma, monkeypatch):
    """The sm_90 opcode bits find exactly the MMAs nvdisasm names, at the same pcs."""
    sig, ones = (SIG16, ("stride_ak", "stride_bn", "stride_cn")) if dtype == "fp16" else \
        (SIG8, ("stride_ak", "stride_bk", "stride_cn"))
    ck = _mm(sig, ones, monkeypatch)
    text = _Elf(ck.asm["cubin"]).by_name[".text." + ck.name].data()
    want = [i.pc for i in ck.artifacts.instructions if i.opcode.startswith(("HGMMA", "QGMMA", "IGMMA"))]
    assert want and all(i.opcode.startswith(mma) for i in ck.artifacts.instructions if i.pc in want)
    assert wgmma_pcs(text) == want


@pytest.mark.parametrize("dtype,mma", [("fp16", "HGMMA"), ("fp8e4nv", "QGMMA")])
def test_attention_mmas_land_on_their_own_dots_with_a_from_registers(dtype, mma):
    """Two dots a loop (QK^T from shared memory, PV with P in registers: another opcode): the map puts each
    MMA on its own dot's line, in order."""
    from examples.kernels import attention
    sig = dict(Q="*" + dtype, K="*" + dtype, V="*" + dtype, Out="*fp16", sm_scale="fp32", H="i32", N_CTX="i32",
               **{f"stride_{a}{b}": "i32" for a in "qkvo" for b in ("z", "h", "m" if a in "qo" else "n", "k")})
    ck = kernelc.compile(attention.attn_fwd_kernel, sig, dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, CAUSAL=True),
                         target="sm_90a", num_warps=4, num_stages=2, divisibility={n: 16 for n in sig},
                         equal_to_1=("stride_qk", "stride_kk", "stride_vk", "stride_ok"))
    text = _Elf(ck.asm["cubin"]).by_name[".text." + ck.name].data()
    mmas = [i for i in ck.artifacts.instructions if i.opcode.startswith(mma)]
    assert mmas and wgmma_pcs(text) == [i.pc for i in mmas]
    src = open(attention.__file__).read().splitlines()
    lines = [ck.source_map.pc_to_line(i.pc) for i in mmas]
    assert all(os.path.basename(f) == "attention.py" and "tl.dot(" in src[ln - 1] for f, ln in lines), lines
    # QK^T (n = 64) and PV (n = 128, head dim) each on one line of their own
    by_shape = {}
    for i, (_, ln) in zip(mmas, lines):
        by_shape.setdefault(i.opcode.split(".")[1], set()).add(ln)
    assert len(by_shape) == 2 and all(len(v) == 1 for v in by_shape.values()), by_shape
    assert len(set().union(*by_shape.values())) == 2


@pytest.mark.parametrize("wgmma_async", ["1", "0"])
def test_every_hgmma_is_on_the_dot_line_with_or_without_a_wgmma_in_flight(wgmma_async, monkeypatch):
    ck = _mm(SIG16, ("stride_ak", "stride_bn", "stride_cn"), monkeypatch, wgmma_async=wgmma_async,
             cx=dict(CX, BLOCK_SIZE_N=256), warps=8)
    pcs = [i.pc for i in ck.artifacts.instructions if i.opcode.startswith("HGMMA")]
    assert len(pcs) == 4     # per warpgroup: 64x256 rows of 4 k-steps
    got = {(os.path.basename(f), ln) for f, ln in (ck.source_map.pc_to_line(pc) for pc in pcs)}
    assert got == {_dot_line()}
    raw = SourceMap.from_cubin(ck.asm["cubin"], default_function=ck.name)
    # why this exists: ptxas's own table puts some of them elsewhere (CUDA 13.0: lines 37 and 41 with the wgmma
    # waited for in its iteration, 37 with one in flight); a ptxas that stops doing so fails this line
    assert {os.path.basename(raw.pc_to_line(pc)[0]) + f":{raw.pc_to_line(pc)[1]}" for pc in pcs} != \
        {"%s:%d" % _dot_line()}
    # every other instruction keeps ptxas's line
    for ins in ck.artifacts.instructions:
        if ins.pc not in pcs:
            assert ck.source_map.pc_to_line(ins.pc) == raw.pc_to_line(ins.pc), hex(ins.pc)


PTX = """
.version 8.4
.target sm_90a
.visible .entry k1(
\t.param .u64 k1_param_0
)
{
\t.loc\t1 10 3
\tmov.u32 %r1, 0;
\t.loc\t1 12 5
\t{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...}, %rd1, %rd2, p, 1, 1, 0, 1; }
\t.loc\t2 7 1
\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...}, %rd1, %rd2, p, 1, 1, 0, 1;
}
.func helper()
{
\tret;
}
\t.file\t1 "/src/kern.py"
\t.file\t2 "/src/lib.py"
"""


def test_ptx_wgmma_lines_reads_each_wgmmas_loc_per_function():
    assert ptx_wgmma_lines(PTX) == {"k1": [("/src/kern.py", 12), ("/src/lib.py", 7)]}
    assert ptx_wgmma_lines(PTX.replace("wgmma.mma_async", "mma.sync")) == {}


def test_set_lines_overrides_single_pcs_and_keeps_the_rest():
    sm = SourceMap(default_function="k")
    fid = sm._file_id("/src/kern.py")
    from cubintools.sourcemap import FunctionLines
    fl = sm.functions["k"] = FunctionLines()
    fl.add(0, 0x40, fid, 3)
    fl.add(0x40, 0x80, fid, 4)
    assert sm.set_lines("k", {0x20: ("/src/kern.py", 9), 0x90: ("/src/kern.py", 9)}) == 2
    assert [sm.pc_to_line(pc)[1] if sm.pc_to_line(pc) else None for pc in range(0, 0xa0, 0x10)] == \
        [3, 3, 9, 3, 4, 4, 4, 4, None, 9]
    assert sm.set_lines("k", {0x20: ("/src/kern.py", 9)}) == 0      # already so
    assert SourceMap.from_dict(sm.to_dict()) == sm


def test_counts_that_differ_with_several_lines_leave_ptxas_lines(monkeypatch):
    """When the cubin's MMAs cannot be matched to the PTX's one for one and the PTX's wgmmas sit on several
    lines, the map stays as ptxas wrote it."""
    ck = _mm(SIG16, ("stride_ak", "stride_bn", "stride_cn"), monkeypatch, wgmma_async="1")
    cubin, ptx = ck.asm["cubin"], ck.asm["ptx"]
    raw = SourceMap.from_cubin(cubin, default_function=ck.name)
    assert any(ln for s in line_sequences(cubin) for _, _, ln in s.rows)
    # one wgmma more in the PTX, on another line: neither rule applies
    first = ptx.index("wgmma.mma_async")
    line_start = ptx.rindex("\n", 0, first) + 1
    loc_start = ptx.rindex("\t.loc", 0, first)
    extra = "\t.loc\t1 1 1\n" + ptx[line_start:ptx.index("\n", first) + 1] + ptx[loc_start:ptx.index("\n", loc_start) + 1]
    changed = place_wgmma_lines(raw, cubin, ptx[:line_start] + extra + ptx[line_start:])
    assert changed == 0
    assert raw == SourceMap.from_cubin(cubin, default_function=ck.name)
