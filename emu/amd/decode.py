"""AMD GPU instruction decoder: code bytes -> `Inst`, table-driven from the vendor ISA tables (emu.amd.isa).

API (stable; the wave executor consumes it):

- `decode(code, arch, pc=0) -> list[Inst]` decodes a code stream in order (arch: gfx name, the name of a
  generation's instruction set, or a family name: the family's whole tables; emu.amd.isa.load). A chip decodes
  exactly the opcodes its generation has: another generation's opcode is <unknown> there. It never
  raises on any bytes: bytes that are no valid instruction (unknown encoding or opcode, truncated tail) become
  an `Inst` with `op is None`, `enc == 'INVALID'`, 4 bytes (or the truncated remainder) long, printing as
  `<unknown>` like llvm-objdump. An unknown arch raises isa.UnknownArch.
- `Inst`: `pc`, `size` (bytes, literal included), `raw` (its bytes), `enc` (encoding name as in emu.amd.isa,
  e.g. 'VOP3_DPP16', 'SOP2_LIT'), `base` ('VOP3'), `op` (isa.Op; for VOPD the X opcode, the Y one is
  `fields['opy']`), `valid`, `name` (LLVM mnemonic, e.g. 'v_add_f32_e64'), `fields` (every field of the
  encoding: name -> int; RDNA3 NSA images add vaddr1..4), `operands` (field name -> `Operand`, for the
  register/constant operands the opcode has, at the width it gives them; DPP/SDWA: 'src0' is the vsrc0 VGPR),
  `literal` (32-bit literal or None); `str(inst)` is the text llvm-objdump-19 prints for it.
- `Operand`: `kind` in sgpr, vgpr, agpr, ttmp, special (vcc_lo, vcc, exec, m0, null, src_scc, ...; `name` says
  which), inline (inline constant: `value` = its bits at the operand's width), literal (`value` = the 32
  literal bits), imm (an immediate in a register field, e.g. s_atc_probe), invalid; `index` (first register,
  or the encoded operand value), `count` (32-bit registers), `valid`.

How an encoding is found: every encoding's fixed fields in the first dword form a (mask, value) matcher; the
most specific match wins. Among the encodings sharing a matcher (VOP3 / VOP3SD / VOP3_SDST, VOP3P /
VOP3P_MFMA, ...) the one with the smallest opcode set holding the op field is taken. Then the source operand
values select the variant: DPP16 (250), DPP8 (233/234), SDWA (249, CDNA) and LIT (255 in any source, or an
opcode only the literal variant admits, such as v_fmamk_f32). Where the vendor tables and LLVM disagree the
code says so next to the rule (asm.operands.OPERAND_FIXUPS, RENAMES, NO_E32; RDNA3 NSA and buffer literals).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from emu.amd import isa, target
from emu.amd.asm.operands import Operand, mnemonic, operands
from emu.amd.isa import Encoding, Op
from emu.amd.regs import DPP8, DPP8FI, DPP16, LITERAL, SDWA

_SRC_FIELDS = ("src0", "src1", "src2", "ssrc0", "ssrc1", "srcx0", "srcy0")  # may hold the literal marker 255
# Encodings whose identifying bits are not in the first dword (CDNA4's 128-bit VOP3PX2, unknown to LLVM 19).
_UNMATCHED = ("VOP3PX2",)
MEMO_LIMIT = 1 << 16  # decoded words remembered per instruction set (then forgotten all at once)


@dataclass(eq=False, slots=True)
class Inst:
    pc: int
    size: int
    raw: bytes
    enc: str
    base: str
    op: Op | None
    name: str
    fields: dict[str, int]
    operands: dict[str, Operand]
    family: str
    literal: int | None = None
    _text: str | None = field(default=None, repr=False)
    renderer: ClassVar[Callable[[Inst], str]] = lambda inst: inst.name  # LLVM text: emu.amd.asm.text sets it

    @property
    def valid(self) -> bool:
        return self.op is not None

    def __str__(self) -> str:
        if self._text is None:
            try:
                self._text = Inst.renderer(self)
            except Exception as e:  # a printer gap must not crash a disassembly listing
                self._text = f"{self.name} <operands not printable: {type(e).__name__}>"
        return self._text


@dataclass(frozen=True)
class _Group:
    """Encodings sharing one first-dword matcher, with the modifier variants of each."""
    mask: int
    value: int
    size0: int  # bytes of the basic form
    forms: tuple[Encoding, ...]  # basic forms (no LIT/DPP/SDWA), the plain one first
    variants: dict[tuple[str, str], Encoding]  # (form name, modifier) -> encoding
    literal_ops: dict[str, frozenset[int]]  # form name -> opcodes that always carry a literal
    op_field: tuple[int, int]  # lo, width
    form_of: dict[int | None, Encoding]  # opcode -> the most specific form admitting it


_MODIFIERS = ("LIT", "DPP16", "DPP8", "SDWA")


def _form_of(t: isa.ISA, forms: list[Encoding], literal_ops: dict[str, frozenset[int]], opf
             ) -> dict[int | None, Encoding]:
    """Opcode -> the form whose opcode set admits it, the smallest such set winning (VOP3P_MFMA over VOP3P);
    an opcode whose name carries a form's variant (V_MFMA_*, V_SMFMAC_*: MFMA) takes that form, as LLVM does
    for the gfx940 matrix opcodes the CDNA4 tables list as plain VOP3P."""
    if opf is None:  # no opcode field (EXP, VOPD: decided by the pair)
        return {None: forms[0]}
    out: dict[int | None, Encoding] = {}
    for f in sorted(forms, key=lambda f: -len(f.ops) if f.ops is not None else -(1 << 30)):
        admitted = range(1 << opf.width) if f.ops is None else f.ops | literal_ops.get(f.name, frozenset())
        out.update(dict.fromkeys(admitted, f))
    for f in forms:
        if f.variant == "MFMA":
            out.update({o.value: f for o in t.ops_of(f.space) if "MFMA" in o.name and o.value in out})
    return out


def _modifier(e: Encoding) -> str:
    return next((m for m in _MODIFIERS if m in e.variant.split("_")), "")


class Decoder:
    """Precomputed matchers for one instruction set (a generation's, emu.amd.isa.name)."""

    def __init__(self, name: str):
        self.family, self.gen = name, target.generation(name)
        self.isa = isa.load(name)
        encs = self.isa.encodings
        by_key: dict[tuple[int, int], list[Encoding]] = {}
        for e in encs.values():
            if e.base in _UNMATCHED or not e.fixed or any(f.hi >= 32 for f in e.fixed):
                continue
            mask = value = 0
            for f in e.fixed:
                mask |= ((1 << f.width) - 1) << f.lo
                value |= f.value << f.lo
            by_key.setdefault((mask, value), []).append(e)
        groups = []
        for (mask, value), es in by_key.items():
            forms = sorted((e for e in es if not _modifier(e)), key=lambda e: (e.variant != "", e.name))
            if not forms:
                continue
            variants, literal_ops = {}, {}
            for e in es:
                mod = _modifier(e)
                if not mod:
                    continue
                form = e.name.replace("_" + mod, "")
                variants[(form, mod)] = e
            for f in forms:
                lit = variants.get((f.name, "LIT"))
                if lit is not None and lit.ops is not None:
                    others = frozenset().union(*(g.ops or () for g in forms))
                    literal_ops[f.name] = lit.ops - others
            opf = forms[0].field("op")
            groups.append(_Group(mask, value, forms[0].size, tuple(forms), variants, literal_ops,
                                 (opf.lo, opf.width) if opf else (0, 0), _form_of(self.isa, forms, literal_ops, opf)))
        groups.sort(key=lambda g: -bin(g.mask).count("1"))
        self.groups = tuple(groups)
        self._part: dict[bytes, int] = {}  # first dword -> bytes that decide the size
        self._size: dict[bytes, int] = {}  # those bytes -> the instruction's size
        self._memo: dict[bytes, Inst] = {}  # the instruction's bytes -> it, decoded (at another pc)

    def match(self, word: int) -> _Group | None:
        for g in self.groups:
            if word & g.mask == g.value:
                return g
        return None

    def decode_one(self, code: bytes, off: int, pc: int) -> Inst:
        """The instruction at code[off:] (at address pc). Kernels repeat instruction words within and across each
        other, so a decoded word is remembered by its bytes: its first dword gives the size of the part that decides
        the whole size (the encoding's own), that part gives the size with any literal, and the bytes the Inst."""
        if type(code) is not bytes:
            code = bytes(code)
        head = code[off:off + 4]
        part = self._part.get(head)
        if part is not None:
            size = self._size.get(code[off:off + part])
            if size is not None and off + size <= len(code):
                t = self._memo.get(code[off:off + size])
                if t is not None:
                    return Inst(pc, size, t.raw, t.enc, t.base, t.op, t.name, t.fields, t.operands, t.family,
                                t.literal)
        inst, part = self._decode(code, off, pc)
        if inst.valid:
            if len(self._memo) >= MEMO_LIMIT:
                self._part.clear(), self._size.clear(), self._memo.clear()
            self._part[head] = part
            self._size[code[off:off + part]] = inst.size
            self._memo[inst.raw] = inst
        return inst

    def _decode(self, code: bytes, off: int, pc: int) -> tuple[Inst, int]:
        """The instruction, and how many of its bytes decide its size (its first encoding's: any literal, NSA
        dword or buffer literal is named there)."""
        avail = len(code) - off
        if avail < 4:
            return self._invalid(code[off:], pc), 0
        word0 = int.from_bytes(code[off:off + 4], "little")
        g = self.match(word0)
        if g is None or g.size0 > avail:
            return self._invalid(code[off:off + min(4, avail)], pc), 0
        word = int.from_bytes(code[off:off + g.size0], "little")
        opv = (word >> g.op_field[0]) & ((1 << g.op_field[1]) - 1) if g.op_field[1] else None
        form = g.form_of.get(opv)
        if form is None:
            return self._invalid(code[off:off + 4], pc), 0
        enc = self._variant(g, form, word, opv)
        # Not in the tables: RDNA3 MIMG NSA keeps vaddr1..4 in a third dword; an RDNA3 buffer soffset of 255
        # names a literal that follows the instruction.
        nsa = enc.field("nsa")
        soffset = enc.field("soffset") if enc.base in ("MUBUF", "MTBUF") and self.gen.buffer_soffset_literal else None
        buffer_literal = soffset is not None and soffset.get(word) == LITERAL
        size = enc.size + (4 if nsa is not None and nsa.get(word) or buffer_literal else 0)
        if size > avail:
            return self._invalid(code[off:off + 4], pc), 0
        raw = code[off:off + size]
        word = int.from_bytes(raw, "little")
        fields = {f.name: f.get(word) for f in enc.fields}
        if buffer_literal:
            fields["literal"] = word >> (8 * enc.size)
        elif size > enc.size:
            fields.update({f"vaddr{i}": (word >> (56 + 8 * i)) & 0xFF for i in range(1, 5)})
        space = enc.space or enc.base  # VOPD: the X opcode stands for the pair
        if opv is None and "opx" in fields:
            opv = fields["opx"]
        if opv is None:  # EXP/VEXPORT have no opcode field: one pseudo-opcode stands for the export
            op = Op(space, "EXP" if space == "EXP" else "EXPORT", 0)
        else:
            op = self.isa.op(space, opv)
        if op is None or (enc.base == "VOPD" and self.isa.op(space, fields["opy"]) is None):
            return self._invalid(raw[:4], pc), 0
        ops = operands(self, enc, op, fields)
        return Inst(pc, size, bytes(raw), enc.name, enc.base, op, mnemonic(self, enc, op, fields), fields, ops,
                    self.family, fields.get("literal")), g.size0

    def _variant(self, g: _Group, form: Encoding, word: int, opv: int | None) -> Encoding:
        src0 = form.field("src0") or form.field("srcx0")
        mod = ""
        if src0 is not None:
            s = src0.get(word)
            if s == DPP16:
                mod = "DPP16"
            elif s in (DPP8, DPP8FI) and self.gen.dpp8:
                mod = "DPP8"
            elif s == SDWA and self.gen.sdwa:
                mod = "SDWA"
        if not mod:
            lit = opv in g.literal_ops.get(form.name, ()) or (form.base == "VOPD" and self._vopd_literal(form, word))
            lit = lit or any(f.get(word) == LITERAL for f in form.fields
                             if f.name in _SRC_FIELDS and f.kind in ("src", "ssrc"))
            mod = "LIT" if lit else ""
        if not mod:
            return form
        # the variant of this form, else of its base encoding, else its SGPR-destination twin (CDNA VOPC SDWA)
        for name in (form.name, form.base, form.base + "_SDST"):
            e = g.variants.get((name, mod))
            if e is not None:
                return e
        return form

    def _vopd_literal(self, form: Encoding, word: int) -> bool:
        """VOPD pairs whose X or Y is v_dual_fmaak/fmamk carry a literal (the VOPD tables do not say so)."""
        return any("_FMAAK_" in o.name or "_FMAMK_" in o.name for o in
                   (self.isa.op("VOPD", form.field(n).get(word)) for n in ("opx", "opy")) if o)

    def _invalid(self, raw: bytes, pc: int) -> Inst:
        return Inst(pc, len(raw), bytes(raw), "INVALID", "INVALID", None, "<unknown>", {}, {}, self.family)


def decoder(arch: str) -> Decoder:
    """The decoder of the instruction set of `arch` (one per generation)."""
    return _decoder(isa.name(arch))


@functools.cache
def _decoder(name: str) -> Decoder:
    return Decoder(name)


def decode(code: bytes, arch: str, pc: int = 0) -> list[Inst]:
    """Decode a code stream in order; never raises on any bytes (raises isa.UnknownArch for an unknown arch)."""
    d = decoder(arch)
    out, off, code = [], 0, bytes(code)
    while off < len(code):
        try:
            inst = d.decode_one(code, off, pc + off)
        except Exception:  # a table gap must not crash the host: report the word as undecodable
            inst = d._invalid(code[off:off + 4], pc + off)
        out.append(inst)
        off += inst.size
    return out
