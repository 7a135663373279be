"""Property tests: compiled vector integer ALU semantics against Python-integer references (issue 3, item 5).

Each example is one wave of random lanes; references are written from the ISA's meaning with exact Python ints.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from pcode_refs import (
    LANES,
    MASKS,
    PROPS,
    SEEDS,
    check,
    compiled,
    gen_int,
    lane_bits,
    lane_ints,
    run,
    sext,
    u64,
)

M16, M32, M64 = (1 << 16) - 1, (1 << 32) - 1, (1 << 64) - 1


@dataclass(frozen=True)
class Case:
    space: str
    name: str
    srcs: tuple[int, ...]  # bit width of S0, S1, S2
    ref: Callable  # (S0, S1, S2..., carry_in) -> {'D0': int, 'VCC'/'D1': bool}
    dbits: int = 32
    names: tuple[tuple[str, str], ...] = ()  # family -> name where the family renamed the op

    def name_in(self, fam: str) -> str:
        return dict(self.names).get(fam, self.name)


def carry(total: int, bits: int = 32) -> dict:
    return {"D0": total & ((1 << bits) - 1), "VCC": total >> bits != 0}


def borrow(a: int, b: int, cin: int = 0) -> dict:
    return {"D0": (a - b - cin) & M32, "VCC": b + cin > a}


def bfe_s(x: int, off: int, width: int) -> int:
    f = (sext(x, 32) >> off) & ((1 << width) - 1)
    return sext(f, width) & M32 if width else 0


def mad64(s: int) -> dict:
    return {"D0": s & M64, "D1": bool(s >> 64 & 1)}


def med3(a, b, c):
    return sorted((a, b, c))[1]


def s32(x):
    return sext(x, 32)


def s16(x):
    return sext(x, 16)


def s24(x):
    return sext(x, 24)


CASES = [
    # carry / borrow out (VCC) and in (VCC read as the carry in)
    Case("VOP3SD", "V_ADD_CO_U32", (32, 32), lambda a, b, c: carry(a + b)),
    Case("VOP3SD", "V_SUB_CO_U32", (32, 32), lambda a, b, c: borrow(a, b)),
    Case("VOP3SD", "V_SUBREV_CO_U32", (32, 32), lambda a, b, c: borrow(b, a)),
    Case("VOP2", "V_ADD_CO_CI_U32", (32, 32), lambda a, b, c: carry(a + b + c), names=(("cdna", "V_ADDC_CO_U32"),)),
    Case("VOP3SD", "V_ADD_CO_CI_U32", (32, 32), lambda a, b, c: carry(a + b + c),
         names=(("cdna", "V_ADDC_CO_U32"),)),
    Case("VOP2", "V_SUB_CO_CI_U32", (32, 32), lambda a, b, c: borrow(a, b, c), names=(("cdna", "V_SUBB_CO_U32"),)),
    Case("VOP3SD", "V_SUBREV_CO_CI_U32", (32, 32), lambda a, b, c: borrow(b, a, c),
         names=(("cdna", "V_SUBBREV_CO_U32"),)),
    Case("VOP2", "V_ADD_NC_U32", (32, 32), lambda a, b, c: {"D0": (a + b) & M32}, names=(("cdna", "V_ADD_U32"),)),
    Case("VOP2", "V_SUB_NC_U32", (32, 32), lambda a, b, c: {"D0": (a - b) & M32}, names=(("cdna", "V_SUB_U32"),)),
    Case("VOP3", "V_ADD3_U32", (32, 32, 32), lambda a, b, c, _: {"D0": (a + b + c) & M32}),
    Case("VOP3", "V_XAD_U32", (32, 32, 32), lambda a, b, c, _: {"D0": ((a ^ b) + c) & M32}),
    Case("VOP3", "V_ADD_NC_U16", (16, 16), lambda a, b, c: {"D0": (a + b) & M16}, 16),
    Case("VOP3", "V_SUB_NC_U16", (16, 16), lambda a, b, c: {"D0": (a - b) & M16}, 16),
    # shifts: only the low log2(width) bits of the count are used
    Case("VOP2", "V_LSHLREV_B32", (32, 32), lambda a, b, c: {"D0": (b << (a & 31)) & M32}),
    Case("VOP2", "V_LSHRREV_B32", (32, 32), lambda a, b, c: {"D0": b >> (a & 31)}),
    Case("VOP2", "V_ASHRREV_I32", (32, 32), lambda a, b, c: {"D0": (s32(b) >> (a & 31)) & M32}),
    Case("VOP3", "V_LSHLREV_B64", (32, 64), lambda a, b, c: {"D0": (b << (a & 63)) & M64}, 64),
    Case("VOP3", "V_LSHRREV_B64", (32, 64), lambda a, b, c: {"D0": b >> (a & 63)}, 64),
    Case("VOP3", "V_ASHRREV_I64", (32, 64), lambda a, b, c: {"D0": (sext(b, 64) >> (a & 63)) & M64}, 64),
    Case("VOP3", "V_LSHLREV_B16", (16, 16), lambda a, b, c: {"D0": (b << (a & 15)) & M16}, 16),
    Case("VOP3", "V_LSHRREV_B16", (16, 16), lambda a, b, c: {"D0": b >> (a & 15)}, 16),
    Case("VOP3", "V_ASHRREV_I16", (16, 16), lambda a, b, c: {"D0": (s16(b) >> (a & 15)) & M16}, 16),
    Case("VOP3", "V_ALIGNBIT_B32", (32, 32, 32), lambda a, b, c, _: {"D0": (((a << 32) | b) >> (c & 31)) & M32}),
    Case("VOP3", "V_LSHL_ADD_U32", (32, 32, 32), lambda a, b, c, _: {"D0": ((a << (b & 31)) + c) & M32}),
    Case("VOP3", "V_ADD_LSHL_U32", (32, 32, 32), lambda a, b, c, _: {"D0": ((a + b) << (c & 31)) & M32}),
    Case("VOP3", "V_LSHL_OR_B32", (32, 32, 32), lambda a, b, c, _: {"D0": ((a << (b & 31)) | c) & M32}),
    # bit fields
    Case("VOP3", "V_BFE_U32", (32, 32, 32), lambda a, b, c, _: {"D0": (a >> (b & 31)) & ((1 << (c & 31)) - 1)}),
    Case("VOP3", "V_BFE_I32", (32, 32, 32), lambda a, b, c, _: {"D0": bfe_s(a, b & 31, c & 31)}),
    Case("VOP3", "V_BFI_B32", (32, 32, 32), lambda a, b, c, _: {"D0": (a & b) | (~a & c & M32)}),
    Case("VOP3", "V_BFM_B32", (32, 32), lambda a, b, c: {"D0": (((1 << (a & 31)) - 1) << (b & 31)) & M32}),
    # multiplies
    Case("VOP3", "V_MUL_LO_U32", (32, 32), lambda a, b, c: {"D0": (a * b) & M32}),
    Case("VOP3", "V_MUL_HI_U32", (32, 32), lambda a, b, c: {"D0": (a * b) >> 32}),
    Case("VOP3", "V_MUL_HI_I32", (32, 32), lambda a, b, c: {"D0": ((s32(a) * s32(b)) >> 32) & M32}),
    Case("VOP2", "V_MUL_U32_U24", (32, 32), lambda a, b, c: {"D0": ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & M32}),
    Case("VOP2", "V_MUL_HI_U32_U24", (32, 32), lambda a, b, c: {"D0": ((a & 0xFFFFFF) * (b & 0xFFFFFF)) >> 32}),
    Case("VOP2", "V_MUL_I32_I24", (32, 32), lambda a, b, c: {"D0": (s24(a) * s24(b)) & M32}),
    Case("VOP2", "V_MUL_HI_I32_I24", (32, 32), lambda a, b, c: {"D0": ((s24(a) * s24(b)) >> 32) & M32}),
    Case("VOP3", "V_MAD_U32_U24", (32, 32, 32),
         lambda a, b, c, _: {"D0": ((a & 0xFFFFFF) * (b & 0xFFFFFF) + c) & M32}),
    Case("VOP3", "V_MAD_I32_I24", (32, 32, 32), lambda a, b, c, _: {"D0": (s24(a) * s24(b) + s32(c)) & M32}),
    Case("VOP3", "V_MAD_U32_U16", (32, 32, 32), lambda a, b, c, _: {"D0": ((a & M16) * (b & M16) + c) & M32}),
    Case("VOP3", "V_MAD_I32_I16", (32, 32, 32), lambda a, b, c, _: {"D0": (s16(a) * s16(b) + s32(c)) & M32}),
    Case("VOP3", "V_MAD_U16", (16, 16, 16), lambda a, b, c, _: {"D0": (a * b + c) & M16}, 16),
    Case("VOP3", "V_MUL_LO_U16", (16, 16), lambda a, b, c: {"D0": (a * b) & M16}, 16),
    Case("VOP3SD", "V_MAD_U64_U32", (32, 32, 64), lambda a, b, c, _: mad64(a * b + c), 64,
         names=(("rdna4", "V_MAD_CO_U64_U32"),)),
    Case("VOP3SD", "V_MAD_I64_I32", (32, 32, 64), lambda a, b, c, _: mad64(s32(a) * s32(b) + sext(c, 64)), 64,
         names=(("rdna4", "V_MAD_CO_I64_I32"),)),
    # min / max / median
    Case("VOP2", "V_MIN_I32", (32, 32), lambda a, b, c: {"D0": min(s32(a), s32(b)) & M32}),
    Case("VOP2", "V_MAX_U32", (32, 32), lambda a, b, c: {"D0": max(a, b)}),
    Case("VOP3", "V_MED3_I32", (32, 32, 32), lambda a, b, c, _: {"D0": med3(s32(a), s32(b), s32(c)) & M32}),
    Case("VOP3", "V_MED3_U32", (32, 32, 32), lambda a, b, c, _: {"D0": med3(a, b, c)}),
    Case("VOP3", "V_MIN3_U32", (32, 32, 32), lambda a, b, c, _: {"D0": min(a, b, c)}),
    Case("VOP3", "V_MAX3_I32", (32, 32, 32), lambda a, b, c, _: {"D0": max(s32(a), s32(b), s32(c)) & M32}),
    Case("VOP3", "V_MAX_I16", (16, 16), lambda a, b, c: {"D0": max(s16(a), s16(b)) & M16}, 16),
    Case("VOP3", "V_MIN_U16", (16, 16), lambda a, b, c: {"D0": min(a, b)}, 16),
]
# the representative subset run on rdna4 and cdna too (same ISA meaning)
SUBSET = {"V_ADD_CO_U32", "V_SUB_CO_CI_U32", "V_SUBREV_CO_CI_U32", "V_ADD_CO_CI_U32", "V_LSHLREV_B64",
          "V_ASHRREV_I64", "V_ASHRREV_I32", "V_BFE_I32", "V_BFE_U32", "V_MUL_HI_I32", "V_MUL_HI_U32_U24",
          "V_MAD_U64_U32", "V_MAD_I64_I32", "V_MED3_I32", "V_LSHRREV_B16"}


def cases_of(fam: str) -> list[Case]:
    return [c for c in CASES if fam == "rdna3" or c.name in SUBSET]


def check_case(fam: str, case: Case, srcs: list[np.ndarray], vcc: int):
    name = case.name_in(fam)
    ops = {f"S{i}": s for i, s in enumerate(srcs)}
    out = run(fam, case.space, name, VCC=vcc, **ops)
    cin = lane_bits(vcc).astype(int).tolist()
    lanes = [case.ref(*vals) for vals in zip(*[s.tolist() for s in srcs], cin, strict=True)]
    inputs = ops | ({"VCC": cin} if "VCC" in compiled(fam, case.space, name).reads else {})
    for key in lanes[0]:
        want = np.array([r[key] for r in lanes], dtype=np.uint64 if key == "D0" else bool)
        got = lane_ints(out["D0"], case.dbits) if key == "D0" else lane_bits(out[key])
        check(f"{fam} {case.space} {name} {key}", got, want, inputs)


def draw_waves(seed: int) -> dict[int, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return {b: [gen_int(b, rng) for _ in range(3)] for b in (16, 32, 64)}


@pytest.mark.parametrize("fam", ["rdna3", "rdna4", "cdna"])
@PROPS
@given(seed=SEEDS, vcc=MASKS)
def test_vector_int(fam: str, seed: int, vcc: int):
    """Every case of the family's list on the same random wave (so each op sees 200 waves)."""
    waves = draw_waves(seed)
    for case in cases_of(fam):
        check_case(fam, case, [waves[b][i] for i, b in enumerate(case.srcs)], vcc)


