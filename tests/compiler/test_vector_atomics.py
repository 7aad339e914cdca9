"""passes/atomic_results.py ``vectorize_atomics``: an fp32 tile atomic add whose result nobody reads,
over contiguous aligned addresses, becomes sm_90 vector reductions (``red.global.add.v4.f32``), decided
in the IR (``vec``) and lowered by codegen/memory.py. The compiled LLVM IR runs on the CPU
(tests/compiler/llir_sim.py) against numpy; the attention backward's atomic dQ spills less."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from tests.compiler import llir_sim


@kernelc.jit
def tile_add_kernel(x_ptr, y_ptr, n: kl.constexpr, M: kl.constexpr, N: kl.constexpr, SEM: kl.constexpr, USE: kl.constexpr):
    rows = kl.arange(0, M)
    offs = rows[:, None] * N + kl.arange(0, N)[None, :]
    x = kl.load(x_ptr + offs)
    old = kl.atomic_add(y_ptr + offs, x, mask=(rows < n)[:, None], sem=SEM)
    if USE:  # the old value is read: each element's atom returns it, no vector
        kl.store(x_ptr + offs, old)


SIG = dict(x_ptr="*fp32", y_ptr="*fp32")


def _compile(M, N, sem="relaxed", use=False, num_warps=4, target="sm_90a"):
    # n = M - 1: the last row is masked off
    return kernelc.compile(tile_add_kernel, SIG, dict(n=M - 1, M=M, N=N, SEM=sem, USE=use), target=target,
                           num_warps=num_warps, divisibility={"x_ptr": 16, "y_ptr": 16})


def _atomics(ck):
    return [a for a in ck.reports["memory_accesses"] if a["kind"] == "atomic"]


@pytest.mark.parametrize("M,N,num_warps", [(32, 64, 4), (16, 32, 4)])
def test_vector_reductions_add_each_element_once(M, N, num_warps):
    """(16, 32) at 4 warps: one v4 per thread; (32, 64): four, over two rows."""
    ck = _compile(M, N, num_warps=num_warps)
    assert re.search(r"^\s*%\d+ = atomic_rmw .*vec=4", ck.asm["tir"], re.M)
    assert [a["vector_elems"] for a in _atomics(ck)] == [4]
    assert "red.relaxed.gpu.global.add.v4.f32" in ck.asm["ptx"]
    assert "REDG.E.ADD.F32x4" in ck.asm["sass"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = rng.standard_normal((M, N)).astype(np.float32)
    want = y.copy()
    want[:M - 1] += x[:M - 1]
    got = y.copy()
    llir_sim.Kernel(ck.asm["llir"]).run([x.copy(), got], num_warps)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw", [dict(sem="acq_rel"), dict(use=True), dict(target="sm_80")])
def test_no_vector_where_ptx_has_none_or_the_result_is_read(kw):
    ck = _compile(32, 64, **kw)
    assert "vec=" not in ck.asm["tir"]
    assert ".v4.f32" not in ck.asm["ptx"] and ".v2.f32" not in ck.asm["ptx"]
    assert [a["vector_elems"] for a in _atomics(ck)] == []  # the per-element path


def test_attention_atomic_dq_issues_vector_reds_from_the_accumulator_without_spills(monkeypatch):
    """The dK/dV kernel with atomic dQ at head dim 128, BLOCK_M 32 (164 spilled registers before)."""
    from tests.compiler.test_attention_kernels import _compile as compile_cfg
    from examples.kernels import attention_bwd as B
    P = lambda t: "*" + t  # noqa: E731
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp32"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
    cfg = dict(BLOCK_M=32, BLOCK_N=128, num_warps=8, num_stages=3)

    def build():
        return compile_cfg(B.attn_bwd_dkdv_kernel, sig, dict(HEAD_DIM=128, CAUSAL=True, ATOMIC_DQ=True), cfg,
                           ("stride_k",))
    vec = build()
    monkeypatch.setattr(C, "TILE_PASSES", tuple(p for p in C.TILE_PASSES if p.name != "vectorize_atomics"))
    scalar = build()
    one = r"\b(?:ATOM|RED)G\.E\.ADD\.F32\b(?!x)"  # one element, its own 64-bit address
    n_scalar = len(re.findall(one, scalar.asm["sass"]))
    widths = [int(w) for w in re.findall(r"\bREDG\.E\.ADD\.F32x(\d)\b", vec.asm["sass"])]
    assert widths and not re.search(one, vec.asm["sass"])
    assert sum(widths) == n_scalar, (widths, n_scalar)  # the same elements, in vectors
    # the reductions read dQ's MMA accumulator in place (fp32 pairs): no conversion through shared memory
    assert set(widths) == {2}
    sts = [len(re.findall(r"\bSTS\b", ck.asm["sass"])) for ck in (scalar, vec)]
    assert sts[1] < sts[0], sts
    assert scalar.n_spills > 100 and vec.n_spills == 0, (scalar.n_spills, vec.n_spills)
