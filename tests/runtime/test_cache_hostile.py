"""#28: the disk cache never returns a stale or unchecked build. Plain Python helpers the frontend
runs and global values it folds (list/dict elements, module attributes) are recorded with the build
and checked before reuse; meta.json, the cubin and autotune files are validated by schema, and a bad
one is rebuilt (or re-tuned) with a warning naming the file. Includes hypothesis fuzzers."""
import importlib.util
import json
import os
import sys
import textwrap
import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kernelc
from cubintools.target import parse_target
from kernelc.runtime import cache

SIG = {"x_ptr": "*fp32", "n": "i32"}
TARGET = parse_target("sm_90a")
FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

CFG = '''
TABLE = {table}
'''
SRC = '''
import kernelc
import kernelc.language as kl
import {cfg} as cfg

FACTORS = {factors}
SCALES = {{"a": ({scale}, 1.0)}}

def plain_helper(x):        # not @jit: the frontend runs it on the tile
    return inner(x) + {helper}

def inner(x):               # called by the helper, never seen by the frontend
    return x * {inner}

@kernelc.jit
def jit_helper(x):          # reached through a dict: invisible to a fingerprint of the kernel's names
    return x - {jit}

OPS = {{"sub": jit_helper}}

@kernelc.jit
def kern(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + offs, mask=offs < n)
    y = OPS["sub"](plain_helper(x)) * FACTORS[1] + SCALES["a"][0] + cfg.TABLE[0][1]
    kl.store(x_ptr + offs, y, mask=offs < n)
'''


def _load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod          # as an imported module is
    spec.loader.exec_module(mod)
    return mod


def _build(tmp_path, name="m_stale", factors="[1.0, 2.0]", scale=3.0, helper=4.0, inner=5.0, table="[(6.0, 7.0)]",
           jit=8.0):
    (tmp_path / f"{name}_cfg.py").write_text(CFG.format(table=table))
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SRC.format(cfg=f"{name}_cfg", factors=factors, scale=scale,
                                                                     helper=helper, inner=inner, jit=jit)))
    sys.path.insert(0, str(tmp_path))
    try:
        _load_module(f"{name}_cfg", tmp_path / f"{name}_cfg.py")
        mod = _load_module(name, tmp_path / f"{name}.py")
    finally:
        sys.path.remove(str(tmp_path))
    return cache.cached_compile(mod.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, TARGET)


def _consts(ck):
    return ck.asm["tir"]


@pytest.mark.parametrize("edit", [dict(helper=40.0), dict(inner=50.0), dict(factors="[1.0, 20.0]"),
                                  dict(scale=30.0), dict(table="[(6.0, 70.0)]"), dict(jit=80.0)],
                         ids=["plain-helper", "helper-of-helper", "list-element", "nested-dict-tuple",
                              "module-attribute-list", "jit-helper-through-a-dict"])
def test_an_edit_the_build_depends_on_rebuilds(tmp_path, edit):
    first = _build(tmp_path)
    again = _build(tmp_path)
    assert "disk_cache_load" in again.timings                    # unchanged program: served from disk
    edited = _build(tmp_path, **edit)
    assert "disk_cache_load" not in edited.timings, f"stale build returned after {edit}"
    assert _consts(edited) != _consts(first)
    assert "disk_cache_load" in _build(tmp_path, **edit).timings  # the rebuilt entry serves the next run


# -- meta.json and cubin validation -------------------------------------------------------------

@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    d = tmp_path_factory.mktemp("entry")
    old = os.environ.get("KERNELC_CACHE_DIR")
    os.environ["KERNELC_CACHE_DIR"] = str(d / "cache")
    try:
        ck = _build(d, name="m_entry")
    finally:
        if old is None:
            os.environ.pop("KERNELC_CACHE_DIR")
        else:
            os.environ["KERNELC_CACHE_DIR"] = old
    path = os.path.join(str(d / "cache"), ck.cache_key[:2], ck.cache_key)
    with open(os.path.join(path, "meta.json")) as f:
        return path, json.load(f)


@pytest.mark.parametrize("field,value", [("n_regs", "255"), ("num_warps", 3), ("shared", -1), ("signature", ["x"]),
                                         ("timings", {"a": "slow"}), ("name", "../../x"), ("target", 90),
                                         ("cubin_sha256", None), ("cache_key", "0" * 40), ("arg_names", "x_ptr"),
                                         ("source_map", {"functions": {"k": [[1]]}})])
