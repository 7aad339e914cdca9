"""``triton._C`` under the alias: only the piece of Triton's C extension that its tutorials call from
host code (``libtriton.nvidia.cublas.CublasLt``, the cuBLAS baseline of tutorial 09), on torch."""
