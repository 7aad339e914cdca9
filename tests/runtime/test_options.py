"""#28 / #21 item 4: every KERNELC_* knob in one typed table (kernelc.options); malformed values are
clear errors naming the variable; compile knobs are hashed whole into the cache key; docs/options.md
is generated from the table. Includes hypothesis fuzzers for the knobs and KERNELC_OVERRIDE."""
import os
import pathlib
import re

import pytest
from hypothesis import given, settings, strategies as st

import kernelc
import kernelc.language as kl
from kernelc import options
from cubintools.target import parse_target
from kernelc.runtime import cache
from kernelc.runtime.override import OverrideError, parse

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=200, deadline=None, derandomize=True)


def test_docs_options_md_is_generated_from_the_table():
    assert (ROOT / "docs" / "options.md").read_text() == options.markdown(), \
        "regenerate: python3 -m kernelc.options --markdown > docs/options.md"


def test_every_knob_named_in_kernelc_is_in_the_table_and_read_only_through_it():
    named, raw_reads = set(), []
    for p in (ROOT / "kernelc").rglob("*.py"):
        text = p.read_text()
        named |= set(re.findall(r"\b(KERNELC_[A-Z0-9_]+)\b", text))
        if p.parent.name != "options":
            # reads only: setting a knob for this process and its children (kernelc.run --interpret) is fine
            reads = re.findall(r"environ\.get\(\s*['\"](KERNELC_\w+)", text)
            reads += re.findall(r"environ\[\s*['\"](KERNELC_\w+)['\"]\s*\](?!\s*=[^=])", text)
            raw_reads += [f"{p}: {m}" for m in reads]
    assert named <= set(options.BY_NAME), named - set(options.BY_NAME)
    assert raw_reads == []


@pytest.mark.parametrize("name,raw,want", [
    ("KERNELC_TMA", "off", False), ("KERNELC_TMA", " Yes ", True), ("KERNELC_TMA", "", True),
    ("KERNELC_AUTO_TMA", "ALL", "all"), ("KERNELC_AUTO_TMA", "0", "off"), ("KERNELC_AUTO_TMA", "1", "dots"),
    ("KERNELC_WARP_SPECIALIZE", "none", "none"), ("KERNELC_WARP_SPECIALIZE", "on", "all"),
    ("KERNELC_WGMMA_ASYNC", "1", "on"), ("KERNELC_WGMMA_ASYNC", None, "default"),
    ("KERNELC_LOG_RECOMPILES", "1", True), ("KERNELC_LAUNCH_IMPL", "ctypes", "ctypes"),
])
def test_values_parse_to_their_types(name, raw, want):
    env = {} if raw is None else {name: raw}
    assert options.get(name, env) == want


@pytest.mark.parametrize("name,raw", [("KERNELC_TMA", "maybe"), ("KERNELC_INTERPRET", "2"),
                                      ("KERNELC_AUTO_TMA", "some"), ("KERNELC_WARP_SPECIALIZE", "sometimes"),
                                      ("KERNELC_LAUNCH_IMPL", "ctype"), ("KERNELC_PIPELINE_LOADS", "nope")])
def test_malformed_values_name_the_variable_and_the_accepted_values(name, raw):
    with pytest.raises(options.OptionError, match=rf"^{name}='{raw}' is not a valid value: use one of .*"):
        options.get(name, {name: raw})


def test_malformed_interpret_flag_is_an_error_at_launch(monkeypatch):
    # before: any value but 1/true/yes/on silently meant "off"
    monkeypatch.setenv("KERNELC_INTERPRET", "ture")

    @kernelc.jit
    def k(x_ptr):
        kl.store(x_ptr, 1.0)
    import numpy as np
    with pytest.raises(options.OptionError, match="KERNELC_INTERPRET='ture'"):
        k[(1,)](np.zeros(1, np.float32))


@kernelc.jit
def _copy(x_ptr, y_ptr, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(y_ptr + offs, kl.load(x_ptr + offs))


def _key():
    return cache.cache_key(_copy, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 16}, {}, (), 4, 3,
                           parse_target("sm_90a"))


def test_cache_key_hashes_the_parsed_compile_options(monkeypatch):
    base = _key()
    monkeypatch.setenv("KERNELC_WGMMA_DEFER", "false")
    off = _key()
    monkeypatch.setenv("KERNELC_WGMMA_DEFER", "0")
    assert _key() == off != base          # two spellings of one value: one entry
    monkeypatch.setenv("KERNELC_WGMMA_DEFER", "1")
    assert _key() == base                 # the default spelled out: the same build
    monkeypatch.delenv("KERNELC_WGMMA_DEFER")
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")
    assert _key() != base


# -- fuzzers ----------------------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_SPELLINGS = st.sampled_from(["1", "0", "true", "False", " on ", "OFF", "yes", "no", "all", "dots", "none", "auto",
                              "default", "ctypes", "cuda-python", ""])


@FUZZ
@given(name=st.sampled_from([k.name for k in options.KNOBS]), raw=st.one_of(_TEXT, _SPELLINGS))
def test_fuzz_every_knob_parses_or_names_itself(name, raw):
    knob = options.BY_NAME[name]
    try:
        v = options.get(name, {name: raw})
    except options.OptionError as e:
        assert str(e).startswith(f"{name}={raw!r} is not a valid value: use one of ")
        return
    if knob.type == "bool":
        assert isinstance(v, bool)
    elif knob.type == "choice":
        assert v in [c for c, _ in knob.choices]
    else:
        assert v is None or isinstance(v, str)


