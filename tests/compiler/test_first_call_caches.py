"""What makes first calls cheaper without changing what is compiled (docs/performance.md, "First calls"): the
per-process memo of shared-memory layout plans answers as the plan itself does, for every argument that decides
it; the IR walk on one stack visits what the recursive walk visited, in the same order, also ops a caller adds
during the walk; ``replace_all_uses`` rewrites exactly the operands that read the old value."""
import dataclasses

import pytest

from kernelc.compiler.ir.core import Block, Op, replace_all_uses, users
from kernelc.compiler.layouts import default_blocked, mma_v2
from kernelc.compiler import shared_layouts as S


def _uncached(*args):
    return S._plan_shared_layout.__wrapped__(*args)


LAYOUTS = [
    (default_blocked((64, 64), 4, (1, 0), vec=4), default_blocked((64, 64), 4, (0, 1), vec=4)),
    (mma_v2((64, 64), (2, 2)), default_blocked((64, 64), 4, (1, 0), vec=8)),
    (default_blocked((32, 128), 8, (1, 0), vec=2), default_blocked((32, 128), 8, (0, 1), vec=2)),
]


@pytest.mark.parametrize("src,dst", LAYOUTS)
def test_the_plan_memo_answers_as_the_plan(src, dst):
    S._plan_shared_layout.cache_clear()
    for ebytes in (2, 4):
        for vec in (8, 16):
            for sm in (False, True):
                assert S.plan_shared_layout(src, dst, ebytes, vec, stmatrix=sm) == _uncached(src, dst, ebytes, vec, sm)
    info = S._plan_shared_layout.cache_info()
    assert info.misses == 8 and info.hits == 0   # every argument is part of the key
    assert S.plan_shared_layout(src, dst, 2, 16, stmatrix=True) == _uncached(src, dst, 2, 16, True)
    assert S._plan_shared_layout.cache_info().hits == 1
    # the key is the layouts' bases and shape (what Layout compares): a different layout is a different plan
    assert S.plan_shared_layout(dst, src, 4) == _uncached(dst, src, 4, 16, False)


def test_layout_fields_outside_the_key_do_not_change_a_plan():
    src, dst = LAYOUTS[0]
    other = dataclasses.replace(src, kind="derived", params=None)
    assert other == src and hash(other) == hash(src)  # what the memo keys on is the same ...
    assert _uncached(other, dst, 4, 16, True) == _uncached(src, dst, 4, 16, True)  # ... and so is the plan


def _nested():
    """for { a; if { b; c }; d }; e -- with values flowing between them."""
    outer = Block()
    x = Op("constant", [], ["i32"], {"value": 1})
    outer.append(x)
    body = Block()
    a = body.append(Op("add", [x.results[0], x.results[0]], ["i32"]))
    inner = Block()
    b = inner.append(Op("add", [a.results[0], x.results[0]], ["i32"]))
    c = inner.append(Op("add", [b.results[0], a.results[0]], ["i32"]))
    iff = body.append(Op("scf.if", [a.results[0]], [], regions=[inner, Block()]))
    d = body.append(Op("add", [x.results[0], a.results[0]], ["i32"]))
    loop = outer.append(Op("scf.for", [x.results[0]], [], regions=[body]))
    e = outer.append(Op("add", [x.results[0], x.results[0]], ["i32"]))
    return outer, [x, loop, a, iff, b, c, d, e], (x, a)


def _recursive(op):
    yield op
    for r in op.regions:
        for o in r.ops:
            yield from _recursive(o)


def test_walk_order_is_the_recursive_pre_order():
    outer, want, _ = _nested()
    got = [o for op in outer.ops for o in op.walk()]
    assert got == want == [o for op in outer.ops for o in _recursive(op)]
    loop = want[1]
    assert list(loop.walk()) == list(_recursive(loop))


def test_walk_sees_ops_added_behind_its_position():
    outer, ops, (x, a) = _nested()
    loop, iff = ops[1], ops[3]
    seen = []
    for o in loop.walk():
        seen.append(o)
        if o is iff:   # a pass appending to a block the walk has not finished
            iff.regions[1].append(Op("add", [x.results[0], x.results[0]], ["i32"]))
            loop.regions[0].append(Op("add", [a.results[0], a.results[0]], ["i32"]))
    assert len(seen) == 8 and seen[5].block is iff.regions[1] and seen[7].block is loop.regions[0]


def test_replace_all_uses_rewrites_exactly_the_readers():
    outer, ops, (x, a) = _nested()
    lists = {id(o): o.operands for o in outer.ops for o in o.walk()}
    new = Op("constant", [], ["i32"], {"value": 2})
    replace_all_uses(outer, a.results[0], new.results[0])
    readers = [o for op in outer.ops for o in op.walk() if new.results[0] in o.operands]
    assert readers == [ops[3], ops[4], ops[5], ops[6]]      # the if, b and c inside it, d
    assert not any(a.results[0] in o.operands for op in outer.ops for o in op.walk())
    assert users(outer)[new.results[0].id] == readers
    # an op that did not read the value keeps its operand list object
    e = ops[-1]
    assert e.operands is lists[id(e)] and e.operands == [x.results[0], x.results[0]]


