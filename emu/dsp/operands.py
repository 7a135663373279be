"""Operands of an instruction, read from its vendor syntax string ("Rd32=add(Rs32,#s16)").

A register operand is class letter + field letter(s) + register count (+ .new/.cur/.tmp): `Rdd32` is the pair
named by encoding field d. An immediate is `#` + letter + bits (+ `:scale`): a lower-case letter's
immediate lives in encoding field i, an upper-case one's in I; its semantic name is letter + "iV" (`#s16` ->
siV, `#U5` -> UiV). The semantic name of a register operand is class + field + V (`RddV`), N for a new value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# destination fields are written, x/y both read and written, the others read
_DEST, _INOUT = frozenset("de"), frozenset("xy")
_OPERAND = re.compile(r"(?P<reg>(?P<cls>[RPCMNVQO])(?P<f>[a-z]{1,2})(?P<half>\.[HL])?(?P<n>\d+)"
                      r"(?P<sfx>\.new|\.cur|\.tmp)?)"
                      r"|(?P<imm>#(?P<k>[a-zA-Z])(?P<bits>\d+)(?::(?P<scale>\d))?)")


@dataclass(frozen=True, slots=True)
class Operand:
    text: str  # as spelled in the syntax: Rdd32, Nt8.new, #s11:2
    name: str  # in the semantics: RddV, NtN, siV
    cls: str  # R P C M N V Q O (registers), or "#" (immediates)
    field: str  # encoding field letter: d s t ... ; i or I for immediates
    count: int  # registers in the class the field can name (32, 16, 8, 4, 2), or immediate bits
    pair: bool = False  # a register pair (Rdd, Vdd, Cdd)
    signed: bool = False  # immediates: sign-extended
    scale: int = 0  # immediates: value = field << scale
    pcrel: bool = False  # immediates: an offset from the packet address (#r)
    suffix: str = ""  # .new .cur .tmp
    half: str = ""  # .H or .L: the operand is a half of the register (Rt.H32)

    @property
    def written(self) -> bool:
        return self.cls != "#" and self.field[0] in _DEST | _INOUT

    @property
    def read(self) -> bool:
        return self.cls == "#" or self.field[0] not in _DEST

    @property
    def bits(self) -> int:
        """Width of the encoding field."""
        return self.count if self.cls == "#" else max(1, (self.count - 1).bit_length())


def parse(syntax: str) -> tuple[Operand, ...]:
    out: list[Operand] = []
    for m in _OPERAND.finditer(syntax):
        if m["reg"]:
            cls, f, sfx = m["cls"], m["f"], m["sfx"] or ""
            pair = len(f) == 2
            name = f"{cls}{f}{'N' if cls in 'NO' or (cls == 'P' and sfx == '.new') else 'V'}"
            out.append(Operand(m["reg"], name, cls, f[0], int(m["n"]), pair, suffix=sfx, half=m["half"] or ""))
        else:
            k = m["k"]
            field = "I" if k.isupper() else "i"  # #S8, #U5 live in field I; #s8, #u5, #r9:2 in field i
            out.append(Operand(m["imm"], f"{k}iV", "#", field, int(m["bits"]), signed=k.lower() in "srm",
                               scale=int(m["scale"] or 0), pcrel=k.lower() == "r"))
    return tuple(out)
