"""Memory-bound kernels, side by side in one run on one GPU: kernelc vs Triton (the same source,
examples/kernels/memory_bound.py) vs torch eager, in GB/s of ideal traffic (each input read once,
each output written once).

    python bench/bench_memory_bound.py [names...] [--rounds R]   # writes bench/results/memory_bound.json
        (a name picks the rows that contain it; ^name the rows that start with it: ^softmax leaves log_softmax out)
    python bench/bench_memory_bound.py --variant free:KERNELC_NVJITLINK_LAUNCH_BOUND=0 \
        --variant auto:KERNELC_ASSEMBLER=auto                       # kernelc A/B columns in the same run
    python bench/bench_memory_bound.py --no-torch ...            # without torch's column (a shorter run)
    python bench/bench_memory_bound.py --timing interleaved ...  # columns' launches interleaved in each round
    python bench/bench_memory_bound.py --cpu-smoke               # tiny sizes, kernelc interpreter only

Rounds interleave the implementations (kernelc, Triton, torch, then the next round in another order) so
clock and thermal drift hit all of them alike; each figure is the median over rounds of do_bench's median (every
round's figure is kept too). Triton's kernel is timed a second time as ``triton[control]``: its ratio to the
``triton`` column is the run's noise floor, and each kernelc/Triton ratio is called faster, slower or within noise
against it (and, from 6 rounds on, against a sign test over the rounds, kernelc's time against the control's).
``--timing interleaved`` times each round with the columns' launches interleaved instead (bench/interleaved.py:
each repetition runs every column once, after the same L2 flush) and gives each column's ratio to Triton from the
per-repetition ratios, so a level the GPU holds for a while (two levels 0.6% apart on an H200, seventeenth
session) cancels; ``--timing both`` runs both in every round (the JSON's ``interleaved`` holds the new figures,
``*/triton_ci95`` there from those rounds, the control's interval being the A/A).
A ``--variant TAG:VAR=VALUE[,VAR=VALUE]`` is one more kernelc column, ``kernelc[TAG]``: a second copy of the
kernels module (its own JIT caches) whose kernels compile with those environment knobs set.

Every kernelc column compiles in this process into a disk cache of its own, made empty for the run: a column
never times a build left in ``KERNELC_CACHE_DIR`` by another process or tree. Each row records what each column
built (``kernels``: registers, cache key, whether it was compiled here); the run stops if a column's kernel came
from disk or shares its cache key with a column compiled under other options.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.common import ROOT, env_vars, triton_twin, write_results  # noqa: E402
from examples.kernels import memory_bound as K  # noqa: E402

F = torch.nn.functional
SMOKE = "--cpu-smoke" in sys.argv
DEV = "cpu" if SMOKE else "cuda"


def _nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


def _rnd(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=torch.float32).to(dtype)


def _err(a, b):
    if isinstance(a, (tuple, list)):
        return max(_err(x, y) for x, y in zip(a, b))
    return (a.float() - b.float()).abs().max().item()


# -- torch references (eager) ---------------------------------------------------------------------------

def _swiglu_bwd_ref(dc, a, b):
    af = a.float()
    s = torch.sigmoid(af)
    silu = af * s
    return ((dc.float() * (silu * (1 - s) + s) * b.float()).to(a.dtype), (dc.float() * silu).to(b.dtype))


def _geglu_bwd_ref(dc, a, b):
    af = a.float()
    k = 0.7978845608028654
    t = torch.tanh(k * (af + 0.044715 * af ** 3))
    gelu = 0.5 * af * (1 + t)
    dgelu = 0.5 * (1 + t) + 0.5 * af * (1 - t * t) * k * (1 + 3 * 0.044715 * af * af)
    return ((dc.float() * b.float() * dgelu).to(a.dtype), (dc.float() * gelu).to(b.dtype))


def _rms_bwd_ref(dy, x, w, rstd):
    xf, dyf = x.float(), dy.float()
    x_hat = xf * rstd[:, None]
    wdy = w.float() * dyf
    c = (x_hat * wdy).mean(-1, keepdim=True)
    return ((wdy - x_hat * c) * rstd[:, None]).to(x.dtype), (dyf * x_hat).sum(0).to(w.dtype)


def _ln_bwd_ref(dy, x, w, mean, rstd):
    if not x.is_cuda:  # the CPU kernel keeps the statistics in the input dtype
        mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)
    out = torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[-1]], mean[:, None], rstd[:, None], w,
                                                    torch.zeros_like(w), [True, True, True])
    return out


def _ce_ref(logits, target):
    lx = logits.detach().requires_grad_(True)
    loss = F.cross_entropy(lx.float() if lx.dtype != torch.float32 else lx, target)
    loss.backward()
    return loss.detach(), lx.grad


def _rope_ref(q, cos, sin):
    h = q.shape[-1] // 2
    x1, x2 = q[..., :h].float(), q[..., h:].float()
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).to(q.dtype)


# -- cases: name -> (make inputs, kernelc/triton call on module M, torch call, bytes moved) ------------------
# Each ``make`` binds its sizes as default arguments: a closure would read R, C when called, after cases() has
# reassigned them (until 2026-11-27 every row kernel ran at the last R, C: 2048 x 4096, under its own name).

def cases():
    big = not SMOKE
    out = {}
    M, N = (8192, 8192) if big else (40, 70)
    out["transpose 8192x8192 fp32" if big else "transpose"] = (
        lambda M=M, N=N: (_rnd(M, N, dtype=torch.float32),),
        lambda m, x: m.transpose(x), lambda x: x.t().contiguous(), lambda x: 2 * _nbytes(x))
    B, PM, PN = (32, 2048, 1024) if big else (2, 20, 36)
    out[f"permute(0,2,1) {B}x{PM}x{PN} fp16"] = (
        lambda B=B, PM=PM, PN=PN: (_rnd(B, PM, PN, dtype=torch.float16),),
        lambda m, x: m.permute021(x), lambda x: x.permute(0, 2, 1).contiguous(), lambda x: 2 * _nbytes(x))
    R, C = (4096, 14336) if big else (4, 100)
    out[f"swiglu fwd {R}x{C} bf16"] = (
        lambda R=R, C=C: (_rnd(R, C), _rnd(R, C)), lambda m, a, b: m.swiglu_fwd(a, b), lambda a, b: F.silu(a) * b,
        lambda a, b: 3 * _nbytes(a))
    out[f"swiglu bwd {R}x{C} bf16"] = (
        lambda R=R, C=C: (_rnd(R, C), _rnd(R, C), _rnd(R, C)), lambda m, dc, a, b: m.swiglu_bwd(dc, a, b),
        _swiglu_bwd_ref, lambda dc, a, b: 5 * _nbytes(a))
    out[f"geglu fwd {R}x{C} bf16"] = (
        lambda R=R, C=C: (_rnd(R, C), _rnd(R, C)), lambda m, a, b: m.geglu_fwd(a, b),
        lambda a, b: F.gelu(a, approximate="tanh") * b, lambda a, b: 3 * _nbytes(a))
    out[f"geglu bwd {R}x{C} bf16"] = (
        lambda R=R, C=C: (_rnd(R, C), _rnd(R, C), _rnd(R, C)), lambda m, dc, a, b: m.geglu_bwd(dc, a, b),
        _geglu_bwd_ref, lambda dc, a, b: 5 * _nbytes(a))
    R, C = (8192, 8192) if big else (5, 77)
    out[f"softmax fwd {R}x{C} fp16"] = (
        lambda R=R, C=C: (_rnd(R, C, dtype=torch.float16),), lambda m, x: m.softmax_fwd(x),
        lambda x: torch.softmax(x, -1), lambda x: 2 * _nbytes(x))
    out[f"softmax bwd {R}x{C} fp16"] = (
        lambda R=R, C=C: (_rnd(R, C, dtype=torch.float16), torch.softmax(_rnd(R, C, dtype=torch.float32), -1).half()),
        lambda m, dy, y: m.softmax_bwd(dy, y),
        lambda dy, y: torch.ops.aten._softmax_backward_data(dy, y, -1, y.dtype), lambda dy, y: 3 * _nbytes(y))
    out[f"log_softmax fwd {R}x{C} fp16"] = (
        lambda R=R, C=C: (_rnd(R, C, dtype=torch.float16),), lambda m, x: m.log_softmax_fwd(x),
        lambda x: torch.log_softmax(x, -1), lambda x: 2 * _nbytes(x))
    out[f"log_softmax bwd {R}x{C} fp16"] = (
        lambda R=R, C=C: (_rnd(R, C, dtype=torch.float16),
                          torch.log_softmax(_rnd(R, C, dtype=torch.float32), -1).half()),
        lambda m, dy, y: m.log_softmax_bwd(dy, y),
        lambda dy, y: torch.ops.aten._log_softmax_backward_data(dy, y, -1, y.dtype), lambda dy, y: 3 * _nbytes(y))
    R, C = (8192, 4096) if big else (9, 50)

    def rms_inputs(R=R, C=C):
        x = _rnd(R, C)
        return _rnd(R, C), x, _rnd(C), K.rms_norm_stats(x)
    out[f"rms_norm bwd {R}x{C} bf16"] = (
        rms_inputs, lambda m, dy, x, w, rstd: m.rms_norm_bwd(dy, x, w, rstd), _rms_bwd_ref,
        lambda dy, x, w, rstd: 3 * _nbytes(x))

    def ln_inputs(R=R, C=C):
        x = _rnd(R, C, dtype=torch.float16)
        xf = x.float()
        return (_rnd(R, C, dtype=torch.float16), x, _rnd(C, dtype=torch.float16), xf.mean(-1),
                torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5))
    out[f"layer_norm bwd {R}x{C} fp16"] = (
        ln_inputs, lambda m, dy, x, w, mean, rstd: m.layer_norm_bwd(dy, x, w, mean, rstd), _ln_bwd_ref,
        lambda dy, x, w, mean, rstd: 3 * _nbytes(x))
    R, V = (2048, 128256) if big else (3, 300)
    out[f"cross_entropy {R}x{V} bf16"] = (
        lambda R=R, V=V: (_rnd(R, V), torch.randint(0, V, (R,), device=DEV)), lambda m, x, t: m.cross_entropy(x, t),
        _ce_ref, lambda x, t: 3 * _nbytes(x))  # read twice, gradient written once
    Bq, S, H, D = (4, 4096, 32, 128) if big else (2, 5, 3, 12)

    def rope_inputs(Bq=Bq, S=S, H=H, D=D):
        pos = torch.arange(S, device=DEV, dtype=torch.float32)[:, None] * \
            torch.arange(D // 2, device=DEV, dtype=torch.float32)[None, :] * 1e-3
        return _rnd(Bq, S, H, D), torch.cos(pos), torch.sin(pos)
    out[f"rope {Bq}x{S}x{H}x{D} bf16"] = (
        rope_inputs, lambda m, q, c, s: m.rope(q, c, s), _rope_ref, lambda q, c, s: 2 * _nbytes(q))
    return out


def _time(fn):
    from kernelc.testing import do_bench
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def kernelc_variant(tag: str):
    """examples/kernels/memory_bound.py loaded once more, as its own module: its JIT functions compile apart
    from ``K``'s (the compile knobs are read when a kernel first compiles)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"memory_bound_{tag}", K.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _compiles(mod) -> int:
    """How many times ``mod``'s kernels have compiled for the GPU in this process."""
    return sum(getattr(f, "_cuda_state", {}).get("compiles", 0) for f in vars(mod).values()
               if hasattr(f, "arg_names"))


