"""PTX hashes (.loc/.file/comments dropped) of a few GEMM kernels at the default options, to compare two trees:
run it with PYTHONPATH=<tree> from each tree (issue 20: KERNELC_REUSE_SYNC must leave the default output alone).

    KERNELC_STORE_SMEM_DISCOUNT=4 KERNELC_FLATTEN_LOOPS=0 KERNELC_CACHE_DIR=$(mktemp -d) PYTHONPATH=. python3 bench/experiments/tutorial_gaps/reuse_sync_default_ptx.py

Nothing here is a test."""
import hashlib
import os
import sys

sys.path.insert(0, os.getcwd())
from examples.kernels.matmul import matmul_kernel
from kernelc.compiler.compiler import compile as kcompile
from tests.compiler.test_codegen_sass import MM_SIG, UNIT_STRIDES
from tests.compiler.test_store_conversion import ptr_persistent, PSIG
DIV = {n: 16 for n in MM_SIG}
out = []
for (bm, bn, bk, w, s) in [(128, 128, 64, 4, 3), (128, 256, 64, 8, 4), (64, 64, 32, 4, 4), (32, 64, 32, 2, 5)]:
    for sig in (MM_SIG, dict(MM_SIG, a_ptr="*fp8e5", b_ptr="*fp8e5")):
        eq = UNIT_STRIDES if sig is MM_SIG else ("stride_ak", "stride_bk", "stride_cn")
        for arch in ("sm_90a", "sm_80"):
            if arch == "sm_80" and bn == 256: continue
            if arch == "sm_80" and sig is not MM_SIG: continue
            ck = kcompile(matmul_kernel, sig, dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8), arch, w, s, divisibility=DIV, equal_to_1=eq)
            ptx = "\n".join(l for l in ck.asm["ptx"].splitlines() if not l.strip().startswith((".loc", ".file", "//")))
            out.append(f"{bm}x{bn}x{bk}w{w}s{s} {sig['a_ptr']} {arch} {hashlib.sha1(ptx.encode()).hexdigest()[:12]}")
ck = kcompile(ptr_persistent, PSIG, dict(BM=128, BN=256, BK=64, PROGRAMS=132), "sm_90a", 8, 4, divisibility={n: 16 for n in PSIG}, equal_to_1=UNIT_STRIDES)
ptx = "\n".join(l for l in ck.asm["ptx"].splitlines() if not l.strip().startswith((".loc", ".file", "//")))
out.append(f"persistent {hashlib.sha1(ptx.encode()).hexdigest()[:12]}")
print("\n".join(out))
