"""The fields of one drawn AMD GPU instruction (emu.amd.strategies): registers in range and aligned, sources the
operand kind accepts, each field's valid values. Fields is the base of the strategies' instruction generator."""
from __future__ import annotations

import re
from dataclasses import dataclass

from hypothesis import strategies as st

from emu.amd import isa, target
from emu.amd.exec.state import EXEC, VCC
from emu.amd.regs import INLINE_FLOAT, INLINE_INT, LITERAL, VGPR0

INLINE = (*INLINE_INT, *INLINE_FLOAT)  # the inline integers and float constants

# Fields LLVM 19 decodes only as 0 for some opcodes of a chip (arch, encoding, opcode regexes; field; why).
_LLVM_ZERO = (
    (r"gfx90a", r"FLAT|GLOBAL|MUBUF", r"\w+_ATOMIC_(ADD_F32|PK_ADD_F16|(ADD|MIN|MAX)_F64)", "sc1",
     "its gfx90a float atomics take no scc: the assembler drops it, the disassembler rejects the bit"),
)

# Source operand kinds -> what they accept: s = scalar registers, v = VGPRs, i = inline constants, l = literal.
ACCEPTS = {
    "SRC": "svil", "SRC_NOLDS": "svil", "SRC_NOLIT": "svi", "SRC_SIMPLE": "svi", "SSRC": "sil",
    "SSRC_NOLIT": "si", "SSRC_LANESEL": "si", "SREG_M0_INL": "si", "SREG_LITERAL": "sl",
    "SRC_VGPR": "v", "VGPR": "v", "VGPR_OR_LDS": "v", "SRC_VGPR_OR_INLINE": "vi", "SRC_VGPR_OR_ACCVGPR": "v",
    "SRC_VGPR_OR_ACCVGPR_OR_CONST": "vi", "SRC_ACCVGPR": "v", "VGPR_OR_ACCVGPR": "v", "ACCVGPR": "v",
    "SREG": "S", "SDST": "s", "SDST_NULL": "s", "SREG_NOVCC": "S", "EXEC": "s", "SMEM_OFFSET": "S",
    "SSRC_BARRIER_ID": "i",
}

# DPP16 dpp_ctrl values: quad_perm, row_shl/shr/ror, row_mirror / row_half_mirror, then gfx9's wave shifts and
# row broadcasts (Generation.dpp_broadcasts) or RDNA's row_share and row_xmask.
_DPP_ROWS = (*range(0x000, 0x100), *range(0x101, 0x110), *range(0x111, 0x120), *range(0x121, 0x130), 0x140, 0x141)
_DPP_CTRL = {True: (*_DPP_ROWS, 0x130, 0x134, 0x138, 0x13C, 0x142, 0x143),
             False: (*_DPP_ROWS, *range(0x150, 0x160), *range(0x160, 0x170))}
_SIMM16_BITS = {"S_SET_GPR_IDX_MODE": 0xF}  # the table types its 4-bit VGPR-index mode as a 16-bit immediate

# Cache-policy fields: any value, for opcodes that move data.
_CACHE_BITS = re.compile(r"glc|slc|dlc|sc0|sc1|nt|scope|th")
_DATA = ("sdata", "vdata", "data", "data0", "vdst", "vsrc")
_ADDRESS = ("sbase", "addr", "vaddr", "saddr", "srsrc", "rsrc")

# Modifier / control fields whose every value is valid.
_FREE_BITS = re.compile(r"offset\d?|ioffset|lane_sel_\d|row_mask|bank_mask|bc|fi|"
                        r"done|en|attr|attr_chan|wait_vdst|wait_va_vdst|wait_vm_vsrc|waitexp")