def _built(mod) -> dict:
    """``{kernel: CompiledKernel}`` of ``mod``'s kernels as loaded in this process (the last specialisation)."""
    out = {}
    for n, f in vars(mod).items():
        for ent in getattr(f, "_cuda_state", {}).get("cache", {}).values():
            ck = getattr(ent, "compiled", None)
            if ck is not None:
                out[n] = ck
    return out


def _regs(mod) -> dict:
    """Registers of each of ``mod``'s kernels as compiled in this process (what a variant really built)."""
    return {n: ck.n_regs for n, ck in _built(mod).items()}


def column_env(root: str, column: str, env=None) -> dict:
    """The environment a kernelc column compiles under: its knobs and a disk cache of its own under ``root``."""
    return {**(env or {}), "KERNELC_CACHE_DIR": os.path.join(root, column)}


def column_options(env) -> dict:
    """The compile options (``kernelc.options.CompileOptions``, as hashed into the cache key) under ``env``."""
    from kernelc import options
    with _env(env):
        return options.compile_options().key()


def _stored_regs(cache_dir, key):
    """Registers of the entry ``key`` in the disk cache at ``cache_dir`` (None if there is none)."""
    import json
    try:
        with open(os.path.join(cache_dir, key[:2], key, "meta.json")) as f:
            return json.load(f).get("n_regs")
    except (OSError, ValueError, TypeError):
        return None


