"""nvj27: the SASS that the six tests failing under the GPU hosts' nvJitLink (13.0.88) assert, built under whichever
nvJitLink this process loads (``--nvjitlink LIB`` preloads another one, as on the GPU hosts), written as JSON with the
SASS of each build so that two runs can be diffed (``--out DIR``)."""
import argparse
import ctypes
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvjitlink", help="preload this libnvJitLink.so.13 (the GPU hosts': 13.0.88)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.nvjitlink:  # cuda.pathfinder takes a library already loaded
        ctypes.CDLL(args.nvjitlink, mode=os.RTLD_GLOBAL)
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import tempfile
    os.environ["KERNELC_CACHE_DIR"] = tempfile.mkdtemp(prefix="nvj27-")
    import kernelc
    from cuda.bindings import nvjitlink
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = dict(nvjitlink=".".join(map(str, nvjitlink.version())), builds={})

    def rec(name, ck, **extra):
        (out / f"{name}.sass").write_text(ck.asm["sass"])
        res["builds"][name] = dict(n_regs=ck.n_regs, n_spills=ck.n_spills, **extra)

    def ops(ck):
        return Counter(re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).split(" ")[0]
                       for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln))

    # test_fp8_narrowing.py::test_fixup_instructions_a_pair
    from tests.compiler.test_fp8_narrowing import _narrow
    for name, exp2 in (("fp8e5", False), ("fp8e5", True), ("fp8e4nv", False), ("fp8e4nv", True)):
        ck = kernelc.compile(_narrow, dict(x_ptr="*fp32", y_ptr="*" + name), dict(BLOCK=4096, EXP2=exp2),
                             target="sm_90a", num_warps=4)
        c = ops(ck)
        rec(f"fp8_{name}_exp2{int(exp2)}", ck, n_instr=sum(c.values()), n_nop=c["NOP"] + c["NOP;"],
            n_instr_no_nop=sum(c.values()) - c["NOP"] - c["NOP;"], ops=dict(c))

    # test_register_budget.py::test_occupancy_step_reassembles_geglu_bwd_without_spills
    from examples.kernels import memory_bound as K
    from kernelc.compiler.backend import ptxas as PT
    from cubintools.target import ARCH_LIMITS
    env = dict(KERNELC_ASSEMBLER="nvjitlink", KERNELC_NVJITLINK_LAUNCH_BOUND="0", KERNELC_FILL_OCCUPANCY_STEP="0")
    os.environ.update(env)
    sig = {k: "*bf16" for k in ("dc_ptr", "a_ptr", "b_ptr", "da_ptr", "db_ptr")} | dict(stride="i32", n_cols="i32")
    for step in ("0", "1"):
        os.environ["KERNELC_OCCUPANCY_STEP"] = step
        ck = kernelc.compile(K.geglu_bwd_kernel, sig, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                             divisibility={k: 16 for k in sig})
        rec(f"geglu_bwd_step{step}", ck, step_target=PT.occupancy_step_target(ck.n_regs, 512, 0, ARCH_LIMITS[90]),
            ptxas_log=ck.artifacts.ptxas_log)
    for k in list(env) + ["KERNELC_OCCUPANCY_STEP"]:
        os.environ.pop(k)

    # test_uniform_warpgroups.py::test_the_k_step_moves_no_descriptor_to_the_uniform_datapath
    from tests.compiler import persistent_kernels as P
    from tests.compiler.test_flatten_carry import DIV as PDIV, SIG as PSIG, UNIT as PUNIT, _cx as _pcx, _step
    for flat in (True, False):
        for uni in ("1", "0"):
            os.environ["KERNELC_FLATTEN_LOOPS"] = "1" if flat else "0"
            os.environ["KERNELC_UNIFORM_WARPGROUP"] = uni
            ck = kernelc.compile(P.persistent_ptr_grouped, PSIG, _pcx(128, 256, 64, flat=flat), target="sm_90a",
                                 num_warps=8, num_stages=4, divisibility=PDIV, equal_to_1=PUNIT)
            step = [i.opcode for i in _step(ck)]
            rec(f"pgemm_flat{int(flat)}_uniform{uni}", ck, step_len=len(step),
                step_r2ur=sum(o.startswith("R2UR") for o in step), step_hgmma=sum(o.startswith("HGMMA") for o in step),
                step_nop=sum(o == "NOP" for o in step), step_ops=dict(Counter(step)))
    os.environ.pop("KERNELC_FLATTEN_LOOPS")
    os.environ.pop("KERNELC_UNIFORM_WARPGROUP")
    (out / "builds.json").write_text(json.dumps(res, indent=1, sort_keys=True))
    for k, v in res["builds"].items():
        print(k, {a: b for a, b in v.items() if a not in ("ops", "step_ops", "ptxas_log")})


if __name__ == "__main__":
    main()
