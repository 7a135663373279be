"""Hexagon instruction words -> packets.

A packet is 1-4 words; bits 15:14 of each word (the parse bits) say where it ends: 11 ends it, 00 makes the
word a duplex (two 13-bit sub-instructions, always last), 10 in the first word marks the end of hardware
loop 0 and 10 in the second word the end of loop 1. A constant extender (`immext`, iclass 0) supplies the
upper 26 bits of the next instruction's extendable immediate, whose encoding field then gives the low 6 bits,
unscaled. New-value operands (Nt8.new) name their producer by distance: bits 2:1 of the field count
instructions back, extenders not counted (for a vector new value, HVX instructions only).

The tables come from the vendor encodings (emu.dsp.isa); `Decoder.ambiguous` lists the word patterns that
more than one encoding matches with the same specificity (reported, like decodetree's overlap check).
"""
from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from emu.dsp import operands
from emu.dsp.isa import ISA, Insn

PARSE_END, PARSE_DUPLEX, PARSE_LOOP = 0b11, 0b00, 0b10
_SUB_REG = (0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)  # 4-bit sub-instruction register fields
_SUB_PAIR = (0, 2, 4, 6, 16, 18, 20, 22)  # 3-bit sub-instruction pair fields (low register)
_EXTENDED = re.compile(r"\bf(?:MUST_)?IMMEXT\((\w+)\)")


class DecodeError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Form:
    """Decoding facts of one encoding: fixed bits, and the bit positions (msb first) of each operand."""
    insn: Insn
    mask: int
    value: int
    operands: tuple[operands.Operand, ...]
    fields: tuple[tuple[int, ...], ...]
    extendable: int  # index of the operand a constant extender extends, -1 for none

    @property
    def tag(self) -> str:
        return self.insn.tag


@dataclass(frozen=True, slots=True)
class Inst:
    form: Form
    ops: tuple[int, ...]  # per operand: register number (a pair's low register), or the immediate's value
    extended: bool = False
    word: int = 0  # the instruction word (for a sub-instruction, the duplex word)
    new_cls: str = ""  # the register class (R, V, ...; T: vtmp) of the producer a new-value operand names

    @property
    def tag(self) -> str:
        return self.form.insn.tag


@dataclass(frozen=True, slots=True)
class Packet:
    addr: int
    words: tuple[int, ...]
    insts: tuple[Inst, ...]  # in word order; a duplex contributes its high (slot 1) half first; no extenders
    endloop0: bool = False
    endloop1: bool = False

    @property
    def size(self) -> int:
        return 4 * len(self.words)


def _form(insn: Insn) -> Form:
    pattern = insn.encoding
    assert pattern is not None
    n = len(pattern)
    mask = value = 0
    for i, c in enumerate(pattern):
        if c in "01":
            bit = 1 << (n - 1 - i)
            mask |= bit
            value |= bit if c == "1" else 0
    ops = operands.parse(insn.syntax)
    fields = tuple(tuple(n - 1 - i for i, c in enumerate(pattern) if c == o.field) for o in ops)
    m = _EXTENDED.search(insn.semantics)  # the macro carries A_EXTENDABLE (macros.def)
    ext = next((i for i, o in enumerate(ops) if m and o.name == m.group(1)), -1)
    return Form(insn, mask, value, ops, fields, ext)


def _bits(word: int, positions: tuple[int, ...]) -> int:
    v = 0
    for p in positions:
        v = (v << 1) | ((word >> p) & 1)
    return v


_DECODERS: dict[int, Decoder] = {}