def check_columns(columns, ambient_cache=None) -> dict:
    """What each kernelc column built, checked: ``columns`` is ``[(name, module, env)]`` after every column's
    first (compiling) call. Raises if a kernel was loaded from a disk cache rather than compiled in this process,
    or if two columns compiled under different options hold a kernel under one cache key (one column would time
    the other's build). Returns ``{column: {kernel: {"regs", "cache_key", "compiled_here"}}}``, with
    ``"ambient_regs"`` where ``ambient_cache`` (the cache a column once used) holds an entry under that key."""
    out, seen = {}, {}
    for name, mod, env in columns:
        opts = column_options(env)
        out[name] = {}
        for kname, ck in sorted(_built(mod).items()):
            here = "disk_cache_load" not in ck.timings
            out[name][kname] = {"regs": ck.n_regs, "cache_key": ck.cache_key, "compiled_here": here}
            notes = [ln for ln in getattr(getattr(ck, "artifacts", None), "ptxas_log", "").splitlines()
                     if ln.startswith("kernelc:")]   # how the assembler decided (launch bound, fill, step)
            if notes:
                out[name][kname]["notes"] = notes
            stored = _stored_regs(ambient_cache, ck.cache_key) if ambient_cache and ck.cache_key else None
            if stored is not None:
                out[name][kname]["ambient_regs"] = stored
            if not here:
                raise RuntimeError(f"{name}: {kname} was loaded from the disk cache, not compiled for this column")
            other = seen.get((kname, ck.cache_key))
            if other is not None and other[1] != opts:
                raise RuntimeError(f"{name}: {kname} has the cache key of {other[0]}, compiled under other options")
            seen.setdefault((kname, ck.cache_key), (name, opts))
    return out