@FUZZ
@given(env=st.dictionaries(st.sampled_from([k.name for k in options.KNOBS if k.compile]),
                           st.one_of(_TEXT, _SPELLINGS), max_size=4))
def test_fuzz_compile_options_parse_or_name_the_variable(env):
    try:
        opts = options.compile_options(env)
    except options.OptionError as e:
        assert any(str(e).startswith(f"{n}=") for n in env)
        return
    assert hash(opts) == hash(options.CompileOptions(**opts.key()))


_IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
_PIECE = st.one_of(_IDENT, st.sampled_from([":", ",", ";", "=", "{", "}", "[", "]", '"', "'", " ", "1", "-3",
                                            "num_warps", "num_stages", "True", "1e9", "(", ")", "\\", "\x00"]))


@FUZZ
@given(spec=st.one_of(st.lists(_PIECE, max_size=14).map("".join), _TEXT,
                      st.recursive(st.one_of(st.integers(), st.text(max_size=3), st.booleans(), st.none()),
                                   lambda c: st.one_of(st.lists(c, max_size=3),
                                                       st.dictionaries(st.text(max_size=4), c, max_size=3)),
                                   max_leaves=6).map(lambda d: __import__("json").dumps({"k": d}))))
def test_fuzz_override_parses_or_says_what_is_wrong(spec):
    try:
        table = parse(spec)
    except OverrideError as e:
        assert str(e).startswith("KERNELC_OVERRIDE")
        return
    for name, cfg in table.items():
        assert name.isidentifier() and isinstance(cfg, dict)
        assert all(isinstance(k, str) and k.isidentifier() for k in cfg)
        for k in ("num_warps", "num_stages"):
            if k in cfg:
                assert isinstance(cfg[k], int) and not isinstance(cfg[k], bool) and cfg[k] >= 1


@pytest.mark.parametrize("spec,msg", [('{"k": 1}', "must be KEY=VALUE items"), ('[1]', None),
                                      ('{"k": [1]}', "must be KEY=VALUE items"), ("{", "not valid JSON"),
                                      ("k:num_warps=abc", "must be a positive integer"),
                                      ("k:num_warps=0", "must be a positive integer"),
                                      (":A=1", "not a Python identifier"), ("k:=3", "not a Python identifier")])
def test_malformed_overrides(spec, msg):
    if msg is None:  # not JSON-looking: a plain entry without ':'
        with pytest.raises(OverrideError, match="must look like"):
            parse(spec)
        return
    with pytest.raises(OverrideError, match=msg):
        parse(spec)


def test_override_of_an_unknown_parameter_names_it(monkeypatch):
    import numpy as np
    monkeypatch.setenv("KERNELC_OVERRIDE", "_copy:BLOKC=32")
    with pytest.raises(ValueError, match="KERNELC_OVERRIDE sets BLOKC for _copy, which has no such parameter"):
        _copy[(1,)](np.zeros(16, np.float32), np.zeros(16, np.float32), BLOCK=16)


def test_tool_and_target_knobs_name_themselves(monkeypatch, tmp_path):
    from cubintools import sass
    from kernelc.compiler.backend import ptxas, target_for_device
    monkeypatch.setenv("KERNELC_TARGET", "sm_banana")
    with pytest.raises(options.OptionError, match="KERNELC_TARGET='sm_banana': not a GPU architecture"):
        target_for_device(9, 0)
    # cubintools reads KERNELC_NVDISASM itself (it imports no kernelc): a plain FileNotFoundError there
    for var, fn, err in (("KERNELC_NVDISASM", sass.nvdisasm_path, FileNotFoundError),
                         ("KERNELC_PTXAS", ptxas.ptxas_binary, options.OptionError)):
        fn.cache_clear()
        monkeypatch.setenv(var, str(tmp_path / "missing"))
        try:
            with pytest.raises(err, match=f"{var}=.*missing.*: no such file"):
                fn()
        finally:
            monkeypatch.delenv(var)
            fn.cache_clear()


def test_no_knob_is_read_through_a_shadowing_local():
    """``options.get("KERNELC_...")`` inside a function whose parameter or local is also called
    ``options`` (launch_cuda's dict of launch options) reads that dict, not the knob: the knob is then
    silently ignored (it happened to KERNELC_LOG_RECOMPILES and KERNELC_LAUNCH_BLOCKING; seen on an H100)."""
    import ast
    bad = []
    for p in (ROOT / "kernelc").rglob("*.py"):
        for f in ast.walk(ast.parse(p.read_text())):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            local = {a.arg for a in f.args.args + f.args.kwonlyargs + f.args.posonlyargs}
            local |= {t.id for n in ast.walk(f) if isinstance(n, ast.Assign) for t in n.targets
                      if isinstance(t, ast.Name)}
            for n in ast.walk(f):
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and isinstance(n.func.value, ast.Name) and n.func.value.id in local
                        and n.args and isinstance(n.args[0], ast.Constant)
                        and str(n.args[0].value).startswith("KERNELC_")):
                    bad.append(f"{p}:{n.lineno} {f.name}: {n.func.value.id}.{n.func.attr}({n.args[0].value!r})")
    assert bad == []
