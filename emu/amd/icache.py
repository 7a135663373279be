"""A GPU's instruction cache: code decoded once per code mapping and wave size, decoded again when the bytes it came
from changed (as an instruction-cache invalidate would make the hardware fetch them again).

Instructions are decoded as execution reaches them (the executable segment is mostly padding and other kernels).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from emu.amd.exec import category
from emu.amd.exec.wave import Program
from emu.amd.memory import VM, FaultRecord, GPUFault

MAX_INSTRUCTION = 16  # bytes


def fetch_code(vm: VM, pc: int, n: int) -> bytes:
    """Up to n bytes of code at pc (an instruction fetch: faults when pc is unmapped)."""
    m = vm.mapping(pc)
    if m is None:
        raise GPUFault(FaultRecord("unmapped", (pc,), (), 32, False, detail="instruction fetch"))
    return vm.read(pc, min(n, m.end - pc))


@dataclass(eq=False)
class _Code:
    mapping: object
    program: Program
    lo: int = 0  # offset in the mapping of the bytes decoded so far, and those bytes
    data: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))


class InstructionCache:
    def __init__(self, vm: VM, arch: str):
        self.vm, self.arch = vm, arch
        self._code: dict[tuple[int, int, bool], _Code] = {}  # (code mapping va, lanes, stats) -> decoded code

    def program(self, entry: int, lanes: int, stats: bool = False) -> Program:
        """Decoded code for waves of `lanes` starting at `entry` (faults if the address is unmapped), tallying
        wave-instructions by category under HWEMU_STATS or when `stats` asks (the performance counters count). Code
        decoded before is reused while the bytes it was decoded from are unchanged."""
        fetch_code(self.vm, entry, 4)
        m = self.vm.mapping(entry)
        stats = stats or category.enabled()
        c = self._code.get((m.va, lanes, stats))
        if c is not None and c.mapping is m and np.array_equal(m.buf[c.lo:c.lo + len(c.data)], c.data):
            return c.program
        vm = self.vm
        prog = Program(self.arch, lanes, lambda pc, n: fetch_code(vm, pc, n), stats)
        self._code[(m.va, lanes, stats)] = _Code(m, prog)
        return prog

    def seal(self, entry: int, prog: Program) -> None:
        """After a dispatch of `prog` from `entry`: remember the bytes it has decoded so far, to notice when they
        change (nothing if its code was unmapped or decoded again meanwhile)."""
        m = self.vm.mapping(entry)
        c = self._code.get((m.va, prog.lanes, prog.stats)) if m is not None else None
        if c is None or c.program is not prog or not prog.insts:
            return
        m = c.mapping
        lo, hi = min(prog.insts) - m.va, max(prog.insts) - m.va + MAX_INSTRUCTION
        c.lo, c.data = lo, m.buf[lo:min(hi, m.size)].copy()

    def forget(self, mapping) -> None:
        """Drop the code decoded from `mapping` (unmapped or invalidated)."""
        for key in [k for k, c in list(self._code.items()) if c.mapping is mapping]:
            del self._code[key]
