"""Independent references for the pcode property tests.

Everything here is written from the ISA's stated meaning (IEEE-754 formats, two's complement integers) with
numpy / Python integers / Fractions; nothing is derived from the pcode text or its compiled output.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from depth import examples
from hypothesis import settings
from hypothesis import strategies as st

LANES = 32
# examples per property: 50, 400 under the exploring profile; PCODE_PROPS_EXAMPLES=5000 for a deeper local search
EXAMPLES = int(os.environ.get("PCODE_PROPS_EXAMPLES") or examples(50, 400))
PROPS = settings(max_examples=EXAMPLES, deadline=None)
ALL_LANES = (1 << LANES) - 1


# ---------------------------------------------------------------------------------------------------------------
# IEEE binary formats

@dataclass(frozen=True)
class Fmt:
    name: str
    bits: int
    exp: int  # exponent field width
    man: int  # mantissa field width (without the hidden bit)

    @property
    def bias(self) -> int:
        return (1 << (self.exp - 1)) - 1

    @property
    def emin(self) -> int:  # exponent of the smallest normal
        return 1 - self.bias

    @property
    def sign(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def quiet(self) -> int:  # the quiet bit of a NaN
        return 1 << (self.man - 1)

    @property
    def inf(self) -> int:
        return ((1 << self.exp) - 1) << self.man

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1

    @property
    def max_finite(self) -> Fraction:
        return Fraction((1 << (self.man + 1)) - 1) * Fraction(2) ** (self.bias - self.man)

    @property
    def np(self):
        return {16: np.float16, 32: np.float32, 64: np.float64}[self.bits] if self.name != "bf16" else None


F16 = Fmt("f16", 16, 5, 10)
BF16 = Fmt("bf16", 16, 8, 7)
F32 = Fmt("f32", 32, 8, 23)
F64 = Fmt("f64", 64, 11, 52)
UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def u64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint64)


def is_nan(bits: int, f: Fmt) -> bool:
    return (bits & f.inf) == f.inf and (bits & ((1 << f.man) - 1)) != 0


def is_snan(bits: int, f: Fmt) -> bool:
    return is_nan(bits, f) and not bits & f.quiet


def is_qnan(bits: int, f: Fmt) -> bool:
    return is_nan(bits, f) and bool(bits & f.quiet)


def is_inf(bits: int, f: Fmt) -> bool:
    return (bits & ~f.sign & f.mask) == f.inf


def is_zero(bits: int, f: Fmt) -> bool:
    return (bits & ~f.sign & f.mask) == 0


def neg_bit(bits: int, f: Fmt) -> bool:
    return bool(bits & f.sign)


def value(bits: int, f: Fmt) -> Fraction:
    """Exact value of a finite encoding."""
    e = (bits >> f.man) & ((1 << f.exp) - 1)
    m = bits & ((1 << f.man) - 1)
    assert e != (1 << f.exp) - 1, "not finite"
    q = Fraction(m, 1 << f.man) * Fraction(2) ** f.emin if e == 0 else \
        Fraction(m + (1 << f.man), 1 << f.man) * Fraction(2) ** (e - f.bias)
    return -q if bits & f.sign else q


def to_float(bits, f: Fmt) -> np.ndarray:
    """The values of raw encodings as float64 (exact; NaN payloads are not kept)."""
    b = u64(bits)
    with np.errstate(invalid="ignore"):
        if f is F64:
            return b.view(np.float64).copy()
        if f is BF16:
            return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return b.astype(UINT[f.bits]).view(f.np).astype(np.float64)


def to_bits(x, f: Fmt) -> np.ndarray:
    """Round float64 values to f (round to nearest even, overflow to inf, subnormals kept) -> raw bits."""
    x = np.asarray(x, dtype=np.float64)
    if f is BF16:
        return u64([round_exact(v, f) if math.isfinite(v) else special_bits(v, f) for v in x.tolist()])
    with np.errstate(over="ignore"):
        return x.astype(f.np).view(UINT[f.bits]).astype(np.uint64)


def special_bits(v: float, f: Fmt) -> int:
    if math.isnan(v):
        return f.inf | f.quiet
    return f.inf | (f.sign if v < 0 else 0)


def round_exact(q, f: Fmt, neg_zero: bool = False, rtz: bool = False) -> int:
    """Round an exact rational to f, to nearest even (or toward zero with `rtz`); subnormals and overflow (to inf,
    or to the largest finite value when rounding toward zero) per IEEE-754."""
    q = Fraction(q)
    if q == 0:
        return f.sign if neg_zero else 0
    sign = f.sign if q < 0 else 0
    a = abs(q)
    e = max(a.numerator.bit_length() - a.denominator.bit_length(), f.emin)  # floor(log2 a) or one below
    while Fraction(2) ** e > a and e > f.emin:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    scaled = a / Fraction(2) ** (e - f.man)  # significand in units of the last place
    n, rem = divmod(scaled.numerator, scaled.denominator)
    if not rtz and (2 * rem > scaled.denominator or (2 * rem == scaled.denominator and n & 1)):
        n += 1
    if n >= 1 << (f.man + 1):  # carried into the next binade
        n >>= 1
        e += 1
    if e > f.bias:
        return sign | (f.inf - 1 if rtz else f.inf)
    if n < 1 << f.man:  # subnormal (e == emin)
        return sign | n
    return sign | ((e + f.bias) << f.man) | (n - (1 << f.man))


def fma_ref(a: int, b: int, c: int, f: Fmt) -> int | None:
    """IEEE fusedMultiplyAdd of three encodings, one rounding; None when the result is NaN."""
    if any(is_nan(x, f) for x in (a, b, c)):
        return None
    pinf, ninf = is_inf(a, f) or is_inf(b, f), is_inf(c, f)
    psign = neg_bit(a, f) != neg_bit(b, f)
    if pinf:
        if is_zero(a, f) or is_zero(b, f) or (ninf and neg_bit(c, f) != psign):
            return None
        return f.inf | (f.sign if psign else 0)
    if ninf:
        return c
    exact = value(a, f) * value(b, f) + value(c, f)
    if exact == 0:  # exact zero: -0 only when both addends are -0 (round to nearest)
        pz = value(a, f) * value(b, f) == 0
        return f.sign if (pz and psign and neg_bit(c, f)) else 0
    return round_exact(exact, f)


def quiet(x: int, f: Fmt) -> int:
    return x | f.quiet


def ordered_lt(x: int, y: int, f: Fmt) -> bool:
    """x < y for non-NaN encodings, with -0 < +0."""
    vx, vy = (float(value(v, f)) if not is_inf(v, f) else (-math.inf if v & f.sign else math.inf) for v in (x, y))
    return vx < vy or (vx == vy == 0 and bool(x & f.sign) and not y & f.sign)


def minmax_ref(kind: str, is_max: bool, f: Fmt, x: int, y: int, ieee: bool = True):
    """Wanted result of a float min/max of encodings x (S0), y (S1), -0 < +0 throughout:
    - 'legacy' (V_MIN/V_MAX_F*, rdna3/cdna): one NaN operand -> the other operand; in IEEE mode a signaling NaN
      operand gives that NaN quieted (S0 first); two quiet NaNs -> either of them;
    - 'num' (IEEE 754-2019 minimumNumber/maximumNumber, rdna4 *_NUM_*): a NaN operand (even signaling) is ignored,
      both NaN -> a quiet NaN;
    - 'minimum' (IEEE 754-2019 minimum/maximum, rdna4 V_MINIMUM/V_MAXIMUM): a NaN operand -> that NaN quieted
      (a signaling one first, then S0)."""
    nx, ny = is_nan(x, f), is_nan(y, f)
    if kind == "legacy":
        if ieee and is_snan(x, f):
            return quiet(x, f)
        if ieee and is_snan(y, f):
            return quiet(y, f)
        if nx and ny:
            return {x, y}
    elif kind == "num":
        if nx and ny:
            return AnyNaN(f)
    elif nx or ny:
        nans = [v for v in (x, y) if is_snan(v, f)] or [v for v in (x, y) if is_nan(v, f)]
        return {quiet(v, f) for v in nans}
    if nx:
        return y
    if ny:
        return x
    lt = ordered_lt(x, y, f)
    return (y if lt else x) if is_max else (x if lt else y)


def ulp(x: float, f: Fmt) -> float:
    """Unit in the last place of |x| in f (the subnormal spacing below the normal range)."""
    ax = abs(x)
    e = max(math.frexp(ax)[1] - 1, f.emin) if ax else f.emin
    return math.ldexp(1.0, e - f.man)


# ---------------------------------------------------------------------------------------------------------------
# random waves: LANES raw values mixing specials, any bit pattern, small values and (floats) moderate magnitudes

def specials(f: Fmt) -> list[int]:
    one = f.bias << f.man
    vals = [0, 1, (1 << f.man) - 1, 1 << f.man, (f.inf - 1), f.inf, f.inf | f.quiet, f.inf | 1,
            f.inf | f.quiet | 1, one, one | (1 << (f.man - 1)), one - (1 << f.man), one + (1 << f.man),
            one + 1, one - 1, (f.bias + f.man) << f.man, ((f.bias + f.man) << f.man) | 1]
    return vals + [v | f.sign for v in vals]


def _nice(f: Fmt) -> np.ndarray:
    """Small integers and halves (-32 .. 32): many ties, exact results and equal operands."""
    x = np.arange(-64, 65) / 2
    return x.view(np.uint64) if f is F64 else to_bits(x, f)


def gen_float(f: Fmt, rng: np.random.Generator) -> np.ndarray:
    kind = rng.integers(0, 4, LANES)
    out = rng.integers(0, f.mask, LANES, dtype=np.uint64, endpoint=True)  # kind 1: any bit pattern
    out = np.where(kind == 0, rng.choice(u64(specials(f)), LANES), out)
    out = np.where(kind == 2, rng.choice(_nice(f), LANES), out)
    # kind 3: moderate magnitudes (exponent within 2**-12 .. 2**12) with random mantissas and signs
    e = rng.integers(f.bias - min(12, f.bias - 1), f.bias + min(12, f.bias), LANES).astype(np.uint64)
    m = rng.integers(0, 1 << f.man, LANES, dtype=np.uint64)
    mod = (e << u64(f.man)) | m | np.where(rng.integers(0, 2, LANES) == 1, u64(f.sign), u64(0))
    return np.where(kind == 3, mod, out).astype(np.uint64)


def gen_int(bits: int, rng: np.random.Generator, n: int = LANES) -> np.ndarray:
    m = (1 << bits) - 1
    edges = u64([0, 1, 2, m, m - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, (1 << (bits - 1)) + 1])
    kind = rng.integers(0, 4, n)
    out = rng.integers(0, m, n, dtype=np.uint64, endpoint=True)
    out = np.where(kind == 0, rng.choice(edges, n), out)
    out = np.where(kind == 1, rng.integers(0, 40, n).astype(np.uint64), out)
    return out.astype(np.uint64)


# Each hypothesis example draws a seed; the LANES values of a wave come from a numpy generator seeded with it
# (drawing LANES values one by one through hypothesis costs ~30x more per example).
SEEDS = st.integers(0, 2**64 - 1)


MASKS = st.integers(0, ALL_LANES)


def mix(a: np.ndarray, b: np.ndarray, mask: int) -> np.ndarray:
    """Lanes of b where mask has a 1, else lanes of a (used to make operands equal in some lanes)."""
    return np.where(np.array(lane_bits(mask)), b, a).astype(np.uint64)


def sext(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


# ---------------------------------------------------------------------------------------------------------------
# running compiled semantics and comparing lane by lane

MODE_IEEE = 1 << 9
MODE_DENORMS = 0xF << 4  # f32 and f64/f16 denormals kept on input and output
MODE_DEFAULT = MODE_IEEE | (1 << 8) | MODE_DENORMS  # IEEE mode, DX10 clamp, round to nearest even

POISON = 0xDEADBEEF_DEADBEEF
SCALAR = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP")
_SEMS: dict = {}


def compiled(fam: str, space: str, name: str):
    """The compiled semantics (cached); an op missing from the family is an error of the test's table."""
    from emu.amd import isa
    from emu.pcode import compile_op
    key = (fam, space, name)
    if key not in _SEMS:
        assert (space, name) in isa.load(fam).by_name, f"{fam} has no {space} {name}"
        _SEMS[key] = compile_op(fam, space, name)
    return _SEMS[key]


