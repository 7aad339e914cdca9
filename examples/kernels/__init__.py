"""Kernels written in Triton's spelling (``import kernelc as triton; import kernelc.language as tl``):
our own versions of the Triton tutorials 01-05 plus a fused attention forward. Tests, benchmarks
and examples/train.py share them."""