_env = env_vars  # the name liger_rope.py and older experiments import


def parse_variants(argv):
    """``--variant TAG:VAR=VALUE[,VAR=VALUE]`` options (removed from ``argv``) -> [(tag, env)]."""
    out = []
    while "--variant" in argv:
        i = argv.index("--variant")
        tag, _, assigns = argv[i + 1].partition(":")
        env = dict(a.split("=", 1) for a in assigns.split(",") if a)
        if not tag or not env or not all(k.startswith("KERNELC_") for k in env):
            raise SystemExit(f"--variant {argv[i + 1]!r}: use TAG:KERNELC_VAR=VALUE[,KERNELC_VAR=VALUE]")
        out.append((tag, env))
        del argv[i:i + 2]
    return out


CONTROL = "triton[control]"


# a round-by-round sign test below this two-sided p is needed for a verdict other than 'within noise'
SIGN_P = 0.05
SIGN_MIN_ROUNDS = 6   # below this no split of the rounds reaches SIGN_P: the medians alone decide


def sign_p(wins: int, losses: int) -> float:
    """Two-sided sign test: the chance of a split at least this uneven between ``wins`` and ``losses`` (ties left
    out) if either side were as likely to win each round."""
    from math import comb
    n = wins + losses
    if n == 0:
        return 1.0
    k = max(wins, losses)
    return min(1.0, 2 * sum(comb(n, i) for i in range(k, n + 1)) / 2 ** n)


