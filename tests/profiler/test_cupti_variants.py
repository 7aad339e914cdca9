"""The cupti backend's variants of profiler.options (``cupti_attribution``, ``cupti_records``,
``cupti_buffer_bytes``) on the fake CUPTI: what each one changes, beyond the placement rules that
test_cupti_backend.py runs under every variant."""
import threading

import pytest

import profiler
from profiler import context, options, session as S
from profiler.format import read_profile

from . import fake_cupti
from .test_api import find, names


def _install(monkeypatch, **env):
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return fake_cupti.install(monkeypatch, fake_cupti.FakeCupti())


def test_external_ids_place_scoped_launches(monkeypatch, tmp_path):
    """Launches inside scopes come with their node as an external correlation id (no timeline
    lookup); a launch at the root has none and goes to the root by the timeline."""
    fake = _install(monkeypatch, KPROF_CUPTI_ATTRIBUTION="external-correlation")
    lookups = []
    real = context.node_at
    monkeypatch.setattr(context, "node_at", lambda *a: (lookups.append(a), real(*a))[1])
    sid = profiler.start(str(tmp_path / "e"))
    backend = S.get(sid).backend
    assert backend.external and int(fake_cupti.ActivityKind.EXTERNAL_CORRELATION) in fake.kinds
    with profiler.scope("a"):
        fake.launch("k1")
        with profiler.scope("b"):
            fake.launch("k2")
            fake.launch("k2")
        fake.memset()
    fake.launch("top")
    ext = [r for r in fake.pending if r.kind == int(fake_cupti.ActivityKind.EXTERNAL_CORRELATION)]
    assert len(ext) == 4                         # one per launch inside a scope, none at the root
    profiler.finalize(sid)
    assert len(lookups) == 1                     # only "top" needed the timeline
    assert not any(fake.ext_stacks.values())     # nothing of ours left on CUPTI's stack
    root, _ = read_profile(tmp_path / "e.hatchet")
    assert sorted(names(find(root, "a"))) == ["b", "k1", "memset"] and find(root, "a", "b", "k2").metrics["count"] == 2
    assert "top" in names(root)


def test_external_ids_thread_inside_a_scope_at_start(monkeypatch, tmp_path):
    """A Python thread already inside a scope when profiling starts has no id pushed until its next
    change: its launches are placed by its timeline's first entry, and by ids after that."""
    fake = _install(monkeypatch, KPROF_CUPTI_ATTRIBUTION="external-correlation")
    go, started, step = threading.Event(), threading.Event(), threading.Event()

    def worker():
        with profiler.scope("w"):
            started.set()
            go.wait(10)
            fake.launch("before_change")
            with profiler.scope("inner"):
                fake.launch("inner_k")
        fake.launch("at_root")
        step.set()

    t = threading.Thread(target=worker)
    t.start()
    assert started.wait(10)
    sid = profiler.start(str(tmp_path / "w"))
    go.set()
    assert step.wait(10)
    t.join()
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "w.hatchet")
    assert sorted(names(find(root, "w"))) == ["before_change", "inner"]
    assert names(find(root, "w", "inner")) == ["inner_k"] and "at_root" in names(root)


def test_external_ids_of_an_older_profile_are_ignored(monkeypatch, tmp_path):
    fake = _install(monkeypatch, KPROF_CUPTI_ATTRIBUTION="external-correlation")
    sid = profiler.start(str(tmp_path / "g1"))
    with profiler.scope("s"):
        old = context.ext_id(context.current_node())
        assert context.ext_node(old) == context.current_node()
    profiler.finalize(sid)
    sid = profiler.start(str(tmp_path / "g2"))
    assert context.ext_node(old) is None and context.ext_node(context.ext_id(5)) == 5
    profiler.finalize(sid)
    assert fake.subscribes == 2


def test_deferred_records_kept_raw_until_flush(monkeypatch, tmp_path):
    """``cupti_records="deferred"``: a buffer completed mid-run is only kept; it is split and joined
    at the flush, or in the callback once RAW_MAX records are held."""
    from profiler.backends import cupti as backend_mod
    monkeypatch.setattr(backend_mod, "RAW_MAX", 8)
    fake = _install(monkeypatch, KPROF_CUPTI_RECORDS="deferred")
    sid = profiler.start(str(tmp_path / "d"))
    backend = S.get(sid).backend
    split_calls = []
    real = backend_mod.cupti_records.split
    monkeypatch.setattr(backend_mod.cupti_records, "split", lambda *a: (split_calls.append(len(a[1])), real(*a))[1])
    with profiler.scope("a"):
        fake.launch("k")
        fake.launch("k")
    fake.activity_flush_all(1)                  # 2 kernel + 2 API records: kept as they came
    assert split_calls == [] and backend.raw_count == 4 and backend.held.count == 0
    with profiler.scope("b"):
        for _ in range(3):
            fake.launch("k")
    fake.activity_flush_all(1)                  # 10 >= RAW_MAX: split in the callback
    assert split_calls == [4, 6] and backend.raw_count == 0 and backend.held.count == 5
    with profiler.scope("c"):
        fake.launch("k")
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "d.hatchet")
    assert [find(root, s, "k").metrics["count"] for s in "abc"] == [2, 3, 1]


