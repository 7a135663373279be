"""LLVM assembly text of a decoded AMD instruction (what llvm-objdump-19 / llvm-mc-19 --disassemble print):
`render` hands an instruction to the printer of its encoding (alu: scalar and vector ALU; memory: memory, image,
export). Importing this module makes it the renderer of `Inst.__str__` (emu.amd does so).

Printing is per encoding and per operand kind; opcodes are named only in small documented tables (symbolic
immediates, LLVM spellings that differ from the vendor's, table gaps)."""
from __future__ import annotations

from emu.amd.asm import alu, memory
from emu.amd.asm import syntax as syn
from emu.amd.decode import Inst, decoder

_RENDER = {**alu.RENDER, **memory.RENDER}


def render(inst: Inst) -> str:
    if inst.op is None:
        return syn.UNKNOWN
    return _RENDER.get(inst.base, alu.generic)(inst, decoder(inst.family)).rstrip()


Inst.renderer = render
