"""Instructions a chip has that the vendor tables do not list (the tables are CDNA4's; gfx90a keeps opcodes CDNA3 and
CDNA4 dropped or reused; gfx942 has XF32 MFMAs the tables list without operands). One table: `ADDED[instruction
set]` is a tuple of `Added` rows, each with its opcode space and number, the instruction it copies its operand types
from (`like`, an opcode of the same space in the tables the set is derived from; `bits` overrides operand widths,
`drop` removes operands), its pcode written here (None: the fixup table's, e.g. the generated matrix pcode for an
MFMA name) and where the facts come from. emu.amd.isa.generations puts them into the instruction set; a row whose
number a table opcode has replaces it there.

Sources: the opcode numbers and mnemonics are what llvm-mc-19 -mcpu=gfx90a assembles and disassembles; the
operations are those AMD's "AMD Instinct MI200" ISA reference (and the Vega ISA it extends) names: V_MAD_F32 and its
forms D = S0 * S1 + S2, a MAD (multiply, then add: LLVM's AMDGPU backend selects these for ISD::FMAD, the unfused
multiply-add, and v_fma_f32 for fma), V_MAD_LEGACY_F32 with the DX9 multiply of V_MUL_LEGACY_F32. Their f32
denormals: LLVM's AMDGPU backend (reviews.llvm.org/D48573, by AMD: "v_mad_f32 flushes. v_mad_f16 does not"; it forms
fmad with them only where f32 denormals are flushed, and its llvm.amdgcn.fmad.ftz intrinsic selects them regardless
of the mode). The MI200 ISA text on their denormals was not at hand.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Added:
    space: str  # opcode space (VOP2, VOP3, VOP3P, MUBUF, ...)
    value: int  # opcode number in that space
    name: str  # vendor-style name (LLVM's mnemonic for the chip: emu.amd.isa.generations' spellings)
    like: str  # the instruction of the same space whose operand types it has
    pcode: str | None
    source: str
    bits: dict[str, int] = field(default_factory=dict)  # operand -> width, where it differs from `like`'s
    drop: tuple[str, ...] = ()  # operands of `like` it does not have


def _flush(x: str) -> str:
    """`x` (an f32) read as zero of its sign when denormal: the MAD unit has no f32 denormals."""
    return f"(isDENORM({x}) ? {x} * 0.0F : {x})"


def _mad(a: str, b: str, c: str, legacy: bool = False) -> str:
    """D = a * b + c as the gfx9 MAD does it: two roundings (the product is rounded to f32 before the add, unlike
    fma), every f32 denormal (the sources, the product, the result) read and written as zero of its sign. The
    legacy form multiplies by the DX9 rule: zero times anything, infinity and NaN included, is +0."""
    lines = [f"declare {v} : 32'F;" for v in ("a", "b", "c", "p", "d")]
    lines += [f"a = {_flush(a)};", f"b = {_flush(b)};", f"c = {_flush(c)};"]
    if legacy:
        lines += ["if ((64'F(a) == 0.0) || (64'F(b) == 0.0)) then", "p = 0.0F", "else", "p = a * b", "endif;"]
    else:
        lines.append("p = a * b;")
    lines += [f"p = {_flush('p')};", "d = p + c;", f"D0.f32 = {_flush('d')}"]
    return "\n".join(lines)


_MAD = "a MAD, not an FMA (LLVM: ISD::FMAD): the product is rounded before the add; f32 denormals flushed (LLVM D48573)"
_LEGACY = "like V_MAD_F32 with V_MUL_LEGACY_F32's multiply (DX9 rules: 0 * x = +0, also for x infinite or NaN)"
_CACHE = ("invalidates the vector L1 cache (the _VOL form: its volatile lines; LLVM's AMDGPUUsage gfx90a memory model "
          "issues it at acquire); hwemu's memory is coherent, so no state changes")
_LLVM = "llvm-mc-19 -mcpu=gfx90a"


def _mfma(value: int, name: str, like: str, spelled: str, src_bits: int | None = None, chip: str = "gfx90a",
          why: str = "") -> Added:
    """An MFMA the tables do not list at that number (named in the CDNA3 style the matrix pcode generator reads:
    M x N x K, blocks, element type; emu.pcode.matrix)."""
    bits = {"src0": src_bits, "src1": src_bits} if src_bits else {}
    source = f"llvm-mc-19 -mcpu={chip}: VOP3P opcode {value:#x} is {spelled}{why}"
    return Added("VOP3P", value, name, like, None, source, bits)


_XF32 = ("; the CDNA4 tables list gfx940's XF32 MFMAs (CDNA4 dropped them) without operands; xf32 arithmetic is "
         "not modelled (the matrix pcode generator knows no XF32)")

ADDED: dict[str, tuple[Added, ...]] = {
    "cdna3": (
        _mfma(0x3E, "V_MFMA_F32_16X16X8_XF32", "V_MFMA_F32_16X16X4_F32", "v_mfma_f32_16x16x8_xf32", 64, "gfx942",
              _XF32),
        _mfma(0x3F, "V_MFMA_F32_32X32X4_XF32", "V_MFMA_F32_32X32X2_F32", "v_mfma_f32_32x32x4_xf32", 64, "gfx942",
              _XF32),
    ),
    "cdna2": (
        Added("VOP2", 0x16, "V_MAC_F32", "V_FMAC_F32", _mad("S0.f32", "S1.f32", "D0.f32"),
              f"{_LLVM}: v_mac_f32_e32 (VOP2 0x16, gfx950's v_dot2c_f32_bf16); {_MAD}"),
        Added("VOP3", 0x116, "V_MAC_F32", "V_FMAC_F32", _mad("S0.f32", "S1.f32", "D0.f32"),
              f"{_LLVM}: v_mac_f32_e64 (VOP3 0x116); {_MAD}"),
        Added("VOP2", 0x17, "V_MADMK_F32", "V_FMAMK_F32", _mad("S0.f32", "SIMM32.f32", "S1.f32"),
              f"{_LLVM}: v_madmk_f32 (VOP2 0x17, gfx940's v_fmamk_f32): S0 * K + S1; {_MAD}"),
        Added("VOP2", 0x18, "V_MADAK_F32", "V_FMAAK_F32", _mad("S0.f32", "S1.f32", "SIMM32.f32"),
              f"{_LLVM}: v_madak_f32 (VOP2 0x18, gfx940's v_fmaak_f32): S0 * S1 + K; {_MAD}"),
        Added("VOP3", 0x1C0, "V_MAD_LEGACY_F32", "V_FMA_F32", _mad("S0.f32", "S1.f32", "S2.f32", legacy=True),
              f"{_LLVM}: v_mad_legacy_f32 (VOP3 0x1c0); {_LEGACY}; {_MAD}"),
        Added("VOP3", 0x1C1, "V_MAD_F32", "V_FMA_F32", _mad("S0.f32", "S1.f32", "S2.f32"),
              f"{_LLVM}: v_mad_f32 (VOP3 0x1c1); {_MAD}"),
        Added("MUBUF", 0x3E, "BUFFER_WBINVL1", "BUFFER_WBL2", "nop()",
              f"{_LLVM}: buffer_wbinvl1 (MUBUF 0x3e); {_CACHE}"),
        Added("MUBUF", 0x3F, "BUFFER_WBINVL1_VOL", "BUFFER_WBL2", "nop()",
              f"{_LLVM}: buffer_wbinvl1_vol (MUBUF 0x3f); {_CACHE}"),
        Added("MUBUF", 0x3D, "BUFFER_STORE_LDS_DWORD", "BUFFER_STORE_DWORD", None,
              f"{_LLVM}: buffer_store_lds_dword (MUBUF 0x3d, the lds bit set; no VGPR operands); MI200 ISA: stores "
              "a dword of LDS to memory; LDS DMA is not modelled", drop=("vaddr", "vdata")),
        _mfma(0x54, "V_MFMA_I32_32X32X8_I8", "V_MFMA_I32_32X32X16_I8", "v_mfma_i32_32x32x8i8", 32),
        _mfma(0x55, "V_MFMA_I32_16X16X16_I8", "V_MFMA_I32_16X16X32_I8", "v_mfma_i32_16x16x16i8", 32),
        # the bf16 MFMAs with four elements per source (gfx90a's _1k forms; CDNA3 moved them to 0x5d..0x61)
        _mfma(0x63, "V_MFMA_F32_32X32X4_2B_BF16", "V_MFMA_F32_32X32X4_2B_BF16", "v_mfma_f32_32x32x4bf16_1k"),
        _mfma(0x64, "V_MFMA_F32_16X16X4_4B_BF16", "V_MFMA_F32_16X16X4_4B_BF16", "v_mfma_f32_16x16x4bf16_1k"),
        _mfma(0x65, "V_MFMA_F32_4X4X4_16B_BF16", "V_MFMA_F32_4X4X4_16B_BF16", "v_mfma_f32_4x4x4bf16_1k"),
        _mfma(0x66, "V_MFMA_F32_32X32X8_BF16", "V_MFMA_F32_32X32X8_BF16", "v_mfma_f32_32x32x8bf16_1k"),
        _mfma(0x67, "V_MFMA_F32_16X16X16_BF16", "V_MFMA_F32_16X16X16_BF16", "v_mfma_f32_16x16x16bf16_1k"),
        # the bf16 MFMAs with two elements per source (gfx908's; CDNA3 dropped them)
        _mfma(0x68, "V_MFMA_F32_32X32X2_2B_BF16", "V_MFMA_F32_32X32X4_2B_BF16", "v_mfma_f32_32x32x2bf16", 32),
        _mfma(0x69, "V_MFMA_F32_16X16X2_4B_BF16", "V_MFMA_F32_16X16X4_4B_BF16", "v_mfma_f32_16x16x2bf16", 32),
        _mfma(0x6B, "V_MFMA_F32_4X4X2_16B_BF16", "V_MFMA_F32_4X4X4_16B_BF16", "v_mfma_f32_4x4x2bf16", 32),
        _mfma(0x6C, "V_MFMA_F32_32X32X4_BF16", "V_MFMA_F32_32X32X8_BF16", "v_mfma_f32_32x32x4bf16", 32),
        _mfma(0x6D, "V_MFMA_F32_16X16X8_BF16", "V_MFMA_F32_16X16X16_BF16", "v_mfma_f32_16x16x8bf16", 32),
    ),
}