# -- the dependency record's fingerprints stop at kernelc's own functions -------------------------------------

import kernelc  # noqa: E402
import kernelc.language as _kl  # noqa: E402
from kernelc.compiler.frontend import deps as D  # noqa: E402


def _user_helper_module(tmp_path, scale):
    src = ("import kernelc\nimport kernelc.language as tl\n\n"
           f"def inner(x):\n    return x * {scale}\n\n"
           "@kernelc.jit\ndef helper(x):\n    return tl.exp2(inner(x)) + tl.sum(x, 0)\n")
    p = tmp_path / f"fp_helper_{str(scale).replace('.', '_')}.py"
    p.write_text(src)
    import importlib.util
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_helpers_fingerprint_follows_user_code_not_kernelc(tmp_path, monkeypatch):
    mod = _user_helper_module(tmp_path, 2.0)
    before = D.function_fingerprint(mod.helper)
    visited = []
    real = D.function_fingerprint
    monkeypatch.setattr(D, "function_fingerprint", lambda f, _seen=None: visited.append(f) or real(f, _seen))
    assert D.function_fingerprint(mod.helper) == before
    # the helper and the user function it calls; tl.exp2 and tl.sum (kernelc's) are named, not followed
    assert {getattr(getattr(f, "fn", f), "__name__", "") for f in visited} == {"helper", "inner"}
    monkeypatch.undo()
    # kernelc's functions stand as their names: replacing one does not change the record (COMPILER_VERSION does)
    monkeypatch.setattr(_kl, "exp2", _kl.exp)   # another of kernelc's functions under that name
    assert D.function_fingerprint(mod.helper) == before
    monkeypatch.undo()
    # a user function it calls still counts
    mod.inner.__code__ = _user_helper_module(tmp_path, 3.0).inner.__code__
    assert D.function_fingerprint(mod.helper) != before


# -- compiles on threads take turns for their Python half ---------------------------------------------------

def test_threaded_compiles_take_turns_for_the_python_half_and_build_the_same(monkeypatch):
    monkeypatch.setenv("KERNELC_COMPILE_TURNS", "on")
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor
    import kernelc.compiler.compiler as C
    import kernelc.compiler.codegen as CG
    spans, lock = {}, threading.Lock()
    gen, low = C.generate_ir, CG.lower_to_llvm

    def spy_gen(*a, **k):
        with lock:
            spans.setdefault(threading.get_ident(), [None, None])[0] = time.perf_counter()
        return gen(*a, **k)

    def spy_low(*a, **k):
        out = low(*a, **k)
        with lock:
            spans[threading.get_ident()][1] = time.perf_counter()
        return out
    monkeypatch.setattr(C, "generate_ir", spy_gen)
    monkeypatch.setattr(CG, "lower_to_llvm", spy_low)
    sig = dict(x_ptr="*fp32", out_ptr="*fp32", n="i32", p="fp32", seed="i32")
    blocks = (256, 512, 1024, 2048)

    def one(b):
        return kernelc.compile(_keep_above_kernel(), sig, dict(BLOCK=b), target="sm_90a", num_warps=4).asm["cubin"]
    with ThreadPoolExecutor(4) as ex:
        threaded = list(ex.map(one, blocks))
    got = sorted(spans.values())
    assert len(got) == 4 and all(s and e for s, e in got)
    assert all(got[i][1] <= got[i + 1][0] for i in range(3)), got   # one frontend-to-LLVM-IR half at a time
    monkeypatch.undo()
    assert threaded == [one(b) for b in blocks]


@kernelc.jit
def _keep_above(x_ptr, out_ptr, n, p, seed, BLOCK: _kl.constexpr):
    offs = _kl.program_id(0) * BLOCK + _kl.arange(0, BLOCK)
    m = offs < n
    x = _kl.load(x_ptr + offs, mask=m)
    _kl.store(out_ptr + offs, _kl.where(_kl.rand(seed, offs) > p, x / (1 - p), 0.0), mask=m)


def _keep_above_kernel():
    return _keep_above


def test_compile_turns_auto_needs_four_cores(monkeypatch):
    import os
    import kernelc.compiler.compiler as C
    for cores, want in ((2, False), (4, True), (16, True)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        monkeypatch.setenv("KERNELC_COMPILE_TURNS", "auto")
        assert C._take_turns() is want
        monkeypatch.setenv("KERNELC_COMPILE_TURNS", "off")
        assert C._take_turns() is False
        monkeypatch.setenv("KERNELC_COMPILE_TURNS", "on")
        assert C._take_turns() is True
