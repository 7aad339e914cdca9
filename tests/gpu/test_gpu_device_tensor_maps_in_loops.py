"""Tensor maps rebuilt inside the problem loop of a grouped GEMM (descriptors made from addresses and
leading dimensions read from memory; codegen/device_tensor_map.py, ``build='here'``), against torch."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler import grouped_tma_kernels as G  # noqa: E402


@pytest.mark.parametrize("shapes", [[(128, 128, 128)] * 4, [(256, 384, 512), (130, 136, 72), (64, 128, 8192)],
                                    [(1000, 264, 328), (8, 16, 16)],
                                    [(256, 100, 64), (96, 36, 40)]])  # N % 8 != 0: C through the masked store
@pytest.mark.parametrize("addresses", [True, False])
def test_grouped_gemm_with_maps_built_in_the_loop_matches_torch(shapes, addresses):
    torch.manual_seed(0)
    pool = torch.zeros(sum(m * k + n * k + m * n + 64 for m, n, k in shapes), device="cuda", dtype=torch.float16)
    at, mats = 0, []
    for m, n, k in shapes:
        for r, c in ((m, k), (n, k), (m, n)):
            mats.append(pool[at:at + r * c].view(r, c))
            at += (r * c + 63) // 64 * 64
    As, Bs, Cs = mats[0::3], mats[1::3], mats[2::3]
    for x in As + Bs:
        x.copy_(torch.randn(x.shape, device="cuda"))
    for c in Cs:
        c.fill_(float("nan"))
    table, dims, lds = G.problem_tables(As, Bs, Cs, None if addresses else pool)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ck = G.grouped_gemm_made_descs[(sms,)](pool, table, dims, lds, len(shapes), NUM_PROGRAMS=sms, BM=128, BN=128,
                                           BK=64, ADDRESSES=addresses, num_warps=8, num_stages=3)
    torch.cuda.synchronize()
    for a, b, c in zip(As, Bs, Cs):
        torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.05 * a.shape[1] ** 0.5, rtol=1e-2)
    if torch.cuda.get_device_capability() == (9, 0):
        assert [m["built"] for m in ck.reports["tensor_maps"]] == ["here"] * 3
