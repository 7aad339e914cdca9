"""The PTX variants rope_ptx_ab.py times: kernelc's and Triton 3.6's PTX of bench_memory_bound's rope kernel
(sm_90a, 4 warps, BLOCK_H=32, BLOCK_D=64, integers and pointers divisible by 16), each with one difference
changed to the other compiler's form. CPU only.

    python3 bench/experiments/mb_gaps/rope_ptx_variants.py [--triton-site DIR] [--out DIR]

Writes DIR/*.ptx (default results/rope13/ptx) and prints, per variant, the registers and the SASS's load/store
shape from Triton's ptxas (rope_ptx_ab.sass_shape). Names (k: kernelc's PTX, t: Triton's):

- k0: kernelc's PTX under KERNELC_UNIFORM_MASKS=rings (main's rule until mask13; ``.version`` lowered to 8.7 so
  that Triton's ptxas 12.8 reads it);
- k_req: k0 with ``.reqntid 128`` (Triton's) for ``.maxntid 128``;
- k_um: kernelc's PTX under KERNELC_UNIFORM_MASKS=all (mask13's default: the cos/sin mask computed once per 8
  columns, as Triton does);
- k_sl: k0 with its four stores moved after the last arithmetic (Triton's place for them);
- k_sl_um: both;
- k_slt: k_sl_um with Triton's two remaining address forms (``bfe`` for the row index, ``mad.wide.s32``);
- k_off: kernelc's PTX under KERNELC_CONSUMER_ORDER=off (code generation's op order, as Triton's PTX has it) and
  the branch's masks (all);
- t0: Triton's PTX as compiled;
- t_khdr: Triton's body under kernelc's header (8 parameters, ``.align 16``, ``.maxntid``);
- t_p2: t0 with the second cos/sin vector under its own predicate (``(d|4) < half``, as kernelc's k0);
- t_k: t_p2 with kernelc's address forms (``shr``, ``mul.wide`` + ``add``): kernelc's instructions in Triton's order.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))

from cpu_compare import kernel_module  # noqa: E402
from sass_diff import CASES  # noqa: E402

_KERNELC_CHILD = r"""
import json, sys, importlib.util
a = json.loads(sys.argv[1])
sys.path.insert(0, a["root"])
from kernelc.compat import install
install()
spec = importlib.util.spec_from_file_location("rope_variants", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
import kernelc
from kernelc.compiler.compiler import compile as kcompile
assert kernelc.__file__.startswith(a["root"]), kernelc.__file__
ck = kcompile(getattr(mod, a["kernel"]), a["sig"], a["cx"], "sm_90a", a["num_warps"], a["num_stages"], divisibility=a["div"])
json.dump({"ptx": ck.asm["ptx"]}, sys.stdout)
"""

_TRITON_CHILD = r"""
import json, sys, importlib.util
a = json.loads(sys.argv[1])
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("rope_variants", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = getattr(mod, a["kernel"])
names = fn.arg_names
sig = {n: (a["sig"][n] if n in a["sig"] else "constexpr") for n in names}
attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if a["div"].get(n) == 16}
src = ASTSource(fn, signature=sig, constexprs={(names.index(k),): v for k, v in a["cx"].items()}, attrs=attrs)
ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": a["num_warps"], "num_stages": a["num_stages"]})
json.dump({"ptx": ck.asm["ptx"]}, sys.stdout)
"""


def compile_ptx(impl: str, site: str, env_extra=None) -> str:
    src, kernel, sig_text, cx, warps, stages, _ = CASES["rope 4x4096x32x128 bf16"]
    sig = dict(p.split("=", 1) for p in sig_text.split(","))
    div = {n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}
    fd, mod_path = tempfile.mkstemp(suffix=".py", prefix="rope_variants_")
    with os.fdopen(fd, "w") as f:
        f.write(kernel_module(src))
    payload = json.dumps(dict(root=ROOT, mod=mod_path, kernel=kernel, sig=sig, cx=cx, div=div, num_warps=warps,
                              num_stages=stages))
    if impl == "triton":
        env, child = dict(os.environ, PYTHONPATH=site), _TRITON_CHILD
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELC_")}
        env.update(PYTHONPATH=ROOT, KERNELC_CACHE_DIR=tempfile.mkdtemp(prefix="rope-variants-"), **(env_extra or {}))
        child = _KERNELC_CHILD
    try:
        r = subprocess.run([sys.executable, "-c", child, payload], env=env, capture_output=True, text=True,
                           cwd=tempfile.gettempdir())
    finally:
        os.unlink(mod_path)
    if r.returncode:
        raise SystemExit(f"{impl} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)["ptx"]


def _sub(text: str, pattern: str, repl: str, count: int = 1) -> str:
    out, n = re.subn(pattern, repl, text)
    if n != count:
        raise SystemExit(f"expected {count} match(es) of {pattern!r}, found {n}: the compilers' PTX changed")
    return out


def to_87(ptx: str) -> str:
    return _sub(ptx, r"(?m)^\.version 9\.\d+$", ".version 8.7")


def stores_last(ptx: str) -> str:
    lines = ptx.split("\n")
    stores = [ln for ln in lines if "st.global" in ln]
    if len(stores) != 4:
        raise SystemExit(f"{len(stores)} stores in kernelc's PTX, expected 4")
    rest = [ln for ln in lines if "st.global" not in ln]
    ret = max(i for i, ln in enumerate(rest) if ln.strip() == "ret;")
    return "\n".join(rest[:ret] + stores + rest[ret:])


def triton_address_forms(ptx: str) -> str:
    """kernelc's row index and x1 addresses in Triton's forms (k_slt): ``bfe`` and ``mad.wide.s32``."""
    m = re.search(r"shr\.u32 \t(%r\d+), (%r\d+), 3;", ptx)
    ptx = _sub(ptx, re.escape(m.group(0)), f"bfe.u32 \t{m.group(1)}, {m.group(2)}, 3, 4;")
    for _ in range(2):   # the two row pointers: mul.wide.s32 + add.s64 off the row's base
        m = re.search(r"mul\.wide\.s32 \t(%rd\d+), (%r\d+), 2;((?:\s*\.loc[^\n]*)?\s*)add\.s64 \t(%rd\d+), (%rd\d+), \1;",
                      ptx)
        ptx = ptx.replace(m.group(0), f"mad.wide.s32 \t{m.group(4)}, {m.group(2)}, 2, {m.group(5)};")
    return ptx


def kernelc_header(tri: str, k: str) -> str:
    th = tri[:tri.index("{", tri.index(".entry"))]
    kh = k[:k.index("{", k.index(".entry"))]
    return kh + tri[len(th):]


def split_predicate(tri: str) -> str:
    """Triton's second cos/sin vector under ``(d|4) < half`` (t_p2), as kernelc's k0 predicates it."""
    m = re.search(r"setp\.lt\.s32 \t%p1, (%r\d+), (%r\d+);", tri)
    d, half = m.groups()
    tri = tri.replace(m.group(0), m.group(0) + f"\n\tor.b32 \t%r900, {d}, 4;\n\tsetp.lt.s32 \t%p9, %r900, {half};")
    loads = re.findall(r"@%p1 ld\.global\.v4\.b32 \{ [^}]*\}, \[ (%rd\d+) \+ 0 \];", tri)
    if len(loads) != 4:
        raise SystemExit(f"{len(loads)} cos/sin loads under %p1 in Triton's PTX, expected 4")
    for ln in re.findall(r"@%p1 ld\.global\.v4\.b32 \{ [^}]*\}, \[ (?:%rd2|%rd4) \+ 0 \];", tri):
        tri = tri.replace(ln, ln.replace("@%p1", "@%p9"))
    if tri.count("@%p9") != 2:
        raise SystemExit("the second cos/sin vectors are not %rd2/%rd4 in Triton's PTX")
    tri = _sub(tri, r"\.reg \.pred \t%p<(\d+)>;", ".reg .pred \t%p<10>;")
    return _sub(tri, r"\.reg \.b32 \t%r<(\d+)>;", ".reg .b32 \t%r<901>;")


def kernelc_address_forms(tri: str) -> str:
    """t_k: Triton's ``bfe`` and ``mad.wide.s32`` as kernelc writes them (``shr``, ``mul.wide`` + ``add``)."""
    tri = _sub(tri, r"bfe\.u32 \t(%r\d+), (%r\d+), 3, 4;", r"shr.u32 \t\1, \2, 3;")
    for i, m in enumerate(re.findall(r"mad\.wide\.s32 \t(%rd\d+), (%r\d+), 2, (%rd\d+);", tri)):
        dst, off, base = m
        tri = tri.replace(f"mad.wide.s32 \t{dst}, {off}, 2, {base};",
                          f"mul.wide.s32 \t%rd{40 + i}, {off}, 2;\n\tadd.s64 \t{dst}, {base}, %rd{40 + i};")
    return _sub(tri, r"\.reg \.b64 \t%rd<(\d+)>;", ".reg .b64 \t%rd<48>;")


def variants(site: str) -> dict:
    k0 = to_87(compile_ptx("kernelc", site, {"KERNELC_UNIFORM_MASKS": "rings"}))   # main's rule at 653742a
    kum = to_87(compile_ptx("kernelc", site, {"KERNELC_UNIFORM_MASKS": "all"}))
    t0 = compile_ptx("triton", site)
    tp2 = split_predicate(t0)
    return {
        "k0": k0,
        "k_req": _sub(k0, r"\.maxntid 128\b", ".reqntid 128"),
        "k_um": kum,
        "k_sl": stores_last(k0),
        "k_sl_um": stores_last(kum),
        "k_slt": triton_address_forms(stores_last(kum)),
        "k_off": to_87(compile_ptx("kernelc", site, {"KERNELC_CONSUMER_ORDER": "off"})),
        "t0": t0,
        "t_khdr": kernelc_header(t0, k0),
        "t_p2": tp2,
        "t_k": kernelc_address_forms(tp2),
    }


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "rope13", "ptx"))
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    from rope_ptx_ab import assemble
    exe = os.path.join(a.triton_site, "triton", "backends", "nvidia", "bin", "ptxas")
    manifest = {}
    for name, ptx in variants(a.triton_site).items():
        path = os.path.join(a.out, f"{name}.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        c = assemble(path, exe)
        manifest[name] = {k: c[k] for k in ("regs", "params", "sha256", "shape")}
        print(f"{name:8s} r{c['regs']:3d} params {c['params']:2d} {c['sha256']}  {c['shape']}")
    with open(os.path.join(a.out, "manifest.json"), "w") as f:   # rope_ptx_ab.py checks the GPU's cubins against it
        json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
