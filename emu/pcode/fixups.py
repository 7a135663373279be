"""The one table of corrections: instructions whose vendor pcode is absent, prose, or wrong.

`FIXUPS[name]` (or `FAMILY_FIXUPS[(family, name)]`, which wins) is a `Fixup(pcode, reason)`: `pcode` is the
replacement text, or a function of the vendor text returning it (for a local edit), or None when the
instruction stays unsupported, `reason` saying why. Keep it small.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from emu.pcode import matrix


@dataclass(frozen=True)
class Fixup:
    pcode: str | Callable[[str], str] | None
    reason: str

    def apply(self, text: str | None) -> str | None:
        if callable(self.pcode):
            return self.pcode(text or "")
        return self.pcode


_TIMING = "scheduling or cache hint only; the emulator executes in order with coherent memory, so no state changes"
_NOP = Fixup("nop()", _TIMING)


def _div_scale(text: str) -> str:
    # VCC is written per lane (the vendor text assigns the whole mask inside per-lane conditions), and a lane
    # that needs no scaling returns S0 unchanged (the text leaves D0 unassigned there).
    ty = "f64" if "f64" in text.split("\n", 2)[1] else "f32"
    bias, k = (1023, 128) if ty == "f64" else (127, 64)
    text = re.sub(r"\bVCC = 0x([01])LL", r"VCC.u64[laneId] = 1'\1U", text)
    # hardware over the manual (tinygrad's hardware-confirmed vectors, tests/test_fidelity_div_scale.py): a zero
    # numerator or denominator (D0 NaN) sets VCC, which the text leaves 0
    text = text.replace(f"D0.{ty} = NAN.{ty}", f"VCC.u64[laneId] = 1'1U;\nD0.{ty} = NAN.{ty}")
    # and "1 / S1 is subnormal", "S2 / S1 is subnormal" are tests of the exponents (whether the result may be
    # subnormal) in the format itself, where the text divides exactly, 1 / S1 in f64 (never subnormal for an f32):
    # hardware sets VCC and scales the numerator for 2**-126 / 1.0, and leaves 1.0 / 2**127's numerator unscaled
    s1 = "S1.f64" if ty == "f64" else "64'F(S1.f32)"
    rcp, quot = f"exponent(S1.{ty}) >= {2 * bias - 1}", f"exponent(S2.{ty}) + {bias - 1} <= exponent(S1.{ty})"
    for was, now in ((f"1.0 / {s1} == DENORM.f64", rcp), (f"S2.{ty} / S1.{ty} == DENORM.{ty}", quot)):
        assert was in text, f"V_DIV_SCALE_{ty.upper()}: {was!r} not in the vendor text"
        text = text.replace(was, now)
    # when both may be subnormal the text scales the denominator up, to infinity (it is >= 2**(bias - 1)); V_DIV_FMAS
    # then scales the quotient down (S2 < 2), so the denominator is scaled down (clang's f64 1.0 / 2**1023 is inf else)
    head, tail = text.split(f"(({rcp}) && ({quot}))")
    text = head + f"(({rcp}) && ({quot}))" + tail.replace(f"ldexp(S0.{ty}, {k})", f"ldexp(S0.{ty}, -{k})", 1)
    return f"D0.{ty} = S0.{ty};\n" + text


def _div_fmas(text: str) -> str:
    # the text scales by 2**32 (f32) / 2**64 (f64), half of what V_DIV_SCALE applies, always upward, and rounds
    # twice; the hardware undoes V_DIV_SCALE (2**64 / 2**128 up for a scaled denominator, down for a scaled
    # numerator, S2 below 1) and rounds the scaled fma once (a subnormal quotient is otherwise off by one ulp)
    ty, bias, k = ("f64", 1023, 128) if "f64" in text else ("f32", 127, 64)
    fma = f"fma(S0.{ty}, S1.{ty}, S2.{ty}"
    return (f"if VCC.u64[laneId] then\nD0.{ty} = {fma}, exponent(S2.{ty}) > {bias} ? {k} : -{k})\n"
            f"else\nD0.{ty} = {fma})\nendif")


def _fma_mix(text: str) -> str:
    # the text's S[] array stands for the three sources but is never filled
    return text.replace("declare S : 32'B[3];", "declare S : 32'B[3];\nS[0] = S0.b32;\nS[1] = S1.b32;\nS[2] = S2.b32;")


def _fused_mix(text: str) -> str:
    return _fma_mix(text).replace("in[0] * in[1] + in[2]", "fma(in[0], in[1], in[2])")


def _two_over_pi_bits(n: int) -> int:
    """floor(2/pi * 2**n), from pi by Machin's formula in integers with guard bits."""
    g = n + 64
    one = 1 << g

    def atan_inv(x: int) -> int:
        total, term, k, sign = 0, one // x, 1, 1
        while term:
            total += sign * term // k
            term //= x * x
            k, sign = k + 2, -sign
        return total
    pi = 16 * atan_inv(5) - 4 * atan_inv(239)
    return (2 * one * one // pi) >> (g - n)


def _trig_preop(text: str) -> str:
    # segment `shift` of 2/pi: the 53 bits below the first `shift` fraction bits (the text shifts them left out
    # of its 1201-bit window instead); past the 1201st bit they are zeros
    text = text.replace("1201'B(2.0 / PI)", f"1201'B({_two_over_pi_bits(1201):#x})")
    text = re.sub(r"(1201'B\(0x[0-9a-f]+\))\[1200 : 0\] << shift\.u32\)",
                  r"shift.u32 > 1148U ? \1 << (shift.u32 - 1148U) : \1 >> (1148U - shift.u32))", text)
    # and the 53-bit integer is converted by value (64'F() would reinterpret its bits)
    return text.replace("result = 64'F(", "result = u64_to_f64(64'U(").replace("1fffffffffffff);", "1fffffffffffff));")


def _carry_clamp(text: str) -> str:
    # clamp saturates the 32-bit result where the carry / borrow (VCC, already written) says it wrapped
    sat = "0xffffffffU" if "+" in text.split("\n", 1)[0] else "0U"
    return text.replace("D0.u32 = tmp.u32", f"D0.u32 = CLAMP.u1 && VCC.u64[laneId] ? {sat} : tmp.u32")


def _cvt_pk_16(kind: str) -> Fixup:
    return Fixup(f"declare tmp : 32'B;\ntmp[31 : 16] = 16'B(f32_to_{kind}16(S1.f32));\n"
                 f"tmp[15 : 0] = 16'B(f32_to_{kind}16(S0.f32));\nD0 = tmp.b32",
                 f"calls v_cvt_{kind}16_f32, an instruction this family does not have; same conversion inlined")


def _minmax3(kind: str, ty: str, packed: bool) -> Fixup:
    """IEEE 754-2019 minimum/maximum: NaN if either is NaN, -0 < +0."""
    op, neg0 = ("<", "sign(a) && !sign(b)") if kind == "minimum" else (">", "!sign(a) && sign(b)")
    lam = (f"PICK = lambda(a, b) (isNAN(64'F(a)) ? 64'F(cvtToQuietNAN(64'F(a))) : isNAN(64'F(b)) ? "
           f"64'F(cvtToQuietNAN(64'F(b))) : ((a {op} b) || ((64'F(a) == 0.0) && (64'F(b) == 0.0) && {neg0})) ? "
           f"64'F(a) : 64'F(b));\n")
    bits = ty[1:]
    if not packed:
        body = f"D0.{ty} = {bits}'F(PICK({bits}'F(PICK(S0.{ty}, S1.{ty})), S2.{ty}))"
    else:
        body = "".join(f"tmp[{h} : {lo}].{ty} = {bits}'F(PICK({bits}'F(PICK(S0[{h} : {lo}].{ty}, S1[{h} : {lo}].{ty}))"
                       f", S2[{h} : {lo}].{ty}));\n" for h, lo in ((31, 16), (15, 0))) + "D0.b32 = tmp.b32"
    return Fixup(lam + body, f"calls v_{kind}{'3' if packed else ''}_{ty}, which this family does not have; "
                              "IEEE 754-2019 " + kind + " written out")


_SWIZZLE = """offset = { OFFSET1.u8, OFFSET0.u8 };
if offset >= 16'0xe000U then
unsupported("ds_swizzle FFT and rotate modes")
elsif offset[15] then
src = (laneId & 0xfffffffcU) + 32'U(offset[(laneId[1 : 0].u32 * 2U) +: 2]);
RETURN_DATA.b32 = EXEC[src].u1 ? VGPR[src][DATA0.u32].b32 : 0U
else
src = (laneId & 0x20U) | ((((laneId & 32'U(offset[4 : 0])) | 32'U(offset[9 : 5])) ^ 32'U(offset[14 : 10])) & 0x1fU);
RETURN_DATA.b32 = EXEC[src].u1 ? VGPR[src][DATA0.u32].b32 : 0U
endif"""


def _signed_zero_tests(text: str) -> str:
    # `x == +0.0` / `x == -0.0` meant as "x is that zero" (IEEE == holds for either zero)
    def test(m: re.Match) -> str:
        neg = "" if m.group(4) == "-" else "!"
        return f"({m.group(1)} == 0.0 && {neg}sign({m.group(2) or m.group(3)}))"
    return re.sub(r"(64'F\((S\d\.f\d\d)\)|(S\d\.f64)) == ([+-])0\.0", test, text)


_RNDNE = Fixup(lambda t: re.sub(r"(D0\.f\d\d) = .*", lambda m: f"{m.group(1)} = roundEven(S0.{m.group(1)[3:]})", t,
                                count=1, flags=re.S),
               "floor(x + 0.5) in the operand's precision is not roundToIntegralTiesToEven where x + 0.5 is inexact "
               "(odd integers beyond 2**23 for f32, 0.49999997 -> 1) and loses the sign of zero (-0.25 -> +0)")


def _frexp_exp(src: str, dst: str) -> Fixup:
    special = (f"((64'F(S0.{src}) == +INF) || (64'F(S0.{src}) == -INF) || isNAN(64'F(S0.{src})) || "
               f"(64'F(S0.{src}) == 0.0))")
    if src == "f64":  # a subnormal f64 is scaled into the normal range first
        body = ("elsif exponent(S0.f64) == 0 then\nD0.i32 = exponent(S0.f64 * 2.0 ** 64) - 1023 + 1 - 64\n"
                "else\nD0.i32 = exponent(S0.f64) - 1023 + 1\n")
    else:  # every f16 / f32 is a normal f64
        body = f"else\nD0.{dst} = {dst[1:]}'I(exponent(64'F(S0.{src})) - 1023 + 1)\n"
    return Fixup(f"if {special} then\nD0.{dst} = {dst[1:]}'I(0)\n{body}endif",
                 "exponent() is the raw biased field, so the text gives 1 - bias for zero and a wrong exponent for "
                 "subnormals; frexp's exponent is meant (0 for zero)")


def _prose(what: str) -> Fixup:
    return Fixup(None, f"prose: {what}")


FIXUPS: dict[str, Fixup] = {
    "V_FREXP_EXP_I32_F32": _frexp_exp("f32", "i32"),
    "V_FREXP_EXP_I32_F64": _frexp_exp("f64", "i32"),
    "V_FREXP_EXP_I16_F16": _frexp_exp("f16", "i16"),
    **{n: _RNDNE for n in ("V_RNDNE_F16", "V_RNDNE_F32", "V_RNDNE_F64", "S_RNDNE_F16", "S_RNDNE_F32")},
    "V_CVT_NEAREST_I32_F32": Fixup("D0.i32 = f64_to_i32(floor(64'F(S0.f32) + 0.5))",
                                   "floor(S0.f32 + 0.5F) rounds the sum in f32 (8388609.0 -> 8388610, 0.49999997 -> "
                                   "1); the same formula in f64 is exact"),
    **{n: Fixup(lambda t: t.replace("32'I(VGPR[i][ADDR] + OFFSET.b32)", "32'U(VGPR[i][ADDR] + OFFSET.b32)"),
                "the lane number is computed signed (a negative lane for an address with bit 31 set) although the "
                "text says the high-order bits are ignored; CDNA's text computes it unsigned")
       for n in ("DS_PERMUTE_B32", "DS_BPERMUTE_B32", "DS_BPERMUTE_FI_B32")},
    "DS_SWIZZLE_B32": Fixup(_SWIZZLE, "prose (mode table); quad-permute and bit-mask modes written out, the source "
                                      "lane's DATA0 register read like DS_BPERMUTE (FFT and rotate modes fail)"),
    **{n: _prose("wave-level LDS/GDS counter, also needs the GDS") for n in ("DS_APPEND", "DS_CONSUME")},
    **{n: _prose("GS register file (graphics)") for n in ("DS_ADD_GS_REG_RTN", "DS_SUB_GS_REG_RTN")},
    "DS_BVH_STACK_RTN_B32": _prose("ray-tracing BVH stack"),
    "LDS_DIRECT_LOAD": _prose("field list of the encoding, no semantics (graphics parameter load)"),
    "IMAGE_GET_LOD": _prose("texture level-of-detail query (graphics)"),
    **{n: _NOP for n in ("S_WAITCNT", "S_WAITCNT_VSCNT", "S_WAITCNT_VMCNT", "S_WAITCNT_EXPCNT", "S_WAITCNT_LGKMCNT",
                         "S_SLEEP", "S_DELAY_ALU", "S_CODE_END", "S_SETPRIO", "S_PREFETCH_INST",
                         "S_PREFETCH_INST_PC_REL", "S_PREFETCH_DATA", "S_BUFFER_PREFETCH_DATA",
                         "S_PREFETCH_DATA_PC_REL")},
    "V_DIV_SCALE_F32": Fixup(_div_scale, "VCC assigned as a whole inside per-lane conditions; D0 unassigned when "
                                         "no scaling is needed (hardware returns S0); hardware sets VCC for a zero "
                                         "operand, tests subnormal results by exponents in the format itself, "
                                         "scales the denominator down when both 1 / S1 and S2 / S1 may be "
                                         "subnormal (tests/test_fidelity_div_scale.py)"),
    "V_DIV_FMAS_F32": Fixup(_div_fmas, "with VCC it scales by 2**32 only upward; undoing V_DIV_SCALE needs 2**64 "
                                       "up (scaled denominator) or down (scaled numerator, S2 below 1)"),
    "V_DIV_FMAS_F64": Fixup(_div_fmas, "with VCC it scales by 2**64 only upward; undoing V_DIV_SCALE needs 2**128 "
                                       "up (scaled denominator) or down (scaled numerator, S2 below 1)"),
    **{n: Fixup(lambda t: re.sub(r"exponent\(S1\.(f32|f64|f16)\) == (255|2047|31)", r"exponent(S0.\1) == \2", t),
                "the overflow case tests the denominator's exponent, which the earlier cases rule out; the quotient "
                "S0 is meant (a quotient beyond the range, computed as inf or NaN, gives the signed overflow)")
       for n in ("V_DIV_FIXUP_F32", "V_DIV_FIXUP_F64")},
    "V_DIV_SCALE_F64": Fixup(_div_scale, "VCC assigned as a whole inside per-lane conditions; D0 unassigned when "
                                         "no scaling is needed (hardware returns S0); hardware sets VCC for a zero "
                                         "operand, tests subnormal results by exponents in the format itself, "
                                         "scales the denominator down when both 1 / S1 and S2 / S1 may be "
                                         "subnormal (tests/test_fidelity_div_scale.py)"),
    **{n: Fixup(_fma_mix, "array S[] of the three sources is read but never filled")
       for n in ("V_FMA_MIXLO_F16", "V_FMA_MIXHI_F16")},
    "V_FMA_MIX_F32": Fixup(_fma_mix, "array S[] of the three sources is read but never filled"),
    **{n: Fixup(_fused_mix, "array S[] of the three sources is read but never filled; and CDNA3/4 run these opcodes "
                            "as v_fma_mix_* (llvm-mc-19 rejects v_mad_mix_* for gfx942, clang-19 compiles OpenCL "
                            "fma() of halves to v_fma_mix_f32), one rounding where the text rounds the product")
       for n in ("V_MAD_MIX_F32", "V_MAD_MIXLO_F16", "V_MAD_MIXHI_F16")},
    "V_MINIMUM3_F32": _minmax3("minimum", "f32", False),
    "V_MAXIMUM3_F32": _minmax3("maximum", "f32", False),
    "V_PK_MINIMUM3_F16": _minmax3("minimum", "f16", True),
    "V_PK_MAXIMUM3_F16": _minmax3("maximum", "f16", True),
    "V_PK_MOV_B32": Fixup(lambda t: t.replace("S0.u32[", "S0.u64[").replace("S1.u32[", "S1.u64["),
                          "selects a 32-bit half of 64-bit sources but slices their 32-bit view"),
    "V_CVT_PK_I16_F32": _cvt_pk_16("i"),
    "V_CVT_PK_U16_F32": _cvt_pk_16("u"),
    "V_TRIG_PREOP_F64": Fixup(_trig_preop, "1201'B(2.0 / PI) stands for the first 1201 fraction bits of 2/pi, "
                                           "which no floating-point literal holds; the segment is the 53 bits "
                                           "after the first `shift` bits, not the window shifted left, and is "
                                           "converted by value"),
    **{n: Fixup(_carry_clamp, "the clamp bit is not in the text: set, the result saturates (0xffffffff on carry-out, "
                              "0 on borrow) as the ISA manual's integer clamp says")
       for n in ("V_ADD_CO_U32", "V_ADD_CO_CI_U32", "V_ADDC_CO_U32", "V_SUB_CO_U32", "V_SUB_CO_CI_U32",
                 "V_SUBB_CO_U32", "V_SUBREV_CO_U32", "V_SUBREV_CO_CI_U32", "V_SUBBREV_CO_U32")},
    "V_CVT_OFF_F32_I4": Fixup("D0.f32 = i32_to_f32(signext_from_bit(S0.u32[3 : 0].i32, 4U)) * 0.0625F",
                              "its table CVT_OFF_TABLE is given in prose: entry i is the 4-bit signed i / 16"),
}
def _trig(fn: str) -> Fixup:
    return Fixup(lambda t: re.sub(rf"{fn}\(S0\.(f16|f32) \* (16|32)'F\(PI \* 2\.0\)\)",
                                  rf"\2'F({fn}(64'F(S0.\1 - roundEven(S0.\1)) * (PI * 2.0)))", t),
                 "the input counts revolutions; multiplying a large one by 2*pi in its own precision loses the "
                 "fraction (132000.25 revolutions gave sin 0.9995): the hardware reduces to the fraction first "
                 "(x - nearest integer: exact in any float type) and the rest is evaluated in f64 here")


def _vinterp_source(m: re.Match) -> str:
    lane, k, ty = m.group(1), m.group(2), m.group(3)
    reg = f"VGPR[{lane}][SRC{k}.u32]"
    v = f"(OPSEL[{k}].u1 ? {reg}[31 : 16].f16 : {reg}[15 : 0].f16)" if ty == "f16" else f"{reg}.f32"
    return f"(NEG[{k}].u1 ? -{v} : {v})"


_VINTERP = Fixup(lambda t: re.sub(r"VGPR\[([^\[\]]*)\]\[SRC(\d)\.u32\]\.(f16|f32)", _vinterp_source, t),
                 "the sources read from other lanes' registers (the quad's parameter data) take the encoding's neg "
                 "and, for f16 data, op_sel (high half) modifiers, which the text leaves out")


_MODE_FIELD = ("the table has no pcode; the ISA manual: SIMM16[3:0] replaces MODE.{0} (MODE[{1}])")
_MODE_SETTERS = {
    "S_ROUND_MODE": Fixup("MODE = (MODE.u32 & 0xfffffff0U) | 32'U(SIMM16.u16[3 : 0])",
                          _MODE_FIELD.format("FP_ROUND", "3:0")),
    "S_DENORM_MODE": Fixup("MODE = (MODE.u32 & 0xffffff0fU) | (32'U(SIMM16.u16[3 : 0]) << 4U)",
                           _MODE_FIELD.format("FP_DENORM", "7:4")),
}
_SETREG = Fixup(lambda t: t.replace("mask = (mask & 32'I(", "mask = (mask << offset.u32);\nmask = (mask & 32'I("),
                "the field mask is not shifted to the field's offset before masking the value (RDNA4's text is)")
FIXUPS.update(_MODE_SETTERS)
FIXUPS.update({n: _VINTERP for n in ("V_INTERP_P10_F32", "V_INTERP_P2_F32", "V_INTERP_P10_F16_F32",
                                     "V_INTERP_P2_F16_F32", "V_INTERP_P10_RTZ_F16_F32", "V_INTERP_P2_RTZ_F16_F32")})
FIXUPS.update({f"V_{fn.upper()}_{t}": _trig(fn) for fn in ("sin", "cos") for t in ("F16", "F32")})
FAMILY_FIXUPS: dict[tuple[str, str], Fixup] = {
    ("rdna3", "S_SETREG_B32"): _SETREG, ("rdna3", "S_SETREG_IMM32_B32"): _SETREG,
    **{("cdna", n): Fixup("D0.b32 = S0.b32", "the table has no pcode; a 32-bit move between the VGPR and ACC VGPR "
                                             "files (which file each operand is in comes from the encoding)")
       for n in ("V_ACCVGPR_WRITE", "V_ACCVGPR_READ", "V_ACCVGPR_MOV_B32")},
    ("rdna3", "V_LDEXP_F16"): Fixup("D0.f16 = ldexp(S0.f16, 32'I(S1.i16))",
                                    "S0.f16 * 16'F(2.0F ** S1) rounds 2**S1 to f16 first (inf for S1 > 15)"),
    **{("cdna", f"V_{op}_{t}"): Fixup(_signed_zero_tests, "tests signed zeros with IEEE == (x == +0.0 holds for -0.0 "
                                                         "too): min(-0, +0) gave +0")
       for op in ("MIN", "MAX") for t in ("F16", "F32", "F64")},
    **{("cdna", f"V_BITOP3_{t}"): Fixup(lambda text: re.sub(r"\bD\.", "D0.", text),
                                        "the text names the destination D (every other definition D0), so "
                                        "nothing was written") for t in ("B16", "B32")},
}


_MATRIX = ("the vendor entry is prose (D = A * B + C); pcode generated from the shape and types in the name "
           "with the lane/register layout of AMD's matrix instruction calculator (emu.pcode.matrix)")


def _matrix(family: str, name: str) -> Fixup | None:
    if not name.startswith(("V_MFMA", "V_SMFMAC", "V_WMMA", "V_SWMMAC")):
        return None
    if name.startswith(("V_SMFMAC", "V_SWMMAC")):
        return Fixup(None, "prose: sparse matrix multiply (structured-sparsity index data) is not modelled")
    try:
        return Fixup(matrix.mfma(name) if family == "cdna" else matrix.wmma(name, family), _MATRIX)
    except matrix.NotMatrix as e:
        return Fixup(None, f"prose: matrix op not modelled ({e})")


def fnuz(text: str) -> str:
    """The text with fp8 / bf8 naming the FNUZ formats, for instruction sets that have those (the CDNA tables are
    CDNA4's, whose fp8 and bf8 are OCP E4M3 / E5M2; CDNA3's are FNUZ: the descriptor's Generation.fp8)."""
    return re.sub(r"(?<![A-Za-z0-9])(fp8|bf8)(?![A-Za-z0-9])", r"\1fnuz", text)


def fixup(family: str, name: str) -> Fixup | None:
    return FAMILY_FIXUPS.get((family, name)) or FIXUPS.get(name) or _matrix(family, name)