def run(fam: str, space: str, name: str, **operands) -> dict:
    """Call the compiled semantics of one op on one wave; operands not given default (EXEC all, MODE IEEE)."""
    sem = _SEMS.get((fam, space, name)) or compiled(fam, space, name)
    st = {"EXEC": ALL_LANES, "MODE": MODE_DEFAULT, **operands}
    for k in sem.reads - st.keys():
        if k in ("D0", "D1"):  # a destination the compiler reads back (conditionally written): poison, not zero
            st[k] = POISON if space in SCALAR else np.full(LANES, POISON, dtype=np.uint64)
        elif "." in k or k == "CLAMP":  # a status-register field (TRAPSTS.INVALID) or the clamp bit: clear
            st[k] = 0
        else:
            raise AssertionError(f"{name} reads {k} that the test does not provide")
    return sem(st, LANES)


def lane_ints(x, bits: int, n: int = LANES) -> np.ndarray:
    """Per-lane raw values of a result (array over lanes or a uniform value), truncated to `bits` (<= 64)."""
    a = np.broadcast_to(np.asarray(x, dtype=np.uint64), (n,))
    return a & u64((1 << bits) - 1)


def lane_bits(x, n: int = LANES) -> np.ndarray:
    """Per-lane booleans of a mask result: a Python int with bit i = lane i, or an array over lanes."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return ((u64(int(x) & ((1 << 64) - 1)) >> np.arange(n, dtype=np.uint64)) & u64(1)).astype(bool)
    return np.broadcast_to(np.asarray(x).astype(np.uint64) & u64(1), (n,)).astype(bool)


class AnyNaN:
    """Accepts any NaN of f (quiet only when `quiet`): the ISA does not fix the payload of computed NaNs."""

    def __init__(self, f: Fmt, quiet: bool = True):
        self.f, self.quiet = f, quiet

    def __call__(self, got: int) -> bool:
        return is_qnan(got, self.f) if self.quiet else is_nan(got, self.f)

    def __repr__(self):
        return f"any {'quiet ' if self.quiet else ''}NaN"


class Within:
    """Accepts a value within `ulps` units in the last place of the exact result `x` (a finite longdouble; ulp
    measured at x, subnormal spacing below the normal range); beyond the largest finite value, inf of x's sign too."""

    def __init__(self, x, f: Fmt, ulps: float):
        self.x, self.f, self.ulps = np.longdouble(x), f, ulps

    def __call__(self, got: int) -> bool:
        if is_nan(got, self.f):
            return False
        if is_inf(got, self.f):
            big = np.longdouble(float(self.f.max_finite)) + np.longdouble(ulp(float(self.f.max_finite), self.f)) / 2
            return abs(self.x) >= big and neg_bit(got, self.f) == (self.x < 0)
        err = abs(np.longdouble(float(value(got, self.f))) - self.x)
        return bool(err <= self.ulps * np.longdouble(ulp(float(self.x), self.f)))

    def __repr__(self):
        return f"{self.x!r} +- {self.ulps} ulp"


