# dry run only (CPU host): Triton 3.6 real, its profiler (Proton) stood in for -- start ~9 ms, finalize ~3 ms and
# a file, as measured on an H200 (s20 R1); no CUPTI on this host
import contextlib, sys, time, types
m = types.ModuleType("triton.profiler")
_out = []
def _spin(s):
    t = time.perf_counter()
    while time.perf_counter() - t < s:
        pass
def start(name, **kw):
    _out.append(name); _spin(0.009); return 0
def finalize(session=None, output_format=""):
    _spin(0.003)
    open(_out.pop() + ".hatchet", "w").write('{"fake": 1}')
@contextlib.contextmanager
def scope(name, metrics=None):
    yield
m.start, m.finalize, m.scope = start, finalize, scope
sys.modules["triton.profiler"] = m
