"""CPU dry run of request_s25_proton.sh's command, as far as a host without a GPU goes: kprof's CPU backend, Triton 3.6
real (torch looks for it), Proton stood in for by site/sitecustomize.py (start ~9 ms, finalize ~3 ms and a file) and
cupti-python by site/cupti (its finalize a no-op).  The bench's CLI takes --fine-order swap on a GPU only: this parses
the request's arguments as given (--device cuda) and then runs the same overhead() with the device set to cpu.

    KPROF_BACKEND=cpu PYTHONPATH=<tree>:<this dir>/site:<triton 3.6 site> python3 dry.py WORKLOAD BUDGET SETTLE_MS OUT
"""
import sys
from bench import reconcile_profilers as rp
def go():
    got = {}
    real_ov = rp.overhead
    rp.overhead = lambda a: got.setdefault("a", a) and 0
    wl, budget, settle, out = sys.argv[1:5]
    rp.main(["overhead", "--spawn", "fork", "--profilers", "kprof", "--against", "proton", "--workloads", wl,
             "--budget", budget, "--fine", "3", "--fine-settle", settle, "--fine-order", "swap", "--settle-pairs", "2",
             "--pre", "1", "--grace", "2", "--name", f"profiler_overhead_s25_swap_{wl}_h200", "--results-dir", out,
             "--device", "cuda"])
    a = got["a"]; a.device = "cpu"
    return real_ov(a)


if __name__ == "__main__":
    sys.exit(go())
