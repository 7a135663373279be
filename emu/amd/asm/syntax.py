"""LLVM's spellings of symbolic operands: waitcnt, s_delay_alu, hwreg, sendmsg, DPP controls, output modifiers."""
from __future__ import annotations

from typing import TYPE_CHECKING

from emu.amd import target
from emu.amd.asm import buffer_formats, names
from emu.amd.regs import DPP8FI

if TYPE_CHECKING:
    from emu.amd.decode import Inst

UNKNOWN = "<unknown>"  # what we print for bytes that are no valid instruction (llvm-objdump prints the same)
INV2PI = {16: "0.15915494", 32: "0.15915494", 64: "0.15915494309189532"}
OMOD = {1: "mul:2", 2: "mul:4", 3: "div:2"}


def simm16(inst: Inst, kind: str) -> str:
    v = inst.fields["simm16"]
    if kind == "LABEL":
        return str(v)
    if kind == "VERSION" and not v & _VERSION_RESERVED:
        return version(v)
    if inst.op.name in _DECIMAL and v <= 64:
        return str(v)
    if kind == "WAITCNT":
        return waitcnt(inst.family, v)
    if kind == "DELAY":
        return delay_alu(v)
    if kind in ("WAITCNT_DEPCTR", "WAIT_ALU") and target.generation(inst.family).gfx >= 10:
        return depctr(v)
    if kind == "SENDMSG":
        return sendmsg(inst, v)
    if kind == "HWREG":
        return hwreg(inst, v)
    return f"0x{v:x}"


# s_version's immediate: the microcode's target (low byte; LLVM 19 names these) and three flag bits
_UC_VERSIONS = {0: "UC_VERSION_GFX7", 4: "UC_VERSION_GFX10", 6: "UC_VERSION_GFX11", 9: "UC_VERSION_GFX12"}
_UC_FLAGS = ((13, "UC_VERSION_W64_BIT"), (14, "UC_VERSION_W32_BIT"), (15, "UC_VERSION_MDP_BIT"))
_VERSION_RESERVED = 0x1F00  # a value with these bits set is printed in hex


def version(v: int) -> str:
    """s_version's operand as LLVM 19 prints it: the target's name or number, then each flag OR-ed on, the
    expression so far in parentheses (`(UC_VERSION_GFX11|UC_VERSION_W64_BIT)|UC_VERSION_MDP_BIT`)."""
    text = _UC_VERSIONS.get(v & 0xFF, str(v & 0xFF))
    for bit, name in _UC_FLAGS:
        if v >> bit & 1:
            text = f"({text})|{name}" if "|" in text else f"{text}|{name}"
    return text


# SOPP/SOPK immediates LLVM prints in decimal when they are inline integers (0..64), else in hex
_DECIMAL = {"S_NOP", "S_SLEEP", "S_SETPRIO", "S_SETKILL", "S_SETHALT", "S_TRAP", "S_INCPERFLEVEL", "S_DECPERFLEVEL",
            "S_DENORM_MODE"}


def waitcnt(fam: str, v: int) -> str:
    """S_WAITCNT's immediate in the counter fields of the generation (Generation.waitcnt)."""
    parts, used, all_max = [], 0, True
    for name, pieces in target.generation(fam).waitcnt:
        val, sh, full = 0, 0, 0
        for lo, w in pieces:
            val |= ((v >> lo) & ((1 << w) - 1)) << sh
            full |= ((1 << w) - 1) << sh
            used |= ((1 << w) - 1) << lo
            sh += w
        parts.append((name, val, full))
        all_max &= val == full
    out = [f"{n}({c})" for n, c, full in parts if c != full or all_max]
    return " ".join(out)


_DELAY_ID = ("NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4", "TRANS32_DEP_1", "TRANS32_DEP_2",
             "TRANS32_DEP_3", "FMA_ACCUM_CYCLE_1", "SALU_CYCLE_1", "SALU_CYCLE_2", "SALU_CYCLE_3")
