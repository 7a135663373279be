"""Packets in LLVM's Hexagon assembly syntax (as llvm-mc / llvm-objdump print them).

The text starts from the vendor syntax string, with each operand replaced by its LLVM spelling and the
assignment operators of the top level spaced as LLVM spaces them.
"""
from __future__ import annotations

from emu.dsp.decode import Inst, Packet
from emu.dsp.operands import _OPERAND

CONTROL = {0: "sa0", 1: "lc0", 2: "sa1", 3: "lc1", 4: "p3:0", 6: "m0", 7: "m1", 8: "usr", 9: "pc", 10: "ugp",
           11: "gp", 12: "cs0", 13: "cs1", 14: "upcyclelo", 15: "upcyclehi", 16: "framelimit", 17: "framekey",
           18: "pktcountlo", 19: "pktcounthi", 30: "utimerlo", 31: "utimerhi"}


def operand(o, value: int, extended: bool, addr: int, new_cls: str = "") -> str:
    if o.cls == "#":
        if o.pcrel:
            return f"{(addr + value) & 0xFFFFFFFF:#x}"
        return f"{'##' if extended else '#'}{value}"
    if o.cls == "C":
        name = f"c{value + 1}:{value}" if o.pair else CONTROL.get(value, f"c{value}")
    else:
        prefix = {"R": "r", "N": "r", "P": "p", "M": "m", "V": "v", "O": "v", "Q": "q"}[o.cls]
        if new_cls == "T":  # the vtmp register a gather wrote
            return "vtmp" + o.suffix
        if new_cls:  # a new-value operand spells its producer's register
            prefix = new_cls.lower()
        name = f"{prefix}{value + 1}:{value}" if o.pair and prefix == "v" else (
            f"r{value + 1}:{value}" if o.pair else f"{prefix}{value}")
    return name + o.half.lower() + o.suffix


# frame instructions on the stack/frame registers print with those implied and without :raw
_FRAME = {"deallocframe(": {"d": 30, "s": 30}, "dealloc_return(": {"d": 30, "s": 30}, "allocframe(": {"x": 29}}


def _space_assignments(text: str) -> str:
    """`a=b` -> `a = b` (and `+=` ...) outside parentheses; comparisons (==, <=, >=, !=) stay."""
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(text):
        c = text[i]
        depth += (c in "([") - (c in ")]")
        if c == "=" and depth == 0 and text[i + 1:i + 2] != "=" and (not out or out[-1] not in "=!<>" or
                                                                    "".join(out[-2:]) in ("<<", ">>")):
            op = "="
            while out and out[-1] in "+-&|^<>":
                op = out.pop() + op
            while out and out[-1] == " ":
                out.pop()
            out.append(f" {op} ")
            i += 1
            while i < len(text) and text[i] == " ":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def inst(i: Inst, addr: int = 0) -> str:
    """One instruction; addr is its packet's address (pc-relative targets print as absolute addresses)."""
    syntax = i.form.insn.syntax
    parts: list[str] = []
    last = 0
    for k, m in enumerate(_OPERAND.finditer(syntax)):
        parts.append(syntax[last:m.start()])
        o = i.form.operands[k]
        parts.append(operand(o, i.ops[k], i.extended and k == i.form.extendable, addr,
                             i.new_cls if o.cls in "NO" else ""))
        last = m.end()
    parts.append(syntax[last:])
    text = _space_assignments("".join(parts))
    if i.extended and "gp+##" in text:  # an extended GP-relative address is absolute: GP is not added
        text = text.replace("gp+##", "##")
    frame = next((w for w in _FRAME if w in syntax), None)
    if frame and all(i.ops[k] == _FRAME[frame].get(o.field, i.ops[k]) for k, o in enumerate(i.form.operands)):
        for implied in ("r31:30 = ", "(r30)", "r29,", ":raw"):
            text = text.replace(implied, "")
    return text


def packet(p: Packet) -> str:
    body = "\n".join(f"\t\t{inst(i, p.addr)}" for i in p.insts)
    loops = "01" if p.endloop0 and p.endloop1 else "0" if p.endloop0 else "1" if p.endloop1 else ""
    return f"\t{{\n{body}\n\t}}{f' :endloop{loops}' if loops else ''}"