def regs(bits: int) -> int:
    """Registers an operand of `bits` bits occupies."""
    return max(1, (bits + 31) // 32)


@dataclass(frozen=True)
class Enc:
    """Everything instructions() needs about one encoding, computed once."""
    enc: isa.Encoding
    ops: tuple[isa.Op, ...]  # opcodes of the op field (of opy for VOPD)
    xops: tuple[isa.Op, ...] = ()  # VOPD: opcodes of opx
    literal_only: frozenset[str] = frozenset()  # opcodes (names) whose literal is implicit (FMAMK's K, ...)


class Fields:
    """Draws the fields of one instruction of one encoding for one chip (or family)."""

    def __init__(self, arch: str, t: isa.ISA, e: Enc):
        self.t, self.e, self.gen = t, e, target.generation(arch)
        self.zero = [(re.compile(op), fld) for a, en, op, fld, _ in _LLVM_ZERO
                     if re.fullmatch(a, arch) and re.fullmatch(en, e.enc.name)]
        self.short = e.enc.base in ("VOP1", "VOP2", "VOPC")  # 32-bit encodings: 16-bit VGPR operands are v0..v127
        self.dpp = e.enc.variant.startswith("DPP")
        self.promoted = e.enc.base in ("VOP3", "VOP3SD") and not self.dpp  # VOP3 forms of 32-bit opcodes

    # -- registers ----------------------------------------------------------------------------------------
    @property
    def saddr_none(self) -> int:
        """The saddr of opcodes without a scalar address, as LLVM encodes them (gfx9: 0)."""
        return 0 if self.gen.gfx == 9 else self.gen.null

    def sgpr(self, draw, n: int) -> int:
        align = 1 if n == 1 else 2 if n == 2 else 4
        return draw(st.integers(0, (self.gen.sgprs - n) // align)) * align

    def vgpr(self, draw, n: int, limit: int = 256) -> int:
        align = 2 if n > 1 and self.gen.vgpr_align64 else 1
        return draw(st.integers(0, (limit - n) // align)) * align

    def scalar(self, draw, n: int, accepts: str) -> int:
        """An SGPR (tuple) or, where `accepts` allows ('s'), a special register."""
        g = self.gen
        # LLVM 19 decodes gfx9's NULL (125) but does not assemble it: drawn from gfx10 on
        specials = [] if "S" in accepts else [VCC, EXEC, g.null] if g.gfx > 9 else [VCC, EXEC]
        if n == 1 and "S" not in accepts:
            specials.append(g.m0)
        if specials and draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(specials))
        return self.sgpr(draw, n)

    def source(self, draw, operand: isa.Operand, field: isa.Field, literal: bool) -> int:
        """A value for a register/source field that the operand kind accepts."""
        if operand.kind == "EXEC":
            return EXEC
        if operand.kind == "SDST_NULL":
            return self.gen.null
        accepts = ACCEPTS.get(operand.kind, "")
        n = regs(operand.bits)
        limit = 128 if self.short and operand.bits == 16 else 256
        if field.kind == "vgpr" or (field.kind == "src" and accepts == "v"):
            return self.vgpr(draw, n, limit) + (VGPR0 if field.kind == "src" else 0)
        kinds = [k for k in "svi" if k in accepts.lower() and (k != "v" or field.kind == "src")]
        if literal and "l" in accepts:
            kinds.append("l")
        if not kinds:
            return field.value or 0
        k = draw(st.sampled_from(kinds))
        if k == "v":
            return VGPR0 + self.vgpr(draw, n, limit)
        if k == "i":  # LLVM turns float constants into literals for 16-bit integer and SALU operands
            ints = operand.bits == 16 and (field.kind == "ssrc" or re.search(r"[IU]16", operand.fmt))
            return draw(st.sampled_from(INLINE_INT if ints else INLINE))
        if k == "l":
            return LITERAL
        return self.scalar(draw, n, accepts)

    def operand(self, ops: dict[str, isa.Op], name: str) -> tuple[isa.Op | None, isa.Operand | None]:
        """The opcode a field belongs to and the operand it encodes (None if the opcode does not use it)."""
        if "opx" in ops:  # VOPD: the table types opy's fields; opx has the same operands
            op = ops["opx"] if name in ("srcx0", "vsrcx1", "vdstx") else ops["opy"]
            name = name.replace("x", "y")
        else:
            op = ops.get("op")
        if op is None:
            return None, None
        o = op.operands
        alias = {"src0": "vsrc0", "vsrc0": "src0", "src1": "vsrc1", "vsrc1": "src1"}
        operand = o.get(name) or o.get(alias.get(name, ""))
        if self.promoted and name in ("src0", "src1") and operand is not None and ACCEPTS[operand.kind] == "v":
            operand = self.vop3_source(op, operand)
        return op, operand

    def vop3_source(self, op: isa.Op, operand: isa.Operand) -> isa.Operand:
        """The VOP3 form of a VOP1/VOP2/VOPC opcode takes in src0/src1 whatever its 32-bit form's src0 takes;
        the table types them after the 32-bit form's VGPR-only fields."""
        for space in ("VOP1", "VOP2", "VOPC"):
            e32 = self.t.by_name.get((space, op.name))
            if e32 is not None and (src0 := e32.operands.get("src0")) is not None:
                return isa.Operand(operand.fmt, operand.bits, src0.kind) if "s" in ACCEPTS[src0.kind] else operand
        return operand

    def field(self, draw, op: isa.Op | None, operand: isa.Operand | None, f: isa.Field, lit: bool) -> int:
        if op is not None and not op.operands:  # e.g. S_DCACHE_INV, GLOBAL_WB
            return self.saddr_none if f.name == "saddr" else 0
        if operand is not None and operand.kind.startswith("SIMM") and f.kind != "bits":  # an immediate in a
            bits = min(5, int(operand.kind[4:]))  # register field; LLVM 19 decodes 5 bits of RDNA4's SIMM8
            return draw(st.integers(0, (1 << bits) - 1))
        if self.dpp and f.name in ("src1", "src2") and operand is not None and operand.fmt != "NUM_M64":  # DPP: VGPRs
            return VGPR0 + self.vgpr(draw, regs(operand.bits))
        if f.name == "saddr":
            if operand is None:
                return self.saddr_none
            return self.sgpr(draw, regs(operand.bits)) if draw(st.booleans()) else self.gen.saddr_off
        if f.kind in ("vgpr", "src", "ssrc", "sgpr"):
            return self.source(draw, operand, f, lit) if operand else (f.value or 0)
        if f.name in ("rsrc", "samp") and operand is not None:  # RDNA4: SGPR numbers in plain fields
            return self.sgpr(draw, regs(operand.bits))
        if f.name == "vaddr0" and op is not None:  # the first image address VGPR (later ones depend on dim)
            return self.vgpr(draw, 1)
        if f.kind == "sbase":
            return self.sgpr(draw, regs(operand.bits)) >> 1 if operand else 0
        if f.kind == "srsrc":
            return self.sgpr(draw, regs(operand.bits)) >> 2 if operand else 0
        if f.kind == "vdsty":
            return self.vgpr(draw, 1) >> 1 if operand else 0
        if f.name == "dpp":
            return draw(st.sampled_from(_DPP_CTRL[self.gen.dpp_broadcasts]))
        if f.name == "simm16":
            return self.simm16(draw, operand, op.name) if operand else 0
        if f.name in ("dfmt", "nfmt") and op is not None and op.name.startswith("TBUFFER"):
            return draw(st.integers(f.name == "dfmt", (1 << f.width) - 1))  # dfmt 0 is invalid
        if f.name == "format":  # buffer data format; 0 is BUF_FMT_INVALID, untyped accesses have 1
            return draw(st.integers(1, 63)) if op is not None and op.name.startswith("TBUFFER") else 1
        if _CACHE_BITS.fullmatch(f.name):
            data = op is not None and any(not o.kind.startswith("SIMM") for n, o in op.operands.items() if n in _DATA) \
                and any(n in op.operands for n in _ADDRESS)
            return draw(st.integers(0, (1 << f.width) - 1)) if data else 0
        if f.name.startswith("attr") and (op is None or "attr" not in op.operands):
            return 0
        if f.name == "attr":  # attr0 .. attr32
            return draw(st.integers(0, 32))
        if f.name in ("offset", "ioffset") and op is not None and op.name.startswith("S_BUFFER_"):
            return draw(st.integers(0, (1 << 20) - 1))  # buffer offsets are unsigned
        if f.name == "offset" and self.e.enc.base == "FLAT":  # the FLAT segment's offset is 12-bit unsigned
            return draw(st.integers(0, 4095)) if op is not None and "addr" in op.operands else 0
        if f.name in ("offset", "ioffset") and op is not None and not any(n in op.operands for n in _ADDRESS):
            return 0  # S_MEMTIME and friends
        if _FREE_BITS.fullmatch(f.name):
            return draw(st.integers(0, (1 << f.width) - 1))
        return f.value or 0

    def simm16(self, draw, operand: isa.Operand, op_name: str) -> int:
        """The 16-bit immediate of SOPP/SOPK, structured where the operand kind says so."""
        if operand.kind == "HWREG":  # register id, bit offset, size - 1
            hwreg = sorted(self.t.enums["HWREG"])
            return draw(st.sampled_from(hwreg)) | draw(st.integers(0, 31)) << 6 | draw(st.integers(0, 31)) << 11
        if operand.kind == "DELAY":  # instid0, instskip, instid1
            return draw(st.integers(0, 11)) | draw(st.integers(0, 5)) << 4 | draw(st.integers(0, 11)) << 7
        if operand.kind == "WAITCNT":  # vmcnt, expcnt, lgkmcnt; the bits between them are unused
            return draw(st.integers(0, 0xFFFF)) & self.gen.waitcnt_mask
        return draw(st.integers(0, 0xFFFF)) & _SIMM16_BITS.get(op_name, 0xFFFF)
