"""kernelc runtime: the @jit kernel object, launch hooks, autotuning, the CPU interpreter."""
