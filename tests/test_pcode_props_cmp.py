"""Property tests: every VOPC compare predicate and the class tests against IEEE-754 / integer references.

Each example is one wave of random operands; every predicate of the type is checked on it in its VOPC form, its CMPX
form (which writes EXEC) and, on rdna3, its VOP3 form. References are numpy comparisons (IEEE: NaN is unordered).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from pcode_refs import (
    F16,
    F32,
    F64,
    LANES,
    MASKS,
    PROPS,
    SEEDS,
    Fmt,
    check,
    gen_float,
    gen_int,
    is_inf,
    is_qnan,
    is_snan,
    is_zero,
    lane_bits,
    mix,
    run,
    sext,
    to_float,
    value,
)

FLOAT_PREDS = {  # name -> predicate on float arrays (IEEE: NaN is unordered, so every ordered relation is False)
    "F": lambda a, b: np.zeros(a.shape, bool),
    "LT": np.less, "EQ": np.equal, "LE": np.less_equal, "GT": np.greater,
    "LG": lambda a, b: (a < b) | (a > b), "GE": np.greater_equal,
    "O": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "U": lambda a, b: np.isnan(a) | np.isnan(b),
    "NGE": lambda a, b: ~(a >= b), "NLG": lambda a, b: ~((a < b) | (a > b)), "NGT": lambda a, b: ~(a > b),
    "NLE": lambda a, b: ~(a <= b), "NEQ": lambda a, b: ~(a == b), "NLT": lambda a, b: ~(a < b),
    "T": lambda a, b: np.ones(a.shape, bool),
}
INT_PREDS = {"F": FLOAT_PREDS["F"], "LT": np.less, "EQ": np.equal, "LE": np.less_equal, "GT": np.greater,
             "NE": np.not_equal, "GE": np.greater_equal, "T": FLOAT_PREDS["T"]}
FLOATS = {"F16": F16, "F32": F32, "F64": F64}
INT_TYPES = {"I16": (16, True), "U16": (16, False), "I32": (32, True), "U32": (32, False), "I64": (64, True),
             "U64": (64, False)}
FAMS = ("rdna3", "rdna4", "cdna")
# Regression witnesses (fixed in emu.pcode): `<>` compiled as `!=`, so LG / NLG were True / False for NaN operands;
# f32 class tests never saw a signaling NaN (quieted by 64'F()).
REGRESSIONS = {"F16": (0x4980, 0x7E00), "F32": (0x41300000, 0x7FC00000), "F64": (0x40260000_00000000,
                                                                           0x7FF80000_00000000)}


def op_name(fam: str, kind: str, pred: str, ty: str) -> str:
    if fam == "cdna" and pred == "T" and ty.startswith("F"):
        pred = "TRU"  # CDNA spells the always-true float compare TRU
    return f"V_{kind}_{pred}_{ty}"


def forms(fam: str, pred: str, ty: str) -> list[tuple[str, str, str]]:
    """(space, name, written mask) of the compare forms checked: VOPC, VOP3 (rdna3 only, to keep the budget) and
    CMPX (writes EXEC); only those that exist in the family."""
    from emu.amd import isa
    names = isa.load(fam).by_name
    cands = [("VOPC", op_name(fam, "CMP", pred, ty), "D0"), ("VOPC", op_name(fam, "CMPX", pred, ty), "EXEC")]
    if fam == "rdna3":
        cands.append(("VOP3", op_name(fam, "CMP", pred, ty), "D0"))
    return [c for c in cands if c[:2] in names]


def check_pred(fam: str, ty: str, pred: str, fn, s0, s1, a, b):
    want = fn(a, b)
    found = forms(fam, pred, ty)
    for space, name, dst in found:
        out = run(fam, space, name, S0=s0, S1=s1)
        check(f"{fam} {space} {name} {dst}", lane_bits(out[dst]), want, {"S0": s0, "S1": s1})
    return len(found)


def float_operands(ty: str, seed: int, same: int):
    f = FLOATS[ty]
    rng = np.random.default_rng(seed)
    s0 = gen_float(f, rng)
    s1 = mix(gen_float(f, rng), s0, same)  # equal operands in the lanes of `same`
    return s0, s1, to_float(s0, f), to_float(s1, f)


@pytest.mark.parametrize("fam", FAMS)
@pytest.mark.parametrize("ty", FLOATS)
@PROPS
@given(seed=SEEDS, same=MASKS)
def test_float_compares(fam: str, ty: str, seed: int, same: int):
    """Every float predicate of the type, on one random wave per example."""
    s0, s1, a, b = float_operands(ty, seed, same)
    ran = sum(check_pred(fam, ty, p, fn, s0, s1, a, b) for p, fn in FLOAT_PREDS.items())
    assert ran >= 2 * 14, f"{fam}: only {ran} {ty} compare forms found"


@pytest.mark.parametrize("fam", FAMS)
@pytest.mark.parametrize("ty", FLOATS)
def test_regressions(fam: str, ty: str):
    f = FLOATS[ty]
    s0, s1 = (np.full(LANES, w, np.uint64) for w in REGRESSIONS[ty])
    for pred in ("LG", "NLG"):
        check_pred(fam, ty, pred, FLOAT_PREDS[pred], s0, s1, to_float(s0, f), to_float(s1, f))
    snan = np.full(LANES, f.inf | 1, np.uint64)
    check_class(fam, ty, snan, np.full(LANES, 1, np.uint64))


@pytest.mark.parametrize("fam", FAMS)
@pytest.mark.parametrize("ty", INT_TYPES)
@PROPS
@given(seed=SEEDS, same=MASKS)
def test_int_compares(fam: str, ty: str, seed: int, same: int):
    bits, signed = INT_TYPES[ty]
    rng = np.random.default_rng(seed)
    s0 = gen_int(bits, rng)
    s1 = mix(gen_int(bits, rng), s0, same)
    a, b = (s0.view(np.int64), s1.view(np.int64)) if signed and bits == 64 else \
        (np.array([sext(x, bits) for x in s0.tolist()]), np.array([sext(x, bits) for x in s1.tolist()])) if signed \
        else (s0, s1)
    ran = sum(check_pred(fam, ty, p, fn, s0, s1, a, b) for p, fn in INT_PREDS.items())
    assert ran >= 2 * 6, f"{fam}: {ran} {ty} compare forms found"


def fp_class(x: int, f: Fmt) -> int:
    """The class bit V_CMP_CLASS tests: 0 sNaN, 1 qNaN, then -inf, -normal, -denormal, -0, +0, +denormal, +normal,
    +inf as bits 2..9."""
    if is_snan(x, f):
        return 0
    if is_qnan(x, f):
        return 1
    neg = bool(x & f.sign)
    if is_inf(x, f):
        k = 0
    elif is_zero(x, f):
        k = 3
    elif abs(value(x, f)) < 2 ** f.emin:
        k = 2
    else:
        k = 1
    return 2 + k if neg else 9 - k


@pytest.mark.parametrize("fam", FAMS)
@pytest.mark.parametrize("ty", FLOATS)
@PROPS
@given(seed=SEEDS)
def test_class(fam: str, ty: str, seed: int):
    f = FLOATS[ty]
    rng = np.random.default_rng(seed)
    s0, s1 = gen_float(f, rng), gen_int(10, rng)  # S1: the mask of classes, bits 0..9
    check_class(fam, ty, s0, s1)


def check_class(fam: str, ty: str, s0: np.ndarray, s1: np.ndarray):
    f = FLOATS[ty]
    want = np.array([bool(m >> fp_class(x, f) & 1) for x, m in zip(s0.tolist(), s1.tolist(), strict=True)])
    for space, name, dst in (("VOPC", f"V_CMP_CLASS_{ty}", "D0"), ("VOP3", f"V_CMP_CLASS_{ty}", "D0"),
                             ("VOPC", f"V_CMPX_CLASS_{ty}", "EXEC")):
        out = run(fam, space, name, S0=s0, S1=s1)
        check(f"{fam} {space} {name} {dst}", lane_bits(out[dst]), want, {"S0": s0, "S1": s1})


def test_class_reference_on_known_values():
    """The class reference itself, on hand-picked f32 encodings (guards the reference, not the compiler)."""
    cases = {0x7F800001: 0, 0x7FC00000: 1, 0xFF800000: 2, 0xBF800000: 3, 0x80000001: 4, 0x80000000: 5, 0: 6,
             0x007FFFFF: 7, 0x00800000: 8, 0x7F800000: 9}
    assert {x: fp_class(x, F32) for x in cases} == cases
