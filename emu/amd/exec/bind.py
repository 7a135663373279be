"""The operand binder: what each name an instruction's pseudocode reads or writes is in the instruction, for all tiers.

For a decoded instruction (emu.amd.decode.Inst) and its compiled semantics (emu.pcode), a `Binding` gives each input
and output name of the pcode its `Operand`: the encoding field it comes from, its register code, its width in bits as
the pcode types it, its format (the ISA operand tables': a float, an integer or a wave mask), its `Kind` and its
modifiers (`Mods`: abs / neg, the half of a 16-bit operand, SDWA selects, VOP3P packing, DPP; a result's omod, clamp
and denormal flushing). Scalar operand codes are emu.amd.regs's, M0 and NULL the generation's (emu.amd.target).

The reference plans (emu.amd.exec.plan, valu, vmem) render a binding as closures, the lean interpreter
(emu.amd.exec.interp) as Python source and the LLVM tier (emu.amd.exec.translate) as LLVM IR; each renders what it
takes and declines the rest (emu.amd.exec.takes). Memory instructions: the binding covers their data registers and
fields; where an access goes (ADDR, MEM) each tier places itself.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from emu.amd import isa, target
from emu.amd.exec import hwreg
from emu.amd.exec.operands import OperandError, Unsupported, constant, dest_register, is_float, sext, source_register
from emu.amd.exec.state import ACC
from emu.amd.regs import EXEC, LITERAL, VCC, VGPR0

if TYPE_CHECKING:
    from emu.pcode import Semantics

MASK_FMT = "NUM_M64"  # operand format of wave masks (compare results, carry-outs)
# untyped (B32/B16) sources the hardware reads as floats under VOP3 abs/neg (LLVM accepts |x| / -x on them)
FLOAT_MODIFIED = frozenset({"V_CNDMASK_B32", "V_CNDMASK_B16"})
MIX = ("V_FMA_MIX", "V_MAD_MIX")  # VOP3P mixed f16/f32: OPSEL_HI[i] picks f16, NEG_HI[i] is abs
FLAT_OFFSET_MASK = 0xFFF  # the bits of a gfx9 FLAT-segment OFFSET the hardware reads
# CDNA's 16-bit results clear the high half of their VGPR (`D0.f16 = ...`; V_MADAK_F16's text spells it out as
# {16'0, tmp}), except where the pcode writes the slice D0[15 : 0] alone, which keeps the other bits: V_MAD_MIXLO_F16
# (LLVM's GCNSubtarget::zeroesHigh16BitsOfDest, "derived from experimentation", has gfx9's mixlo preserve them too)
_LOW_SLICE = re.compile(r"\bD0\[15 : 0\][.\w]* =")
_SHORT = {"S0": "src0", "S1": "vsrc1", "D0": "vdst"}  # VOP2 / VOPC (and VOPD's halves)
_LONG = {"S0": "src0", "S1": "src1", "S2": "src2", "D0": "vdst"}
SOURCES = ("S0", "S1", "S2")
SDWA_SELECTS = {"BYTE0": 0, "BYTE1": 1, "BYTE2": 2, "BYTE3": 3, "WORD0": 4, "WORD1": 5, "DWORD": 6}
_INST_FIELDS = {"INST.OMOD": "omod", "INST.ABS": "abs", "INST.NEG": "neg"}  # encoding fields named as such
_MODIFIER_FIELDS = {"OPSEL": "opsel", "OPSEL_HI": "opsel_hi", "NEG": "neg", "NEG_HI": "neg_hi", "CLAMP": "clmp"}
# wave state the pcode reads by name (with the status bits hwreg reads)
_STATE_READS = frozenset({"SCC", "EXEC", "VCC", "M0", "EXECZ", "VCCZ", "MODE", "TRAPSTS", "PC", "VGPR", "SGPR",
                          "HW_REGISTERS", "HwRegWriteMask"})
_STATE_WRITES = frozenset({"SCC", "EXEC", "VCC", "M0", "MODE", "TRAPSTS", "VGPR", "SGPR"})


class Kind(enum.Enum):
    """What an operand is."""
    SGPR = "sgpr"  # scalar registers held as plain slots of the SGPR file at `code` (SGPRs, TTMPs)
    SPECIAL = "special"  # a scalar code of other state: VCC, EXEC (halves), M0, NULL, SCC, VCCZ, EXECZ, apertures
    VGPR = "vgpr"  # VGPR rows from `code` - VGPR0 (ACC VGPRs are rows ACC..)
    INLINE = "inline"  # an inline constant source: `value`, at the operand's width and format
    LITERAL = "literal"  # the instruction's literal as a source: `value`
    MASK = "mask"  # a wave mask (an int, bit i = lane i) at scalar code `code`: VCC, an SGPR pair, EXEC, NULL (a
    # constant source: `value`); a destination takes the result's lanes ANDed with EXEC
    FIELD = "field"  # a value of the encoding (an immediate, an offset, a modifier bit, the literal): `value`
    REGNUM = "regnum"  # a register's number as the pcode indexes the VGPR file with it: `value`; None for a source
    # that is no VGPR (`code`: an SGPR or constant the reference gives rows of its own)
    STATE = "state"  # wave state the pcode names (EXEC, VCC, SCC, M0, MODE, PC, status bits, register files)


@dataclass(frozen=True)
class Mods:
    """How an operand is taken from or put into its register."""
    abs: bool = False
    neg: bool = False
    hi: bool = False  # bits 31:16 of the register (opsel, or a VGPR code past VGPR0 + 127 on RDNA)
    flush: bool = False  # float denormals read (written) as zero of their sign where MODE.FP_DENORM flushes them
    sdwa: tuple[int, int] | None = None  # SDWA: a source's (select, sext), the destination's (select, dst_unused)
    packed: tuple[int, int, int, int] | None = None  # VOP3P: this source's (opsel, opsel_hi, neg, neg_hi) bits
    mix: bool = False  # a VOP3P mix source (packed: OPSEL_HI picks f16, NEG_HI is abs)
    dpp: bool = False  # src0 of a DPP form: read from the lane the DPP control selects
    omod: int = 0  # a float result's output modifiers
    clamp: bool = False
    zero_hi16: bool = False  # a 16-bit result clears the other half of its register
    offset: int | None = None  # a constant added to the value (a DS address whose pcode does not add OFFSET)


NO_MODS = Mods()


@dataclass(frozen=True)
class Operand:
    name: str  # the pcode's
    kind: Kind
    field: str | None = None  # the encoding field it comes from
    code: int | None = None  # its scalar operand code (VGPR n: VGPR0 + n)
    bits: int = 32
    fmt: str = ""  # the operand table's format (NUM_F32, NUM_M64, ...)
    value: int | None = None
    mods: Mods = NO_MODS

    @property
    def reg(self) -> int:
        """The VGPR row of a VGPR operand."""
        return self.code - VGPR0

    @property
    def scalar(self) -> bool:
        """A register of the scalar file (plain or special)."""
        return self.kind in (Kind.SGPR, Kind.SPECIAL)


@dataclass(frozen=True)
class Binding:
    """An instruction's operands: `inputs` in the order the reference reads them, `outputs` by name (a memory
    result the instruction drops, such as an atomic's pre-op value without GLC, has none). `fields`: the encoding
    fields they come from (a VOPD half's, or those VGPR indexing offset)."""
    op: isa.Op
    sem: Semantics
    fields: dict
    inputs: dict[str, Operand]
    outputs: dict[str, Operand]

    @property
    def vector(self) -> bool:
        """Per-lane semantics (else scalar: ints)."""
        return self.sem.ir.vector


def dpp16_selects(inst, bd: Binding) -> bool:
    """Whether a DPP16 form selects src0's lanes: pcode that reads no S0 has none to select (nor a write mask)."""
    s0 = bd.inputs.get("S0")
    return s0 is not None and s0.mods.dpp and inst.enc.endswith("DPP16")


# -- formats and constants ---------------------------------------------------------------------------------------
def float_bits(fmt: str, bits: int) -> int:
    """The float width of an operand of format `fmt` and `bits` (a packed pair: 16)."""
    return 16 if "16" in fmt else 64 if "F64" in fmt else 32 if bits >= 32 else 16


def keeps_denormals(name: str) -> bool:
    """Ops that move or classify float bits and never flush them (moves, selects, class tests)."""
    return "CLASS" in name or name.startswith(("V_MOV", "V_CNDMASK", "V_ACCVGPR"))


def table_entry(op: isa.Op, fld: str | None) -> isa.Operand | None:
    """The operand table's entry for an encoding field (some tables name a VOP3 src0 'vsrc0')."""
    if not fld:
        return None
    return op.operands.get(fld) or op.operands.get("v" + fld)


def width(sem: Semantics, name: str, op: isa.Op, fld: str | None, default: int = 32) -> int:
    """Bits of an operand as the pcode types it; the operand table's for slices narrower than 16 (S0[5:0])."""
    b = sem.widths.get(name, 0)
    if b >= 16:
        return b
    o = table_entry(op, fld)
    return max(b, o.bits if o is not None else 0) or default


def fmt(op: isa.Op, fld: str | None) -> str:
    o = table_entry(op, fld)
    return o.fmt if o is not None else ""


def opsel_hi(f: dict) -> int:
    """VOP3P OPSEL_HI: bits 1:0 in one field, bit 2 (src2) in another."""
    return f.get("opsel_hi", 3) | f.get("opsel_hi2", 1) << 2


def valu_fields(base: str) -> dict[str, str]:
    """The encoding field of each of S0..S2 and D0 in a VALU encoding."""
    return _SHORT if base in ("VOP2", "VOPC") else _LONG


def acc_offset(inst, fld: str, fields: dict | None) -> int:
    """Row offset of an ACC VGPR operand (CDNA), as the decoder classifies the operand (none in given fields)."""
    o = inst.operands.get(fld) if fields is None else None
    return ACC if o is not None and o.kind == "agpr" else 0


# -- offsets of memory instructions ------------------------------------------------------------------------------
def smem_offsets(f: dict, gen: target.Generation) -> tuple[int, int | None]:
    """A scalar memory instruction's immediate byte offset and its SGPR offset's operand code (None: none)."""
    if gen.smem_imm_bit:  # IMM: the offset field is a byte offset, else an SGPR; SOFFSET_EN adds soffset
        imm = f.get("imm", 1)
        soff = f["soffset"] if f.get("soffset_en") else None if imm else f["offset"] & 0x7F
        return (sext(f["offset"], 21) if imm else 0), soff
    key = "ioffset" if "ioffset" in f else "offset"
    soff = f.get("soffset")
    return sext(f[key], 24 if key == "ioffset" else 21), None if soff in (None, gen.null) else soff


def memory_offset(inst) -> int:
    """The byte offset of a GLOBAL / FLAT / SCRATCH instruction. gfx9's FLAT segment reads its 13-bit OFFSET as
    12 bits unsigned: the hardware ignores the MSB (LLVM's AMDGPU backend: "MSB is ignored and forced to zero")."""
    f = inst.fields
    if "ioffset" in f:
        return sext(f["ioffset"], 24)
    if target.generation(inst.family).flat_offset_unsigned and inst.base == "FLAT":
        return f["offset"] & FLAT_OFFSET_MASK
    return sext(f["offset"], 13)


def ds_offset(inst) -> int:
    """The byte offset of a DS instruction that names one (offset1:offset0)."""
    return inst.fields["offset1"] << 8 | inst.fields["offset0"]


def returns(f: dict) -> bool:
    """Whether an atomic returns the pre-op value (glc / sc0 / th bit 0)."""
    if "th" in f:
        return bool(f["th"] & 1)
    return bool(f.get("glc", f.get("sc0", 0)))


class Binder:
    """Binds the instructions of one instruction set for one wave size (and holds their compiled semantics)."""

    def __init__(self, arch: str, lanes: int):
        """`arch`: a processor (gfx942), a generation's instruction set (cdna2) or a family name (its instructions as
        the family's whole tables say)."""
        name = isa.name(arch)
        self.arch, self.fam, self.lanes = arch, name, lanes
        self.isa = isa.load(name)
        self.gen = target.generation(arch)
        self.m0, self.null = self.gen.m0, self.gen.null
        self.saddr_off = self.gen.saddr_off
        self.mask_bits = 64 if lanes == 64 else 32
        self._sems: dict[tuple[str, str], object] = {}

    def sem(self, op: isa.Op) -> Semantics:
        """The compiled semantics of `op` (Unsupported: it has none, and faults when executed)."""
        key = (op.enc, op.name)
        s = self._sems.get(key)
        if s is None:
            try:
                from emu.pcode import compile_op
                s = compile_op(self.arch, op.enc, op.name)
            except Exception as e:  # Unsupported, or a pcode gap: the instruction faults when executed
                s = Unsupported(f"{op.enc} {op.name}: no compiled semantics ({type(e).__name__}: {e})")
            self._sems[key] = s
        if isinstance(s, Unsupported):
            raise s
        return s

    def smem_access(self, op: isa.Op) -> int:
        """Bytes one scalar load reads from memory (4 for loads of dwords), from its pcode."""
        return min(self.sem(op).access_bits // 8, 4)

    # -- scalar operands -----------------------------------------------------------------------------------------
    def scalar_source(self, name: str, code: int, bits: int, fmt_: str = "", literal: int | None = None,
                      fld: str | None = None, read_bits: int | None = None, mods: Mods = NO_MODS) -> Operand:
        """A source the scalar code `code` names, read as `read_bits` (default `bits`; 32 or 64): a constant at
        `bits` and `fmt_`, or a register (OperandError: none a source may read)."""
        c = constant(code, bits, fmt_, literal)
        if c is not None:
            return Operand(name, Kind.LITERAL if code == LITERAL else Kind.INLINE, fld, code, bits, fmt_, c, mods)
        k = Kind.SGPR if source_register(code, 2 if (read_bits or bits) == 64 else 1, self.fam) else Kind.SPECIAL
        return Operand(name, k, fld, code, bits, fmt_, mods=mods)

    def scalar_dest(self, name: str, code: int, bits: int, fld: str | None = None, kind: Kind | None = None
                    ) -> Operand:
        """A destination the scalar code `code` names (OperandError: none an instruction may write); `kind`: MASK
        for a wave mask."""
        k = Kind.SGPR if dest_register(code, self.fam) else Kind.SPECIAL
        return Operand(name, kind or k, fld, code, bits)

    def mask_source(self, name: str, code: int, fld: str | None = None) -> Operand:
        """A wave mask read from scalar code `code` (the wave's width of it)."""
        o = self.scalar_source(name, code, self.mask_bits, fld=fld)
        return replace(o, kind=Kind.MASK)

    def mask_dest(self, name: str, code: int, fld: str | None = None) -> Operand:
        return self.scalar_dest(name, code, self.mask_bits, fld, Kind.MASK)

    def common(self, name: str, inst) -> Operand:
        """A name every encoding may read: wave state, or a value of the encoding (Unsupported: the engine has none)."""
        f = inst.fields
        if name in _STATE_READS or (name in hwreg.STATUS_BITS and hwreg.STATUS_BITS[name][0] is not None):
            return Operand(name, Kind.STATE)
        if name in ("SIMM32", "LITERAL"):
            return Operand(name, Kind.FIELD, "literal", value=inst.literal or 0)
        if name in SDWA_SELECTS:
            return Operand(name, Kind.FIELD, value=SDWA_SELECTS[name])
        if name == "SDWA_SRC0_SEL":  # the SDWA source select (fp8 conversions pick their byte); other forms: byte 0
            return Operand(name, Kind.FIELD, "src0_sel", value=f.get("src0_sel", 0) if inst.enc.endswith("SDWA")
                           else 0)
        if name == "OPSEL_HI":
            return Operand(name, Kind.FIELD, "opsel_hi", value=opsel_hi(f))
        fld = _MODIFIER_FIELDS.get(name) or _INST_FIELDS.get(name)
        if fld is not None:
            return Operand(name, Kind.FIELD, fld, value=f.get(fld, 0))
        raise Unsupported(f"{inst.op.name}: reads {name}, which the engine does not provide")

    @staticmethod
    def state_output(name: str, op_name: str) -> Operand:
        """Wave state the pcode writes by name (Unsupported: the engine does not accept it)."""
        if name in _STATE_WRITES or (name in hwreg.STATUS_BITS and hwreg.STATUS_BITS[name][1] is not None):
            return Operand(name, Kind.STATE)
        raise Unsupported(f"{op_name}: writes {name}, which the engine does not accept")

    # -- SALU ----------------------------------------------------------------------------------------------------
    def salu_fields(self, inst, sem: Semantics) -> dict[str, str]:
        """The field of S0, S1 and D0: SOPK's 16-bit immediate is SIMM16, or S1 beside S0 = sdst, or else S0 (CDNA
        pcode)."""
        if inst.base != "SOPK":
            return {"S0": "ssrc0", "S1": "ssrc1", "D0": "sdst"}
        if "S1" in sem.reads or "SIMM16" in sem.reads:
            return {"S0": "sdst", "S1": "simm16", "D0": "sdst"}
        return {"S0": "simm16", "D0": "sdst"}

    def salu_operands(self, inst) -> Binding:
        """A SALU / SOPP instruction's operands (the PC and the hardware registers are the engine's)."""
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        fm = self.salu_fields(inst, sem)
        inputs = {}
        for n in sorted(sem.reads):
            fld = fm.get(n)
            if n in ("SRC0", "SRC1", "DST"):  # the raw field (s_set_gpr_idx_on's SIMM4 in ssrc1; s_movrel*'s registers)
                raw = "sdst" if n == "DST" else "s" + n.lower()
                inputs[n] = Operand(n, Kind.FIELD, raw, value=f.get(raw, 0))
            elif fld == "simm16" or (n == "SIMM16" and "simm16" in f):
                inputs[n] = Operand(n, Kind.FIELD, "simm16", value=f.get("simm16", 0))
            elif fld is not None and fld in f:
                inputs[n] = self.scalar_source(n, f[fld], width(sem, n, op, fld), fmt(op, fld), inst.literal, fld)
            else:
                inputs[n] = self.common(n, inst)
        outputs = {}
        for n in sorted(sem.writes - {"PC", "HW_REGISTERS"}):
            if n == "D0" and "sdst" in f:
                outputs[n] = self.scalar_dest(n, f["sdst"], width(sem, n, op, "sdst"), "sdst")
            else:
                outputs[n] = self.state_output(n, op.name)
        return Binding(op, sem, f, inputs, outputs)

    # -- VALU ----------------------------------------------------------------------------------------------------
    def valu_operands(self, inst, op: isa.Op | None = None, fields: dict | None = None, base: str | None = None
                      ) -> Binding:
        """A VALU instruction's operands; `op`, `fields` and `base` stand for the instruction's own in a VOPD half
        (its VOP2 form) and a VGPR-indexed variant (fields offset)."""
        op = op or inst.op
        sem = self.sem(op)
        v = _Valu(self, inst, op, sem, fields, base or inst.base)
        inputs = {n: v.source(i, n) for i, n in enumerate(SOURCES) if n in sem.reads}
        inputs.update((n, v.other_input(n)) for n in sorted(sem.reads - set(SOURCES)))
        outputs = {n: v.output(n) for n in sorted(sem.writes)}
        return Binding(op, sem, v.f, inputs, outputs)

    def vopd_halves(self, inst, y: int | None = None) -> list[tuple[isa.Op, dict]]:
        """The ops of a VOPD instruction as their VOP1 / VOP2 / VOP3 forms, with the fields each reads: both, or
        the one whose fields a half (emu.amd.exec.kinds) has; `y`: the VGPR opY writes (default vopd_y's)."""
        f, out = inst.fields, []
        for which, opf, s0, s1 in (("X", "opx", "srcx0", "vsrcx1"), ("Y", "opy", "srcy0", "vsrcy1")):
            if opf not in f:
                continue
            dst = f["vdstx"] if which == "X" else vopd_y(f) if y is None else y
            dual = self.isa.op("VOPD", f[opf])
            if dual is None:
                raise OperandError(f"VOPD op{which} {f[opf]} is not an opcode")
            plain = dual.name.replace("V_DUAL_", "V_")
            op = next((self.isa.by_name.get((sp, plain)) for sp in ("VOP2", "VOP1", "VOP3")
                       if (sp, plain) in self.isa.by_name), None)
            if op is None:
                raise Unsupported(f"{dual.name}: no VOP1/VOP2/VOP3 equivalent")
            out.append((op, {"src0": f[s0], "vsrc1": f[s1], "vdst": dst}))
        return out

    # -- memory --------------------------------------------------------------------------------------------------
    def ds_operands(self, inst) -> Binding:
        """An LDS instruction's operands (MEM and LDS: the workgroup's LDS)."""
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        offsets = {"OFFSET": ds_offset(inst), "OFFSET0": f["offset0"], "OFFSET1": f["offset1"]}
        data = {"DATA": "data0", "DATA0": "data0", "DATA2": "data1", "DATA1": "data1"}
        acc = ACC if f.get("acc") else 0
        regs = "VGPR" in sem.reads  # cross-lane ops (permute, swizzle) name registers: ADDR, DATA0 are numbers
        src = f["data0"] if "data0" in op.operands else f["addr"]  # ds_swizzle reads the register in addr
        numbers = {"ADDR": f["addr"], "DATA0": src, "DATA": src, "DATA1": f["data1"], "VDST": f["vdst"]}
        addend = None if offsets.keys() & sem.reads else offsets["OFFSET"]  # pcode of MEM[ADDR] alone: ADDR has it
        inputs = {}
        for n in sorted(sem.reads - {"MEM", "LDS"}):
            if regs and n in numbers:
                inputs[n] = Operand(n, Kind.REGNUM, value=numbers[n] + acc)
            elif n == "ADDR":
                inputs[n] = _vgpr(n, "addr", f["addr"], 32, Mods(offset=addend))
            elif n == "ADDR_BASE":  # two-address ops add each offset themselves
                inputs[n] = _vgpr(n, "addr", f["addr"], 32)
            elif n in offsets:
                inputs[n] = Operand(n, Kind.FIELD, n.lower(), value=offsets[n])
            elif n in data:
                inputs[n] = _vgpr(n, data[n], f[data[n]] + acc, width(sem, n, op, data[n]))
            elif n == "VDST":
                inputs[n] = Operand(n, Kind.REGNUM, "vdst", value=f["vdst"] + acc)
            elif n == "RETURN_DATA":
                inputs[n] = _vgpr(n, "vdst", f["vdst"] + acc, width(sem, n, op, "vdst"))
            else:
                inputs[n] = self.common(n, inst)
        return Binding(op, sem, f, inputs, self._memory_outputs(sem, op, f["vdst"] + acc))

    def flat_operands(self, inst) -> Binding:
        """A GLOBAL / FLAT / SCRATCH instruction's registers and offset (CDNA: data and destination may be ACC
        VGPRs)."""
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        rdna4 = "ioffset" in f
        acc = ACC if f.get("acc") else 0
        data, vdst = (f["vsrc"] if rdna4 else f["data"]) + acc, f["vdst"] + acc
        inputs = {}
        for n in sorted(sem.reads - {"MEM", "ADDR"}):
            if n == "VDATA" and "vdst" in op.operands:  # a d16 load keeps the other half of its destination
                inputs[n] = _vgpr(n, "vdst", vdst, width(sem, n, op, "vdst"))
            elif n in ("DATA", "VDATA", "DATA0"):
                inputs[n] = _vgpr(n, "data", data, width(sem, n, op, "data"))
            elif n == "OFFSET":
                inputs[n] = Operand(n, Kind.FIELD, "offset", value=memory_offset(inst))
            else:
                inputs[n] = self.common(n, inst)
        return Binding(op, sem, f, inputs, self._memory_outputs(sem, op, vdst, returns(f)))

    def buffer_operands(self, inst) -> Binding:
        """A MUBUF / MTBUF / VBUFFER instruction's data registers."""
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        vdata = f["vdata"] + (ACC if f.get("acc") else 0)
        inputs = {n: _vgpr(n, "vdata", vdata, width(sem, n, op, "vdata")) if n in ("DATA", "VDATA")
                  else self.common(n, inst) for n in sorted(sem.reads - {"MEM", "ADDR"})}
        return Binding(op, sem, f, inputs, self._memory_outputs(sem, op, vdata, returns(f)))

    def _memory_outputs(self, sem: Semantics, op: isa.Op, vdst: int, returning: bool = True) -> dict[str, Operand]:
        """A memory op's register results: loaded data (VDATA), and an atomic's pre-op value (RETURN_DATA) when it
        is `returning`. Ops without a destination operand (DS_ADD_U32, stores) write none."""
        has_dst = "vdst" in op.operands or ("vdata" in op.operands and "STORE" not in op.name)
        out = {}
        for n in sorted(sem.writes - {"MEM", "LDS"}):
            if n not in ("VDATA", "RETURN_DATA"):
                out[n] = self.state_output(n, op.name)
            elif has_dst and (n == "VDATA" or returning):
                out[n] = _vgpr(n, "vdst", vdst, width(sem, n, op, "vdst"))
        return out


def vopd_y(f: dict) -> int:
    """The VGPR a VOPD's opY writes: vdsty holds its high bits, the low bit is the opposite of vdstx's."""
    return (f["vdsty"] << 1) | ((f["vdstx"] & 1) ^ 1)


def _vgpr(name: str, fld: str, reg: int, bits: int, mods: Mods = NO_MODS, fmt_: str = "") -> Operand:
    return Operand(name, Kind.VGPR, fld, VGPR0 + reg, bits, fmt_, mods=mods)


class _Valu:
    """The binding of one VALU instruction under way: its encoding's facts."""

    def __init__(self, b: Binder, inst, op: isa.Op, sem, fields: dict | None, base: str):
        self.b, self.inst, self.op, self.sem, self.base = b, inst, op, sem, base
        self.given = fields is not None
        f = self.f = fields if fields is not None else inst.fields
        enc = inst.enc
        self.fm = valu_fields(base)
        self.vop3 = base in ("VOP3", "VOP3SD", "VOP3P", "VINTERP")
        self.dpp = enc.endswith(("DPP16", "DPP8"))
        self.sdwa = enc.endswith(("SDWA", "SDWA_SDST"))
        self.halves = b.gen.vgpr_halves
        self.opsel = f.get("opsel", 0)
        self.negs, self.abss = f.get("neg", 0), f.get("abs", 0)
        if not self.vop3 and (enc.endswith("DPP16") or self.sdwa):
            self.negs = f.get("src0_neg", 0) | f.get("src1_neg", 0) << 1
            self.abss = f.get("src0_abs", 0) | f.get("src1_abs", 0) << 1
        self.dst_fmt = fmt(op, "vdst")
        self.dst_bits = width(sem, "D0", op, "vdst")
        dec = inst.operands.get("vdst") if not self.given else None  # the decoder's view of the destination
        self.scalar_dst = (op.operands.get("vdst") is not None and op.operands["vdst"].kind in ("SREG", "SDST")) \
            or enc.endswith("_SDST") or base == "VOPC" or self.dst_fmt == MASK_FMT \
            or (dec is not None and dec.kind in ("sgpr", "special", "ttmp"))
        self.mask_code = VCC if base == "VOPC" and not (self.sdwa and f.get("sd")) \
            else f.get("sdst" if self.sdwa else "vdst")

    def acc(self, fld: str) -> int:
        return acc_offset(self.inst, fld, self.f if self.given else None)

    def source_code(self, i: int, fld: str) -> int:
        """The operand code of source i (VGPR0 + n: VGPR n, ACC VGPRs past ACC): DPP and SDWA forms name src0 in
        their extra dword (vsrc0; SDWA's s0/s1 bits say an SGPR)."""
        f = self.f
        if i == 0 and (self.dpp or self.sdwa):
            return f["vsrc0"] + (0 if self.sdwa and f.get("s0") else VGPR0)
        code = f[fld] + (VGPR0 if fld.startswith("vsrc") else 0) + self.acc(fld)
        return code - VGPR0 if i == 1 and self.sdwa and f.get("s1") else code

    def source(self, i: int, n: str) -> Operand:
        op, f = self.op, self.f
        fld = self.fm.get(n)
        if fld is None or fld not in f:
            raise Unsupported(f"{op.name}: reads {n} but the encoding has no such source")
        bits, fmt_ = width(self.sem, n, op, fld), fmt(op, fld)
        code = self.source_code(i, fld)
        hi = False
        if bits <= 16 and self.halves:
            if self.vop3:
                hi = bool(self.opsel >> i & 1)
            elif code >= VGPR0 + 128:
                code, hi = code - 128, True
        mods = Mods(hi=hi, flush=is_float(fmt_) and not keeps_denormals(op.name), dpp=i == 0 and self.dpp,
                    **self._modifiers(i, fmt_))
        if code >= VGPR0:
            return Operand(n, Kind.VGPR, fld, code, bits, fmt_, mods=mods)
        return self.b.scalar_source(n, code, bits, fmt_, self.inst.literal, fld, 64 if bits == 64 else 32, mods)

    def _modifiers(self, i: int, fmt_: str) -> dict:
        """Source i's abs / neg, packing or SDWA select."""
        op, f = self.op, self.f
        floaty = is_float(fmt_)
        pick = (self.opsel >> i & 1, opsel_hi(f) >> i & 1)
        if self.base == "VOP3P" and ("PK" in fmt_ or op.name.startswith("V_PK_")):
            negs = (self.negs >> i & 1, f.get("neg_hi", 0) >> i & 1) if floaty else (0, 0)
            return {"packed": (*pick, *negs)}
        if op.name.startswith(MIX):
            return {"packed": (*pick, self.negs >> i & 1, f.get("neg_hi", 0) >> i & 1), "mix": True}
        out: dict = {}
        sel, sx = (f.get(f"src{i}_sel", 6), f.get(f"src{i}_sext", 0)) if self.sdwa and i < 2 else (6, 0)
        if i == 0 and "SDWA_SRC0_SEL" in self.sem.reads:
            sel, sx = 6, 0  # the pcode selects itself
        if sel != 6 or sx:  # SDWA: the operand is a byte or word of the whole dword, then modified
            out["sdwa"] = (sel, int(bool(sx)))
        if floaty or op.name in FLOAT_MODIFIED:
            out.update(abs=bool(self.abss >> i & 1), neg=bool(self.negs >> i & 1))
        return out

    def _dst_vgpr(self) -> tuple[int, bool]:
        """The destination's row and whether it is the high half."""
        reg = self.f["vdst"] + self.acc("vdst")
        hi = bool(self.opsel >> 3 & 1) if self.vop3 and self.halves else False
        if self.dst_bits <= 16 and not self.vop3 and self.halves and reg >= 128:
            reg, hi = reg - 128, True
        return reg, hi

    def other_input(self, n: str) -> Operand:
        f = self.f
        if n == "D0" and self.scalar_dst:
            return self.b.mask_source(n, self.mask_code, "vdst")
        if n == "D0":
            reg, hi = self._dst_vgpr()
            return _vgpr(n, "vdst", reg, self.dst_bits, Mods(hi=hi), self.dst_fmt)
        if n == "VCC" and self.vop3 and "S2" not in self.sem.reads and "src2" in f:
            return self.b.mask_source(n, f["src2"], "src2")
        if n in ("VDST", "DST"):  # register numbers, for pcode indexing VGPR[lane][reg]
            return Operand(n, Kind.REGNUM, "vdst", value=f["vdst"] + self.acc("vdst"))
        if n in ("SRC0", "SRC1", "SRC2"):  # a source that is no VGPR: the reference gives it rows of its own
            code = self.source_code(int(n[3]), n.lower())
            return Operand(n, Kind.REGNUM, n.lower(), code, value=code - VGPR0 if code >= VGPR0 else None)
        return self.b.common(n, self.inst)

    def output(self, n: str) -> Operand:
        op, f = self.op, self.f
        if n == "D0" and self.scalar_dst:
            if self.dst_fmt == MASK_FMT or self.base == "VOPC" or "CMP" in op.name:
                return self.b.mask_dest(n, self.mask_code, "vdst")
            return self.b.scalar_dest(n, self.mask_code, self.dst_bits, "vdst")
        if n == "D0":
            return self._vgpr_result()
        if n in ("VCC", "D1") and self.base == "VOP3SD":
            return self.b.mask_dest(n, f["sdst"], "sdst")
        if n in ("S0", "S1") and self.fm.get(n) in f:  # v_swap: the source VGPR is written too
            fld = self.fm[n]
            code = f[fld] + (VGPR0 if fld.startswith("vsrc") else 0)
            if code < VGPR0:
                raise OperandError(f"{op.name}: {n} must be a VGPR")
            return _vgpr(n, fld, code - VGPR0 + self.acc(fld), 32)
        if n == "VCC":  # a VOP2 carry-out: VCC_LO alone in wave32 (VCC_HI is an SGPR there)
            return self.b.mask_dest(n, VCC)
        if n == "EXEC":
            return self.b.mask_dest(n, EXEC)
        return self.b.state_output(n, op.name)

    def _vgpr_result(self) -> Operand:
        """D0 as a VGPR: its half, SDWA select and output modifiers (those of a float result of 16, 32 or 64 bits)."""
        f, bits, fmt_ = self.f, self.dst_bits, self.dst_fmt
        reg, hi = self._dst_vgpr()
        mods = Mods(hi=hi, zero_hi16=self.b.gen.zeroes_hi16 and not _LOW_SLICE.search(self.op.pcode or ""))
        if self.sdwa and f.get("dst_sel", 6) != 6:  # the result goes to a byte or word of the whole dword
            mods = replace(mods, sdwa=(f["dst_sel"], f.get("dst_unused", 0)))
        if is_float(fmt_) and bits in (16, 32, 64):
            mods = replace(mods, omod=f.get("omod", 0), clamp=bool(f.get("clmp", 0)),
                           flush=not keeps_denormals(self.op.name))
        return _vgpr("D0", "vdst", reg, bits, mods, fmt_)
