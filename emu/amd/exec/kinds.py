"""An instruction's kind: what one handler of the threaded tier (emu.amd.exec.threaded) is compiled for. The kind
is the instruction with its SGPR / VGPR fields, integer constants and literal replaced by `Sym`s, ints that stand for
a canonical register and record how the code indexes with them, so that the handler computes the index from the
instruction's entry words at run time; everything else (encoding, opcode, modifiers, other operands) is in its key.
Code that does with a `Sym` what cannot be done at run time raises NotSymbolic, and that kind gets no handler.

A 32-bit scalar source that an SGPR, VCC's or EXEC's halves, M0 or an inline constant may fill is one kind whatever
fills it: the wave's scalar slots (emu.amd.exec.state) hold each at its operand code as a 32-bit source reads it, so
the handler reads the slot at the code its word gives (`_slot_reads`).

A VOPD instruction is two kinds, one per half (`Kind.halves`), where its opY reads no VGPR its opX writes: running
opX and then opY is then the pair's simultaneous read and write, and the halves of a kernel's many pairs recur far
more often than the pairs themselves."""
from __future__ import annotations

import dataclasses
import functools

from emu.amd import target
from emu.amd.exec import bind, takes
from emu.amd.exec.bind import ds_offset, memory_offset, smem_offsets, vopd_y
from emu.amd.exec.control import BARRIERS, ENDS, ENGINE_NOPS, SOPP_BRANCHES
from emu.amd.exec.operands import constant
from emu.amd.exec.state import CONSTANTS
from emu.amd.regs import EXEC, INLINE_FLOAT, INLINE_INT, VCC


class NotSymbolic(TypeError):
    """Code does with a Sym what cannot be done at run time: that kind of instruction gets no handler."""


