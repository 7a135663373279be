"""Fault reports: what a programmer needs to find the bug behind a GPU fault.

`wave_report` (called by the run loop when a wave faults, emu.amd.exec.wave) takes what only the wave knows then:
its PC and instruction, EXEC, the instruction's address operands in each faulting lane, the last instructions it
ran (emu.amd.debug.history) and the allocations of its VM. `Kernel` is what the launcher knows about the dispatch
(kernel name, code object, kernargs); `FaultReport.describe` adds it: the source line from the code object's
DWARF (emu.amd.debug.dwarf), the kernel arguments that point at each allocation, the grid and block.
`FaultReport.text()` renders it; GPUFault's str() and the CLIs, MOCKKFD's memory-exception events and the pytest
plugins show that text.
"""
from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field

import numpy as np

from emu.amd.debug import dwarf, history
from emu.amd.memory import FaultRecord, GPUFault
from emu.amd.regs import VCC
from objfile.codeobj import CodeObject

WINDOW = 32  # instructions of history a report shows
SHOWN_LANES = 8  # faulting lanes listed one by one


@dataclass
class Allocation:
    va: int
    size: int
    name: str
    args: list[str] = field(default_factory=list)  # the kernel arguments pointing into it


@dataclass
class Lane:
    lane: int
    address: int
    operands: list[tuple[str, int]]  # (operand, value) of the instruction's address operands in this lane
    where: str = ""  # the address placed against the allocations


@dataclass
class Kernel:
    """What a launch knows of the kernel it dispatches (for the report)."""
    name: str
    code_object: bytes  # the ELF (for its DWARF line table)
    co: CodeObject
    base: int  # the image's load address
    kernargs: bytes
    buffers: dict = field(default_factory=dict)  # address -> buffer (its exact .size: mappings are whole pages)


