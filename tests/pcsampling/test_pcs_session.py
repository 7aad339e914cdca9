"""attach(session) / finish(session, root) with a stand-in session and the fake libcupti: samples
go under the right kernel frames by correlation id, unknown launches by name, failures leave the
tree alone."""

import pytest

import fake_cupti
from fake_cupti import FakeCupti, sm90_like_table
from kernelc.runtime import hooks
from profiler.format import ProfileNode
from profiler.pcsampling import attach, finish, sampler as sampler_mod, sampler_of
from profiler.pcsampling.cupti_pc import Cupti

IDX = {name.split("_stalled_", 1)[1]: i for i, name in sm90_like_table()}


class Session:
    def __init__(self, mode="pcsampling:period=9", forward=True):
        self.mode = mode
        self.kernels = {}
        self.callbacks = []
        if forward:
            self.add_launch_callback = self.callbacks.append

    def launched(self, corr=None):
        for cb in self.callbacks:
            cb(correlation_id=corr)


@pytest.fixture
def fake(monkeypatch):
    f = FakeCupti()
    monkeypatch.setattr(sampler_mod, "CUPTI_FACTORY", lambda: Cupti(f))
    monkeypatch.setattr(sampler_mod, "CONTEXT_FACTORY", lambda device: 0x1000)
    return f


def kernel_records(instrs, corr, crc, scale=1):
    out = []
    for k, ins in enumerate(instrs):
        out.append({"function": ins.function, "pc": ins.pc, "correlation_id": corr, "cubin_crc": crc,
                    "stalls": [[IDX["long_scoreboard" if "LD" in ins.opcode else "wait"], scale * (1 + k % 3)],
                               [IDX["selected"], scale], [IDX["wait_not_issued"], 99]]})
    return out


def kernel_node(parent, name, ck):
    node = parent.child(f"{name} [grid 64x1x1, warps 8, stages 3, smem 32KiB]")
    node.add_metrics({"time (ns)": 1000, "count": 1, "device_id": "0", "device_type": "CUDA"})
    node.extra = {"kind": "kernel", "kernel": name, "cache_key": ck.cache_key}
    return node


def test_attach_finish_places_samples(fake, synthetic, capsys):
    _, _, kernels = synthetic
    mm, mm_jit = kernels["matmul_kernel"]
    sm, sm_jit = kernels["softmax_kernel"]
    crc_mm, crc_sm = fake_cupti.fake_crc(mm.asm["cubin"]), fake_cupti.fake_crc(sm.asm["cubin"])
    mm_ins = [i for i in mm.artifacts.instructions if i.function == "matmul_kernel"][:200]
    sm_ins = [i for i in sm.artifacts.instructions if i.function == "softmax_kernel"]
    session = Session()
    s = attach(session)
    assert s.active and sampler_of(session) is s and s.period == 9 and fake.attrs[1] == 9
    assert session.callbacks == [s.on_launch] and not s.drain_on_kernelc

    root = ProfileNode("ROOT")
    step = root.child("step")
    n1 = kernel_node(step.child("attn"), "matmul_kernel", mm)
    n2 = kernel_node(step.child("mlp"), "matmul_kernel", mm)
    n3 = kernel_node(step, "softmax_kernel", sm)
    # Launch 1 and 2: matmul in two scopes (the session knows their correlation ids and records).
    for corr, node, scale in ((201, n1, 1), (202, n2, 2)):
        rec = hooks.LaunchRecord("matmul_kernel", (64, 1, 1), 8, 3, 0, 0, "cuda", compiled=mm, function=mm_jit)
        session.kernels[corr] = (node, rec)
        fake.launch(kernel_records(mm_ins, corr, crc_mm, scale))
        session.launched(corr)
    # Launch 3: softmax, whose record the session lost: matched by name (one frame has it).
    fake.launch(kernel_records(sm_ins, 203, crc_sm))
    session.launched(203)
    # Launch 4: a library kernel the session never saw: its own frame under the root.
    fake.launch([{"function": "_Z10cublasGemmv", "pc": 0, "correlation_id": 204, "cubin_crc": 5,
                  "stalls": [[IDX["math_pipe_throttle"], 7]]}])
    s.note_kernel(sm, sm_jit)
    summary = finish(session, root)
    assert sampler_of(session) is None and not s.active
    assert capsys.readouterr().err == ""

    for node, scale in ((n1, 1), (n2, 2)):
        lines = {c.name: c for c in node.children}
        assert lines and all(c.frame_type == "line" for c in lines.values())
        assert all(name.startswith("matmul.py:") or not name.endswith(".py:0") for name in lines)
        total = sum(c.metrics["num_samples"] for c in lines.values()) + node.metrics.get("num_samples", 0)
        expect = sum(scale * (1 + k % 3) + scale for k in range(len(mm_ins)))
        assert total == expect  # the _not_issued 99s are not counted
        assert node.extra["cache_key"] == mm.cache_key and node.extra["source"]["lines"][0] == "@triton.jit"
        assert node.extra["pcsampling"]["launches_sampled"] == 1
        assert node.metrics["time (ns)"] == 1000  # timing untouched
    assert n3.children and n3.extra["pcsampling"]["samples"] == sum(2 + k % 3 for k in range(len(sm_ins)))
    lib = next(c for c in root.children if c.name == "cublasGemm()")
    assert lib.extra["pcsampling"]["unmatched"] and lib.metrics["num_samples"] == 7
    assert summary["kernels"] == 4 and summary["unmatched_launches"] == 1 and summary["period"] == 9
    assert root.extra["pcsampling"]["samples"] == summary["samples"]


