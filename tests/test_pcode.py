"""emu.pcode: front end, coverage of the vendor tables, and representative semantics checked against numpy."""
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_round_trip_every_vendor_text():
    """parse(unparse(tree)) == tree for every entry of the three tables that is pcode (prose excluded)."""
    texts = {o.pcode for fam in ("rdna3", "rdna4", "cdna") for o in isa.load(fam).ops.values() if o.pcode}
    done = 0
    for text in sorted(texts):
        try:
            tree = parse(text)
        except PcodeSyntaxError:
            continue
        assert parse(S.unparse(tree)) == tree, text
        done += 1
    assert done > 0.97 * len(texts)


_PIECES = ["D0", ".u32", ".f16", "[", "]", "31", " : ", "0", "(", ")", "{", "}", ",", "=", "+=", " + ", " ? ", "'",
           "16'", "0x1fU", "1.5F", "if ", " then\n", "elsif ", "else\n", "endif", "for i in ", " do\n", "endfor",
           ";\n", "lambda(a) (", "declare x : 32'U[4]", "MEM[ADDR]", "\"s\"", "//c\n", "$", "-", "!", "~", "**"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_parser_rejects_bad_text_cleanly(pieces):
    text = "".join(pieces)
    try:
        tree = parse(text)
    except PcodeSyntaxError as e:
        assert "line " in str(e) and " col " in str(e)
        return
    assert parse(S.unparse(tree)) == tree


def test_coverage_cli_json(capsys):
    from emu.pcode.coverage import main
    assert main(["--arch", "gfx1100", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r) == {"arch", "total", "parsed", "compiled", "fixups", "failing"} and r["arch"] == "rdna3"
    assert main(["--arch", "gfx9999"]) == 2


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
    assert sem.reads == {"S0", "S1", "MODE"} and sem.writes == {"D0"} and sem.widths["D0"] == 32
    got = f32(sem({"S0": bits32(a), "S1": bits32(b)}, LANES)["D0"])
    with np.errstate(invalid="ignore"):
        expect = a + b
    np.testing.assert_array_equal(got.view(np.uint32)[[0, 1, 3]], expect.view(np.uint32)[[0, 1, 3]])
    assert np.isnan(got[2]) and np.array_equal(got[4:], expect[4:])


def test_v_add_co_u32_carry_in_vcc():
    x = rng.integers(0, 1 << 32, LANES, dtype=np.uint64)
    y = rng.integers(0, 1 << 32, LANES, dtype=np.uint64)
    sem = compile_op("rdna3", "VOP3SD", "V_ADD_CO_U32")
    assert sem.writes == {"D0", "VCC"}
    out = sem({"S0": x, "S1": y, "CLAMP": 0}, LANES)
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
    with np.errstate(over="ignore"):
        expect = x.astype(np.float16).view(np.uint16).astype(np.uint64)
    np.testing.assert_array_equal(got, expect)


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


# ---- matrix ops: the generated pcode against numpy, operands placed by the layout emu.pcode.matrix documents ----

def _mfma_place(M, N, K, B, lanes=64):
    """Lane/register/item of A[b][i][k], B[b][k][j] and D[b][i][j] (register-major element index)."""
    T = K * M // 64 if B == 1 else K
    a = {(b, i, k): [(i + M * (b if B > 1 else k // T), k if B > 1 else k % T)]
         for b in range(B) for i in range(M) for k in range(K)}
    bb = {(b, k, j): [(j + N * (b if B > 1 else k // T), k if B > 1 else k % T)]
          for b in range(B) for k in range(K) for j in range(N)}
    d = {}
    for r in range(M * N * B // 64):
        for lane in range(lanes):
            j = lane % N
            if B * N == 64:
                b, i = lane // N, r
            else:
                R = M * N // 64
                b, q = r // R, r % R
                i = 4 * ((64 // N) * (q // 4) + lane // N) + q % 4
            d[(b, i, j)] = (lane, r)
    return a, bb, d


def _run_matrix(arch, name, M, N, K, B, place, elem_bits, conv, lanes):
    a_at, b_at, d_at = place
    A = rng.integers(-4, 5, (B, M, K)).astype(np.float64)
    Bm = rng.integers(-4, 5, (B, K, N)).astype(np.float64)
    C = rng.integers(-50, 50, (B, M, N)).astype(np.float64)
    vgpr = np.zeros((lanes, 256), np.uint32)
    src0, src1, src2, vdst = 0, 32, 64, 128
    per = 32 // elem_bits
    for (b, i, k), places in a_at.items():
        for lane, t in places:
            vgpr[lane, src0 + t // per] |= np.uint32(conv(A[b, i, k]) << (elem_bits * (t % per)))
    for (b, k, j), places in b_at.items():
        for lane, t in places:
            vgpr[lane, src1 + t // per] |= np.uint32(conv(Bm[b, k, j]) << (elem_bits * (t % per)))
    for (b, i, j), (lane, r) in d_at.items():
        vgpr[lane, src2 + r] = np.float32(C[b, i, j]).view(np.uint32)
    sem = compile_op(arch, "VOP3P", name)
    assert {"VGPR", "SRC0", "SRC1", "SRC2", "VDST"} <= sem.reads and "VGPR" in sem.writes
    sem({"VGPR": vgpr, "SRC0": src0, "SRC1": src1, "SRC2": src2, "VDST": vdst, "ACTIVE": np.ones(lanes, bool)},
        lanes)
    expect = A @ Bm + C
    got = np.zeros_like(expect)
    for (b, i, j), (lane, r) in d_at.items():
        got[b, i, j] = vgpr[lane, vdst + r].view(np.float32)
    np.testing.assert_array_equal(got, expect)  # small integers: exact in every order


def _f16(v: float) -> int:
    return int(np.float16(v).view(np.uint16))


@pytest.mark.parametrize("name, M, N, K, B", [("V_MFMA_F32_32X32X8_F16", 32, 32, 8, 1),
                                              ("V_MFMA_F32_16X16X16_F16", 16, 16, 16, 1),
                                              ("V_MFMA_F32_4X4X4_16B_F16", 4, 4, 4, 16),
                                              ("V_MFMA_F32_32X32X4_2B_F16", 32, 32, 4, 2)])
def test_mfma_f16_against_numpy(name, M, N, K, B):
    _run_matrix("cdna", name, M, N, K, B, _mfma_place(M, N, K, B), 16, _f16, 64)


def test_wmma_rdna3_f16_against_numpy():
    a = {(0, i, k): [(i, k), (i + 16, k)] for i in range(16) for k in range(16)}  # lanes 16..31 repeat 0..15
    b = {(0, k, j): [(j, k), (j + 16, k)] for j in range(16) for k in range(16)}
    d = {(0, i, j): (j + 16 * (i % 2), i // 2) for i in range(16) for j in range(16)}
    _run_matrix("rdna3", "V_WMMA_F32_16X16X16_F16", 16, 16, 16, 1, (a, b, d), 16, _f16, 32)


def test_wmma_rdna4_f16_against_numpy():
    a = {(0, i, k): [(i + 16 * (k // 8), k % 8)] for i in range(16) for k in range(16)}
    b = {(0, k, j): [(j + 16 * (k // 8), k % 8)] for j in range(16) for k in range(16)}
    d = {(0, i, j): (j + 16 * (i // 8), i % 8) for i in range(16) for j in range(16)}
    _run_matrix("rdna4", "V_WMMA_F32_16X16X16_F16", 16, 16, 16, 1, (a, b, d), 16, _f16, 32)


# ---- more semantics ------------------------------------------------------------------------------------------------

def test_fp8_bf8_conversions_ocp():
    sem = compile_op("rdna4", "VOP1", "V_CVT_F32_FP8")
    codes = np.arange(256, dtype=np.uint64)
    vgpr = np.zeros((256, 4), np.uint32)
    vgpr[:, 1] = codes.astype(np.uint32)
    got = f32(sem({"VGPR": vgpr, "SRC0": 1, "OPSEL": 0}, 256)["D0"])
    for c in range(256):  # E4M3: bias 7, no infinities, 0x7f / 0xff NaN
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        v = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        if c & 0x7F == 0x7F:
            assert np.isnan(got[c])
        else:
            assert got[c] == (-v if s else v), c
    pk = compile_op("rdna4", "VOP3", "V_CVT_PK_FP8_F32")
    x = np.array([1.0, 448.0, 1.0625, 2.0 ** -9, -3.5, 1e6, np.nan, -0.0] * 4, np.float32)
    vgpr = np.zeros((32, 4), np.uint32)
    pk({"VGPR": vgpr, "VDST": 2, "S0": bits32(x), "S1": bits32(x), "OPSEL": 0, "MODE": 0,
        "ACTIVE": np.ones(32, bool)}, 32)
    np.testing.assert_array_equal(vgpr[:8, 2] & 0xFF, [0x38, 0x7E, 0x38, 0x01, 0xC6, 0x7F, 0x7F, 0x80])


def test_ds_load_d16_keeps_the_other_half_and_b128_loads():
    mem = FakeMem()
    mem.b[0:16] = bytes(range(1, 17))
    sem = compile_op("rdna3", "DS", "DS_LOAD_U16_D16_HI")
    assert "RETURN_DATA" in sem.reads
    out = sem({"MEM": mem, "ADDR": np.zeros(4, np.uint64), "RETURN_DATA": np.full(4, 0xAAAABBBB, np.uint64)}, 4)
    np.testing.assert_array_equal(out["RETURN_DATA"], np.full(4, 0x0201BBBB, np.uint64))
    sem = compile_op("rdna3", "DS", "DS_LOAD_B128")
    assert sem.widths["RETURN_DATA"] == 128
    out = sem({"MEM": mem, "ADDR": np.zeros(2, np.uint64), "OFFSET": 0}, 2)["RETURN_DATA"]
    assert out.shape == (4, 2) and [int(w) for w in out[:, 1]] == [0x04030201, 0x08070605, 0x0C0B0A09, 0x100F0E0D]


def test_readlane_and_div_scale_fixup():
    vgpr = np.arange(32 * 8, dtype=np.uint32).reshape(32, 8)
    out = compile_op("rdna3", "VOP3", "V_READLANE_B32")({"VGPR": vgpr, "SRC0": 5, "S1": 7}, 32)["D0"]
    assert int(out[0]) == 7 * 8 + 5
    sem = compile_op("rdna3", "VOP3SD", "V_DIV_SCALE_F32")
    n, d = np.array([1.0, 3.0, 1e-39, 2.0], np.float32), np.array([2.0, 7.0, 1.0, 1e-39], np.float32)
    out = sem({"S0": bits32(n), "S1": bits32(d), "S2": bits32(n)}, 4)
    got = f32(out["D0"])
    np.testing.assert_array_equal(got[:2], n[:2])  # nothing to scale: S0 unchanged
    assert out["VCC"] & 3 == 0


def test_runtime_failure_is_loud():
    vgpr = np.zeros((32, 4), np.uint32)
    sem = compile_op("rdna3", "DS", "DS_SWIZZLE_B32")
    with pytest.raises(Unsupported, match="FFT"):
        sem({"VGPR": vgpr, "DATA0": 1, "OFFSET0": 0, "OFFSET1": 0xE0, "EXEC": 0xFFFFFFFF}, 32)
    out = sem({"VGPR": vgpr + np.arange(32, dtype=np.uint32)[:, None], "DATA0": 1, "OFFSET0": 0x1F,
               "OFFSET1": 0x04, "EXEC": 0xFFFFFFFF}, 32)["RETURN_DATA"]  # bit mode: and 0x1f, xor 1
    np.testing.assert_array_equal(out, np.arange(32) ^ 1)


def test_v_cmp_class_f32_keeps_signaling_nans_apart():
    x = np.array([0x7FA00000, 0x7FC00000, 0xFF800000, 0xBF800000, 0x80000001, 0x80000000, 0x00000000,
                  0x00000001, 0x3F800000, 0x7F800000], np.uint64)  # one of each class, in class-bit order
    sem = compile_op("rdna3", "VOPC", "V_CMP_CLASS_F32")
    for k in range(10):
        assert sem({"S0": x, "S1": np.full(10, 1 << k, np.uint64)}, 10)["D0"] == 1 << k, k


class WideMem(FakeMem):
    def load(self, addr, bits, active):
        return super().load(addr - np.uint64(0x7FFF_0000_0000), bits, active)


def test_scalar_load_uses_64_bit_address_once():
    mem = WideMem()
    mem.b[0:8] = bytes(range(1, 9))
    sem = compile_op("rdna3", "SMEM", "S_LOAD_B64")
    assert sem.widths["ADDR"] == 64
    assert sem({"MEM": mem, "ADDR": 0x7FFF_0000_0000}, 32) == {"SDATA": 0x0807060504030201}
    assert len(mem.log) == 2  # two dword loads, one scalar access each
    assert compile_op("rdna3", "SOP1", "S_GETPC_B64")({"PC": 0x7FFF_0000_1000}, 32) == {"D0": 0x7FFF_0000_1004}


@pytest.mark.parametrize("fam", ["rdna3", "rdna4"])
def test_setreg_getreg_field(fam):
    hw = np.zeros(64, np.uint32)
    hw[1] = 0xF0F
    simm = 1 | (4 << 6) | (3 << 11)  # HW register 1, bits 7:4
    compile_op(fam, "SOPK", "S_SETREG_B32")({"SIMM16": simm, "S0": 0x13, "HW_REGISTERS": hw, "WAVE_STATUS.PRIV": 0,
                                             "HwRegWriteMask": lambda reg, priv: 0xFFFFFFFF}, 32)
    assert hw[1] == 0xF3F
    assert compile_op(fam, "SOPK", "S_GETREG_B32")({"SIMM16": simm, "HW_REGISTERS": hw}, 32) == {"D0": 3}


@pytest.mark.parametrize("fam", ["rdna3", "rdna4", "cdna"])
def test_f32_division_sequence_matches_ieee(fam):
    """LLVM's f32 fdiv expansion (div_scale, rcp, fma refinement, div_fmas, div_fixup) gives numpy's quotient,
    subnormal quotients included (div_fmas must round its scaled result once). 40 waves of 64 lanes."""
    r = np.random.default_rng(7)
    for batch in range(40):
        num = (r.standard_normal(64) * 10.0 ** r.integers(-38, 38, 64)).astype(np.float32)
        den = (r.standard_normal(64) * 10.0 ** r.integers(-38, 38, 64)).astype(np.float32)
        if batch == 0:
            num[:6], den[:6] = [1.0, 0.0, 1.0, 6.0, np.inf, 1e-30], [3.0, 0.0, 0.0, -0.0, 2.0, 1e30]
        _check_f32_division(fam, num, den)


def _check_f32_division(fam: str, num: np.ndarray, den: np.ndarray) -> None:
    lanes = len(num)

    def op(space, name, **st):
        spaces = [o.enc for o in isa.load(fam).ops.values() if o.name == name and o.pcode]
        return compile_op(fam, space if space in spaces else spaces[0], name)(st, lanes)

    def neg(x):
        return x ^ np.uint64(0x80000000)

    d, n = bits32(den), bits32(num)
    den_s = op("VOP3SD", "V_DIV_SCALE_F32", S0=d, S1=d, S2=n)["D0"]
    scaled = op("VOP3SD", "V_DIV_SCALE_F32", S0=n, S1=d, S2=n)
    num_s, vcc = scaled["D0"], scaled["VCC"]
    rcp = op("VOP1", "V_RCP_F32", S0=den_s)["D0"]
    e = op("VOP3", "V_FMA_F32", S0=neg(den_s), S1=rcp, S2=bits32(np.ones(lanes)))["D0"]
    rcp = op("VOP3", "V_FMA_F32", S0=e, S1=rcp, S2=rcp)["D0"]
    q = op("VOP2", "V_MUL_F32", S0=num_s, S1=rcp)["D0"]
    r = op("VOP3", "V_FMA_F32", S0=neg(den_s), S1=q, S2=num_s)["D0"]
    q = op("VOP3", "V_FMA_F32", S0=r, S1=rcp, S2=q)["D0"]
    r = op("VOP3", "V_FMA_F32", S0=neg(den_s), S1=q, S2=num_s)["D0"]
    q = op("VOP3", "V_DIV_FMAS_F32", S0=r, S1=rcp, S2=q, VCC=vcc)["D0"]
    got = f32(op("VOP3", "V_DIV_FIXUP_F32", S0=q, S1=d, S2=n)["D0"])
    with np.errstate(all="ignore"):
        expect = num / den
    np.testing.assert_array_equal(got.view(np.uint32) | np.isnan(got) * 0x400000,
                                  expect.view(np.uint32) | np.isnan(expect) * 0x400000)


def test_integer_clamp_saturates_sums():
    a, b = np.array([0xFFFFFFFF, 5, 0x80000000], np.uint64), np.array([2, 7, 1], np.uint64)
    add = compile_op("rdna3", "VOP3", "V_ADD_NC_U32")
    assert "CLAMP" in add.reads
    np.testing.assert_array_equal(add({"S0": a, "S1": b, "CLAMP": 1}, 3)["D0"], [0xFFFFFFFF, 12, 0x80000001])
    np.testing.assert_array_equal(add({"S0": a, "S1": b, "CLAMP": 0}, 3)["D0"], [1, 12, 0x80000001])
    sub = compile_op("rdna3", "VOP3", "V_SUB_NC_I32")  # INT_MIN - 1 clamps to INT_MIN
    np.testing.assert_array_equal(sub({"S0": a, "S1": b, "CLAMP": 1}, 3)["D0"], [0xFFFFFFFD, 0xFFFFFFFE, 0x80000000])


@pytest.mark.parametrize("fam", ["rdna3", "rdna4", "cdna"])
def test_f64_division_sequence_matches_ieee(fam):
    """LLVM's f64 fdiv expansion gives numpy's quotient, extreme exponent ratios (overflow, underflow to zero,
    subnormal quotients: V_DIV_FMAS_F64 rounds its scaled result once) included."""
    r = np.random.default_rng(11)
    for _ in range(10):
        num = r.standard_normal(64) * 10.0 ** r.integers(-300, 300, 64)
        den = r.standard_normal(64) * 10.0 ** r.integers(-300, 300, 64)
        got, want = _f64_division(fam, num, den)
        np.testing.assert_array_equal(got, want)


def test_f64_division_subnormal_quotient():
    num = np.full(64, float.fromhex("0x1.d7d0110bba107p-139"))
    den = np.full(64, float.fromhex("-0x1.2578ec18e36f0p+884"))
    got, want = _f64_division("rdna3", num, den)
    np.testing.assert_array_equal(got, want)


def _f64_division(fam: str, num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(emulated quotient bits, numpy's quotient bits) of LLVM's f64 fdiv expansion."""
    lanes = len(num)
    n, d, one = num.view(np.uint64), den.view(np.uint64), np.ones(lanes).view(np.uint64)

    def op(name, **st):
        space = next(o.enc for o in isa.load(fam).ops.values() if o.name == name and o.pcode)
        return compile_op(fam, space, name)(st, lanes)

    def neg(x):
        return x ^ np.uint64(1 << 63)

    d0 = op("V_DIV_SCALE_F64", S0=d, S1=d, S2=n)["D0"]
    rcp = op("V_RCP_F64", S0=d0)["D0"]
    e = op("V_FMA_F64", S0=neg(d0), S1=rcp, S2=one)["D0"]
    rcp = op("V_FMA_F64", S0=rcp, S1=e, S2=rcp)["D0"]
    e = op("V_FMA_F64", S0=neg(d0), S1=rcp, S2=one)["D0"]
    scaled = op("V_DIV_SCALE_F64", S0=n, S1=d, S2=n)
    rcp = op("V_FMA_F64", S0=rcp, S1=e, S2=rcp)["D0"]
    q = op("V_MUL_F64", S0=scaled["D0"], S1=rcp)["D0"]
    r = op("V_FMA_F64", S0=neg(d0), S1=q, S2=scaled["D0"])["D0"]
    q = op("V_DIV_FMAS_F64", S0=r, S1=rcp, S2=q, VCC=scaled["VCC"])["D0"]
    got = op("V_DIV_FIXUP_F64", S0=q, S1=d, S2=n)["D0"]
    with np.errstate(all="ignore"):
        return np.asarray(got, np.uint64), (num / den).view(np.uint64)


@pytest.mark.parametrize("name, dt, ut", [("V_FREXP_EXP_I32_F32", np.float32, np.uint32),
                                          ("V_FREXP_EXP_I32_F64", np.float64, np.uint64),
                                          ("V_FREXP_EXP_I16_F16", np.float16, np.uint16)])
def test_frexp_exponent_like_numpy(name, dt, ut):
    x = np.array([0.0, -0.0, 1.0, 3.0, 0.3, np.finfo(dt).tiny / 8, np.finfo(dt).tiny, np.inf, np.nan, -5.5], dt)
    out = compile_op("rdna3", "VOP1", name)({"S0": x.view(ut).astype(np.uint64), "CLAMP": 0}, len(x))["D0"]
    bits = 16 if "I16" in name else 32
    got = [(int(v) ^ (1 << (bits - 1))) - (1 << (bits - 1)) for v in out]
    assert got == [int(np.frexp(v)[1]) if np.isfinite(v) else 0 for v in x.astype(np.float64)]
