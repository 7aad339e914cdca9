"""(kvr27) The dK/dV kernels ``kvregs_ws_check.py`` launches, compiled as the launch specialises them (the kernel's
``warmup`` with the launch's own arguments: H=4, N=1024 and the launch's divisibility, not the tests' all-16), on CPU
for sm_90a, or on a GPU the build the launch runs. Per config: the assembler (ptxas path and version), registers,
spills, a_regs / pinned waits in the tile IR, the PTX / SASS hashes, and the HGMMAs whose register A fragment the
SASS overwrites inside the loop (tests/compiler/test_attention_kernels.py's check). ``--dump DIR`` writes each
build's PTX and SASS there.

    PYTHONPATH=$PWD python3 bench/experiments/kvr27/launch_build.py [--seq 1024] [--heads 4] [--json OUT] [--dump DIR]
"""
import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

import torch  # noqa: E402


class _Capture:
    """Stands in for a kernel in attention_bwd_steps(kernels=...): ``[grid](*args, **kw)`` compiles, never runs."""

    def __init__(self, real):
        self.real, self.built = real, []

    def __getitem__(self, grid):
        return lambda *a, **kw: self.built.append(self.real.warmup(*a, grid=grid, **kw))


def assembler():
    from kernelc.compiler.backend.ptxas import ptxas_binary
    exe = ptxas_binary()
    ver = ""
    if exe:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
        ver = ([ln for ln in out.splitlines() if "release" in ln] or [""])[-1].strip()
    try:
        from cuda.bindings import nvjitlink
        jit = ".".join(map(str, nvjitlink.version()))
    except Exception as e:  # noqa: BLE001
        jit = f"none ({type(e).__name__})"
    return dict(ptxas=exe, ptxas_version=ver, nvjitlink=jit, KERNELC_ASSEMBLER=os.environ.get("KERNELC_ASSEMBLER"),
                KERNELC_PTXAS=os.environ.get("KERNELC_PTXAS"))


def _sha(text, kind):
    """A hash of ``text`` without what differs between two checkouts: the source paths and line table of the PTX,
    the addresses and comments of the SASS (bench/experiments/d64b27/ws_sass.py's normalisation)."""
    import re
    if kind == "ptx":
        lines = [ln for ln in text.splitlines() if not ln.strip().startswith((".loc", ".file", "$L__tmp", "//"))
                 and "debug" not in ln]
    else:
        lines = [re.sub(r"/\*[0-9a-f]{4,}\*/", "", ln).strip() for ln in text.splitlines()
                 if ln.strip() and not ln.lstrip().startswith(("//", "."))]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def build_row(ck, name, dump=None):
    from tests.compiler.test_attention_kernels import _overwritten_a_fragments
    asm = ck.asm
    sass, ptx, tir = asm["sass"], asm["ptx"], asm["tir"]
    bad, loops = _overwritten_a_fragments(sass)
    if dump:
        os.makedirs(dump, exist_ok=True)
        for ext in ("ptx", "sass", "tir"):
            with open(os.path.join(dump, f"{name}.{ext}"), "w") as f:
                f.write(asm[ext])
        with open(os.path.join(dump, f"{name}.log"), "w") as f:
            f.write(str(getattr(ck, "compile_log", "")))
    return dict(kernel=name, regs=ck.n_regs, spills=ck.n_spills, a_regs=tir.count("a_regs=True"),
                pinned_waits=tir.count("pin=True"), usetmaxreg="USETMAXREG" in sass,
                ptx_sha=_sha(ptx, "ptx"), sass_sha=_sha(sass, "sass"),
                loops=loops, overwritten_a_fragments=bad,
                compiled_again=any("compiled again with those operands staged" in x for x in ck.compile_log))


def main():
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--kv", default="0,1,2")
    ap.add_argument("--json")
    ap.add_argument("--dump")
    ap.add_argument("--nvjitlink", help="preload this libnvJitLink.so (the GPU hosts': 13.0.88)")
    args = ap.parse_args()
    if args.nvjitlink:  # cuda.pathfinder takes a library already loaded (bench/experiments/mem20/asm_matrix.py)
        import ctypes
        ctypes.CDLL(args.nvjitlink, mode=os.RTLD_GLOBAL)
    dev, N, D = args.device, args.seq, 64
    q, k, v, do = (torch.randn(1, args.heads, N, D, device=dev, dtype=torch.float16) for _ in range(4))
    o = torch.randn_like(q)
    lse = torch.zeros(1, args.heads, N, device=dev, dtype=torch.float32)
    rows = []
    kvs = [int(x) for x in args.kv.split(",")]
    for kv, ws, tma in itertools.product(kvs, (0, 1), (False, True)):
        cfg = dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3, KV_REGS=kv, WS=ws, ROWS_TMA=tma)
        cap = _Capture(B.attn_bwd_dkdv_kernel)
        _, steps = B.attention_bwd_steps(do, q, k, v, o, lse, False, D ** -0.5, dq_mode="separate", dkdv_config=cfg,
                                         kernels=dict(dkdv=cap))
        dict(steps)["dkdv"]()
        r = build_row(cap.built[0], f"kv{kv}_ws{ws}_tma{int(tma)}", args.dump)
        rows.append(r)
        print(json.dumps(r), flush=True)
    import datetime
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    out = dict(device=torch.cuda.get_device_name() if dev == "cuda" else "CPU (sm_90a stand-in)", seq=N,
               heads=args.heads, commit=commit or None, date=datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
               knob=os.environ.get("KERNELC_WGMMA_A_REGS_PINNED"), assembler=assembler(), rows=rows)
    print(json.dumps(out["assembler"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
