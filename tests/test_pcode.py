"""emu.pcode: front end, coverage of the vendor tables, and representative semantics checked against numpy."""
from fractions import Fraction

import numpy as np
import pytest

from emu.amd import isa
from emu.pcode import Unsupported, compile_op
from emu.pcode import syntax as S
from emu.pcode.coverage import coverage
from emu.pcode.syntax import PcodeSyntaxError, parse, tokenize

LANES = 32
rng = np.random.default_rng(1234)


def bits32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32).view(np.uint32).astype(np.uint64)


def f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.uint32).view(np.float32)


def round_f32(x: Fraction) -> np.float32:
    """x rounded to the nearest float32, ties to even (independent of numpy's casts)."""
    c = np.float32(float(x))
    cands = [np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))]
    return min(cands, key=lambda v: (abs(Fraction(float(v)) - x), int(np.float32(v).view(np.uint32)) & 1))


def lane_mask(b: np.ndarray) -> int:
    return sum(1 << i for i, v in enumerate(b) if v)


# ---- front end ------------------------------------------------------------------------------------------------

def test_tokens_sized_literals_and_casts():
    toks = tokenize("16'0U 1'1U 8'0xff 16'1.0 32'I(x) 0x100000000ULL 4LL 0.5F")
    assert [t.kind for t in toks[:-1]] == ["sized", "sized", "sized", "sized", "type", "op", "id", "op",
                                          "num", "num", "num"]
    assert toks[0].value == (0, "u", 16) and toks[1].value == (1, "u", 1) and toks[2].value == (255, None, 8)
    assert toks[3].value == (1.0, "f", 16) and toks[4].value == (32, "i")
    assert toks[8].value == (1 << 32, "u", 64) and toks[9].value == (4, "i", 64) and toks[10].value == (0.5, "f", 32)


def test_parse_statements_and_precedence():
    tree = parse("tmp = S0.u32[31 : 16] + 2 * x ** 3;\nif a && b then\nD0.f32 = c ? d : e\nelsif f\n"
                 "D0 = { 16'0U, S0.u16 }\nelse\nfor i in 0 : WAVE64 ? 63 : 31 do\nbreak\nendfor\nendif")
    a, b = tree
    assert isinstance(a, S.Assign) and isinstance(a.value, S.Binary) and a.value.op == "+"
    assert isinstance(a.value.a, S.Slice) and isinstance(a.value.b.b, S.Binary) and a.value.b.b.op == "**"
    assert isinstance(b, S.If) and len(b.arms) == 2 and isinstance(b.arms[0][1][0].value, S.Ternary)
    loop = b.orelse[0]
    assert isinstance(loop, S.For) and isinstance(loop.hi, S.Ternary) and isinstance(loop.body[0], S.Break)


def test_parse_lambda_declare_partselect_compound():
    tree = parse("F = lambda(a, b) (a > b ? a - b : b - a);\ndeclare t : 32'B[4];\nx[i * 4 +: 4] += F(1, 2)")
    assert isinstance(tree[0].value, S.Lambda) and tree[0].value.params == ("a", "b")
    assert tree[1] == S.Declare("t", 32, "b", 4)
    assert tree[2].op == "+=" and isinstance(tree[2].target, S.PartSelect)


@pytest.mark.parametrize("text, where", [("D0 = (S0.u32", "line 1 col 13"), ("if x then\nD0 = 1", "line 2 col 7"),
                                         ("D0 = 3 $ 4", "line 1 col 8")])
def test_parse_errors_name_the_place(text, where):
    with pytest.raises(PcodeSyntaxError, match=where):
        parse(text)


def test_unknown_instruction_is_unsupported():
    with pytest.raises(Unsupported, match="no instruction"):
        compile_op("rdna3", "VOP2", "V_NO_SUCH_OP")


# ---- coverage of the vendor tables ------------------------------------------------------------------------------

@pytest.mark.parametrize("fam", ["rdna3", "rdna4", "cdna"])
def test_coverage(fam):
    r = coverage(fam)
    assert r["total"] == sum(1 for o in isa.load(fam).ops.values() if o.pcode)
    assert r["parsed"] == r["total"], {k: v for k, v in r["failing"].items() if "parse" in v}
    assert r["compiled"] >= 0.97 * r["total"], r["failing"]
    assert len(r["failing"]) == r["total"] - r["compiled"]


