"""join/split lowered by renaming registers: the register bit that selects the pair, and the half
layouts, must describe the same elements as the paired layout (checked coordinate by coordinate)."""
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.codegen.permute import _half_index, _pair_bit, _unpaired
from kernelc.compiler.layouts import default_blocked, mma_v2


def _check(L):
    bit = _pair_bit(L)
    assert bit is not None
    H = _unpaired(L, bit)
    assert H.num_regs * 2 == L.num_regs and H.shape == L.shape[:-1]
    for k in range(L.num_regs):
        assert L.reg_coord(k) == H.reg_coord(_half_index(k, bit)) + ((k >> bit) & 1,)
    for lane in range(32):
        for warp in range(L.num_warps):
            assert L.thread_coord(lane, warp) == H.thread_coord(lane, warp) + (0,)


@pytest.mark.parametrize("shape,nw", [((64,), 4), ((1024,), 4), ((16, 32), 8), ((4, 4), 1), ((128, 64), 4)])
def test_joined_default_layouts_split_in_registers(shape, nw):
    _check(default_blocked(shape, nw).joined())


def test_epilogue_subtile_of_an_mma_accumulator_splits_in_registers():
    # acc.reshape(M, 2, N // 2).permute(0, 2, 1) then split: Triton's persistent-matmul epilogue
    acc = mma_v2((128, 128), (4, 1))
    _check(acc.reshaped((128, 2, 64)).transposed((0, 2, 1)))


def test_a_pair_split_across_lanes_is_not_register_only():
    L = default_blocked((8, 2), 4)  # 16 elements over 128 threads: the pair is spread over lanes
    assert _pair_bit(L) is None


def test_split_epilogue_of_a_dot_adds_no_shared_memory_traffic(monkeypatch):
    # the split itself (reshape, permute, split) is register-only; the stores keep the accumulator's layout
    # (with KERNELC_STORE_SMEM_DISCOUNT=4 each half's store would convert to 16-byte stores on its own)
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "1")
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"}
    cx = {"BM": 64, "BN": 64, "BK": 32}
    split = kernelc.compile(_epilogue_split, sig, cx, target="sm_90a").asm["ptx"]
    plain = kernelc.compile(_epilogue_plain, sig, cx, target="sm_90a").asm["ptx"]
    assert split.count("st.shared") == plain.count("st.shared")
    assert split.count("bar.sync") == plain.count("bar.sync")


@kernelc.jit
def _epilogue_split(a_ptr, b_ptr, c_ptr, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    rm, rn, rk = kl.arange(0, BM), kl.arange(0, BN), kl.arange(0, BK)
    acc = kl.dot(kl.load(a_ptr + rm[:, None] * BK + rk[None, :]), kl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    acc0, acc1 = kl.split(kl.permute(kl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
    rh = kl.arange(0, BN // 2)
    kl.store(c_ptr + rm[:, None] * BN + rh[None, :], acc0.to(kl.float16))
    kl.store(c_ptr + rm[:, None] * BN + BN // 2 + rh[None, :], acc1.to(kl.float16))


@kernelc.jit
def _epilogue_plain(a_ptr, b_ptr, c_ptr, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    rm, rn, rk = kl.arange(0, BM), kl.arange(0, BN), kl.arange(0, BK)
    acc = kl.dot(kl.load(a_ptr + rm[:, None] * BK + rk[None, :]), kl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(kl.float16))
