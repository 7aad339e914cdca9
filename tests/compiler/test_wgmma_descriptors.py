"""wgmma shared-memory descriptors of a dot one warpgroup issues (codegen/wgmma.operand_descriptor): the buffer's
own descriptor plus each k step's offset in 16-byte units, from the shared window's base read where the dot is
issued. Tutorial 06's backward at d128 causal (4 warps) kept every k step's descriptor of the staged Q and dO
live across its four loops and reloaded 22-25 spilled ones an iteration in its dQ loops
(docs/triton-tutorials.md, "06 backward: causal and d64")."""
import re

from kernelc.compiler.compiler import compile as kcompile
from tests.compiler import fused_bwd_kernels as FB
from tests.compiler.test_ring_views import _loop_sass

DIV = dict(stride_bh=16, stride_tok=16, N_CTX=16)


def test_the_start_address_field_of_base_plus_offset_is_the_bases_plus_the_offset():
    # the identity the lowering relies on: 16-byte aligned shared addresses below 256 KB, no carry out of the
    # 14-bit field
    for base in range(0, 1 << 18, 1040):
        base &= ~15
        for off in (0, 16, 32, 96, 1024, 8192, 65536 - 16, 100000 & ~15):
            if base + off < 1 << 18:
                assert ((base + off) >> 4) & 0x3FFF == ((base >> 4) & 0x3FFF) + (off >> 4)


def _ck(D, causal, warps=4):
    return kcompile(FB.fused_attn_bwd, FB.SIG, dict(FB.CONFIG, D=D, CAUSAL=causal), "sm_90a", warps, 5,
                    divisibility=DIV)


def test_one_warpgroup_reads_the_base_in_the_loop_and_adds_constants():
    ck = _ck(128, True)
    ptx = ck.asm["ptx"]
    # one read of the window's base per dot, each k step one add of a constant to its descriptor
    assert ptx.count("mov.u32 %r") >= 1 and len(re.findall(r"mov\.u32 \t?%r\d+, global_smem;", ptx)) >= 10
    loops = _loop_sass(ck.asm["sass"])
    assert len(loops) == 4
    ldl = [sum(o.startswith("LDL") for o in lp) for lp in loops]
    # the dQ loops (3, 4) reload at most a few spilled values (22-25 before); Triton 3.6's reload 1
    assert ldl[2] <= 4 and ldl[3] <= 4, ldl
    from cubintools import inspect_cubin
    # 896 B with the descriptors hoisted; 640 on fa06b's branch, 672 after the merge with fa06f's elect.sync issue
    # (registers +5): the claim is the drop, and the loops' reloads above
    assert inspect_cubin(ck.asm["cubin"]).kernel(None).frame_size <= 704


def test_several_warpgroups_keep_each_slices_address():
    # 8 warps: a warpgroup's rows start at a runtime offset; the descriptors are built from the slice's address
    ck = kcompile(FB.fused_attn_bwd, FB.SIG, dict(FB.CONFIG, D=64, CAUSAL=False), "sm_90a", 8, 2, divisibility=DIV)
    assert not re.search(r"mov\.u32 \t?%r\d+, global_smem;", ck.asm["ptx"])