class Sym(int):
    """A field the handler reads at run time: entry word threaded.HEAD + slot, times scale, plus off. As an int it is
    the canonical value the code was built for (canonical register 0, or 256 for a VGPR source code). Affine
    arithmetic keeps it symbolic; anything else raises NotSymbolic."""

    def __new__(cls, value: int, slot: int, scale: int = 1, off: int = 0):
        s = super().__new__(cls, value)
        s.slot, s.scale, s.off = slot, scale, off
        return s

    def __add__(self, k):
        if isinstance(k, Sym) or not isinstance(k, int):
            raise NotSymbolic("a register field added to a non-constant")
        return Sym(int(self) + k, self.slot, self.scale, self.off + k)

    __radd__ = __add__

    def __sub__(self, k):
        return self + (-k)

    def __mul__(self, k):
        if isinstance(k, Sym) or not isinstance(k, int):
            raise NotSymbolic("a register field multiplied by a non-constant")
        return Sym(int(self) * k, self.slot, self.scale * k, self.off * k)

    __rmul__ = __mul__

    def __lshift__(self, k):
        return self * (1 << k)

    def __rsub__(self, k):
        return self * -1 + k

    def __and__(self, k):
        """Only a mask of 32 or more low bits: every use truncates the value to the operand's width anyway."""
        if isinstance(k, Sym) or not isinstance(k, int) or k & (k + 1) or k.bit_length() < 32:
            raise NotSymbolic("a field masked")
        return self

    def _no(self, *a):
        raise NotSymbolic("a field used as a constant")

    __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __rshift__ = __neg__ = __invert__ = _no
    __floordiv__ = __mod__ = __index__ = _no


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a handler is compiled for: the canonical instruction and where each Sym word comes from (a field name,
    or one of DERIVED)."""
    key: tuple
    inst: object
    sources: tuple[str, ...]
    halves: tuple[Kind, Kind] | None = None  # a VOPD pair run as its opX's kind and then its opY's (words: X's, Y's)


DERIVED = {  # Sym words computed from the instruction, by what Region calls them
    "literal": lambda inst: inst.literal,
    "vdsty": lambda inst: vopd_y(inst.fields),  # the VGPR a VOPD's opY writes
    "offset:global": memory_offset,
    "offset:smem": lambda inst: smem_offsets(inst.fields, target.generation(inst.family))[0],
    "offset:ds": ds_offset,
}
_OFFSETS = {"offset", "ioffset"}
_SOPK_ARITHMETIC = ("S_MOVK_", "S_CMOVK_", "S_CMPK_", "S_ADDK_", "S_MULK_")  # (not a hwreg, wait or branch field)


_kinds: dict[tuple[bytes, str], tuple[Kind, list[int]] | None] = {}  # (bytes, family) -> kind and words


def kind_of(inst) -> tuple[Kind, list[int]] | None:
    """The kind of `inst` and its words (as kind and words; the same bytes always make the same ones)."""
    key = (inst.raw, inst.family)
    if key not in _kinds:
        k = kind(inst)
        _kinds[key] = None if k is None else (k, words(k, inst))
    return _kinds[key]


def kind(inst) -> Kind | None:
    """The kind of `inst` (None: the tier does not take it, or a register lies where a handler cannot reach it)."""
    why = takes.native(inst)
    if why is not None:
        takes.declined("threaded", inst, why)
        return None
    parts = _vopd_halves(inst) if inst.base == "VOPD" else None
    if parts is not None:
        halves = kind(parts[0]), kind(parts[1])
        if None in halves:
            return None
        key = ("VOPD pair", halves[0].key, halves[1].key)
        k = _by_key.get(key)
        if k is None:
            k = _by_key[key] = Kind(key, None, halves[0].sources + halves[1].sources, halves)
        return k
    name = inst.op.name
    fields: dict[str, int] = {}
    sources: list[str] = []
    literal = None
    slots: frozenset[str] = frozenset()
    if name in SOPP_BRANCHES:
        fields["simm16"] = Sym(0, 0)
        sources.append("simm16")
    elif not (inst.base == "SOPP" or name in ENGINE_NOPS or name in ENDS or name in BARRIERS):
        fields = {k: v for k, v in inst.fields.items() if k != "literal"}

        high = _high_halves(inst)
        slots = _slot_reads(inst)

        def sym(canon: int, source: str) -> Sym:
            sources.append(source)
            return Sym(canon, len(sources) - 1)
        for fld, o in inst.operands.items():
            if fld not in fields:
                continue
            if fld in slots:  # whatever fills it: the slot at its code
                fields[fld] = sym(0, fld)
                continue
            if o.kind == "inline" and 128 <= fields[fld] <= 208:  # an integer constant: its code, read at run time
                fields[fld] = sym(128 if fields[fld] <= 192 else 193, fld)
                continue
            if o.kind not in ("sgpr", "vgpr"):
                continue
            if o.index + o.count > (256 if o.kind == "vgpr" else target.generation(inst.family).sgprs):
                takes.declined("threaded", inst, "a register past a handler's reach")
                return None
            half = 128 if fld in high else 0  # v0.h is code 128 past v0: the binder reads it so
            fields[fld] = sym((256 if fields[fld] >= 256 else 0) + half, "vdsty" if fld == "vdsty" else fld)
        if name.startswith(_SOPK_ARITHMETIC) and inst.base == "SOPK":
            fields["simm16"] = sym(0, "simm16")  # an operand (its extension is the pcode's), not a register field
        if inst.literal is not None:
            literal = sym(1, "literal")  # nonzero: code that reads `literal or 0` keeps it
        if inst.base in takes.GLOBAL or inst.base == "SMEM" and not target.generation(inst.family).smem_imm_bit:
            sources.append("offset:global" if inst.base in takes.GLOBAL else "offset:smem")
            fields.update((k, 0) for k in _OFFSETS & fields.keys())
        elif inst.base == "DS":
            sources += ["offset:ds", "offset0", "offset1"]
            fields.update(offset0=0, offset1=0)
    key = (inst.enc, inst.base, name, inst.size, inst.family, literal is not None,
           tuple(sorted((k, ("sym", int(v)) if isinstance(v, Sym) else v) for k, v in fields.items())),
           tuple(sorted((k, "slot" if k in slots else o.kind, o.count) for k, o in inst.operands.items())))
    k = _by_key.get(key)
    if k is None:
        canon = dataclasses.replace(inst, pc=0, fields=fields, literal=literal, _text=None)
        k = _by_key[key] = Kind(key, canon, tuple(sources))
    return k


def _high_halves(inst) -> set[str]:
    """The fields of a VOP1 / VOP2 / VOPC instruction that name the high half of a VGPR (a 16-bit operand's code past
    VGPR0 + 127, where the chip has VGPR halves), as the binder reads them."""
    if inst.base not in ("VOP1", "VOP2", "VOPC") or "vsrc0" in inst.fields \
            or not target.generation(inst.family).vgpr_halves \
            or not any(o.kind == "vgpr" and o.index >= 128 for o in inst.operands.values()):
        return set()
    try:
        bd = _binder(inst.family).valu_operands(inst)
    except (bind.OperandError, bind.Unsupported):  # no handler either: the instruction faults on every tier
        return set()
    return {o.field for o in (*bd.inputs.values(), *bd.outputs.values()) if o.kind is bind.Kind.VGPR and o.mods.hi}


_VOPD_HALF = (("opx", "srcx0", "vsrcx1", "vdstx"), ("opy", "srcy0", "vsrcy1", "vdsty"))  # each half's fields


def _vopd_halves(inst) -> tuple | None:
    """A VOPD instruction's halves (opX's, opY's), each an instruction of that op alone: the other half's fields gone
    (the binder binds the halves present: emu.amd.exec.bind.Binder.vopd_halves), its encoding, size and literal the
    pair's. None where opY reads a VGPR opX writes (or an op is no opcode): the pair is one kind."""
    x = inst.operands.get("vdstx")
    if x is None or any(o.kind == "vgpr" and o.index <= x.index < o.index + o.count
                        for fld, o in inst.operands.items() if fld in _VOPD_HALF[1][1:3]):
        return None
    out = []
    for which, own in enumerate(_VOPD_HALF):
        op = _binder(inst.family).isa.op("VOPD", inst.fields.get(own[0]))
        if op is None:
            return None
        other = _VOPD_HALF[1 - which]
        out.append(dataclasses.replace(inst, op=op, name=op.name.lower(), _text=None,
                                       fields={k: v for k, v in inst.fields.items() if k not in other},
                                       operands={k: o for k, o in inst.operands.items() if k not in other}))
    return tuple(out)


