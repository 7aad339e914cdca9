"""passes/load_layouts.py: a small vector converted right after its load is loaded in the converted layout
(golden IR before/after) and runs right (the LLVM IR executed on the CPU against numpy); a vector with
another reader keeps its conversion. The attention backward's loops: tests/compiler/test_attention_kernels.py."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from tests.compiler import llir_sim
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes


@kernelc.jit
def cols_minus_vec(x_ptr, v_ptr, y_ptr, M: kl.constexpr, N: kl.constexpr, BN: kl.constexpr):
    # y = x - v[None, :] on a column-major x, BN columns a trip: the tile's coalesced layout runs down the
    # columns, v's along its own axis, so v[None, :] meets the tile through a conversion on every trip
    # (unmasked: the CPU simulator runs plain loads only; the masked form is the attention kernels', checked
    # on the GPU; one stage: no register prefetch of the loads)
    rm = kl.arange(0, M)
    for j in kl.range(0, N, BN, num_stages=1):
        rn = j + kl.arange(0, BN)
        x = kl.load(x_ptr + rm[:, None] + rn[None, :] * M)
        v = kl.load(v_ptr + rn)
        kl.store(y_ptr + rm[:, None] + rn[None, :] * M, x - v[None, :])


SIG = {"x_ptr": "*fp32", "v_ptr": "*fp32", "y_ptr": "*fp32"}


def test_the_load_takes_the_layout_its_conversion_asked_for():
    ir, _, _ = _passes(cols_minus_vec, SIG, dict(M=32, N=128, BN=64), num_warps=4)
    filecheck(ir["hoist_conversions"], """
        CHECK: [[V:%\\d+]] = load {{%\\d+}} : <64xfp32>
        CHECK: [[E:%\\d+]] = expand_dims [[V]] {axis=0} : <1x64xfp32>
        CHECK-NEXT: = convert_layout [[E]] {layout=#{{.*}}} : <1x64xfp32>
    """)
    filecheck(ir["loads_in_use_layout"], """
        CHECK: [[V:%\\d+]] = load {{%\\d+}} {layout=#slice<shape=[64], {{.*}}>} : <64xfp32>
        CHECK: [[E:%\\d+]] = expand_dims [[V]] {axis=0} : <1x64xfp32>
        CHECK-NOT: convert_layout
        CHECK: = broadcast [[E]]
    """)


@kernelc.jit
def cols_minus_vec_once(x_ptr, v_ptr, y_ptr, M: kl.constexpr, N: kl.constexpr):
    rm = kl.arange(0, M)
    rn = kl.arange(0, N)
    x = kl.load(x_ptr + rm[:, None] + rn[None, :] * M)
    v = kl.load(v_ptr + rn)
    kl.store(y_ptr + rm[:, None] + rn[None, :] * M, x - v[None, :])


@pytest.mark.parametrize("M,N,num_warps", [(32, 64, 4), (64, 32, 8)])
def test_the_vector_loaded_in_place_gives_the_same_result(M, N, num_warps, monkeypatch):
    # the CPU simulator runs no loops: the rewrite is applied outside one here (loops_only=False); codegen
    # lowers the load the same way in a loop body
    from kernelc.compiler import compiler as C
    from kernelc.compiler.pass_manager import TilePass
    from kernelc.compiler.passes.load_layouts import loads_in_use_layout
    monkeypatch.setattr(C, "TILE_PASSES", tuple(
        TilePass(p.name, lambda f, c: loads_in_use_layout(f, loops_only=False)) if p.name == "loads_in_use_layout"
        else p for p in C.TILE_PASSES))
    ck = kernelc.compile(cols_minus_vec_once, SIG, dict(M=M, N=N), target="sm_90a", num_warps=num_warps,
                         divisibility={k: 16 for k in SIG})
    assert "convert_layout" not in ck.asm["tir"] and re.search(r"= load .*layout=#slice", ck.asm["tir"])
    assert "bar.sync" not in ck.asm["ptx"]  # no shared-memory round trip left
    rng = np.random.default_rng(5)
    x = rng.standard_normal((M, N)).astype(np.float32)
    v = rng.standard_normal(N).astype(np.float32)
    got = np.zeros((N, M), np.float32)
    llir_sim.Kernel(ck.asm["llir"]).run([x.T.copy(), v, got], num_warps)  # column-major: x^T row-major
    np.testing.assert_array_equal(got.T, x - v[None, :])


def test_a_vector_with_other_readers_keeps_its_conversion():
    @kernelc.jit
    def two_readers(x_ptr, v_ptr, y_ptr, w_ptr, n, M: kl.constexpr, N: kl.constexpr):
        rm = kl.arange(0, M)
        for j in kl.range(0, n, N, num_stages=1):
            rn = j + kl.arange(0, N)
            x = kl.load(x_ptr + rm[:, None] + rn[None, :] * M)
            v = kl.load(v_ptr + rn, mask=rn < n, other=0.0)
            kl.store(y_ptr + rm[:, None] + rn[None, :] * M, x - v[None, :])
            kl.store(w_ptr + rn, v * 2.0)
    ir, _, _ = _passes(two_readers, dict(SIG, w_ptr="*fp32", n="i32"), dict(M=32, N=64), num_warps=4)
    assert "convert_layout" in ir["loads_in_use_layout"] and "layout=#slice" not in ir["loads_in_use_layout"]


def test_a_vector_loaded_outside_a_loop_takes_the_layout_unless_loops_only(monkeypatch):
    # once a program: by default loaded in place too (a one-pass kernel such as rope runs it once per program,
    # i.e. the whole kernel); KERNELC_USE_LAYOUT_LOADS=loops leaves it as coalesce wrote it
    ir, _, _ = _passes(cols_minus_vec_once, SIG, dict(M=32, N=64), num_warps=4)
    assert "convert_layout" in ir["hoist_conversions"]
    filecheck(ir["loads_in_use_layout"], """
        CHECK: [[V:%\\d+]] = load {{%\\d+}} {layout=#slice<shape=[64], {{.*}}>} : <64xfp32>
        CHECK-NOT: convert_layout
        CHECK: = expand_dims [[V]] {axis=0} : <1x64xfp32>
    """)
    monkeypatch.setenv("KERNELC_USE_LAYOUT_LOADS", "loops")
    ir, _, _ = _passes(cols_minus_vec_once, SIG, dict(M=32, N=64), num_warps=4)
    assert ir["loads_in_use_layout"] == ir["hoist_conversions"] and "convert_layout" in ir["hoist_conversions"]


def test_rope_loads_cos_and_sin_in_the_tile_layout():
    # examples/kernels/memory_bound.py's rope: cos/sin rows broadcast over the heads were loaded one element a
    # thread and converted through shared memory (STS, LDS, 3 barriers); Triton 3.6 loads them 16 bytes a thread
    # in the tile's column layout, with no shared memory
    import importlib.util
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("mb_rope", os.path.join(root, "examples", "kernels", "memory_bound.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = dict(q_ptr="*bf16", q_row_stride="i32", cos_ptr="*fp32", sin_ptr="*fp32", cos_row_stride="i32",
               seq_len="i32", n_heads="i32", head_dim="i32")
    div = {k: 16 for k in ("q_ptr", "cos_ptr", "sin_ptr", "q_row_stride", "cos_row_stride", "head_dim")}
    ck = kernelc.compile(mod.rope_kernel, sig, dict(BLOCK_H=32, BLOCK_D=64), target="sm_90a", num_warps=4,
                         divisibility=div)
    assert "convert_layout" not in ck.asm["tir"]
    assert "bar.sync" not in ck.asm["ptx"] and "st.shared" not in ck.asm["ptx"]
    assert len(re.findall(r"ld\.global[.\w]*\.v4\.(?:f32|b32|u32)", ck.asm["ptx"])) >= 4  # cos, sin: 2 x 16 B each
