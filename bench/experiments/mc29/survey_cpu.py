"""CPU (sm_90a): the fp8 forward's default build (D=128, 64x128, 4 warps, 2 stages, host descriptors, key order) at
num_ctas 1 and 2 (multicast K/V with the cluster barrier or 'empty' barriers), copies after the dots or at the top:
registers, spills, shared memory, SASS size, multicast copies, cluster barriers, L1 invalidations (CCTL.IVALL: an
acquire at cluster scope), and the causal build's refusal.

    python3 bench/experiments/mc29/survey_cpu.py [--json OUT]

Nothing here is a test.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "fp813"), os.path.join(ROOT, "bench", "experiments",
                                                                                      "att20")]

import sass_cpu as A20  # noqa: E402


def build(causal, num_ctas, top, sync):
    import kernelc
    from bench.bench_attention import _environ
    orig = kernelc.compile
    kernelc.compile = lambda *a, **k: orig(*a, **k, num_ctas=num_ctas)
    cx = dict(KEY_ORDER=True, EVEN_N=True, REFILL_TOP=top)
    if causal:
        cx.update(ONE_LOOP=True, MASK_FOLD=True, LPT=0)
    try:
        with _environ({"KERNELC_MULTICAST_SYNC": sync}):
            return A20.desc_build(128, causal, True, 64, 128, 4, 2, **cx)
    finally:
        kernelc.compile = orig


def main():
    rows = []
    for causal, nc, top, sync in [(False, 1, False, "cluster"), (False, 2, False, "cluster"), (False, 2, False, "empty"),
                                  (False, 1, True, "cluster"), (False, 2, True, "cluster"), (False, 2, True, "empty"),
                                  (True, 1, True, "cluster"), (True, 2, True, "cluster")]:
        ck = build(causal, nc, top, sync)
        sass = ck.asm["sass"]
        ins = [x for x in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", x)]
        row = dict(causal=causal, num_ctas=nc, refill_top=top, sync=sync if nc == 2 else None, regs=ck.n_regs,
                   spills=ck.n_spills, smem=ck.shared, sass=len(ins),
                   utmaldg_multicast=sass.count("UTMALDG.2D.MULTICAST"), utmaldg=len(re.findall(r"UTMALDG\.2D ", sass)),
                   cluster_barriers=sass.count("UCGABAR_WAIT"), cctl_ivall=sass.count("CCTL.IVALL"),
                   refused=[n for n in ck.compile_log if "not multicast" in n])
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
