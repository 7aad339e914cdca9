"""How kprof finds the libcupti whose buffer callbacks it replaces (``cupti_records="raw"``): cupti-python's own
library first (dladdr of its resolved entry point), then any libcupti* mapped; a library without CUPTI's entry
point is never taken, and when nothing serves, the candidates are what ``skipped`` names."""
import ctypes
import ctypes.util

import pytest

from profiler.backends import cupti_raw


def _libc_path():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    addr = ctypes.cast(libc.strlen, ctypes.c_void_p).value
    return addr, cupti_raw._path_of(addr)


def test_path_of_a_code_address():
    addr, path = _libc_path()
    assert path and "libc" in path.rsplit("/", 1)[-1]
    assert cupti_raw._path_of(0) is None


def test_candidates_order_and_no_library_without_cupti(monkeypatch):
    _, libc = _libc_path()
    monkeypatch.setattr(cupti_raw, "_cupti_python_lib", lambda: libc)
    monkeypatch.setattr(cupti_raw, "_mapped_cupti", lambda: ["/x/libcupti.so.13", libc])
    assert cupti_raw.libcupti_candidates() == [libc, "/x/libcupti.so.13"]   # cupti-python's first, no repeats
    # libc has no cuptiActivityRegisterCallbacks and /x does not exist: nothing is taken
    assert cupti_raw.find_libcupti() is None


def test_mapped_cupti_matches_renamed_copies(monkeypatch, tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f10 r-xp 00000000 08:01 1 /site/nvidia/cu13/lib/libcupti.so.13\n"
        "7f10-7f20 r-xp 00000000 08:01 2 /site/cupti_python.libs/libcupti-1a2b3c.so.13\n"
        "7f20-7f30 r-xp 00000000 08:01 3 /site/nvidia/cu13/lib/libcupti.so.13\n"
        "7f30-7f40 r-xp 00000000 08:01 4 /usr/lib/libcuptiish.txt\n"
        "7f40-7f50 r-xp 00000000 08:01 5 /usr/lib/libc.so.6\n")
    real_open = open

    def fake_open(path, *a, **k):
        return real_open(maps, *a, **k) if path == "/proc/self/maps" else real_open(path, *a, **k)
    monkeypatch.setattr("builtins.open", fake_open)
    assert cupti_raw._mapped_cupti() == ["/site/nvidia/cu13/lib/libcupti.so.13",
                                         "/site/cupti_python.libs/libcupti-1a2b3c.so.13"]


def test_skipped_names_the_candidates(monkeypatch):
    """Where no libcupti serves, the backend's ``skipped`` says where it looked (a GPU run's row shows it)."""
    monkeypatch.setattr(cupti_raw, "find_libcupti", lambda: None)
    monkeypatch.setattr(cupti_raw, "libcupti_candidates", lambda: ["/a/libcupti.so.13"])
    from profiler.backends import cupti as backend
    b = backend.CuptiBackend.__new__(backend.CuptiBackend)
    b.skipped = []
    b._use_raw_buffers()
    assert b.skipped and "/a/libcupti.so.13" in b.skipped[0] and "using cupti-python's" in b.skipped[0]
