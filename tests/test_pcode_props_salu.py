"""Property tests: compiled scalar ALU semantics and SCC against Python-integer references (issue 3, item 5).

Scalar operands and results are Python ints. Each hypothesis example draws DRAWS operand sets from a seeded
generator and runs every case on each (so each op sees DRAWS * pcode_refs.EXAMPLES operand sets).
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from pcode_refs import (
    F16,
    F32,
    PROPS,
    SEEDS,
    AnyNaN,
    Fmt,
    accepts,
    compiled,
    fma_ref,
    gen_float,
    gen_int,
    minmax_ref,
    run,
    sext,
    to_bits,
    to_float,
    u64,
)

DRAWS = 4
M32, M64 = (1 << 32) - 1, (1 << 64) - 1
FAMS = ("rdna3", "rdna4", "cdna")


@dataclass(frozen=True)
class SCase:
    space: str
    name: str
    srcs: tuple[int, ...]  # bit width of S0, S1 (SOPK: S0 or D0, then SIMM16)
    ref: Callable  # (S0, S1, SCC in) -> {'D0': int, 'SCC': bool}
    names: tuple[tuple[str, str], ...] = ()  # family -> name where the family renamed the op
    keys: tuple[str, ...] = ("S0", "S1")  # the state names the sources are passed as
    bfe: int = 0  # S1 is a bit-field descriptor: width field S1[22:16] kept below this

    def name_in(self, fam: str) -> str:
        return dict(self.names).get(fam, self.name)


def s32(x):
    return sext(x, 32)


def nz(d: int, bits: int = 32) -> dict:
    """Result with SCC = result != 0 (logical ops, shifts, bit fields, abs ...)."""
    d &= (1 << bits) - 1
    return {"D0": d, "SCC": d != 0}


def add_i(a: int, b: int) -> dict:
    r = s32(a) + s32(b)
    return {"D0": r & M32, "SCC": not -(1 << 31) <= r < 1 << 31}


def sub_i(a: int, b: int) -> dict:
    r = s32(a) - s32(b)
    return {"D0": r & M32, "SCC": not -(1 << 31) <= r < 1 << 31}


def bfe(a: int, s1: int, bits: int, signed: bool) -> dict:
    off, w = s1 & (bits - 1), (s1 >> 16) & 0x7F
    f = ((sext(a, bits) if signed else a) >> off) & ((1 << w) - 1)
    if signed and w:
        f = sext(f, w)
    return nz(f, bits)


def bitcnt(x: int, bits: int, one: bool) -> dict:
    n = bin(x).count("1")
    return nz(n if one else bits - n)


def lg(fn):
    return lambda a, b, c: {"SCC": fn(a, b)}


NOT1 = (("cdna", "S_ANDN2_B32"),)
CASES = [
    SCase("SOP2", "S_ADD_U32", (32, 32), lambda a, b, c: {"D0": (a + b) & M32, "SCC": a + b > M32},
          (("rdna4", "S_ADD_CO_U32"),)),
    SCase("SOP2", "S_SUB_U32", (32, 32), lambda a, b, c: {"D0": (a - b) & M32, "SCC": b > a},
          (("rdna4", "S_SUB_CO_U32"),)),
    SCase("SOP2", "S_ADD_I32", (32, 32), lambda a, b, c: add_i(a, b), (("rdna4", "S_ADD_CO_I32"),)),
    SCase("SOP2", "S_SUB_I32", (32, 32), lambda a, b, c: sub_i(a, b), (("rdna4", "S_SUB_CO_I32"),)),
    SCase("SOP2", "S_ADDC_U32", (32, 32), lambda a, b, c: {"D0": (a + b + c) & M32, "SCC": a + b + c > M32},
          (("rdna4", "S_ADD_CO_CI_U32"),)),
    SCase("SOP2", "S_SUBB_U32", (32, 32), lambda a, b, c: {"D0": (a - b - c) & M32, "SCC": b + c > a},
          (("rdna4", "S_SUB_CO_CI_U32"),)),
    SCase("SOP2", "S_AND_B32", (32, 32), lambda a, b, c: nz(a & b)),
    SCase("SOP2", "S_OR_B64", (64, 64), lambda a, b, c: nz(a | b, 64)),
    SCase("SOP2", "S_XOR_B32", (32, 32), lambda a, b, c: nz(a ^ b)),
    SCase("SOP2", "S_NAND_B32", (32, 32), lambda a, b, c: nz(~(a & b))),
    SCase("SOP2", "S_NOR_B64", (64, 64), lambda a, b, c: nz(~(a | b), 64)),
    SCase("SOP2", "S_XNOR_B32", (32, 32), lambda a, b, c: nz(~(a ^ b))),
    SCase("SOP2", "S_AND_NOT1_B32", (32, 32), lambda a, b, c: nz(a & ~b), NOT1),
    SCase("SOP2", "S_LSHL_B32", (32, 32), lambda a, b, c: nz(a << (b & 31))),
    SCase("SOP2", "S_LSHR_B32", (32, 32), lambda a, b, c: nz(a >> (b & 31))),
    SCase("SOP2", "S_ASHR_I32", (32, 32), lambda a, b, c: nz(s32(a) >> (b & 31))),
    SCase("SOP2", "S_LSHL_B64", (64, 32), lambda a, b, c: nz(a << (b & 63), 64)),
    SCase("SOP2", "S_LSHR_B64", (64, 32), lambda a, b, c: nz(a >> (b & 63), 64)),
    SCase("SOP2", "S_ASHR_I64", (64, 32), lambda a, b, c: nz(sext(a, 64) >> (b & 63), 64)),
    SCase("SOP2", "S_LSHL2_ADD_U32", (32, 32), lambda a, b, c: {"D0": ((a << 2) + b) & M32, "SCC": (a << 2) + b > M32}),
    SCase("SOP2", "S_BFE_U32", (32, 32), lambda a, b, c: bfe(a, b, 32, False), bfe=32),
    SCase("SOP2", "S_BFE_I32", (32, 32), lambda a, b, c: bfe(a, b, 32, True), bfe=32),
    SCase("SOP2", "S_BFE_U64", (64, 32), lambda a, b, c: bfe(a, b, 64, False), bfe=64),
    SCase("SOP2", "S_BFE_I64", (64, 32), lambda a, b, c: bfe(a, b, 64, True), bfe=64),
    SCase("SOP2", "S_MIN_I32", (32, 32), lambda a, b, c: {"D0": a if s32(a) < s32(b) else b, "SCC": s32(a) < s32(b)}),
    SCase("SOP2", "S_MIN_U32", (32, 32), lambda a, b, c: {"D0": min(a, b), "SCC": a < b}),
    SCase("SOP2", "S_MAX_I32", (32, 32), lambda a, b, c: {"D0": a if s32(a) >= s32(b) else b,
                                                           "SCC": s32(a) >= s32(b)}),
    SCase("SOP2", "S_MAX_U32", (32, 32), lambda a, b, c: {"D0": max(a, b), "SCC": a >= b}),
    SCase("SOP2", "S_ABSDIFF_I32", (32, 32), lambda a, b, c: nz(abs(s32((a - b) & M32)))),
    SCase("SOP2", "S_MUL_I32", (32, 32), lambda a, b, c: {"D0": (a * b) & M32}),
    SCase("SOP2", "S_MUL_HI_U32", (32, 32), lambda a, b, c: {"D0": (a * b) >> 32}),
    SCase("SOP2", "S_MUL_HI_I32", (32, 32), lambda a, b, c: {"D0": ((s32(a) * s32(b)) >> 32) & M32}),
    SCase("SOP2", "S_CSELECT_B32", (32, 32), lambda a, b, c: {"D0": a if c else b}),
    SCase("SOP1", "S_ABS_I32", (32,), lambda a, c: nz(abs(s32(a)))),
    SCase("SOP1", "S_NOT_B32", (32,), lambda a, c: nz(~a)),
    SCase("SOP1", "S_BCNT1_I32_B64", (64,), lambda a, c: bitcnt(a, 64, True)),
    SCase("SOP1", "S_BCNT0_I32_B32", (32,), lambda a, c: bitcnt(a, 32, False)),
    SCase("SOP1", "S_BREV_B32", (32,), lambda a, c: {"D0": int(f"{a:032b}"[::-1], 2)}),
    SCase("SOPC", "S_CMP_EQ_U64", (64, 64), lg(operator.eq)),
    SCase("SOPC", "S_CMP_LG_U64", (64, 64), lg(operator.ne)),
    SCase("SOPC", "S_BITCMP1_B32", (32, 32), lg(lambda a, b: bool(a >> (b & 31) & 1))),
    SCase("SOPC", "S_BITCMP0_B64", (64, 32), lg(lambda a, b: not a >> (b & 63) & 1)),
    *[SCase("SOPC", f"S_CMP_{p}_{t}32", (32, 32), lg(lambda a, b, fn=fn, t=t: fn(*(
        (s32(a), s32(b)) if t == "I" else (a, b)))))
      for p, fn in (("EQ", operator.eq), ("LG", operator.ne), ("GT", operator.gt), ("GE", operator.ge),
                    ("LT", operator.lt), ("LE", operator.le)) for t in "IU"],
    SCase("SOPK", "S_CMPK_LT_U32", (32, 16), lambda a, k, c: {"SCC": a < k}, keys=("S0", "SIMM16")),
    SCase("SOPK", "S_CMPK_GE_I32", (32, 16), lambda a, k, c: {"SCC": s32(a) >= sext(k, 16)}, keys=("S0", "SIMM16")),
    SCase("SOPK", "S_CMPK_EQ_I32", (32, 16), lambda a, k, c: {"SCC": s32(a) == sext(k, 16)}, keys=("S0", "SIMM16")),
    SCase("SOPK", "S_ADDK_I32", (32, 16), lambda d, k, c: add_i(d, sext(k, 16) & M32), (("rdna4", "S_ADDK_CO_I32"),),
          keys=("D0", "SIMM16")),
    SCase("SOPK", "S_MULK_I32", (32, 16), lambda d, k, c: {"D0": (s32(d) * sext(k, 16)) & M32}, keys=("D0", "SIMM16")),
    SCase("SOPK", "S_MOVK_I32", (16,), lambda k, c: {"D0": sext(k, 16) & M32}, keys=("SIMM16",)),
]


def draw_operands(rng: np.random.Generator, case: SCase) -> list[list[int]]:
    """DRAWS operand sets for a case."""
    vals = [gen_int(b, rng, DRAWS) for b in case.srcs]
    if case.bfe:  # keep the width field S1[22:16] in 0 .. bits - 1 (wider fields are not a defined extract)
        vals[1] = (vals[1] & ~u64(0x7F << 16)) | (rng.integers(0, case.bfe, DRAWS).astype(np.uint64) << u64(16))
    return [list(v) for v in zip(*(x.tolist() for x in vals), strict=True)]


def check_scalar(fam: str, case: SCase, vals: list[int], scc: int):
    name = case.name_in(fam)
    keys = case.keys[:len(vals)]
    if "SIMM16" in keys and "SIMM16" not in compiled(fam, case.space, name).reads:
        # rdna4 / cdna pcode names the 16-bit immediate S0 (S1 when S0 is the register operand)
        keys = tuple(("S1" if "S0" in keys else "S0") if k == "SIMM16" else k for k in keys)
    ops = dict(zip(keys, vals, strict=True))
    out = run(fam, case.space, name, SCC=scc, **ops)
    want = case.ref(*vals, scc)
    dbits = 64 if name.endswith(("_B64", "_I64", "_U64")) and "_I32_" not in name else 32
    for k, w in want.items():
        got = out[k] & ((1 << dbits) - 1) if k == "D0" else bool(out[k])
        assert got == w, (f"{fam} {case.space} {name} {k}: {', '.join(f'{n}={v:#x}' for n, v in ops.items())} "
                          f"SCC={scc} -> got {got:#x}, want {w:#x}")


def cases_of(fam: str) -> list[SCase]:
    from emu.amd import isa
    names = isa.load(fam).by_name
    return [c for c in CASES if (c.space, c.name_in(fam)) in names]


@pytest.mark.parametrize("fam", FAMS)
@PROPS
@given(seed=SEEDS)
def test_scalar_alu(fam: str, seed: int):
    rng = np.random.default_rng(seed)
    for case in cases_of(fam):
        for vals, scc in zip(draw_operands(rng, case), rng.integers(0, 2, DRAWS).tolist(), strict=True):
            check_scalar(fam, case, vals, scc)


def test_cases_exist():
    """Every case exists in each family but what the family dropped (rdna4: the SOPK compares)."""
    for fam in FAMS:
        missing = {c.name_in(fam) for c in CASES} - {c.name_in(fam) for c in cases_of(fam)}
        assert missing == ({"S_CMPK_LT_U32", "S_CMPK_GE_I32", "S_CMPK_EQ_I32"} if fam == "rdna4" else set()), fam


FLOAT_PREDS = {"LT": operator.lt, "EQ": operator.eq, "LE": operator.le, "GT": operator.gt, "GE": operator.ge,
               "LG": lambda a, b: a < b or a > b, "O": lambda a, b: a == a and b == b,
               "U": lambda a, b: a != a or b != b, "NGE": lambda a, b: not a >= b,
               "NLG": lambda a, b: not (a < b or a > b), "NGT": lambda a, b: not a > b,
               "NLE": lambda a, b: not a <= b, "NEQ": lambda a, b: not a == b, "NLT": lambda a, b: not a < b}


def check_float_cmp(fam: str, pred: str, ty: str, a: int, b: int):
    f: Fmt = {"F16": F16, "F32": F32}[ty]
    x, y = to_float([a, b], f).tolist()
    out = run(fam, "SOPC", f"S_CMP_{pred}_{ty}", S0=a, S1=b)
    assert bool(out["SCC"]) == FLOAT_PREDS[pred](x, y), f"{fam} S_CMP_{pred}_{ty} ({a:#x}, {b:#x}) -> {out['SCC']}"


@pytest.mark.parametrize("fam", ("rdna3", "rdna4"))
@PROPS
@given(seed=SEEDS)
def test_scalar_float_compares(fam: str, seed: int):
    """S_CMP_*_F32 / _F16 (SALU float ops of gfx1150 and rdna4) set SCC by IEEE comparison."""
    rng = np.random.default_rng(seed)
    for ty, f in (("F16", F16), ("F32", F32)):
        a, b = gen_float(f, rng)[:DRAWS].tolist(), gen_float(f, rng)[:DRAWS].tolist()
        b[: DRAWS // 2] = a[: DRAWS // 2]  # equal operands in half the draws
        for pred in FLOAT_PREDS:
            for x, y in zip(a, b, strict=True):
                check_float_cmp(fam, pred, ty, x, y)


@pytest.mark.parametrize("fam", ("rdna3", "rdna4"))
def test_scalar_float_compare_regressions(fam: str):
    """Fixed in emu.pcode: `<>` compiled as `!=` (S_CMP_LG / NLG with a NaN operand)."""
    for pred in ("LG", "NLG"):
        check_float_cmp(fam, pred, "F16", 0x4980, 0x7E00)
        check_float_cmp(fam, pred, "F32", 0x41300000, 0x7FC00000)


# ---- SALU float ops (gfx1150 in the rdna3 tables, rdna4) ------------------------------------------------------------

def f_arith(op):
    def one(f: Fmt, x: int, y: int, z: int):
        with np.errstate(all="ignore"):
            r = op(*to_float([x, y], f).astype(f.np))
        return AnyNaN(f) if r != r else int(to_bits([r], f)[0])
    return one


def f_round(op):
    def one(f: Fmt, x: int, y: int, z: int):
        with np.errstate(all="ignore"):
            r = op(to_float([x], f).astype(f.np))[0]
        return AnyNaN(f) if r != r else int(to_bits([r], f)[0])
    return one


def f_to_i32(f: Fmt, x: int, y: int, z: int) -> int:
    v = to_float([x], f)[0]
    return 0 if v != v else int(max(-(2**31), min(2**31 - 1, math.trunc(v) if abs(v) != math.inf else v))) & M32


SFLOAT = [  # (space, name, format, reference, families); FMAC accumulates into D0 (passed as z)
    *[("SOP2", f"S_{op}_{t}", fm, f_arith(fn), ("rdna3", "rdna4")) for op, fn in
      (("ADD", np.add), ("SUB", np.subtract), ("MUL", np.multiply)) for t, fm in (("F32", F32), ("F16", F16))],
    ("SOP2", "S_FMAC_F32", F32, lambda f, x, y, z: (lambda r: AnyNaN(f) if r is None else r)(fma_ref(x, y, z, f)),
     ("rdna3", "rdna4")),
    ("SOP2", "S_MIN_F32", F32, lambda f, x, y, z: minmax_ref("legacy", False, f, x, y), ("rdna3",)),
    ("SOP2", "S_MAX_F16", F16, lambda f, x, y, z: minmax_ref("legacy", True, f, x, y), ("rdna3",)),
    ("SOP2", "S_MIN_NUM_F32", F32, lambda f, x, y, z: minmax_ref("num", False, f, x, y), ("rdna4",)),
    ("SOP2", "S_MAXIMUM_F16", F16, lambda f, x, y, z: minmax_ref("minimum", True, f, x, y), ("rdna4",)),
    *[("SOP1", f"S_{op}_{t}", fm, f_round(fn), ("rdna3", "rdna4")) for op, fn in
      (("FLOOR", np.floor), ("CEIL", np.ceil), ("TRUNC", np.trunc)) for t, fm in (("F32", F32), ("F16", F16))],
    ("SOP1", "S_CVT_I32_F32", F32, f_to_i32, ("rdna3", "rdna4")),
]


@pytest.mark.parametrize("fam", ("rdna3", "rdna4"))
@PROPS
@given(seed=SEEDS)
def test_scalar_float_ops(fam: str, seed: int):
    """SALU float arithmetic (IEEE, round to nearest even, MODE with denormals and IEEE mode) on DRAWS operand
    sets per example."""
    rng = np.random.default_rng(seed)
    for space, name, f, ref, fams in SFLOAT:
        if fam not in fams:
            continue
        ops = [gen_float(f, rng)[:DRAWS].tolist() for _ in range(3)]
        for x, y, z in zip(*ops, strict=True):
            out = run(fam, space, name, S0=x, S1=y, D0=z)
            got = out["D0"] & f.mask if name != "S_CVT_I32_F32" else out["D0"] & M32
            want = ref(f, x, y, z)
            assert accepts(want, got), f"{fam} {name} (S0={x:#x}, S1={y:#x}, D0={z:#x}) -> {got:#x}, want {want!r}"
