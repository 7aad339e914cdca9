"""Integer polynomials over symbolic leaves: the normal form the pointer-tile analysis compares in.

Two index expressions written differently -- ``offs_k < K - k * BK`` in a mask and the pointer's
``k * BK + offs_k`` -- are the same function of their inputs when their polynomials are equal. A
``Poly`` maps monomials (sorted tuples of leaf keys, a key repeated for a power) to non-zero integer
coefficients; the empty monomial is the constant term. Leaves are hashable keys the caller chooses
(``passes/tile_exprs.py``: SSA values, tile axes, loop trip counts), so anything the normaliser does
not understand (a division, a remainder, a load) is one opaque leaf and compares equal only to itself.

Example::

    k*64 + x - (K - k*64)  ->  Poly({("x",): 1, ("K",): -1, ("k",): 128})
"""
from __future__ import annotations

from math import gcd
from typing import Callable, Dict, Hashable, Iterable, Optional, Tuple

Monomial = Tuple[Hashable, ...]


class Poly:
    """An immutable integer polynomial ``sum coef * prod(leaves)``."""

    __slots__ = ("terms",)

    def __init__(self, terms: Optional[Dict[Monomial, int]] = None):
        self.terms: Dict[Monomial, int] = {m: c for m, c in (terms or {}).items() if c}

    @staticmethod
    def const(c: int) -> "Poly":
        return Poly({(): int(c)})

    @staticmethod
    def leaf(key: Hashable) -> "Poly":
        return Poly({(key,): 1})

    def __add__(self, other: "Poly") -> "Poly":
        out = dict(self.terms)
        for m, c in other.terms.items():
            out[m] = out.get(m, 0) + c
        return Poly(out)

    def __neg__(self) -> "Poly":
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: "Poly") -> "Poly":
        return self + (-other)

    def __mul__(self, other: "Poly") -> "Poly":
        out: Dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2, key=repr))
                out[m] = out.get(m, 0) + c1 * c2
        return Poly(out)

    def __eq__(self, other) -> bool:
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self):
        return hash(frozenset(self.terms.items()))

    def __repr__(self):
        if not self.terms:
            return "0"
        return " + ".join(f"{c}*{'*'.join(map(str, m)) or '1'}" for m, c in sorted(self.terms.items(), key=repr))

    def is_zero(self) -> bool:
        return not self.terms

    def constant(self) -> Optional[int]:
        """The value if the polynomial is a constant (0 included), else None."""
        if not self.terms:
            return 0
        if list(self.terms) == [()]:
            return self.terms[()]
        return None

    def leaves(self) -> set:
        return {k for m in self.terms for k in m}

    def split(self, keep: Callable[[Monomial], bool]) -> Tuple["Poly", "Poly"]:
        """(the terms whose monomial ``keep`` accepts, the others)."""
        yes = {m: c for m, c in self.terms.items() if keep(m)}
        return Poly(yes), Poly({m: c for m, c in self.terms.items() if m not in yes})

    def divide_monomial(self, m: Monomial, c: int) -> Tuple["Poly", "Poly"]:
        """(quotient, remainder) of dividing by ``c * m`` term by term: a term goes to the quotient
        when ``m``'s leaves are a sub-multiset of its monomial and ``c`` divides its coefficient."""
        quo: Dict[Monomial, int] = {}
        rem: Dict[Monomial, int] = {}
        for mono, coef in self.terms.items():
            rest = _remove(mono, m)
            if rest is not None and coef % c == 0:
                quo[rest] = quo.get(rest, 0) + coef // c
            else:
                rem[mono] = coef
        return Poly(quo), Poly(rem)

    def divisibility(self, leaf_div: Callable[[Hashable], int], cap: int = 1 << 30) -> int:
        """The largest power of two known to divide every value (``leaf_div``: per leaf)."""
        out = 0
        for m, c in self.terms.items():
            d = abs(c) & -abs(c)
            for k in m:
                d = min(d * max(leaf_div(k), 1), cap)
            out = gcd(out, d)
        return min(out, cap) if out else cap


def _remove(mono: Monomial, sub: Iterable[Hashable]) -> Optional[Monomial]:
    rest = list(mono)
    for k in sub:
        if k not in rest:
            return None
        rest.remove(k)
    return tuple(rest)