class Decoder:
    def __init__(self, isa: ISA):
        self.isa = isa
        self.by_iclass: list[list[Form]] = [[] for _ in range(16)]
        self.sub: dict[str, list[Form]] = {}
        for insn in isa.insns.values():
            if insn.encoding is None:
                continue
            f = _form(insn)
            if insn.subclass:
                self.sub.setdefault(insn.subclass, []).append(f)
            else:
                self.by_iclass[f.value >> 28].append(f)
        for forms in [*self.by_iclass, *self.sub.values()]:
            forms.sort(key=lambda f: -bin(f.mask).count("1"))
        self.duplex = {int(d.encoding[:3] + d.encoding[18], 2): d for d in isa.duplexes}

    @functools.cached_property
    def ambiguous(self) -> list[tuple[str, str]]:
        """Pairs of encodings with the same fixed bits (a check of the tables: worked out when asked, not in every
        process that decodes)."""
        return [(a.tag, b.tag) for forms in [*self.by_iclass, *self.sub.values()]
                for i, a in enumerate(forms) for b in forms[i + 1:] if a.mask == b.mask and a.value == b.value]

    @classmethod
    def of(cls, isa: ISA) -> Decoder:
        """The decoder of an ISA, built once."""
        d = _DECODERS.get(id(isa))
        if d is None or d.isa is not isa:
            d = _DECODERS[id(isa)] = cls(isa)
        return d

    def match(self, word: int, forms: Sequence[Form]) -> Form | None:
        for f in forms:
            if word & f.mask == f.value:
                return f
        return None

    def _operands(self, f: Form, word: int, ext: int | None) -> tuple[tuple[int, ...], bool]:
        vals = []
        extended = False
        for i, (o, pos) in enumerate(zip(f.operands, f.fields, strict=True)):
            v = _bits(word, pos)
            if o.cls == "#":
                if i == f.extendable and ext is not None:
                    v = ((ext << 6) | (v & 0x3F)) & 0xFFFFFFFF
                    v = v - (1 << 32) if o.signed and v >> 31 else v
                    extended = True
                else:
                    if o.signed and v >> (len(pos) - 1):
                        v -= 1 << len(pos)
                    v <<= o.scale
            elif o.cls == "R" and o.count < 32:  # the 16- and 8-register subsets (sub-instructions, compound jumps)
                v = (_SUB_PAIR if o.pair else _SUB_REG)[v]
            elif o.cls == "C" and o.pair and v & 1:
                raise DecodeError(f"{f.tag}: no control register pair c{v + 1}:{v}")
            elif o.pair:
                v &= ~1  # a pair is named by its low (even) register; the field's low bit is ignored
            vals.append(v)
        return tuple(vals), extended

    def packet(self, words: Sequence[int], addr: int = 0) -> Packet:
        """Decode the packet at the start of `words` (more words may follow; only the packet's are used)."""
        insts: list[Inst] = []
        ext: int | None = None
        used: list[int] = []
        for k, w in enumerate(words):
            if k == 4:
                raise DecodeError(f"packet at {addr:#x} has no end within 4 words")
            w &= 0xFFFFFFFF
            used.append(w)
            parse = (w >> 14) & 3
            if parse == PARSE_DUPLEX:
                insts += self._duplex(w, addr, ext)
                ext = None
                break
            f = self.match(w, self.by_iclass[w >> 28])
            if f is None:
                raise DecodeError(f"no instruction matches {w:#010x} at {addr + 4 * k:#x}")
            if f.tag == "A4_ext":
                if ext is not None:
                    raise DecodeError(f"two constant extenders in a row at {addr + 4 * k:#x}")
                ext = _bits(w, f.fields[0])
            else:
                if ext is not None and f.extendable < 0:
                    raise DecodeError(f"constant extender before {f.tag}, which has no extendable operand")
                ops, extended = self._operands(f, w, ext)
                insts.append(Inst(f, ops, extended, w))
                ext = None
            if parse == PARSE_END:
                break
        else:
            raise DecodeError(f"truncated packet at {addr:#x}")
        if ext is not None:
            raise DecodeError(f"constant extender ends the packet at {addr:#x}")
        loop0 = len(used) > 1 and (used[0] >> 14) & 3 == PARSE_LOOP
        loop1 = len(used) > 2 and (used[1] >> 14) & 3 == PARSE_LOOP
        return Packet(addr, tuple(used), self._resolve_new(tuple(insts), addr), loop0, loop1)

    def _duplex(self, w: int, addr: int, ext: int | None) -> list[Inst]:
        d = self.duplex[((w >> 29) << 1) | ((w >> 13) & 1)]
        lo = self.match(w & 0x1FFF, self.sub.get(d.low, ()))
        hi = self.match((w >> 16) & 0x1FFF, self.sub.get(d.high, ()))
        if lo is None or hi is None:
            raise DecodeError(f"no sub-instructions match duplex {w:#010x} at {addr:#x}")
        if ext is not None and hi.extendable < 0 and lo.extendable < 0:
            raise DecodeError(f"constant extender before a duplex without an extendable operand at {addr:#x}")
        hops, hext = self._operands(hi, (w >> 16) & 0x1FFF, ext if hi.extendable >= 0 else None)
        lops, lext = self._operands(lo, w & 0x1FFF, ext if hi.extendable < 0 else None)
        return [Inst(hi, hops, hext, w), Inst(lo, lops, lext, w)]

    @staticmethod
    def _resolve_new(insts: tuple[Inst, ...], addr: int) -> tuple[Inst, ...]:
        """New-value operands: the field names the producer by distance; store the producer's register."""
        out = list(insts)
        for k, inst in enumerate(insts):
            for i, o in enumerate(inst.form.operands):
                if o.cls not in "NO":
                    continue
                back = (inst.ops[i] >> 1) & 3
                earlier = [x for x in insts[:k] if o.cls == "N" or x.form.insn.hvx]  # vector values: HVX only
                if back == 0 or back > len(earlier):
                    raise DecodeError(f"{inst.tag} at {addr:#x}: new-value operand names no earlier instruction")
                producer = earlier[-back]
                dests = [j for j, p in enumerate(producer.form.operands) if p.written]
                ops = list(out[k].ops)
                if dests:
                    p = producer.form.operands[dests[0]]
                    ops[i] = producer.ops[dests[0]] + (p.pair and inst.ops[i] & 1)  # bit 0: a pair's high half
                    cls = p.cls
                elif producer.tag.startswith("V6_vgather"):  # a gather writes the vtmp register
                    ops[i], cls = 0, "T"
                else:
                    raise DecodeError(f"{inst.tag} at {addr:#x}: new-value producer {producer.tag} writes no register")
                out[k] = Inst(inst.form, tuple(ops), inst.extended, inst.word, cls)
        return tuple(out)


def words(data: bytes | bytearray | memoryview) -> list[int]:
    """Little-endian 32-bit words of a code buffer (a trailing partial word is dropped)."""
    mv = memoryview(data)[: len(data) // 4 * 4]
    return list(mv.cast("I")) if len(mv) else []
