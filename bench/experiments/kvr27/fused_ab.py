"""(kvr27) The fused D=64 causal backward (the default, FUSED_KV_REGS: K as a register A fragment) under each
KERNELC_WGMMA_A_REGS_PINNED: att23's A/B (``bench/experiments/att23/bwd_ab.py``: entries interleaved round by round,
order reversed each round, ``attention_bwd`` called directly, cuDNN through autograd, every entry's gradients checked
against the default's and cuDNN's), one process. Entries besides att23's ``cudnn`` / ``def``:

- ``keep``: the build before kvr27 (the fragment held across the loops with their pinned waits);
- ``unpin``: the fragment held, the waits of the loops that hold it plain;
- ``stage``: the fragment's operand staged to shared memory before those loops;
- ``auto``: kvr27's default (the fragment kept unless the SASS overwrites one: for this kernel, keep's build);
- ``kv0``: the fused kernel without KV_REGS (K staged without the identity dot; the default before bwd14).

Each knob entry runs its own copy of the fused kernel, compiled with the knob set (the knob is in the cache key).

    python3 bench/experiments/kvr27/fused_ab.py --seq 16384 --head-dim 64 --causal 1 --entries cudnn keep stage ...
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("att23_bwd_ab", os.path.join(HERE, "..", "att23", "bwd_ab.py"))
AB = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AB)

from bench.common import env_vars  # noqa: E402  (the repository root is on sys.path through att23's module)

_FUSED = dict(dq_mode="fused")
AB.ENTRIES.update({"keep": dict(_FUSED), "unpin": dict(_FUSED), "stage": dict(_FUSED), "auto": dict(_FUSED),
                   "kv0": dict(_FUSED, dkdv_config=dict(KV_REGS=0))})
#: the knob each entry compiles its copy of the fused kernel with (not att23's ENV_ENTRIES: its warm-up of the
#: separate and ds modes is not needed here)
ENV = {m: {"KERNELC_WGMMA_A_REGS_PINNED": m} for m in ("keep", "unpin", "stage", "auto")}


def _fused_copy(name, kw):
    """``name``'s attention_bwd keyword arguments with its own copy of the fused kernel, and a wrapper that sets its
    knob around a call (entries without a knob: as they are)."""
    env = ENV.get(name)
    if not env:
        return kw, lambda f: f
    import kernelc
    from examples.kernels import attention_bwd as B
    kw = dict(kw, kernels=dict(fused=kernelc.jit(B.attn_bwd_fused_kernel.fn)))

    def wrap(f):
        def g():
            with env_vars(env):
                return f()
        return g
    return kw, wrap


def _report(name, kw):
    """Registers, spills, shared memory and a_regs / pinned waits of the fused kernel an entry launched."""
    try:
        from kernelc.runtime import launcher
        from examples.kernels import attention_bwd as B
        fn = (kw.get("kernels") or {}).get("fused", B.attn_bwd_fused_kernel)
        for ent in launcher.get_state(fn)["cache"].values():
            ck = ent.compiled
            tir = ck.asm.get("tir", "") or ""
            print(f"  {name}: fused regs {ck.n_regs} spills {ck.n_spills} shared {ck.shared} a_regs "
                  f"{tir.count('a_regs=True')} pinned {tir.count('pin=True')}", flush=True)
    except Exception as e:  # a diagnostic only
        print(f"  {name}: no kernel report ({type(e).__name__}: {e})", flush=True)


AB._with_env = _fused_copy
AB._report_kernels = _report

if __name__ == "__main__":
    AB.main()