@dataclass
class FaultReport:
    summary: str  # the fault record's one line
    pc: int | None
    instruction: str | None
    exec_mask: int
    lanes_per_wave: int
    wave: int | None
    workgroup: tuple[int, int, int] | None
    dispatch: int | None
    lanes: list[Lane]
    history: list[tuple[int, str]]  # (pc, instruction text), oldest first, the faulting one last
    allocations: list[Allocation]
    kernel: str | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    code_offset: int | None = None  # pc - the code object's load address
    source: tuple[str, int] | None = None

    def describe(self, grid, block, kernel: Kernel | None) -> None:
        """Add what the dispatch knows; place each lane's address."""
        self.grid, self.block = tuple(grid), tuple(block)
        if kernel is not None:
            self.kernel = kernel.name
            if self.pc is not None:
                self.code_offset = self.pc - kernel.base
                self.source = dwarf.line(kernel.code_object, self.code_offset)
            for a in self.allocations:
                b = kernel.buffers.get(a.va)
                if b is not None:
                    a.size = b.size
            k = kernel.co.kernels.get(kernel.name)
            for i, arg in enumerate(k.explicit_args if k is not None else ()):
                if arg.size != 8 or arg.offset + 8 > len(kernel.kernargs) or "buffer" not in arg.value_kind:
                    continue
                ptr, = struct.unpack_from("<Q", kernel.kernargs, arg.offset)
                a = _holding(self.allocations, ptr)
                if a is not None:
                    label = f"kernel argument {i}" + (f" `{arg.name}`" if arg.name else "") + \
                        (f" ({arg.type_name})" if arg.type_name and not arg.name else "")
                    a.args.append(label + (f" + {ptr - a.va:#x}" if ptr != a.va else ""))
        for ln in self.lanes:
            ln.where = place(self.allocations, ln.address)

    def work_item(self, lane: int) -> tuple[int, int, int] | None:
        """The global id of a lane's work-item."""
        if self.block is None or self.wave is None or self.workgroup is None:
            return None
        bx, by, _ = self.block
        t = self.wave * self.lanes_per_wave + lane
        local = (t % bx, t // bx % by, t // (bx * by))
        return tuple(g * b + x for g, b, x in zip(self.workgroup, self.block, local, strict=True))

    def text(self) -> str:
        out = [self.summary]
        what = f"kernel `{self.kernel}`" if self.kernel else "kernel (name unknown)"
        if self.dispatch is not None:
            what += f", dispatch {self.dispatch}"
        if self.grid is not None:
            what += f": grid {self.grid} x block {self.block}"
        out.append(what)
        if self.workgroup is not None or self.wave is not None:
            out.append(f"workgroup {self.workgroup}, wave {self.wave}")
        if self.pc is not None:
            off = f" (code object + {self.code_offset:#x})" if self.code_offset is not None else ""
            out.append(f"pc {self.pc:#x}{off}: {self.instruction}")
        if self.source is not None:
            out.append(f"source: {self.source[0]}:{self.source[1]}")
        n = bin(self.exec_mask).count("1")
        out.append(f"EXEC {self.exec_mask:#0{2 + self.lanes_per_wave // 4}x} ({n} of {self.lanes_per_wave} lanes)")
        if self.lanes:
            out.append(f"faulting lanes ({len(self.lanes)}):")
            for ln in self.lanes[:SHOWN_LANES]:
                wi = self.work_item(ln.lane)
                who = f"lane {ln.lane}" + (f" (work-item {wi})" if wi is not None else "")
                out.append(f"  {who}: address {ln.address:#x}: {ln.where}")
                if ln.operands:
                    out.append("      " + ", ".join(f"{name} = {v:#x}" for name, v in ln.operands))
            if len(self.lanes) > SHOWN_LANES:
                out.append(f"  ... and {len(self.lanes) - SHOWN_LANES} more lanes")
        if self.history:
            out.append(f"last {len(self.history)} instructions of the wave (oldest first):")
            for pc, text in self.history:
                out.append(f"  {pc:#x}: {text}" + ("   <- faulted" if pc == self.pc and pc == self.history[-1][0]
                                                    else ""))
        return "\n".join(out)


def wave_report(rec: FaultRecord, w, prog) -> FaultReport:
    """The report of a fault of wave `w` (its state as the fault left it) running `prog`."""
    inst = prog.insts.get(rec.pc) if rec.pc is not None else None
    lanes = []
    if rec.bits and len(rec.addresses) == len(rec.lanes):
        for lane, addr in zip(rec.lanes, rec.addresses, strict=True):
            lanes.append(Lane(lane, addr, _address_operands(inst, w, lane) if inst is not None else []))
    allocations = [Allocation(m.va, m.size, m.name) for m in (w.vm.mappings if w.vm is not None else ())]
    report = FaultReport(rec.line(), rec.pc, rec.instruction, w.exec, w.lanes, rec.wave, rec.workgroup,
                         rec.dispatch, lanes, _history(w, prog, rec.pc), allocations)
    for ln in report.lanes:
        ln.where = place(allocations, ln.address)
    return report


def _history(w, prog, pc: int | None) -> list[tuple[int, str]]:
    if pc is None:
        return []
    ring = w.counters.ctr if w.counters is not None else None
    try:
        pcs = history.instructions(w.history, prog, ring, pc, WINDOW, single=w.trace is not None)
    except Exception:  # the history must not hide the fault
        return []
    return [(p, _text(prog, p)) for p in pcs]


def _text(prog, pc: int) -> str:
    """The instruction at pc, or why there is none (a fetch that faulted: the fault being reported, e.g. a branch
    past the code)."""
    try:
        return str(prog.inst(pc))
    except GPUFault as e:
        return f"(not fetchable: {e.record.kind})"


def place(allocations: list[Allocation], addr: int) -> str:
    """Where `addr` lies: inside or just past an allocation, or the nearest one (`allocations`: the VM's mappings,
    sorted by va and disjoint)."""
    a = _holding(allocations, addr)
    if a is not None:
        return f"offset {addr - a.va:,} of {_name(a)}"
    if not allocations:
        return "inside no allocation (the VM maps nothing)"
    i = bisect.bisect_right([x.va for x in allocations], addr)
    prev = allocations[i - 1] if i else None  # holds nothing at addr: it ends at or before it
    nxt = allocations[i] if i < len(allocations) else None
    if prev is not None and (nxt is None or addr - (prev.va + prev.size) <= nxt.va - addr):
        gap = addr - (prev.va + prev.size)
        if gap < 1 << 20:
            return f"{gap:,} bytes past the end of {_name(prev)}"
        return f"inside no allocation; nearest: {gap:,} bytes past the end of {_name(prev)}"
    gap = nxt.va - addr
    if gap < 1 << 20:
        return f"{gap:,} bytes before the start of {_name(nxt)}"
    return f"inside no allocation; nearest: {gap:,} bytes before the start of {_name(nxt)}"


def _holding(allocations: list[Allocation], addr: int) -> Allocation | None:
    i = bisect.bisect_right([x.va for x in allocations], addr) - 1
    return allocations[i] if i >= 0 and addr < allocations[i].va + allocations[i].size else None


def _name(a: Allocation) -> str:
    text = f"the {a.size:,}-byte {a.name or 'allocation'} at {a.va:#x}"
    return text + (" — " + ", ".join(a.args) if a.args else "")


def _address_operands(inst, w, lane: int) -> list[tuple[str, int]]:
    """The values of the instruction's address operands in `lane` (register operands with their names)."""
    f, base = inst.fields, inst.base
    out: list[tuple[str, int]] = []
    saddr = f.get("saddr")
    scalar_base = saddr is not None and saddr < VCC  # an SGPR pair (otherwise off / null)
    for key in ("addr", "vaddr"):
        if key in f and base != "SMEM":
            r = f[key]
            wide = base in ("FLAT", "VFLAT") or (base in ("GLOBAL", "VGLOBAL") and not scalar_base)
            v = int(w.vgpr[r, lane])
            if wide and r + 1 < w.vgpr.shape[0]:
                v |= int(w.vgpr[r + 1, lane]) << 32
            out.append((f"v[{r}:{r + 1}]" if wide else f"v{r}", v))
    if scalar_base:
        out.append((f"s[{saddr}:{saddr + 1}]", _sgprs(w, saddr, 2)))
    if "sbase" in f:
        r = f["sbase"] * 2
        out.append((f"s[{r}:{r + 1}]", _sgprs(w, r, 2)))
    if "srsrc" in f:
        r = f["srsrc"] * 4
        out.append((f"s[{r}:{r + 3}]", _sgprs(w, r, 4)))
    so = f.get("soffset")
    if so is not None and so < VCC:
        out.append((f"s{so}", _sgprs(w, so, 1)))
    for key in ("offset", "ioffset", "offset0", "offset1"):
        if f.get(key):
            out.append((key, int(f[key])))
    return out


def _sgprs(w, r: int, n: int) -> int:
    v = 0
    for k in range(n):
        v |= int(np.uint32(w.sgpr[r + k])) << (32 * k)
    return v
