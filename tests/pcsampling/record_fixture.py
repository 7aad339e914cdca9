"""Record real PC samples on the GPU as CPU test data (run once on the GPU machine, commit the files).

    python tests/pcsampling/record_fixture.py [--period N] [--out DIR]

Writes ``sm90_matmul.json`` (kernelc matmul, fp16 2048^3, 2 launches) and ``sm90_softmax.json``
(kernelc fused softmax, fp32 4096x4096, 2 launches) to ``tests/pcsampling/data/`` (and copies
them to ``$OUT/pcsampling_data/`` when ``$OUT`` is set), in the format of
``profiler/pcsampling/fixture.py``: CUPTI's raw records and stall-reason table, the kernels' cubins
and source, and the top-line ranking computed here (``expected``), which the CPU tests recompute
from the file.  Prints what it saw: the stall reasons, the period CUPTI reports, samples per
launch, whether the records' cubin CRC matches CUPTI's CRC of kernelc's cubin, the top lines.
Exits non-zero if a kernel got no samples.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)


def record(name: str, factory, period: int, out_dir: str, launches: int = 2) -> bool:
    import torch

    from profiler.pcsampling import PCSampler, fixture

    run = factory()
    run()  # compile and warm up outside the sampled range
    torch.cuda.synchronize()
    s = PCSampler(period=period)
    if not s.start():
        print(f"[{name}] sampling did not start: {s.error}")
        return False
    for _ in range(launches):
        run()
    torch.cuda.synchronize()
    s.close()
    info = s.info()
    print(f"[{name}] {run.what}: info {json.dumps(info)}")
    print(f"[{name}] stall reasons ({len(s.stall_names)}): "
          + ", ".join(f"{i}={n}" for i, n in sorted(s.stall_names.items())))
    by_launch = s.table.by_launch()
    for key, c in sorted(by_launch.items()):
        print(f"[{name}] launch {key}: {c.function} crc={c.cubin_crc:#x} pcs={len(c.pcs)} samples={c.total}")
    seen = s.kernels_seen()
    for ck, _, crc in seen:
        rec_crcs = {c.cubin_crc for c in by_launch.values() if c.function == ck.name}
        print(f"[{name}] kernelc {ck.name}: cuptiGetCubinCrc={crc if crc is None else hex(crc)} "
              f"record CRCs={[hex(x) for x in rec_crcs]} match={crc in rec_crcs}")
    attrs = s.attribute()
    top = fixture.top_lines(attrs, run.kernel, 10)
    if not top:
        print(f"[{name}] ERROR: no samples attributed to lines of {run.kernel}")
        return False
    for f, ln, k in top:
        print(f"[{name}]   {f}:{ln}  {k}")
    path = os.path.join(out_dir, f"sm90_{name}.json")
    expected = {run.kernel: {"top_lines": top}}
    s.save(path, description=f"{run.what}, {launches} launches, period 2^{period} cycles, "
                             f"{torch.cuda.get_device_name()}", extra={"expected": expected})
    # The CPU tests' view of the file must agree with what was computed here.
    back = fixture.load(path)
    again = fixture.top_lines(back.attribute(), run.kernel, 10)
    print(f"[{name}] wrote {path} ({os.path.getsize(path) // 1024} KiB); re-read ranking "
          f"{'matches' if again == top else 'DIFFERS: ' + repr(again)}")
    out = os.environ.get("OUT")
    if out:
        os.makedirs(os.path.join(out, "pcsampling_data"), exist_ok=True)
        shutil.copy(path, os.path.join(out, "pcsampling_data", os.path.basename(path)))
    return again == top


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--period", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from examples import workloads
    os.makedirs(args.out, exist_ok=True)
    ok = record("matmul", workloads.kernelc_matmul, args.period, args.out)
    ok = record("softmax", workloads.kernelc_softmax, args.period, args.out) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
