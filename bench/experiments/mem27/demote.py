"""A Triton kernel that gives L2 lines back their normal eviction priority (``applypriority.global.L2::evict_normal``,
one 128-byte line per element): ab27.py's ``@demote`` columns run it on their own cos/sin copy after each launch, so
that the lines a launch kept under evict_last are not there for the next one (the L2 flush between launches then
evicts them like any other line) and the column shows what the policy does within one launch only. Run on the GPU
only (the interpreter has no inline PTX)."""
import triton
import triton.language as tl


@triton.jit
def demote_kernel(p, n_lines, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = (p + i.to(tl.int64) * 128).to(tl.int64, bitcast=True)
    r = tl.inline_asm_elementwise(
        "{ .reg .pred q; setp.ne.b32 q, $2, 0; @q applypriority.global.L2::evict_normal [$1], 128; mov.u32 $0, 0; }",
        "=r,l,r", [a, (i < n_lines).to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


def demote(t):
    """Every 128-byte line of the contiguous tensor ``t`` back to the normal eviction priority."""
    u = t.view(-1).view(__import__("torch").uint8)
    n = (u.numel() + 127) // 128
    demote_kernel[((n + 127) // 128,)](u, n, BLOCK=128)
