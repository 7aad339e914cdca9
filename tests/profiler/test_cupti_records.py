"""profiler/backends/cupti_records.py on real cupti-python record objects (built from bytes on the
CPU): the numpy column path gives the same records as reading attributes one by one."""
import ctypes

import numpy as np
import pytest

cupti = pytest.importorskip("cupti.cupti")

from profiler.backends import cupti_records  # noqa: E402

KINDS = ({int(cupti.ActivityKind.CONCURRENT_KERNEL), int(cupti.ActivityKind.KERNEL)}, int(cupti.ActivityKind.MEMCPY),
         int(cupti.ActivityKind.MEMSET), int(cupti.ActivityKind.DRIVER))
_NAMES = [ctypes.create_string_buffer(s) for s in (b"_Z6kernelPf", b"void at::native::add<float>")]


def _record(cls, dtype, **fields):
    raw = np.zeros(dtype.itemsize, dtype=np.uint8)
    view = raw.view(dtype)
    for k, v in fields.items():
        view[k] = v
    return cls.from_buffer(raw)


def _activities():
    kdt, adt = cupti.activity_kernel13_dtype, cupti.activity_api_dtype
    mdt, sdt = cupti.activity_memcpy6_dtype, cupti.activity_memset4_dtype
    recs = []
    for i in range(6):
        name = ctypes.addressof(_NAMES[i % 2])
        recs.append(_record(cupti.ActivityKernel13, kdt, kind=int(cupti.ActivityKind.CONCURRENT_KERNEL),
                            correlation_id=100 + i, start=1_000 + i * 10, end=1_005 + i * 10, device_id=i % 2,
                            stream_id=7, graph_node_id=(55 if i == 3 else 0), name=name))
        recs.append(_record(cupti.ActivityAPI, adt, kind=KINDS[3], correlation_id=100 + i, start=900 + i,
                            thread_id=12345, cbid=307))
    recs.append(_record(cupti.ActivityMemcpy6, mdt, kind=KINDS[1], correlation_id=200, copy_kind=1, bytes=4096,
                        start=5, end=9, device_id=0, stream_id=3))
    recs.append(_record(cupti.ActivityMemset4, sdt, kind=KINDS[2], correlation_id=201, bytes=512, start=10, end=12,
                        device_id=0, stream_id=3))
    return recs


def _label(k):
    return f"memcpy {k}"


def test_columns_equal_attributes():
    acts = _activities()
    fast = cupti_records.split(cupti, acts, KINDS, _label, {})
    slow = cupti_records.Records()
    cupti_records._by_attributes(acts, KINDS, _label, slow)
    assert sorted(fast.device()) == sorted(slow.device())
    assert fast.api() == slow.api() and len(fast.api()) == 6
    assert fast.max_cid == slow.max_cid == 201
    assert fast.count == slow.count == 8


def test_fields_decoded():
    recs = cupti_records.split(cupti, _activities(), KINDS, _label, {})
    by_cid = {r[0]: r for r in recs.device()}
    assert by_cid[100] == (100, "_Z6kernelPf", True, 0, 1000, 1005, None, 7, 0)
    assert by_cid[103][1] == "void at::native::add<float>" and by_cid[103][8] == 55
    assert by_cid[200] == (200, "memcpy 1", False, 0, 5, 9, 4096, 3, 0)
    assert by_cid[201][1:3] == ("memset", False) and by_cid[201][6] == 512
    assert recs.api()[104] == (12345, 904)


def test_records_merge():
    a = cupti_records.split(cupti, _activities()[:4], KINDS, _label, {})
    b = cupti_records.split(cupti, _activities()[4:], KINDS, _label, {})
    a.extend(b)
    whole = cupti_records.split(cupti, _activities(), KINDS, _label, {})
    assert sorted(a.device()) == sorted(whole.device()) and a.api() == whole.api()
    assert (a.count, a.max_cid) == (whole.count, whole.max_cid)


def test_name_read_once_per_pointer():
    names = {}
    cupti_records.split(cupti, _activities(), KINDS, _label, names)
    assert sorted(names.values()) == ["_Z6kernelPf", "void at::native::add<float>"]
    # a later buffer reuses the names already read
    names[ctypes.addressof(_NAMES[0])] = "cached"
    recs = cupti_records.split(cupti, _activities(), KINDS, _label, names)
    assert {r[1] for r in recs.device() if r[2]} == {"cached", "void at::native::add<float>"}


def test_take_oldest_moves_old_chunks_and_every_api_record():
    """Records.take_oldest(keep): the oldest device records (loose first, then chunks) until at most
    ``keep`` stay, with every API record (their device records may be in any chunk)."""
    import numpy as np

    from profiler.backends import cupti_records
    r = cupti_records.Records()
    for n in (3, 2, 4):
        cids = np.arange(n)
        r.chunks.append((lambda: [], True, cids, cids, cids, cids, None, cids, cids))
        r.count += n
    r.api_chunks.append((np.arange(3), np.zeros(3), np.arange(3)))
    r.loose.append((1, "x", True, 0, 0, 1, None, 0, 0))
    r.count += 1
    r.max_cid = 9
    old = r.take_oldest(6)
    assert [len(c[2]) for c in old.chunks] == [3] and old.count == 4 and len(old.loose) == 1
    assert [len(c[2]) for c in r.chunks] == [2, 4] and r.count == 6 and r.loose == []
    assert len(old.api_chunks) == 1 and r.api_chunks == [] and old.max_cid == 9
    rest = r.take_oldest(0)
    assert rest.count == 6 and r.count == 0 and r.chunks == []
    r.loose = [(i, "x", True, 0, 0, 1, None, 0, 0) for i in range(5)]
    r.count = 5
    assert [t[0] for t in r.take_oldest(2).loose] == [0, 1, 2] and [t[0] for t in r.loose] == [3, 4] and r.count == 2