_DELAY_SKIP = ("SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4")


def delay_alu(v: int) -> str:
    id0, skip, id1 = v & 0xF, (v >> 4) & 7, (v >> 7) & 0xF

    def name(table, i, what):
        return table[i] if i < len(table) else f"/* invalid {what} value */"
    out = []
    if id0:
        out.append(f"instid0({name(_DELAY_ID, id0, 'instid')})")
    if skip:
        out.append(f"instskip({name(_DELAY_SKIP, skip, 'instskip')})")
    if id1:
        out.append(f"instid1({name(_DELAY_ID, id1, 'instid')})")
    return " | ".join(out) if out else "0"


def sendmsg(inst: Inst, v: int) -> str:
    msg = names.of(names.SENDMSG, inst.family).get(v)
    if msg:
        return f"sendmsg({msg})"
    return f"sendmsg({v}, 0, 0)" if v < 256 else str(v)


def hwreg(inst: Inst, v: int) -> str:
    rid, off, size = v & 0x3F, (v >> 6) & 0x1F, ((v >> 11) & 0x1F) + 1
    name = names.of(names.HWREG, inst.family).get(rid, str(rid))
    if off == 0 and size == 32:
        return f"hwreg({name})"
    return f"hwreg({name}, {off}, {size})"


_QUAD = "quad_perm:[{},{},{},{}]"


_DPP_WAVE = {0x130: "wave_shl:1", 0x134: "wave_rol:1", 0x138: "wave_shr:1", 0x13C: "wave_ror:1",
             0x142: "row_bcast:15", 0x143: "row_bcast:31"}  # GFX9 whole-wave DPP controls
_INVALID_DPP = "/* Invalid dpp_ctrl value */"  # what LLVM 19 prints in place of a reserved control


def dpp16(f: dict[str, int], broadcasts: bool) -> list[str]:
    """DPP16 modifiers; `broadcasts`: gfx9's wave shifts and row broadcasts in place of row_share / row_xmask."""
    c = f["dpp"]
    if c <= 0xFF:
        ctl = _QUAD.format(c & 3, (c >> 2) & 3, (c >> 4) & 3, (c >> 6) & 3)
    elif 0x101 <= c <= 0x10F:
        ctl = f"row_shl:{c & 0xF}"
    elif 0x111 <= c <= 0x11F:
        ctl = f"row_shr:{c & 0xF}"
    elif 0x121 <= c <= 0x12F:
        ctl = f"row_ror:{c & 0xF}"
    elif c == 0x140:
        ctl = "row_mirror"
    elif c == 0x141:
        ctl = "row_half_mirror"
    elif 0x150 <= c <= 0x15F:  # gfx90a+ name the same codes row_newbcast
        ctl = f"{'row_newbcast' if broadcasts else 'row_share'}:{c & 0xF}"
    elif 0x160 <= c <= 0x16F:
        ctl = "/* row_xmask is not supported on ASICs earlier than GFX10 */" if broadcasts else \
            f"row_xmask:{c & 0xF}"
    elif c in _DPP_WAVE:
        ctl = _DPP_WAVE[c] if broadcasts else \
            f"/* {_DPP_WAVE[c].split(':')[0]} is not supported starting from GFX10 */"
    else:
        ctl = _INVALID_DPP
    out = [ctl, f"row_mask:0x{f['row_mask']:x}", f"bank_mask:0x{f['bank_mask']:x}"]
    if f.get("bc"):
        out.append("bound_ctrl:1")
    if f.get("fi"):
        out.append("fi:1")
    return out


def dpp8(f: dict[str, int], src0: int) -> list[str]:
    sel = [f[f"lane_sel_{i}"] for i in range(8)]
    out = [f"dpp8:[{','.join(map(str, sel))}]"]
    if src0 == DPP8FI:
        out.append("fi:1")
    return out