# ---- semantics against numpy --------------------------------------------------------------------------------------

class FakeMem:
    """Byte-addressed little-endian memory; records the order of accesses."""

    def __init__(self, size: int = 256):
        self.b = bytearray(size)
        self.log: list[tuple[str, int]] = []

    def load(self, addr, bits, active):
        out = np.zeros(len(addr), np.uint64)
        for i in np.flatnonzero(active):
            a = int(addr[i])
            out[i] = int.from_bytes(self.b[a:a + bits // 8], "little")
            self.log.append(("load", i))
        return out

    def store(self, addr, bits, value, active):
        for i in np.flatnonzero(active):
            a = int(addr[i])
            self.b[a:a + bits // 8] = int(value[i]).to_bytes(bits // 8, "little")
            self.log.append(("store", i))

    def u32(self, a: int) -> int:
        return int.from_bytes(self.b[a:a + 4], "little")


def test_v_add_f32():
    a, b = rng.standard_normal(LANES, np.float32), rng.standard_normal(LANES, np.float32)
    a[:4] = [np.inf, -0.0, np.nan, 1e-40]
    b[:4] = [-np.inf, -0.0, 1.0, 1e-40]
    sem = compile_op("rdna3", "VOP2", "V_ADD_F32")
    assert sem.reads == {"S0", "S1"} and sem.writes == {"D0"} and sem.widths["D0"] == 32
    got = f32(sem({"S0": bits32(a), "S1": bits32(b)}, LANES)["D0"])
    np.testing.assert_array_equal(got.view(np.uint32)[[0, 1, 3]], (a + b).view(np.uint32)[[0, 1, 3]])
    assert np.isnan(got[2]) and np.array_equal(got[4:], a[4:] + b[4:])


def test_v_add_co_u32_carry_in_vcc():
    x = rng.integers(0, 1 << 32, LANES, dtype=np.uint64)
    y = rng.integers(0, 1 << 32, LANES, dtype=np.uint64)
    sem = compile_op("rdna3", "VOP3SD", "V_ADD_CO_U32")
    assert sem.writes == {"D0", "VCC"}
    out = sem({"S0": x, "S1": y}, LANES)
    np.testing.assert_array_equal(out["D0"], (x + y) & 0xFFFFFFFF)
    assert out["VCC"] == lane_mask((x + y) >> 32)


def test_s_add_u32_scc():
    sem = compile_op("rdna3", "SOP2", "S_ADD_U32")
    assert sem.reads == {"S0", "S1"} and sem.writes == {"D0", "SCC"}
    for a, b in [(0xFFFFFFFF, 1), (5, 7), (0x80000000, 0x80000000), (0, 0)]:
        assert sem({"S0": a, "S1": b}, 32) == {"D0": (a + b) & 0xFFFFFFFF, "SCC": int(a + b > 0xFFFFFFFF)}


def test_v_cmp_lt_f32_mask():
    a, b = rng.standard_normal(LANES, np.float32), rng.standard_normal(LANES, np.float32)
    a[0], b[1] = np.nan, np.nan
    sem = compile_op("rdna3", "VOPC", "V_CMP_LT_F32")
    out = sem({"S0": bits32(a), "S1": bits32(b)}, LANES)
    assert out["D0"] == lane_mask(a < b)


def test_ds_add_u32_duplicate_addresses_serialize():
    mem = FakeMem()
    addr = np.array([0, 4, 0, 8] * 8, np.uint64)
    data = np.arange(1, LANES + 1, dtype=np.uint64)
    active = np.ones(LANES, bool)
    active[5] = False
    sem = compile_op("rdna3", "DS", "DS_ADD_U32")
    assert {"MEM", "ADDR", "DATA"} <= sem.reads and {"MEM", "RETURN_DATA"} <= sem.writes
    out = sem({"MEM": mem, "ADDR": addr, "DATA": data, "ACTIVE": active}, LANES)
    expect_mem, ret = {0: 0, 4: 0, 8: 0}, np.zeros(LANES, np.uint64)
    for i in np.flatnonzero(active):  # lanes in order, each sees the sum of the earlier ones
        ret[i] = expect_mem[int(addr[i])]
        expect_mem[int(addr[i])] += int(data[i])
    assert {a: mem.u32(a) for a in (0, 4, 8)} == expect_mem
    np.testing.assert_array_equal(out["RETURN_DATA"][active], ret[active])
    assert ("load", 5) not in mem.log and ("store", 5) not in mem.log


def test_v_fma_f32_single_rounding():
    a = rng.standard_normal(LANES).astype(np.float32)
    b = rng.standard_normal(LANES).astype(np.float32)
    c = rng.standard_normal(LANES).astype(np.float32)
    # a*b + c where rounding a*b first would change the result
    a[0], b[0], c[0] = np.float32(1 + 2 ** -12), np.float32(1 + 2 ** -12), np.float32(-1.0)
    sem = compile_op("rdna3", "VOP3", "V_FMA_F32")
    got = f32(sem({"S0": bits32(a), "S1": bits32(b), "S2": bits32(c)}, LANES)["D0"])
    expect = [round_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c,
                                                                                                     strict=True)]
    np.testing.assert_array_equal(got, np.array(expect, np.float32))
    assert got[0] != np.float32(a[0] * b[0]) + c[0]


def test_v_cvt_f16_f32_rounds_nearest_even():
    x = np.concatenate([rng.standard_normal(LANES - 6).astype(np.float32) * 1000,
                        np.array([65520.0, 1e-8, -0.0, np.inf, 2049.0, 2051.0], np.float32)])
    sem = compile_op("rdna3", "VOP1", "V_CVT_F16_F32")
    got = sem({"S0": bits32(x)}, LANES)["D0"]
    np.testing.assert_array_equal(got, x.astype(np.float16).view(np.uint16).astype(np.uint64))


def test_s_cvt_pk_rtz_rounds_toward_zero():
    sem = compile_op("rdna3", "SOP2", "S_CVT_PK_RTZ_F16_F32")
    lo, hi = np.float32(2049.0), np.float32(-65520.0)  # nearest-even would give 2050 and -inf
    out = sem({"S0": int(bits32(np.array([lo]))[0]), "S1": int(bits32(np.array([hi]))[0]), "MODE": 0}, 32)["D0"]
    assert np.uint16(out & 0xFFFF).view(np.float16) == 2048.0
    assert np.uint16(out >> 16).view(np.float16) == np.float16(-65504.0)


def test_v_cndmask_reads_vcc_per_lane_and_v_bfe_i32():
    s0 = rng.integers(0, 1 << 32, LANES, dtype=np.uint64)
    s1 = rng.integers(0, 1 << 32, LANES, dtype=np.uint64)
    vcc = 0x5A5A_0F0F
    out = compile_op("rdna3", "VOP2", "V_CNDMASK_B32")({"S0": s0, "S1": s1, "VCC": vcc}, LANES)["D0"]
    np.testing.assert_array_equal(out, np.where((vcc >> np.arange(LANES)) & 1, s1, s0))
    off, width = rng.integers(0, 32, LANES, dtype=np.uint64), rng.integers(0, 33, LANES, dtype=np.uint64)
    got = compile_op("rdna3", "VOP3", "V_BFE_I32")({"S0": s0, "S1": off, "S2": width}, LANES)["D0"]
    for i in range(LANES):
        o, w = int(off[i]) & 31, int(width[i]) & 31
        s = int(s0[i]) - (1 << 32) * (int(s0[i]) >> 31)  # the field is taken after an arithmetic shift
        f = (s >> o) & ((1 << w) - 1)
        v = (f - (1 << w) if w and f >> (w - 1) else f) if w else 0
        assert int(got[i]) == v & 0xFFFFFFFF, i


def test_v_clz_loop_with_break():
    x = rng.integers(0, 1 << 32, LANES, dtype=np.uint64) >> rng.integers(0, 33, LANES, dtype=np.uint64)
    x[0] = 0
    got = compile_op("rdna3", "VOP1", "V_CLZ_I32_U32")({"S0": x}, LANES)["D0"]
    expect = [32 - int(v).bit_length() if v else 0xFFFFFFFF for v in x]
    np.testing.assert_array_equal(got, np.array(expect, np.uint64))