def verdict(ratio: float, control: float, rounds_ms=None, control_rounds_ms=None) -> str:
    """'faster' / 'slower' where ``ratio`` (x/Triton) is further from 1 than the control column's ratio (Triton
    against itself in the same rounds), else 'within noise'.

    Given both columns' per-round times (paired: each round times both), the rounds must also agree: x faster
    (or slower) than the control in enough rounds that a sign test gives p < SIGN_P (8 of 9 rounds, 7 of 7).
    A kernel whose per-round ratios scatter by +-2% around the control's (rms_norm bwd in H10b: 4 rounds
    slower, 5 faster) is within noise whatever its median says."""
    import math
    if abs(math.log(ratio)) <= abs(math.log(control)):
        return "within noise"
    if rounds_ms is not None and control_rounds_ms is not None and len(rounds_ms) >= SIGN_MIN_ROUNDS:
        slower = sum(1 for a, c in zip(rounds_ms, control_rounds_ms) if a > c)
        faster = sum(1 for a, c in zip(rounds_ms, control_rounds_ms) if a < c)
        if sign_p(faster, slower) >= SIGN_P or (faster > slower) != (ratio > 1):
            return "within noise"
    return "faster" if ratio > 1 else "slower"


# two-sided 95% Student t quantiles by degrees of freedom (1..30); past 30 the normal 1.96 is close enough
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def log_ratio_ci(logs):
    """(ratio, low, high): exp of the mean of per-round log ratios and its 95% Student t interval over the rounds;
    None with fewer than 3 rounds."""
    import math
    n = len(logs)
    if n < 3:
        return None
    mean = statistics.fmean(logs)
    half = (_T95[n - 2] if n - 1 <= len(_T95) else 1.96) * statistics.stdev(logs) / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def median_ci(logs):
    """(ratio, low, high): exp of the median of per-round log ratios and a distribution-free interval for it, the
    k-th smallest and k-th largest rounds with k the largest that keeps the coverage >= 95% (a binomial tail):
    one disturbed round (R1a's first layer_norm round, 40% slow in every column) moves it by one rank, not its width.
    None with fewer than 6 rounds (then no k reaches 95%)."""
    import math
    from math import comb
    n = len(logs)
    xs = sorted(logs)
    k = 0
    while k + 1 <= n // 2 and 1 - 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n >= 0.95:
        k += 1
    if k == 0:
        return None
    med = statistics.median(xs)
    return math.exp(med), math.exp(xs[k - 1]), math.exp(xs[n - k])


def interleaved_round(fns: dict, control: str = None, reference: str = "triton", keep: bool = False) -> dict:
    """One round of ``bench/interleaved.py``: every column's launches interleaved in one stretch of GPU time.
    Returns ``{"ms": {col: median ms}, "log": {col: mean over repetitions of log(reference / col), 2% trimmed},
    "mlog": {col: the median of the same}}`` (``log`` was the median until R3: bench/interleaved.py says why), the
    reference's time in a repetition being the mean of ``reference`` and ``control`` (the same kernel) where both
    exist; the control's own entry compares it with ``reference`` alone (the A/A, which must be 0). ``keep``: also
    every repetition's times (``samples``, rounded to 0.1 ns), to look for levels inside a round afterwards."""
    from bench.interleaved import interleaved, paired_log_ratio, paired_log_ratio_mean
    t = interleaved(fns)
    out = {"ms": {n: statistics.median(v) for n, v in t.items()}, "mean_ms": {n: statistics.fmean(v) for n, v in t.items()},
           "log": {}, "mlog": {}}
    if reference in t:
        ref = t[reference]
        if control in t:
            out["log"][control] = paired_log_ratio_mean(ref, t[control])
            out["mlog"][control] = paired_log_ratio(ref, t[control])
            ref = [(a + b) / 2 for a, b in zip(ref, t[control])]
        for n in t:
            if n not in (reference, control):
                out["log"][n] = paired_log_ratio_mean(ref, t[n])
                out["mlog"][n] = paired_log_ratio(ref, t[n])
        out["n"] = len(ref)
    if keep:
        out["samples"] = {n: [round(x, 7) for x in v] for n, v in t.items()}
    return out