_TH = {1: "NT", 2: "HT", 4: "NT_RT", 5: "RT_NT", 6: "NT_HT", 7: "NT_WB"}
_SCOPE = ("", "SCOPE_SE", "SCOPE_DEV", "SCOPE_SYS")


def th_scope(inst: Inst) -> list[str]:
    """RDNA4 temporal hint (named by access kind: load, store, atomic) and scope of memory instructions."""
    f = inst.fields
    th, scope = f.get("th", 0), f.get("scope", 0)
    name = inst.op.name
    out = []
    if th and "_ATOMIC" in name:
        if th & 4:
            t = f"CASCADE_{'NT' if th & 2 else 'RT'}" if scope >= 2 else f"0x{th:x}"
        elif th & 2:
            t = "NT_RETURN" if th & 1 else "NT"
        else:
            t = "RETURN"
        out.append(f"th:TH_ATOMIC_{t}")
    elif th:
        store = "STORE" in name
        if th == 7 and not store:
            out.append("th:0x7")
        else:
            t = ("BYPASS" if scope == 3 else "RT_WB" if store else "LU") if th == 3 else _TH[th]
            out.append(f"th:TH_{'STORE' if store else 'LOAD'}_{t}")
    if scope:
        out.append(f"scope:{_SCOPE[scope]}")
    return out


def gpr_idx(v: int) -> str:
    if v > 15:
        return f"0x{v:x}"
    return f"gpr_idx({','.join(n for i, n in enumerate(('SRC0', 'SRC1', 'SRC2', 'DST')) if v >> i & 1)})"


def buffer_format(inst: Inst) -> str:
    f = inst.fields
    if "format" in f:
        v = f["format"]
    elif "dfmt" in f:
        v = f["dfmt"] | f["nfmt"] << 4
    else:
        return ""
    if v == 1 or not inst.op.name.startswith("TBUFFER"):  # the default format is not printed
        return ""
    name = names.of(buffer_formats.BUFFER_FORMAT, inst.family).get(v)
    return f"format:[{name}]" if name else f"format:{v}"


_SDWA_SEL = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
_SDWA_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")


def _sel(v: int) -> str:
    return _SDWA_SEL[v] if v < len(_SDWA_SEL) else str(v)


def sdwa(inst: Inst) -> list[str]:
    """SDWA modifiers, all printed (CDNA): clamp, omod, dst_sel, dst_unused, src0_sel, src1_sel."""
    f = inst.fields
    out = ["clamp" if f.get("clmp") else "", OMOD.get(f.get("omod", 0), "")]
    if "dst_sel" in f:
        unused = _SDWA_UNUSED[f["dst_unused"]] if f["dst_unused"] < 3 else str(f["dst_unused"])
        out += [f"dst_sel:{_sel(f['dst_sel'])}", f"dst_unused:{unused}"]
    out.append(f"src0_sel:{_sel(f['src0_sel'])}")
    if inst.base != "VOP1":
        out.append(f"src1_sel:{_sel(f['src1_sel'])}")
    return out


# s_waitcnt_depctr / s_wait_alu fields: name, lo bit, width (their all-ones value is the default)
_DEPCTR = (("hold_cnt", 7, 1), ("sa_sdst", 0, 1), ("va_vdst", 12, 4), ("va_sdst", 9, 3), ("va_ssrc", 8, 1),
           ("va_vcc", 1, 1), ("vm_vsrc", 2, 3))


def depctr(v: int) -> str:
    """Symbolic when the unused bits 6..5 are clear, as LLVM requires; the fields not at their default."""
    if (v >> 5) & 3:
        return f"0x{v:x}"
    fields = [(n, (v >> lo) & ((1 << w) - 1), (1 << w) - 1) for n, lo, w in _DEPCTR]
    out = [f"depctr_{n}({x})" for n, x, default in fields if x != default]
    return " ".join(out) if out else " ".join(f"depctr_{n}({x})" for n, x, _ in fields)