def accepts(want, got: int) -> bool:
    if callable(want):
        return want(got)
    if isinstance(want, (set, frozenset)):
        return got in want
    return got == want


def _hex(v, width: int) -> str:
    return f"0x{int(v):0{width}x}" if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) \
        else repr(v)


def check(what: str, got, want, inputs: dict, hexw: int = 8):
    """Assert every lane's result is accepted: `want` is an array of exact values or a list of per-lane exact values,
    sets or acceptor callables. The message names the first failing lane and its inputs."""
    got = np.asarray(got)
    if isinstance(want, np.ndarray):
        if np.array_equal(got, want):
            return
        bad = np.flatnonzero(got != want).tolist()
    else:
        bad = [i for i, (g, w) in enumerate(zip(got.tolist(), want, strict=True)) if not accepts(w, g)]
    if bad:
        i = bad[0]
        ins = ", ".join(f"{k}={_hex(np.asarray(v).tolist()[i], hexw)}" for k, v in inputs.items())
        w = want.tolist()[i] if isinstance(want, np.ndarray) else want[i]
        w = repr(w) if callable(w) else "{" + ", ".join(_hex(v, hexw) for v in sorted(w)) + "}" \
            if isinstance(w, (set, frozenset)) else _hex(w, hexw)
        raise AssertionError(f"{what}: {len(bad)}/{len(got)} lanes wrong; lane {i}: {ins} -> got "
                             f"{_hex(got.tolist()[i], hexw)}, want {w}")