def test_meta_with_a_wrong_field_is_rebuilt_with_a_warning_naming_the_file(entry, field, value, monkeypatch):
    path, meta = entry
    monkeypatch.setenv("KERNELC_CACHE_DIR", os.path.dirname(os.path.dirname(path)))
    bad = dict(meta, **{field: value})
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(bad, f)
    with pytest.raises(cache.CorruptEntry, match=rf"meta.json: .*{field}|meta.json: written for cache key"):
        cache._load(path, None)
    mod = sys.modules["m_entry"]
    with pytest.warns(RuntimeWarning, match=r"corrupt cache entry, recompiling \(.*meta.json"):
        ck = cache.cached_compile(mod.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, TARGET)
    assert isinstance(ck.n_regs, int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache._load(path, None)                                         # healthy again


_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                               st.text(max_size=8)),
                     lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)),
                     max_leaves=8)


@FUZZ
@given(data=st.data())
def test_fuzz_meta_json_is_loaded_typed_or_rejected(entry, data):
    path, meta = entry
    kind = data.draw(st.sampled_from(["field", "drop", "whole", "bytes"]))
    if kind == "field":
        bad = dict(meta, **{data.draw(st.sampled_from(sorted(meta))): data.draw(_JSON)})
        text = json.dumps(bad).encode()
    elif kind == "drop":
        bad = dict(meta)
        bad.pop(data.draw(st.sampled_from(sorted(meta))))
        text = json.dumps(bad).encode()
    elif kind == "whole":
        text = json.dumps(data.draw(_JSON)).encode()
    else:
        text = data.draw(st.binary(max_size=64))
    with open(os.path.join(path, "meta.json"), "wb") as f:
        f.write(text)
    try:
        ck = cache._load(path, None)
    except cache.CorruptEntry as e:
        assert "meta.json" in str(e) or "kernel.cubin" in str(e)
    else:
        for k in ("n_regs", "n_spills", "shared", "dynamic_shared", "local_bytes", "num_warps", "num_stages"):
            assert isinstance(getattr(ck, k), int) and not isinstance(getattr(ck, k), bool)
        assert ck.asm["cubin"] and ck.name.isidentifier()
    finally:
        with open(os.path.join(path, "meta.json"), "w") as f:
            json.dump(meta, f)


# -- autotune cache files -----------------------------------------------------------------------

CONFIGS = [kernelc.Config({"BLOCK": 16}, num_warps=2), kernelc.Config({"BLOCK": 32}, num_warps=4)]


@pytest.mark.parametrize("text", ["[1, 2]", '"config"', "{}", '{"config": 5}', "{", "\xff\xfe", "[" * 5000],
                         ids=["list", "string", "empty", "config-int", "truncated", "not-utf8", "deep-nesting"])
def test_autotune_file_of_the_wrong_shape_is_retuned_with_a_warning(tmp_path, text):
    from kernelc.runtime.tuning import read_saved
    p = tmp_path / "t.json"
    p.write_bytes(text.encode("latin-1"))
    with pytest.warns(RuntimeWarning, match=f"autotune cache file {p} is corrupt"):
        assert read_saved(str(p), CONFIGS) is None


def test_autotune_file_names_a_known_config(tmp_path):
    from kernelc.runtime.tuning import read_saved
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"config": repr(CONFIGS[1]), "timings_ms": {}}))
    assert read_saved(str(p), CONFIGS) is CONFIGS[1]
    p.write_text(json.dumps({"config": "Config(gone)"}))
    assert read_saved(str(p), CONFIGS) is None                       # configs changed: tune again


@pytest.fixture(scope="module")
def autotune_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("autotune")


@FUZZ
@given(payload=st.one_of(_JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=48),
                         st.builds(lambda c, extra: json.dumps({"config": c, **extra}).encode(),
                                   st.one_of(st.sampled_from([repr(c) for c in CONFIGS]), _JSON),
                                   st.dictionaries(st.text(max_size=4), _JSON, max_size=2))))
def test_fuzz_autotune_files_never_crash(autotune_dir, payload):
    from kernelc.runtime.tuning import read_saved
    p = autotune_dir / "t.json"
    p.write_bytes(payload)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = read_saved(str(p), CONFIGS)
    assert got is None or got in CONFIGS
