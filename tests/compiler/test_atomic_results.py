"""Atomics whose old value nothing reads skip the shared-memory broadcast (passes/atomic_results.py):
checked on CPU down to SASS on a lock-protected accumulation like Triton's layer-norm backward."""
import re

import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.passes.atomic_results import mark_unused_atomic_results


@kernelc.jit
def locked_accumulate(Lock, X, Acc, Old, N, BLOCK: kl.constexpr, KEEP_OLD: kl.constexpr):
    cols = kl.arange(0, BLOCK)
    mask = cols < N
    x = kl.load(X + cols, mask=mask)
    while kl.atomic_cas(Lock, 0, 1) == 1:
        pass
    kl.store(Acc + cols, kl.load(Acc + cols, mask=mask) + x, mask=mask)
    kl.debug_barrier()
    old = kl.atomic_xchg(Lock, 0)
    if KEEP_OLD:
        kl.store(Old, old)


SIG = dict(Lock="*i32", X="*fp32", Acc="*fp32", Old="*i32", N="i32")


def _opcodes(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


def test_mark_only_atomics_whose_result_is_unused():
    fn, _ = generate_ir(_base_function(locked_accumulate), SIG, dict(BLOCK=256, KEEP_OLD=False), {}, (), None,
                        arch="sm_90a", num_warps=4)
    atoms = [op for op in mark_unused_atomic_results(fn).walk() if op.name in ("atomic_cas", "atomic_rmw")]
    assert [(op.name, bool(op.attrs.get("result_unused"))) for op in atoms] == \
        [("atomic_cas", False), ("atomic_rmw", True)]  # the spin loop reads the CAS; the release is dropped


def test_unused_release_has_no_broadcast_in_sass():
    dropped = kernelc.compile(locked_accumulate, SIG, dict(BLOCK=256, KEEP_OLD=False), target="sm_90a", num_warps=4)
    kept = kernelc.compile(locked_accumulate, SIG, dict(BLOCK=256, KEEP_OLD=True), target="sm_90a", num_warps=4)
    d, k = _opcodes(dropped), _opcodes(kept)
    assert sum(o.startswith("ATOM") for o in d) == sum(o.startswith("ATOM") for o in k) == 2
    # the kept old value travels thread 0 -> shared -> everyone: a store, barriers and a load more
    bars = lambda ops: sum(o.startswith("BAR") for o in ops)  # noqa: E731
    assert bars(d) < bars(k), (bars(d), bars(k))
    assert sum(o.startswith("STS") for o in d) < sum(o.startswith("STS") for o in k)
    # nothing after the release but the exit: the release is the kernel's last memory operation
    last_atom = max(i for i, o in enumerate(d) if o.startswith("ATOM"))
    assert not any(o.startswith(("BAR", "STS", "LDS")) for o in d[last_atom:])
