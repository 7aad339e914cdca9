"""(kvr26) Register A fragments held across a loop, compiled on CPU for sm_90a: the D=64 dK/dV kernel at 64 x 128,
8 warps, rows by TMA, KV_REGS 0/1/2 with and without a producer warpgroup (WS), and the kernels that ran KV_REGS
correctly on an H200 (the fused D=64 causal default, the separate dK/dV kernel at 32 x 64 with KV_REGS=2). For each:
dots reading A from registers (a_regs), pinned waits, registers, spills, USETMAXREG, and the HGMMAs whose register A
fragment the SASS overwrites inside the loop (tests/compiler/test_attention_kernels.py: _overwritten_a_fragments).
``--no-rule`` compiles as before kvr26 (register fragments under WS too) and assembles each such kernel's PTX again
with ptxas directly: as it is, with .minnctapersm 1, and with the pinned waits (codegen/wgmma.pinned_wait) replaced
by plain wgmma.wait_group. Nothing runs on a GPU.

    PYTHONPATH=$PWD KERNELC_CACHE_DIR=/tmp/kc python3 bench/experiments/kvr26/a_frag_sass.py [--no-rule] [--json OUT]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.compiler.test_attention_kernels import _dkdv_d64, _overwritten_a_fragments, P  # noqa: E402

PIN = re.compile(r"\{ \.reg \.pred kc_p;[^\n]*?(wgmma\.wait_group\.sync\.aligned \d+;)[^\n]*?kc_pin_j: \}")


def fused_causal_default():
    import kernelc
    from examples.kernels import attention_bwd as B
    _, _, cx, opts = B._fused_config(4096, 64, True, None, None)
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", H="i32", N_CTX="i32")
    return kernelc.compile(B.attn_bwd_fused_kernel, sig, cx, target="sm_90a", divisibility={n: 16 for n in sig},
                           equal_to_1=("stride_k",), **opts)


def assemble(ptx, minncta=False):
    """SASS and ptxas's log of ``ptx`` assembled by the standalone ptxas at its own register choice."""
    from cubintools.sass import disassemble_with_instructions
    from kernelc.compiler.backend.ptxas import ptxas_binary
    if minncta:
        ptx = re.sub(r"(\.maxntid[^\n]*\n)", r"\1.minnctapersm 1\n", ptx, count=1)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "k.ptx"), "w") as f:
            f.write(ptx)
        r = subprocess.run([ptxas_binary(), "-arch=sm_90a", "-O3", "-v", os.path.join(d, "k.ptx"), "-o",
                            os.path.join(d, "k.cubin")], capture_output=True, text=True)
        with open(os.path.join(d, "k.cubin"), "rb") as f:
            return disassemble_with_instructions(f.read())[0], r.stdout + r.stderr


def row(name, ck):
    bad, loops = _overwritten_a_fragments(ck.asm["sass"])
    tir = ck.asm["tir"]
    return dict(kernel=name, a_regs=tir.count("a_regs=True"), pinned_waits=tir.count("pin=True"), regs=ck.n_regs,
                spills=ck.n_spills, usetmaxreg="USETMAXREG" in ck.asm["sass"], loops=loops,
                overwritten_a_fragments=bad)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-rule", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.no_rule:
        from kernelc.compiler.passes import stage_operands
        stage_operands._warp_specialised = lambda op: False
    kernels = [(f"d64 64x128 8w KV_REGS={kv} WS={ws}", lambda kv=kv, ws=ws: _dkdv_d64(WS=ws, ROWS_TMA=True,
                                                                                        KV_REGS=kv))
               for ws in (0, 1) for kv in (0, 1, 2)]
    kernels += [("fused D=64 causal default", fused_causal_default),
                ("separate 32x64 4w KV_REGS=2", lambda: _dkdv_d64(cfg=(32, 64, 4, 3), TAIL=True, KV_REGS=2)),
                ("separate 32x64 4w KV_REGS=2 causal", lambda: _dkdv_d64(True, (32, 64, 4, 3), TAIL=True,
                                                                         KV_REGS=2))]
    rows = []
    for name, make in kernels:
        ck = make()
        r = row(name, ck)
        if args.no_rule and r["a_regs"]:
            ptx = ck.asm["ptx"]
            r["ptxas_alone"] = {}
            for how, text, mn in (("as is", ptx, False), ("minnctapersm", ptx, True),
                                  ("plain waits", PIN.sub(r"\1", ptx), False),
                                  ("plain waits, minnctapersm", PIN.sub(r"\1", ptx),
                                   True)):
                sass, log = assemble(text, mn)
                bad, loops = _overwritten_a_fragments(sass)
                r["ptxas_alone"][how] = dict(spill_stores=re.findall(r"(\d+) bytes spill stores", log),
                                             usetmaxreg="USETMAXREG" in sass, loops=loops, overwritten=len(bad))
        rows.append(r)
        print(json.dumps(r), flush=True)
    if args.json:
        import datetime
        from kernelc.compiler.backend.ptxas import ptxas_binary
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        ptxas = [ln for ln in subprocess.run([ptxas_binary(), "--version"], capture_output=True,
                                             text=True).stdout.splitlines() if "release" in ln][-1]
        with open(args.json, "w") as f:
            json.dump(dict(no_rule=args.no_rule, device="CPU (sm_90a compile only)", commit=commit, ptxas=ptxas,
                           date=datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
