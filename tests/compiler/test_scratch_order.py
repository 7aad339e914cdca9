"""Ops that stage operands in the per-op shared-memory scratch must convert their other operands first:
a layout conversion goes through the same scratch (offset 0) and would overwrite what was staged (the
bug that made kl.gather return its index's bits on the H100, 2026-11-25). Checked on the emitted LLVM IR:
after an operand's last shared store, no store of another type reaches shared memory before it is used."""
import re

import kernelc
import kernelc.language as kl


@kernelc.jit
def _dot_acc_other_layout(a_ptr, b_ptr, c_ptr, o_ptr, M: kl.constexpr, N: kl.constexpr, K: kl.constexpr):
    rm, rn, rk = kl.arange(0, M), kl.arange(0, N), kl.arange(0, K)
    a = kl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = kl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = kl.trans(kl.load(c_ptr + rn[:, None] * M + rm[None, :]))  # not in the MMA layout: converted
    kl.store(o_ptr + rm[:, None] * N + rn[None, :], kl.dot(a, b, c))


def _shared_events(llir):
    out = []
    for line in llir.splitlines():
        m = re.search(r"\b(store|load) (?:<\d+ x )?(\w+)[^,]*, ptr addrspace\(3\)", line)
        if m:
            out.append((m.group(1), m.group(2)))
        elif "mma.sync" in line or "ldmatrix" in line:
            out.append(("mma", None))
    return out


def test_mma_dot_converts_its_accumulator_before_staging_the_operands():
    ck = kernelc.compile(_dot_acc_other_layout, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32",
                                                 "o_ptr": "*fp32"}, {"M": 64, "N": 64, "K": 32}, target="sm_80")
    ev = _shared_events(ck.asm["llir"])
    first_mma = next(i for i, e in enumerate(ev) if e[0] == "mma")
    staged = [i for i, e in enumerate(ev[:first_mma]) if e == ("store", "half")]
    assert staged and any(e == ("store", "float") for e in ev[:staged[0]])  # the conversion ran, and first
    assert not [e for e in ev[staged[-1]:first_mma] if e[0] == "store" and e[1] != "half"]
