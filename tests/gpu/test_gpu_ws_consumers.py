"""Tutorial 09's ``_ws`` shape on the GPU against torch: a persistent GEMM whose tile loop asks for warp
specialisation, descriptors made in the kernel, grouped tile order (``tests/compiler/test_ws_consumers.py``).
Its K loop is specialised: a producer warp fills the ring across tiles, and at 4 warps a 128-row tile runs
on two consumer warpgroups (passes/ws_consumers.py). Ragged shapes, K shorter than the ring, many tiles a
program (the producer runs ahead into the next tile while the consumers store this one)."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler.test_ws_consumers import ws_tiles  # noqa: E402


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


SHAPES = [(1024, 1024, 512), (1000, 1040, 1008), (257, 136, 520), (128, 256, 16)]


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("bm,bn,num_warps,num_stages", [(128, 256, 4, 3), (128, 256, 8, 3), (128, 128, 4, 3),
                                                        (128, 128, 4, 4), (64, 128, 4, 3)])
@pytest.mark.parametrize("programs", [7, 132])
@pytest.mark.parametrize("split", [True, False])
def test_nested_ws_matches_torch(M, N, K, bm, bn, num_warps, num_stages, programs, split, monkeypatch):
    if not split and (num_warps, bm) != (4, 128):
        pytest.skip("KERNELC_WS_SPLIT_M changes only 4-warp kernels with 128-row tiles")
    monkeypatch.setenv("KERNELC_WS_SPLIT_M", "1" if split else "0")
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    # 132 programs: more than the small shapes' tiles (programs without a tile); 7: many tiles a program
    ck = ws_tiles[(programs,)](a, b, c, M, N, K, BM=bm, BN=bn, BK=64, GROUP_M=8, PROGRAMS=programs, WS=True,
                               num_warps=num_warps, num_stages=num_stages)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.05 * K ** 0.5, rtol=1e-2)
    if _hopper():
        consumers = 8 if (bm == 128 and (split or num_warps == 8)) else num_warps
        # a and b take TMA (and a producer fills their ring) when their row stride K is known 16-byte aligned: the
        # launch specialises K on divisibility by 16; else their loads take the masked path, without a producer
        producer = 1 if K % 16 == 0 else 0
        assert ck.launch_warps == consumers + producer
        if consumers == 8 and producer:
            assert ck.n_spills == 0