_SLOT_BASES = frozenset({"SOP1", "SOP2", "SOPC", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOPD"})


def _slot_reads(inst) -> frozenset[str]:
    """The fields of an ALU instruction whose source a handler reads from the scalar slot at the field's code,
    whatever the code. An SGPR's is read so anyway; VCC's and EXEC's halves, M0 and inline constants join it where
    the binder reads the field as a plain 32-bit source (no mask, half or packing) that the instruction never writes
    and, for a constant, where that is the value a 32-bit read takes from its slot (an f16, bf16 or f64 constant is
    another value: its kind keeps it)."""
    if inst.base not in _SLOT_BASES or inst.enc.endswith(("DPP16", "DPP8", "SDWA")):
        return frozenset()
    gen = target.generation(inst.family)
    regs = {fld for fld, o in inst.operands.items() if o.kind == "sgpr" and o.count == 1}
    others = {fld for fld, o in inst.operands.items() if o.kind in ("special", "inline") and o.count == 1
              and (inst.fields.get(fld) in (VCC, VCC + 1, EXEC, EXEC + 1, gen.m0)
                   or inst.fields.get(fld) in INLINE_INT or inst.fields.get(fld) in INLINE_FLOAT)}
    return frozenset(regs | (_plain_reads(inst, others) if others else set()))


def _plain_reads(inst, fields: set[str]) -> set[str]:
    """Those of `fields` that the binder reads as plain 32-bit sources and the instruction never writes, where a
    constant's value is its slot's (_slot_reads)."""
    b, named = _binder(inst.family), {}
    try:
        if inst.base == "VOPD":  # one half (_vopd_halves), bound as its VOP2 form
            halves = b.vopd_halves(inst, 0)
            if len(halves) != 1:
                return set()
            xy = "x" if "opx" in inst.fields else "y"
            named = {"src0": f"src{xy}0", "vsrc1": f"vsrc{xy}1", "vdst": f"vdst{xy}"}
            bd = b.valu_operands(inst, *halves[0], base="VOP2")
        else:
            bd = b.salu_operands(inst) if inst.base.startswith("SOP") else b.valu_operands(inst)
    except (bind.OperandError, bind.Unsupported):
        return set()
    out, refused = set(), {named.get(o.field, o.field) for o in bd.outputs.values()}
    for n, o in bd.inputs.items():
        fld = named.get(o.field, o.field)
        if fld not in fields:
            continue
        plain = o.kind in (bind.Kind.SPECIAL, bind.Kind.INLINE) and o.bits == 32 and bd.sem.ir.inputs.get(n) == 32 \
            and dataclasses.replace(o.mods, abs=False, neg=False, flush=False) == bind.NO_MODS
        if plain and (o.kind is bind.Kind.SPECIAL or constant(o.code, 32, o.fmt, None) == CONSTANTS[o.code]):
            out.add(fld)
        else:
            refused.add(fld)  # (a field read two ways keeps its kind)
    return out - refused


@functools.cache
def _binder(family: str) -> bind.Binder:
    return bind.Binder(family, 32)


_by_key: dict[tuple, Kind] = {}  # one Kind per key: instructions that differ only in Sym words share it


def keyed(made: tuple[Kind, list[int]] | None) -> tuple[tuple | None, list[int] | None]:
    """(the kind's key, the words) of kind_of's answer: what a kernel's instructions are kept on disk as."""
    return (None, None) if made is None else (made[0].key, made[1])


def words(k: Kind, inst) -> list[int]:
    """The Sym words of `inst` (of kind `k`)."""
    return [DERIVED[s](inst) if s in DERIVED else inst.fields[s] for s in k.sources]
