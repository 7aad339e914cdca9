"""KERNELC_TMA_L2_PROMOTION: the L2 promotion of the CUtensorMaps encoded for host TensorDescriptors (read when a
map is encoded; a cached map keeps its own), and a clear error for a value the driver has no enum for."""
import pytest

from kernelc.options import OptionError
from kernelc.runtime import tensor_map as TM


def _params():
    return TM.tensor_map_params("fp8e5", 0x7f0000000000, [4 * 32 * 4096, 64], [64, 1], [64, 64])


@pytest.mark.parametrize("raw, enum", [("256", 3), ("128", 2), ("64", 1), ("none", 0), ("0", 0)])
def test_each_value_is_the_drivers_enum(monkeypatch, raw, enum):
    monkeypatch.setenv("KERNELC_TMA_L2_PROMOTION", raw)
    assert _params().l2_promotion == enum


def test_default(monkeypatch):
    monkeypatch.delenv("KERNELC_TMA_L2_PROMOTION", raising=False)
    assert _params().l2_promotion == TM.L2_PROMOTION["128"] == 2  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B, as Triton


def test_only_the_promotion_changes(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_L2_PROMOTION", "256")
    a = _params()
    monkeypatch.setenv("KERNELC_TMA_L2_PROMOTION", "128")
    b = _params()
    assert a != b and a.__class__(**{**a.__dict__, "l2_promotion": b.l2_promotion}) == b


def test_cached_maps_keep_their_encoding(monkeypatch):
    seen = []
    enc = lambda p: seen.append(p.l2_promotion) or bytes(128)  # noqa: E731  (no driver on CPU)
    TM.clear_cache()
    try:
        monkeypatch.setenv("KERNELC_TMA_L2_PROMOTION", "256")
        TM.cached_tensor_map("fp16", 0x10000, [256, 64], [64, 1], [64, 64], encoder=enc)
        monkeypatch.setenv("KERNELC_TMA_L2_PROMOTION", "128")
        TM.cached_tensor_map("fp16", 0x10000, [256, 64], [64, 1], [64, 64], encoder=enc)
        assert seen == [3]
        TM.clear_cache()
        TM.cached_tensor_map("fp16", 0x10000, [256, 64], [64, 1], [64, 64], encoder=enc)
        assert seen == [3, 2]
    finally:
        TM.clear_cache()


def test_bad_value_names_the_knob(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_L2_PROMOTION", "512")
    with pytest.raises(OptionError, match="KERNELC_TMA_L2_PROMOTION='512'"):
        _params()