def paired_ratio_ci(x_rounds_ms, triton_rounds_ms, control_rounds_ms=None):
    """(ratio, low, high): Triton's speed over x's and its 95% interval from the rounds, paired.

    Each round times every column back to back, so a round's clock and thermal state cancels in its own ratio;
    the rounds' log ratios are averaged and given a Student t interval. Triton's time in a round is the mean of
    its two columns (``triton`` and the control, the same kernel) where both exist. A row whose interval lies
    past 0.995 on both ends resolves a 0.5% gap; ``verdict`` (against the control's spread) is left as it is.
    None with fewer than 3 rounds."""
    import math
    if control_rounds_ms is not None:
        triton_rounds_ms = [(a + b) / 2 for a, b in zip(triton_rounds_ms, control_rounds_ms)]
    return log_ratio_ci([math.log(t / x) for t, x in zip(triton_rounds_ms, x_rounds_ms) if t > 0 and x > 0])


TIMINGS = ("separate", "interleaved", "both")


def _partial(rows):
    """The rows so far, in $OUT/memory_bound.partial.json when $OUT is set: a run cut short by a time limit keeps
    the rows it finished."""
    import json
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "memory_bound.partial.json"), "w") as f:
            json.dump(rows, f)


def run(names, rounds, variants=(), with_torch=True, timing="separate"):
    import tempfile
    from kernelc.runtime.cache import cache_dir
    ambient_cache = cache_dir()
    cache_root = tempfile.mkdtemp(prefix="kernelc-bench-memory-bound-")
    V = [(f"kernelc[{tag}]", kernelc_variant(tag), column_env(cache_root, str(i + 1), env))
         for i, (tag, env) in enumerate(variants)]
    K_env = column_env(cache_root, "0")
    T = None
    try:
        T = triton_twin("memory_bound")
    except Exception as e:  # no Triton: kernelc and torch only, said in the results
        print(f"triton unavailable: {type(e).__name__}: {e}", flush=True)
    rows = []
    for name, (make, call, ref, nbytes) in cases().items():
        if names and not any(name.startswith(n[1:]) if n.startswith("^") else n in name for n in names):
            continue
        try:
            with _env(K_env):   # make() may run a kernelc kernel too (rms_norm's statistics)
                args = make()
                got = call(K, *[a.clone() for a in args])
            want = ref(*args)
            r = {"benchmark": name, "unit": "GB/s", "kernelc_max_abs_err_vs_torch": _err(got, want)}
            if T is not None:
                r["triton_max_abs_err_vs_torch"] = _err(call(T, *[a.clone() for a in args]), want)
            for n, mod, env in V:   # compiles (first call) with the variant's knobs
                with _env(env):
                    r[f"{n}_max_abs_err_vs_torch"] = _err(call(mod, *[a.clone() for a in args]), want)
            impls = [("kernelc", lambda: call(K, *args))] + ([("torch", lambda: ref(*args))] if with_torch else [])
            if T is not None:
                impls.insert(1, ("triton", lambda: call(T, *args)))
                # the same Triton kernel timed as one more column: its ratio to "triton" is the run's noise floor
                impls.insert(2, (CONTROL, lambda: call(T, *args)))
            impls[1:1] = [(n, (lambda mod=mod: call(mod, *args))) for n, mod, _ in V]
            compiled = [_compiles(mod) for _, mod, _ in V]
            times = {n: [] for n, _ in impls}
            inter = {"rounds": []}
            for rnd in range(rounds):
                order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
                if timing in ("separate", "both"):
                    for n, fn in order:
                        times[n].append(_time(fn))
                if timing in ("interleaved", "both"):
                    # the first and last rounds keep their repetitions' times
                    inter["rounds"].append(interleaved_round(dict(order), CONTROL, keep=rnd in (0, rounds - 1)))
            if timing == "interleaved":   # the columns' figures are the interleaved rounds' medians
                times = {n: [rd["ms"][n] for rd in inter["rounds"]] for n, _ in impls}
            if inter["rounds"]:
                for n in inter["rounds"][0]["log"]:
                    logs = [rd["log"][n] for rd in inter["rounds"]]
                    ci = log_ratio_ci(logs)
                    if ci is not None:
                        inter[f"{n}/triton_ci95"] = [round(v, 5) for v in ci]
                    ci = median_ci(logs)
                    if ci is not None:
                        inter[f"{n}/triton_median_ci95"] = [round(v, 5) for v in ci]
                r["interleaved"] = inter
            if [_compiles(mod) for _, mod, _ in V] != compiled:   # a compile outside the variant's knobs
                raise RuntimeError("a kernelc variant compiled again while timed, without its knobs")
            r["kernels"] = check_columns([("kernelc", K, K_env), *V], ambient_cache)
            r["regs"] = {col: {k: v["regs"] for k, v in ks.items()} for col, ks in r["kernels"].items()}
            gb = nbytes(*args)
            for n in times:
                ms = statistics.median(times[n])
                r[f"{n}_ms"] = ms
                r[f"{n}_rounds_ms"] = times[n]
                r[n] = gb / ms / 1e6
            r["kernelc/triton"] = r["triton_ms"] / r["kernelc_ms"] if T is not None else None
            for n, _, _ in V:
                r[f"{n}/triton"] = r["triton_ms"] / r[f"{n}_ms"] if T is not None else None
            if T is not None:
                r[f"{CONTROL}/triton"] = r["triton_ms"] / r[f"{CONTROL}_ms"]
                for n in ["kernelc"] + [n for n, _, _ in V]:
                    r[f"{n}/triton_verdict"] = verdict(r[f"{n}/triton"], r[f"{CONTROL}/triton"], times[n],
                                                       times[CONTROL])
                    ci = paired_ratio_ci(times[n], times["triton"], times[CONTROL])
                    if ci is not None:
                        r[f"{n}/triton_ci95"] = [round(v, 5) for v in ci]
                ci = paired_ratio_ci(times[CONTROL], times["triton"])   # the same kernel: its interval holds 1
                if ci is not None:
                    r[f"{CONTROL}/triton_ci95"] = [round(v, 5) for v in ci]
            if with_torch:
                r["kernelc/torch"] = r["torch_ms"] / r["kernelc_ms"]
            rows.append(r)
            print(name, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                         if k not in ("benchmark", "kernels", "regs", "interleaved")
                         and not k.endswith("_rounds_ms")}, flush=True)
            if "interleaved" in r:
                print("   interleaved", {k: v for k, v in r["interleaved"].items() if k != "rounds"}, flush=True)
        except Exception as e:  # one failing benchmark must not hide the others
            import traceback
            traceback.print_exc()
            rows.append({"benchmark": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
        torch.cuda.empty_cache()
        _partial(rows)
    if not rows:
        raise SystemExit(f"no benchmark matches {names}; the results file is left as it was")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    import shutil
    shutil.rmtree(cache_root, ignore_errors=True)
    write_results("memory_bound", rows, {"rounds": rounds, "timing": timing, "kernelc_commit": commit or None,
                                         "variants": {f"kernelc[{t}]": e for t, e in variants},
                                         "options": {n: column_options(e) for n, _, e in
                                                     [("kernelc", K, K_env), *V]}})


def smoke():
    """Every case at tiny sizes in kernelc's CPU interpreter, checked against its torch reference."""
    bad = []
    for name, (make, call, ref, nbytes) in cases().items():
        args = make()
        err = _err(call(K, *[a.clone() for a in args]), ref(*args))
        print(f"{name}: max abs err {err:.3g}, {nbytes(*args)} bytes", flush=True)
        if not err < 5e-2:
            bad.append(name)
    if bad:
        raise SystemExit(f"mismatches: {bad}")


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if a != "--cpu-smoke"]
    variants = parse_variants(argv)
    rounds = 5
    if "--rounds" in argv:
        i = argv.index("--rounds")
        rounds = int(argv[i + 1])
        del argv[i:i + 2]
    timing = "separate"
    if "--timing" in argv:
        i = argv.index("--timing")
        timing = argv[i + 1]
        del argv[i:i + 2]
        if timing not in TIMINGS:
            raise SystemExit(f"--timing {timing!r}: one of {TIMINGS}")
    with_torch = "--no-torch" not in argv
    argv = [a for a in argv if a != "--no-torch"]
    unknown = [a for a in argv if a.startswith("-")]
    if unknown:   # e.g. --help: print the usage, never run (and write an empty results file)
        print(__doc__)
        raise SystemExit(0 if unknown == ["--help"] or unknown == ["-h"] else f"unknown option(s) {unknown}")
    if SMOKE:
        smoke()
    else:
        run(argv, rounds, variants, with_torch, timing)
