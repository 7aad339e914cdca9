"""Tutorial 04: low-memory dropout with a seed (Philox), the mask never stored."""
import kernelc as triton
import kernelc.language as tl


@triton.jit
def seeded_dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def seeded_dropout(x, p, seed, BLOCK_SIZE=1024):
    import torch
    output = torch.empty_like(x)
    n = x.numel()
    seeded_dropout_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, output, n, p, seed, BLOCK_SIZE=BLOCK_SIZE)
    return output