def test_buffer_size_option(monkeypatch, tmp_path):
    fake = _install(monkeypatch, KPROF_CUPTI_BUFFER_SIZE="1M")
    sid = profiler.start(str(tmp_path / "b"))
    assert fake.requested() == (1 << 20, 0)
    profiler.finalize(sid)


@pytest.mark.parametrize("var,value", [("KPROF_CUPTI_ATTRIBUTION", "timelines"), ("KPROF_CUPTI_RECORDS", "lazy"),
                                       ("KPROF_CUPTI_ATTRIBUTION", "markers"),   # removed 2026-11-28
                                       ("KPROF_CUPTI_BUFFER_SIZE", "big")])
def test_bad_option_names_the_variable(monkeypatch, tmp_path, var, value):
    _install(monkeypatch, **{var: value})
    with pytest.raises(options.OptionError, match=var):
        profiler.start(str(tmp_path / "x"))
    assert not S._sessions


def test_raw_buffers_from_libcupti(monkeypatch, tmp_path):
    """``cupti_records="raw"``: buffers come from libcupti's own callbacks (cupti-python's are replaced)
    and are only kept while the program runs; the first buffer is walked with CUPTI's iterator, which
    teaches the record sizes, later ones without it; past RAW_MAX_BYTES they are decoded at once."""
    from profiler.backends import cupti as backend_mod
    from profiler.backends import cupti_raw
    # the sizes are learned once per process: start from none, whatever ran before in this worker
    monkeypatch.setattr(cupti_raw, "LEARNED_SIZES", {})
    fake = _install(monkeypatch, KPROF_CUPTI_RECORDS="raw")
    lib = fake_cupti.install_libcupti(monkeypatch, fake)
    monkeypatch.setattr(fake, "completed", lambda recs: pytest.fail("cupti-python's callback was used"))
    sid = profiler.start(str(tmp_path / "r"))
    backend = S.get(sid).backend
    assert backend.rawbufs is not None and lib.req is not None and fake.requested is not None
    monkeypatch.setattr(fake, "completed", lambda recs: pytest.fail("cupti-python's callback was used"))
    with profiler.scope("a"):
        fake.launch("k")
        fake.memset()
        fake.memcpy()
    fake.activity_flush_all(1)                 # completed mid-run: kept, not decoded
    assert lib.buffers == 1 and len(backend.rawbufs.done) == 1 and lib.next_calls == 0
    with profiler.scope("b"):
        fake.launch("k")
        fake.launch("k")
    profiler.finalize(sid)
    walked = lib.next_calls
    assert walked > 0 and not backend.rawbufs.done
    root, _ = read_profile(tmp_path / "r.hatchet")
    assert sorted(names(find(root, "a"))) == ["k", "memcpy HtoD", "memset"]
    assert find(root, "b", "k").metrics["count"] == 2
    assert find(root, "a", "memset").metrics["bytes"] == 1024
    # a second profile: sizes are known, no CUPTI iterator; a tiny bound decodes in the callback
    monkeypatch.setattr(backend_mod, "RAW_MAX_BYTES", 1)
    sid = profiler.start(str(tmp_path / "r2"))
    backend = S.get(sid).backend
    backend.rawbufs.walker.sizes.update({int(k): lib._dtype(k).itemsize for k in lib.DTYPES})
    calls = lib.next_calls
    with profiler.scope("c"):
        fake.launch("k")
    fake.activity_flush_all(1)
    assert not backend.rawbufs.done and backend.held.count == 1 and lib.next_calls == calls
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "r2.hatchet")
    assert names(find(root, "c")) == ["k"]


def test_raw_walker_learns_sizes():
    """The walk without CUPTI's iterator uses the sizes learned from it; a buffer whose records do not
    add up (a size learned wrong) is walked with the iterator again."""
    import ctypes
    from profiler.backends import cupti_raw
    sizes = {1: 16, 2: 8}
    calls = []

    def next_record(base, valid, cur):
        calls.append(cur)
        if not cur:
            return base
        nxt = cur + sizes[ctypes.c_int32.from_address(cur).value]
        return nxt if nxt < base + valid else 0

    layout = [1, 2, 2, 1]
    arr = (ctypes.c_uint8 * 64)()
    off = 0
    for k in layout:
        ctypes.c_int32.from_address(ctypes.addressof(arr) + off).value = k
        off += sizes[k]
    w = cupti_raw.Walker(next_record)
    assert dict(w.offsets(arr, off)) == {1: [0, 32], 2: [16, 24]} and w.sizes == {1: 16, 2: 8}
    n = len(calls)
    assert dict(w.offsets(arr, off)) == {1: [0, 32], 2: [16, 24]} and len(calls) == n
    w.sizes[2] = 12                               # wrong: the records no longer add up to the buffer
    assert dict(w.offsets(arr, off)) == {1: [0, 32], 2: [16, 24]} and len(calls) > n