def test_subset_exists_in_every_family():
    """The rdna4/cdna subset must exist under the names the table gives (no silent skips)."""
    from emu.amd import isa
    for fam in ("rdna3", "rdna4", "cdna"):
        names = isa.load(fam).by_name
        missing = [c.name_in(fam) for c in cases_of(fam) if (c.space, c.name_in(fam)) not in names]
        assert not missing, f"{fam}: {missing}"


def test_carry_chain_64bit_add():
    """V_ADD_CO_U32 then V_ADD_CO_CI_U32 on the high halves adds 64-bit numbers (carry flows through VCC)."""
    a = u64([0xFFFFFFFF_FFFFFFFF, 0x1_FFFFFFFF, 0x7FFFFFFF_80000000, 12345] * (LANES // 4))
    b = u64([1, 1, 0x80000000, 0xFFFFFFFF_00000000] * (LANES // 4))
    lo = run("rdna3", "VOP3SD", "V_ADD_CO_U32", S0=a & u64(M32), S1=b & u64(M32))
    hi = run("rdna3", "VOP2", "V_ADD_CO_CI_U32", S0=a >> u64(32), S1=b >> u64(32), VCC=lo["VCC"])
    got = (lane_ints(hi["D0"], 32) << u64(32)) | lane_ints(lo["D0"], 32)
    assert got.tolist() == [(x + y) & M64 for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    assert lane_bits(hi["VCC"]).tolist() == [x + y > M64 for x, y in zip(a.tolist(), b.tolist(), strict=True)]
