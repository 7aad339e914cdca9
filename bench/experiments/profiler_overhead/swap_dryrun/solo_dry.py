"""CPU dry run of request_s26_ovh26_r2.sh's command (``--fine-order solo``), as swap_dryrun/dry.py does for the swap
design: kprof's CPU backend, Triton 3.6 real, Proton stood in for by site/sitecustomize.py.  The CLI takes the solo
order on a GPU only: this parses the request's arguments as given (--device cuda), then runs overhead() on cpu.

    KPROF_BACKEND=cpu PYTHONPATH=<tree>:<this dir>/site:<triton 3.6 site> python3 solo_dry.py PROFILERS BUDGET NAME OUT \
        [WORKLOAD [SETTLE_MS]]
"""
import sys
from bench import reconcile_profilers as rp


def go():
    got = {}
    real_ov = rp.overhead
    rp.overhead = lambda a: got.setdefault("a", a) and 0
    profs, budget, name, out = sys.argv[1:5]
    wl = sys.argv[5] if len(sys.argv) > 5 else "encoder"
    settle = sys.argv[6] if len(sys.argv) > 6 else "1"
    rp.main(["overhead", "--spawn", "fork", "--profilers", profs, "--rounds", "2", "--workloads", wl,
             "--budget", budget, "--fine", "3", "--fine-settle", settle, "--fine-order", "solo", "--settle-pairs", "2",
             "--pre", "1", "--grace", "2", "--name", name, "--results-dir", out, "--device", "cuda"])
    a = got["a"]
    a.device = "cpu"
    return real_ov(a)


if __name__ == "__main__":
    sys.exit(go())