def test_without_launch_callbacks_kernelc_hook_drains(fake, synthetic):
    _, _, kernels = synthetic
    mm, jit = kernels["matmul_kernel"]
    session = Session(forward=False)
    s = attach(session)
    assert s.drain_on_kernelc
    fake.launch(kernel_records([i for i in mm.artifacts.instructions if i.function == "matmul_kernel"][:10], 7, 0))
    hooks.fire_exit(hooks.LaunchRecord("matmul_kernel", (1, 1, 1), 8, 3, 0, 0, "cuda", compiled=mm, function=jit))
    assert len(s.table) > 0
    root = ProfileNode("ROOT")
    node = kernel_node(root, "matmul_kernel", mm)
    session.kernels[7] = (node, None)  # no launch record: the code is found from the hook's kernels
    finish(session, root)
    assert node.children and node.extra["source"]["file"].endswith("matmul.py")


def test_privileges_error_leaves_tree_alone(monkeypatch, capsys):
    f = FakeCupti(fail={"cuptiPCSamplingEnable": 35})
    monkeypatch.setattr(sampler_mod, "CUPTI_FACTORY", lambda: Cupti(f))
    monkeypatch.setattr(sampler_mod, "CONTEXT_FACTORY", lambda device: 0x1000)
    session = Session("pcsampling")
    s = attach(session)
    assert not s.active and session.callbacks == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "INSUFFICIENT_PRIVILEGES" in err
    root = ProfileNode("ROOT")
    root.child("k").add_metrics({"time (ns)": 5})
    summary = finish(session, root)
    assert "INSUFFICIENT_PRIVILEGES" in summary["error"]
    assert root.extra is None and root.children[0].children == []


def test_no_gpu_session(capsys):
    session = Session("pcsampling:period=10")
    s = attach(session)  # the CPU machine: no CUDA context
    assert not s.active and "no CUDA context" in capsys.readouterr().err
    assert finish(session, ProfileNode("ROOT")).get("error")
    assert finish(session, ProfileNode("ROOT")) == {}  # a second finish is harmless


def test_kernel_paths_protocol(fake):
    session = Session()
    assert attach(session).active
    fake.launch([{"function": "k", "pc": 0, "correlation_id": 31, "stalls": [[IDX["wait"], 3]]},
                 {"function": "k", "pc": 16, "correlation_id": 32, "stalls": [[IDX["wait"], 5]]}])
    session.launched()
    root = ProfileNode("ROOT")
    a = root.child("a").child("k")
    b = root.child("b").child("k")
    for n in (a, b):
        n.add_metrics({"time (ns)": 1, "device_id": "0"})
    session.kernels = {}
    session.kernel_paths = {31: (("a", "k"), None), 32: (("b", "k"),)}
    finish(session, root)
    assert a.metrics["num_samples"] == 3 and b.metrics["num_samples"] == 5  # no line info: own metrics
    assert not any(c.name == "k" for c in root.children)


def test_real_session_glue(fake, tmp_path):
    """profiler.start(mode="pcsampling:...") calls attach/finish; the profile carries the samples."""
    session_mod = pytest.importorskip("profiler.session")
    import profiler
    from profiler.format import read_profile
    sid = profiler.start(str(tmp_path / "p"), mode="pcsampling:period=11", backend="cpu")
    try:
        s = session_mod.get(sid).extra.get("pcsampler")
        assert s is not None and s.active and s.period == 11 and fake.attrs[1] == 11
        fake.launch([{"function": "_Z6kernelv", "pc": 0, "correlation_id": 5, "stalls": [[IDX["barrier"], 4]]}])
    finally:
        paths = profiler.finalize(sid)
    root, _ = read_profile(paths[0])
    node = next(c for c in root.children if c.name == "kernel()")
    assert node.metrics["num_samples"] == 4 and node.metrics["stalled_barrier"] == 4
    assert root.extra["pcsampling"]["period"] == 11


def test_bad_period_is_one_line(fake, capsys):
    session = Session("pcsampling:period=3")
    s = attach(session)
    assert not s.active and "period must be 5..31" in capsys.readouterr().err
    assert finish(session, ProfileNode("ROOT"))["error"]
