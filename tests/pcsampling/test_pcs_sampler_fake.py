"""The ctypes collector and PCSampler against a fake libcupti (fake_cupti.py): call order, the
read-after-Stop pitfall, paging, decoding, family counting, and failing soft."""

import pytest

import fake_cupti
from fake_cupti import FakeCupti, sm90_like_table
from profiler.pcsampling import PCSampler
from profiler.pcsampling.sampler import release_contexts
from profiler.pcsampling.cupti_pc import Cupti

CTX = 0x7F00DEAD0000
TABLE = sm90_like_table()
IDX = {name.split("_stalled_", 1)[1]: i for i, name in TABLE}


def rec(fn, pc, corr, **stalls):
    out = []
    for reason, n in stalls.items():
        out.append([IDX[reason], n])
        if reason != "selected":
            out.append([IDX[reason + "_not_issued"], n // 2 + 1])
    return {"function": fn, "pc": pc, "correlation_id": corr, "cubin_crc": 77, "function_index": 1, "stalls": out}


def kernel(fn, corr, n_pcs, **stalls):
    return [rec(fn, 16 * i, corr, **stalls) for i in range(n_pcs)]


def sampler(fake, **kw):
    kw.setdefault("hook_kernelc", False)
    return PCSampler(cupti=Cupti(fake), context=CTX, **kw)


def test_closing_releases_the_context_by_default():
    """An enabled context holds the GPU's sampling unit for every process: released at close."""
    fake = FakeCupti()
    s = sampler(fake)
    assert s.start()
    s.close()
    assert "cuptiPCSamplingDisable" in fake.calls and not fake.enabled


def test_lifecycle_and_read_after_stop(capsys):
    fake = FakeCupti()
    s = sampler(fake, period=12, capacity=7, keep_enabled=True)
    assert s.start() and s.active and s.error is None
    # Configuration: the period, kernel-serialized mode, start/stop control, our buffer, the family.
    assert fake.attrs[1] == 12 and fake.attrs[5] == 2 and fake.attrs[6] == 1 and fake.attrs[8]
    assert fake.stall_filter == {i for i, n in TABLE if not n.endswith("_not_issued")}
    assert s.collector.effective_period == 12
    fake.launch(kernel("mm", 101, 10, long_scoreboard=3, selected=1))
    s.on_launch()  # drain_every=1: GetData pages 10 PCs through a 7-PC buffer
    assert len(s.table) == 20
    fake.launch(kernel("mm", 102, 30, wait=2))
    s.stop()       # Stop puts 7 PCs in the configured buffer; the other 23 come through GetData
    assert fake.calls.index("cuptiPCSamplingStop") < len(fake.calls)
    s.close()
    # left enabled (stopped) for the next sampler; released explicitly or at exit
    assert "cuptiPCSamplingDisable" not in fake.calls and fake.enabled and not fake.running
    release_contexts()
    assert "cuptiPCSamplingDisable" in fake.calls and not fake.enabled
    by = s.table.by_launch()
    assert set(by) == {101, 102}
    assert by[101].total == 10 * 4 and by[102].total == 30 * 2      # _not_issued not counted
    assert by[101].pcs[16] == {"long_scoreboard": 3, "selected": 1}
    assert by[101].function == "mm" and by[101].cubin_crc == 77 and by[101].correlation_ids == {101}
    assert capsys.readouterr().err == ""
    # Round trip through CUPTI-shaped records.
    recs = s.records
    assert {r["correlation_id"] for r in recs} == {101, 102} and all(r["pc"] % 16 == 0 for r in recs)


def test_records_left_at_disable_are_read():
    fake = FakeCupti()
    s = sampler(fake, drain_every=0, keep_enabled=False)
    assert s.start()
    fake.launch(kernel("k", 5, 3, wait=1))
    s.collector.running = False      # pretend the range ended without our Stop: Disable flushes
    fake.running = False
    s.close()
    assert s.table.by_launch()[5].total == 3


def test_stall_subset_rejected_falls_back_to_all():
    fake = FakeCupti(reject_stall_subset=True)
    s = sampler(fake)
    assert s.start()
    assert s.collector.configured_reasons.startswith("all")
    assert any("counted stall reasons only failed" in w for w in s.collector.stats.warnings)
    fake.launch(kernel("k", 9, 4, long_scoreboard=2, selected=2))
    s.close()
    assert s.table.by_launch()[9].total == 4 * 4  # both families collected, one counted


@pytest.mark.parametrize("code,needle", [(35, "INSUFFICIENT_PRIVILEGES"), (27, "not supported"),
                                         (39, "another profiler")])
def test_enable_failure_is_one_line(code, needle, capsys):
    s = sampler(FakeCupti(fail={"cuptiPCSamplingEnable": code}))
    assert s.start() is False and not s.active and needle in s.error
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kprof: pcsampling:") and "continuing without" in err
    s.close()  # harmless
    assert PCSampler(cupti=Cupti(FakeCupti()), context=CTX, hook_kernelc=False).start()  # nothing left held


def test_busy_context_and_second_sampler(capsys):
    first = sampler(FakeCupti())
    assert first.start()
    second = sampler(FakeCupti())
    assert second.start() is False and "already running" in second.error
    first.close()
    release_contexts()
    # Another client (not kprof) holds PC sampling on the context: CUPTI refuses Enable.
    fake_cupti._enabled_contexts.add(CTX)
    third = sampler(FakeCupti())
    assert third.start() is False and "CUPTI is busy" in third.error
    assert capsys.readouterr().err.count("kprof: pcsampling:") == 2


def test_old_cupti_refused():
    s = sampler(FakeCupti(version=21))
    assert s.start() is False and "too old" in s.error


def test_getdata_failing_mid_range_falls_back_to_stop(capsys):
    fake = FakeCupti()
    s = sampler(fake)
    assert s.start()
    fake.launch(kernel("k", 1, 2, wait=1))
    s.on_launch()
    fake.fail["cuptiPCSamplingGetData"] = 7
    fake.launch(kernel("k", 2, 2, wait=1))
    s.on_launch()  # GetData refused during the range: no more mid-range drains, nothing lost
    assert s.drain_every == 0 and s.active
    s.on_launch()
    del fake.fail["cuptiPCSamplingGetData"]
    s.close()      # Stop delivers the rest through the configured buffer
    assert s.table.by_launch()[1].total == 2 and s.table.by_launch()[2].total == 2
    assert any("collecting at stop only" in w for w in s.info()["warnings"])
    assert capsys.readouterr().err == ""


def test_failure_at_stop_keeps_samples(capsys):
    fake = FakeCupti()
    s = sampler(fake)
    assert s.start()
    fake.launch(kernel("k", 1, 2, wait=1))
    s.on_launch()
    fake.fail["cuptiPCSamplingStop"] = 999
    s.close()
    assert s.table.by_launch()[1].total == 2 and not s.active
    assert "samples so far are kept" in capsys.readouterr().err


def test_hardware_buffer_full_is_reported():
    fake = FakeCupti(hw_full_on_get=1)
    s = sampler(fake)
    assert s.start()
    fake.launch(kernel("k", 3, 2, wait=1))
    s.on_launch()
    s.close()
    assert s.collector.stats.hardware_buffer_full
    assert any("overflowed" in w for w in s.info()["warnings"])
    assert s.table.by_launch()[3].total == 2


def test_no_gpu_fails_soft(capsys):
    s = PCSampler(hook_kernelc=False)  # the CPU machine: torch has no CUDA
    assert s.start() is False and "no CUDA context" in s.error
    assert "continuing without instruction samples" in capsys.readouterr().err
    with PCSampler(quiet=True) as q:  # the context manager too; quiet prints nothing
        pass
    assert not q.active and capsys.readouterr().err == ""


def test_kernelc_hook_drains_and_remembers_kernels(synthetic):
    from kernelc.runtime import hooks
    _, _, kernels = synthetic
    ck, jit = kernels["matmul_kernel"]
    fake = FakeCupti()
    s = PCSampler(cupti=Cupti(fake), context=CTX)
    assert s.start() and hooks.any_registered()
    fake.launch(kernel("matmul_kernel", 7, 3, long_scoreboard=1))
    hooks.fire_exit(hooks.LaunchRecord("matmul_kernel", (1, 1, 1), 8, 3, 0, 0, "cuda", compiled=ck, function=jit))
    assert len(s.table) == 3  # drained by the hook
    s.close()
    assert not hooks.any_registered()
    (c, f, crc), = s.kernels_seen()
    assert c is ck and f is jit and crc == fake_cupti.fake_crc(ck.asm["cubin"])
    code = s.code_for("matmul_kernel", crc)
    assert code is not None and code.source["lines"][0].startswith("@triton.jit")


def test_serialized_refused_falls_back_to_continuous():
    fake = FakeCupti(reject_serialized=True)
    s = sampler(fake)
    assert s.start() and s.collector.mode == 1 and fake.attrs[5] == 1
    fake.launch([dict(r, correlation_id=0) for r in kernel("k", 0, 3, wait=1)])
    s.close()
    assert s.info()["collection"] == "continuous" and any("per kernel function" in w for w in s.info()["warnings"])
    assert s.table.by_function()[("k", 77)].total == 3


def test_next_sampler_reuses_the_enabled_context():
    """CUPTI only learns modules loaded while PC sampling is enabled: a closed sampler leaves it
    enabled, the next one starts on it (new period, fresh counts) without Enable."""
    fake = FakeCupti()
    first = sampler(fake, period=10, keep_enabled=True)
    assert first.start()
    fake.launch(kernel("a", 1, 2, wait=1))
    first.close()
    enables = fake.calls.count("cuptiPCSamplingEnable")
    second = sampler(FakeCupti(), period=14, keep_enabled=True)
    assert second.start() and second.collector is first.collector
    assert fake.calls.count("cuptiPCSamplingEnable") == enables and fake.attrs[1] == 14
    fake.launch(kernel("b", 2, 3, wait=1))
    second.close()
    assert set(second.table.by_launch()) == {2} and set(first.table.by_launch()) == {1}
    assert second.info()["pcs_read"] == 3 and second.collector.effective_period == 14
    # a sampler that asks not to keep it enabled releases the context
    third = sampler(FakeCupti(), keep_enabled=False)
    assert third.start() and third.collector is first.collector
    third.close()
    assert not fake.enabled


def test_resident_context_that_fails_to_restart_is_released(capsys):
    fake = FakeCupti()
    first = sampler(fake, keep_enabled=True)
    assert first.start()
    first.close()
    fake.fail["cuptiPCSamplingStart"] = 7
    second = sampler(FakeCupti())
    assert second.start() is False and second.error
    assert not fake.enabled and "kprof: pcsampling:" in capsys.readouterr().err


def test_rearm_enables_the_resident_context_afresh_and_the_next_sampler_uses_it():
    """The timing backend re-arms left-enabled contexts around its subscribe/unsubscribe: a
    collector left enabled across either gave 0 samples on an H200; a fresh Enable works."""
    from profiler.pcsampling.sampler import _resident, rearm_contexts
    fake = FakeCupti()
    first = sampler(fake, period=11, keep_enabled=True)
    assert first.start()
    first.close()
    old = first.collector
    rearm_contexts()
    assert fake.calls.count("cuptiPCSamplingDisable") == 1 and fake.calls.count("cuptiPCSamplingEnable") == 2
    fresh = _resident[CTX]
    assert fresh is not old and fresh.enabled and not fresh.running and fake.enabled
    second = sampler(FakeCupti(), period=11)
    assert second.start() and second.collector is fresh
    fake.launch(kernel("c", 3, 2, wait=1))
    second.close()
    assert second.info()["pcs_read"] == 2
    release_contexts()
    assert not fake.enabled


def test_rearm_skips_a_context_a_running_sampler_holds():
    from profiler.pcsampling.sampler import _resident, rearm_contexts
    fake = FakeCupti()
    first = sampler(fake, keep_enabled=True)
    assert first.start()
    first.close()
    collectors = [first.collector]
    second = sampler(FakeCupti())
    assert second.start()        # adopts the resident collector
    rearm_contexts(collectors)   # must not enable the context a second time under it
    assert CTX not in _resident and fake.calls.count("cuptiPCSamplingEnable") == 1
    second.close()
    release_contexts()


def test_continuous_collection_is_configured_when_asked():
    fake = FakeCupti()
    s = sampler(fake, collection="continuous")
    assert s.start()
    assert fake.attrs[5] == 1 and s.info()["collection"] == "continuous"
    assert not any("refused" in w for w in s.info().get("warnings", []))
    s.close()
    with pytest.raises(ValueError, match="serialized"):
        PCSampler(collection="sometimes")


def test_session_mode_option_selects_the_collection():
    from profiler.pcsampling.integration import parse_mode
    assert parse_mode("pcsampling:period=12:collection=continuous") == (
        "pcsampling", {"period": 12, "collection": "continuous"})
