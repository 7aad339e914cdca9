"""kprof's knobs that come from the environment, in one typed table.

Each knob has a type, a default, an environment variable and a parser that turns a malformed value
into a one-line error naming the variable.  Read them with :func:`get` (the environment is read at
each call, so a test or a wrapper may set it late); command-line flags (``kprof-viewer --max-size``,
``kprof-analyze --max-size``) override them through :func:`set_override`.

==========================  ==========================  =======================================
knob                        environment variable        meaning
==========================  ==========================  =======================================
``max_profile_bytes``       ``KPROF_MAX_PROFILE_SIZE``  largest profile file the readers load
                                                        (``1G``, ``500M``, ``64K`` or bytes;
                                                        default 1 GiB)
``max_profile_depth``       ``KPROF_MAX_PROFILE_DEPTH`` deepest frame nesting the readers accept
                                                        (default 10000)
``cupti_attribution``       ``KPROF_CUPTI_ATTRIBUTION`` how the cupti backend places a launch in
                                                        its thread's scope: ``api-records``
                                                        (driver-API activity records + scope
                                                        timelines) or ``external-correlation``
                                                        (also CUPTI external correlation ids
                                                        pushed at each scope change)
``cupti_records``           ``KPROF_CUPTI_RECORDS``     when completed activity buffers are
                                                        decoded: ``raw`` (the default: buffers
                                                        taken from libcupti through ctypes, no
                                                        cupti-python object per record; decoded
                                                        at the flush or past a bound; falls back
                                                        to cupti-python's callbacks where
                                                        libcupti is not found) or ``split``
                                                        (cupti-python's records, into numpy
                                                        columns on CUPTI's thread as each buffer
                                                        completes) or ``deferred`` (cupti-python's
                                                        records kept as delivered, decoded at the
                                                        flush or past a bound)
``cupti_buffer_bytes``      ``KPROF_CUPTI_BUFFER_SIZE`` size of each CUPTI activity buffer
                                                        (default 8M)
``cupti_callbacks``         ``KPROF_CUPTI_CALLBACKS``   ``1``: place launches by a Python launch
                                                        callback, not API activity records
``cupti_api_records``       ``KPROF_CUPTI_API_RECORDS`` when the launch API records (API-record
                                                        mode) are turned on: ``lazy`` (the
                                                        default: at the first scope entry or
                                                        kernelc launch of any thread -- until
                                                        then every launch is the root's and
                                                        needs no placing; a profile started
                                                        before CUDA is up keeps them on until
                                                        its first context exists) or ``always``
                                                        (at the start)
``cupti_runtime_callbacks`` ``KPROF_CUPTI_RUNTIME``     ``1``: also subscribe to the runtime API's
                                                        launch ids
``cupti_timeline_clock``    ``KPROF_CUPTI_TIMELINE_CLK`` the clock a scope timeline entry reads
                                                        (API-record mode): ``realtime`` (the
                                                        default: ``time.time_ns`` where it is
                                                        CUPTI's own clock, as on the H200 hosts
                                                        measured; else CUPTI's), another
                                                        host clock (``monotonic``,
                                                        ``monotonic_raw``) or ``cupti``
                                                        (``cupti.get_timestamp``, ~2.5x the cost);
                                                        a host clock is mapped to CUPTI's by
                                                        offsets measured at the start and at each
                                                        join
``native_scopes``           ``KPROF_NATIVE_SCOPES``     ``auto`` (the default): a scope's entry
                                                        and exit, and the cupti path of the
                                                        kernelc launch hook, run in C
                                                        (``profiler/_kscope.c``, built on first
                                                        use with the C compiler and headers of
                                                        the running Python into
                                                        ``~/.cache/kprof/native``; the Python
                                                        code where that fails: see
                                                        ``profiler._native.status``) or ``off``
                                                        (read at ``import profiler``)
==========================  ==========================  =======================================

The defaults of the cupti knobs are what docs/performance.md ("Profiler overhead") measured best;
switching one is a change of its ``default`` in :data:`KNOBS`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional

__all__ = ["Knob", "KNOBS", "OptionError", "get", "set_override", "parse_size"]


class OptionError(ValueError):
    """A malformed knob value; ``str(err)`` is one line naming the variable or flag."""


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, what: str = "size") -> int:
    """``"1G"`` -> 1073741824; ``"500M"``, ``"64k"``, ``"2GiB"``, ``"12345"`` (bytes).  Raises
    :class:`OptionError` naming ``what`` for anything else, or for a size below 1."""
    m = _SIZE.match(str(text))
    if not m:
        raise OptionError(f"{what}: bad size {text!r}; expected bytes or a number with K, M, G or T "
                          "(e.g. 2G, 500M)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value < 1:
        raise OptionError(f"{what}: size {text!r} is below 1 byte")
    return value


def _positive_int(text: str, what: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(f"{what}: bad value {text!r}; expected a positive whole number") from None
    if value < 1:
        raise OptionError(f"{what}: bad value {text!r}; expected a positive whole number")
    return value


def _choice(*values: str) -> Callable[[str, str], str]:
    def parse(text: str, what: str) -> str:
        v = str(text).strip().lower()
        if v not in values:
            raise OptionError(f"{what}: bad value {text!r}; expected one of {', '.join(values)}")
        return v
    parse.values = values  # type: ignore[attr-defined]
    return parse


def _flag(text: str, what: str) -> bool:
    v = str(text).strip().lower()
    if v in ("", "0", "false", "no", "off"):
        return False
    if v in ("1", "true", "yes", "on"):
        return True
    raise OptionError(f"{what}: bad value {text!r}; expected 1 or 0")


# "markers" (one marker driver call per scope change instead of an API record per launch) was removed
# 2026-11-28: slower than API records on every workload measured (docs/performance.md, decision records)
ATTRIBUTIONS = ("api-records", "external-correlation")
RECORD_MODES = ("split", "deferred", "raw")
TIMELINE_CLOCKS = ("cupti", "realtime", "monotonic", "monotonic_raw")
API_RECORDS = ("lazy", "always")
NATIVE_SCOPES = ("auto", "off")


@dataclass(frozen=True)
class Knob:
    name: str
    env: str
    default: Any
    parse: Callable[[str, str], Any]
    help: str


KNOBS: Dict[str, Knob] = {k.name: k for k in (
    Knob("max_profile_bytes", "KPROF_MAX_PROFILE_SIZE", 1 << 30, parse_size,
         "largest profile file the readers load"),
    Knob("max_profile_depth", "KPROF_MAX_PROFILE_DEPTH", 10_000, _positive_int,
         "deepest frame nesting the readers accept"),
    Knob("cupti_attribution", "KPROF_CUPTI_ATTRIBUTION", "api-records", _choice(*ATTRIBUTIONS),
         "how the cupti backend places launches in scopes"),
    Knob("cupti_records", "KPROF_CUPTI_RECORDS", "raw", _choice(*RECORD_MODES),
         "when completed CUPTI activity buffers are decoded"),
    Knob("cupti_buffer_bytes", "KPROF_CUPTI_BUFFER_SIZE", 8 << 20, parse_size,
         "size of each CUPTI activity buffer"),
    Knob("cupti_callbacks", "KPROF_CUPTI_CALLBACKS", False, _flag,
         "place launches by a Python launch callback"),
    Knob("cupti_api_records", "KPROF_CUPTI_API_RECORDS", "lazy", _choice(*API_RECORDS),
         "when the launch API records are turned on (lazy: at the first scope or kernelc launch)"),
    Knob("cupti_runtime_callbacks", "KPROF_CUPTI_RUNTIME", False, _flag,
         "also subscribe to the runtime API's launch ids"),
    Knob("cupti_timeline_clock", "KPROF_CUPTI_TIMELINE_CLK", "realtime", _choice(*TIMELINE_CLOCKS),
         "the clock scope timelines read"),
    # auto: faster per event on CPU, not slower on a GPU step (docs/performance.md, decision records)
    Knob("native_scopes", "KPROF_NATIVE_SCOPES", "auto", _choice(*NATIVE_SCOPES),
         "a scope's entry/exit and the kernelc hook's cupti path in C (auto) or Python (off)"),
)}


_overrides: Dict[str, Any] = {}


def set_override(name: str, value: Any) -> None:
    """Set a knob for this process (a command-line flag such as ``--max-size``, a
    bench's variant); ``None`` clears it.  A string is parsed like the environment variable."""
    knob = KNOBS[name]  # KeyError for an unknown knob
    if isinstance(value, str):
        value = knob.parse(value, name)
    if value is None:
        _overrides.pop(name, None)
    else:
        _overrides[name] = value


def get(name: str, environ: Optional[Mapping[str, str]] = None) -> Any:
    """The knob's value: a command-line override, else its environment variable if set (parsed; a
    bad value raises :class:`OptionError`), else its default."""
    knob = KNOBS[name]
    if name in _overrides:
        return _overrides[name]
    env = os.environ if environ is None else environ
    raw = env.get(knob.env)
    if raw is None or raw.strip() == "":
        return knob.default
    return knob.parse(raw, knob.env)