def test_raw_bound_decodes_oldest_buffer_per_completion(monkeypatch, tmp_path):
    """Past RAW_MAX_BYTES only the oldest buffers beyond the bound are decoded in the completion
    callback (about one per completion), not everything held; what ran inside the loop is counted in
    ``stats()``; the flush decodes the rest and the profile holds every launch."""
    from profiler.backends import cupti as backend_mod
    size = 64 << 10
    fake = _install(monkeypatch, KPROF_CUPTI_RECORDS="raw", KPROF_CUPTI_BUFFER_SIZE=str(size))
    fake_cupti.install_libcupti(monkeypatch, fake)
    monkeypatch.setattr(backend_mod, "RAW_MAX_BYTES", 2 * size)
    sid = profiler.start(str(tmp_path / "b"))
    backend = S.get(sid).backend
    seen = []
    for i in range(4):
        with profiler.scope(f"s{i}"):
            fake.launch("k")
            fake.launch("k")
        fake.activity_flush_all(1)          # one buffer completes
        st = backend.stats()
        seen.append((len(backend.rawbufs.done), st["decoded_buffers"], st["raw_buffers"], st["raw_full_calls"]))
    # held: 1 buffer, then 2 (the bound: the oldest decoded, 1 kept), then one decoded per completion
    assert seen == [(1, 0, 1, 0), (1, 1, 2, 1), (1, 2, 3, 2), (1, 3, 4, 3)]
    assert backend.held.count == 3 * 2 and backend.stats()["delivered"] == 0   # delivery waits for the flush
    assert backend.stats()["raw_callback_ns"] > 0
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "b.hatchet")
    assert [find(root, f"s{i}", "k").metrics["count"] for i in range(4)] == [2, 2, 2, 2]


def test_raw_take_keeps_newest_bytes():
    """RawBuffers.take(keep_bytes): the oldest buffers first, until at most keep_bytes are held."""
    from profiler.backends import cupti_raw
    rb = cupti_raw.RawBuffers.__new__(cupti_raw.RawBuffers)
    rb.lock = threading.Lock()
    bufs = [bytearray(10), bytearray(20), bytearray(30)]
    rb.done, rb.held = [(b, 1) for b in bufs], 60
    assert [len(b) for b, _ in rb.take(35)] == [10, 20] and rb.held == 30 and len(rb.done) == 1
    assert rb.take(30) == [] and rb.held == 30
    assert [len(b) for b, _ in rb.take()] == [30] and rb.held == 0 and rb.done == []


def test_loop_stats_of_split_buffers(monkeypatch, tmp_path):
    """``split``: each buffer completed while the program runs is counted with its records and the time
    its callback took; delivery waits for the flush, so nothing is delivered inside the loop."""
    fake = _install(monkeypatch, KPROF_CUPTI_RECORDS="split")
    sid = profiler.start(str(tmp_path / "s"))
    backend = S.get(sid).backend
    assert backend.rawbufs is None and backend.light
    with profiler.scope("a"):
        fake.launch("k")
        fake.memset()
    fake.activity_flush_all(1)          # one buffer: 2 device records + 2 API records
    st = backend.stats()
    assert (st["buffers"], st["records"], st["delivered"], st["decoded_buffers"]) == (1, 4, 0, 0)
    assert st["callback_ns"] > 0 and not any(k.startswith("raw_") for k in st)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "s.hatchet")
    assert sorted(names(find(root, "a"))) == ["k", "memset"]


def test_raw_buffer_of_an_earlier_registration_is_kept():
    """A buffer libcupti took under one RawBuffers' callbacks and completes into a later one's (a profile
    started after another) is kept by the later one, not dropped as unknown."""
    import ctypes
    from profiler.backends import cupti_raw

    class Lib:
        cuptiActivityGetNextRecord = type("F", (), {})()
    first = cupti_raw.RawBuffers(Lib(), 4096, 1 << 30, lambda: None)
    second = cupti_raw.RawBuffers(Lib(), 4096, 1 << 30, lambda: None)
    u8p = ctypes.POINTER(ctypes.c_uint8)
    bufp, size, mx = ctypes.pointer(u8p()), ctypes.pointer(ctypes.c_size_t()), ctypes.pointer(ctypes.c_size_t())
    first._requested(bufp, size, mx)
    second._completed(None, 0, bufp.contents, size.contents.value, 64)
    assert [v for _, v in second.done] == [64] and first.done == [] and second.stats["buffers"] == 1
    assert ctypes.cast(bufp.contents, ctypes.c_void_p).value not in cupti_raw.OUTSTANDING
