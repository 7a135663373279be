"""The GFX hub's translation of VMID 0 (GCVM context 0), the address space every engine of the GPU (the CP, the
shaders, SDMA) reaches memory through, walked into the device's GPU VM (emu.amd.memory, the same VM MOCKKFD's
buffers are mapped into).

What the hub translates (amdgpu's gfxhub_v3_0.c / gfxhub_v12_0.c, gmc_v11_0.c / gmc_v12_0.c, amdgpu_vm.h):

- the system aperture: MC addresses in [SYSTEM_APERTURE_LOW_ADDR << 18, HIGH_ADDR << 18 | 0x3FFFF] that lie in the
  frame buffer (MC_VM_FB_LOCATION_BASE/TOP) are VRAM at (address - FB base), no page table involved;
- the page tables of context 0: VM_CONTEXT0_CNTL enables it and gives PAGE_TABLE_DEPTH (levels below the root) and
  PAGE_TABLE_BLOCK_SIZE (the leaf table indexes 9 + it bits); PAGE_TABLE_START/END_ADDR bound the context's range
  (in 4 KiB pages), and an address's offset from START indexes the tables; PAGE_TABLE_BASE_ADDR is the root's entry.
  Each level is a table of 64-bit entries: bit 0 valid, bit 1 system (the address is system memory's, the page
  the driver got from /proc/self/pagemap), bit 6 writeable, bits 47:12 the address (VRAM: the offset in VRAM). A
  directory entry is a table's, unless its PDE-is-PTE bit (gfx10/11: bit 54; gfx12: bit 63) makes it a huge page
  covering all the directory entry spans (its address is the page's first byte: the hardware adds the offset in the
  page to it, which tinygrad's AM driver relies on, as it maps 2 MiB pages of VRAM that is only 4 KiB-aligned);
  every valid entry of the leaf level is a page.

Like the hardware's TLBs, the model reads the tables when told to: when the context is (re)enabled and at every
invalidation request for VMID 0 on the GFX hub (emu.pci_mock.gmc), it walks them whole and maps each run of
contiguous pages into the VM (adjacent pages of contiguous memory in one mapping), and unmaps what is no longer
there. An address no run covers (an invalid entry, outside the range, a page past VRAM or a system frame the host
never handed out) is unmapped in the VM: an access faults there (GPUFault), and the driver is told with the
address (emu.pci_mock.ih). System memory the host unmaps (`host_unmapped`) leaves the VM at once, so the GPU never
touches a page the process gave back. Read and execute permissions are not modelled (a valid page is readable).
"""
from __future__ import annotations

import bisect
import ctypes
import threading
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from emu.amd.memory import PAGE, VA_LIMIT
from emu.pci_mock.bars import MemoryBar
from emu.pci_mock.gmc import GMC
from emu.pci_mock.mmio import RegisterFile
from emu.pci_mock.tables import tables

_C = tables()["vm"]
VALID, SYSTEM, WRITEABLE = _C["AMDGPU_PTE_VALID"], _C["AMDGPU_PTE_SYSTEM"], _C["AMDGPU_PTE_WRITEABLE"]
ADDRESS = 0x0000_FFFF_FFFF_F000  # bits 47:12
APERTURE_UNIT, FB_UNIT = 18, 24  # SYSTEM_APERTURE_LOW/HIGH_ADDR hold address bits 47:18; FB_LOCATION 47:24
MAX_FLAT = 1 << 20  # entries of a one-level table the model reads at most (8 MiB: 4 GiB of 4 KiB pages)
HUB = "GC"


def pde_is_pte(gfx: int) -> int:
    """The bit that makes a directory entry a huge page (amdgpu_vm.h: AMDGPU_PDE_PTE, AMDGPU_PDE_PTE_GFX12)."""
    return _C["AMDGPU_PDE_PTE_GFX12"] if gfx >= 12 else _C["AMDGPU_PDE_PTE"]


@dataclass(frozen=True)
class Run:
    """`size` bytes of contiguous memory mapped at `va`: VRAM at offset `phys`, or system memory at physical `phys`."""
    va: int
    size: int
    phys: int
    system: bool
    writable: bool


@dataclass(frozen=True)
class Context:
    """What the registers say about context 0 of the hub."""
    enabled: bool
    depth: int        # levels below the root
    block_size: int   # the leaf table indexes 9 + block_size bits
    start: int        # first byte of the range
    end: int          # last byte of the range
    root: int         # the root table's entry (PDE format)
    aperture: tuple[int, int]  # [first, last] byte of the system aperture
    fb: tuple[int, int]        # [first, last] byte of the frame buffer


class TableWalk:
    """The runs a context's tables map. `read(phys, system, count)` gives `count` uint64 entries of the table at
    `phys` (None where there is no such memory); `gfx` selects the entry format."""

    def __init__(self, ctx: Context, gfx: int, read, vram_size: int) -> None:
        self.ctx, self.read, self.vram_size, self.huge = ctx, read, vram_size, pde_is_pte(gfx)
        leaf_bits = 9 + ctx.block_size
        shifts = [12 + leaf_bits + 9 * i for i in range(ctx.depth)][::-1] + [12]
        self.levels = [(s, 9 if i else max(0, 48 - s)) for i, s in enumerate(shifts)]  # (shift, index bits)
        self.levels[-1] = (12, leaf_bits if ctx.depth else self.levels[-1][1])

    def runs(self) -> list[Run]:
        ctx, out = self.ctx, []
        if ctx.enabled and ctx.root & VALID and ctx.start <= ctx.end:
            self._table(ctx.root & ADDRESS, bool(ctx.root & SYSTEM), 0, 0, out)
        return merge(clip(out, ctx.start, ctx.end, self.vram_size))

    def _table(self, phys: int, system: bool, level: int, offset: int, out: list[Run]) -> None:
        shift, bits = self.levels[level]
        count = min(1 << bits, ((self.ctx.end - self.ctx.start - offset) >> shift) + 1, MAX_FLAT)
        e = self.read(phys, system, count) if count > 0 else None
        if e is None:
            return
        valid = np.flatnonzero(e & np.uint64(VALID))
        leaf = level == len(self.levels) - 1
        pages = valid if leaf else valid[(e[valid] & np.uint64(self.huge)) != 0]
        if not leaf:
            for i in valid[(e[valid] & np.uint64(self.huge)) == 0]:
                entry = int(e[i])
                self._table(entry & ADDRESS, bool(entry & SYSTEM), level + 1, offset + (int(i) << shift), out)
        if pages.size:
            self._pages(pages, e[pages], shift, self.ctx.start + offset, out)

    @staticmethod
    def _pages(idx: np.ndarray, ent: np.ndarray, shift: int, base: int, out: list[Run]) -> None:
        """The runs of a table's page entries `ent` at indices `idx`: consecutive entries of contiguous memory of
        one kind make one run."""
        size = 1 << shift
        phys = ent & np.uint64(ADDRESS)
        kind = ent & np.uint64(SYSTEM | WRITEABLE)
        cut = np.flatnonzero((np.diff(idx) != 1) | (np.diff(phys) != np.uint64(size)) | (np.diff(kind) != 0)) + 1
        for a, b in zip(np.concatenate(([0], cut)), np.concatenate((cut, [idx.size])), strict=True):
            k = int(kind[a])
            out.append(Run(base + (int(idx[a]) << shift), int(b - a) << shift, int(phys[a]), bool(k & SYSTEM),
                           bool(k & WRITEABLE)))


def clip(runs: list[Run], start: int, end: int, vram_size: int) -> list[Run]:
    """The runs cut to the context's range, the VA space and (VRAM runs) VRAM."""
    out = []
    for r in runs:
        lo, hi = max(r.va, start), min(r.va + r.size - 1, end, VA_LIMIT - 1)
        phys = r.phys + lo - r.va
        if not r.system:
            hi = min(hi, r.va + vram_size - 1 - r.phys)
        if lo <= hi:
            out.append(Run(lo, (hi + 1 - lo) // PAGE * PAGE, phys, r.system, r.writable))
    return [r for r in out if r.size]


def merge(runs: list[Run]) -> list[Run]:
    """Sorted runs with each run of adjacent, physically contiguous pages of one kind made one."""
    out: list[Run] = []
    for r in sorted(runs, key=lambda r: r.va):
        p = out[-1] if out else None
        if p and p.va + p.size == r.va and p.phys + p.size == r.phys and (p.system, p.writable) == (r.system,
                                                                                                   r.writable):
            out[-1] = Run(p.va, p.size + r.size, p.phys, p.system, p.writable)
        else:
            out.append(r)
    return out


def without(runs: list[Run], lo: int, hi: int) -> list[Run]:
    """The runs with the bytes [lo, hi] taken out (the system aperture wins over the page tables)."""
    out = []
    for r in runs:
        if r.va + r.size - 1 < lo or r.va > hi:
            out.append(r)
            continue
        if r.va < lo:
            out.append(Run(r.va, lo - r.va, r.phys, r.system, r.writable))
        if r.va + r.size - 1 > hi:
            cut = hi + 1 - r.va
            out.append(Run(hi + 1, r.size - cut, r.phys + cut, r.system, r.writable))
    return out


class SystemPages(Protocol):
    """The system memory the GPU reaches by DMA (emu.os.pci.SystemMemory)."""

    def host_address(self, phys: int) -> int | None:
        """The host address of physical address `phys` (None: a frame never handed out)."""

    def frames(self, first: int, end: int) -> list[int]:
        """The frames in [first, end) handed out, in order."""


class NoSystemPages:
    def host_address(self, phys: int) -> int | None:
        return None

    def frames(self, first: int, end: int) -> list[int]:
        return []


def _inside(r: Run, runs: list[Run], vas: list[int]) -> bool:
    """Whether every page of `r` translates the same in `runs` (sorted, with their vas in `vas`)."""
    i = bisect.bisect_right(vas, r.va) - 1
    n = runs[i] if i >= 0 else None
    return n is not None and r.va + r.size <= n.va + n.size and n.phys + (r.va - n.va) == r.phys and \
        (n.system, n.writable) == (r.system, r.writable)


def subtract(runs: list[Run], holes: list[Run]) -> list[Run]:
    """`runs` (sorted) without the bytes of `holes` (sorted, each inside one of them)."""
    out, j = [], 0
    for r in runs:
        pos, end = r.va, r.va + r.size
        while j < len(holes) and holes[j].va < end:
            h = holes[j]
            if h.va > pos:
                out.append(Run(pos, h.va - pos, r.phys + pos - r.va, r.system, r.writable))
            pos, j = max(pos, h.va + h.size), j + 1
        if pos < end:
            out.append(Run(pos, end - pos, r.phys + pos - r.va, r.system, r.writable))
    return out


class GFXHub:
    """Context 0 of the GFX hub of one function, kept in `gpu.vm` (see the module docstring); `memory` is the
    system memory system-page entries address."""

    def __init__(self, regs: RegisterFile, gmc: GMC, vram: MemoryBar, vram_size: int, gpu,
                 memory: SystemPages) -> None:
        self.regs, self.vram, self.vram_size, self.gpu, self.memory = regs, vram, vram_size, gpu, memory
        self.mapped: dict[Run, list] = {}  # run -> its mappings in the VM
        self.walks = 0
        self._lock = threading.RLock()
        self._r = {n: regs.addr(f"reg{HUB}{n}") for n in (
            "VM_CONTEXT0_CNTL", "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32",
            "VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", "VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32",
            "VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", "VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32",
            "MC_VM_SYSTEM_APERTURE_LOW_ADDR", "MC_VM_SYSTEM_APERTURE_HIGH_ADDR", "MC_VM_FB_LOCATION_BASE",
            "MC_VM_FB_LOCATION_TOP")}
        regs.on_write(self._r["VM_CONTEXT0_CNTL"], self._cntl)
        gmc.on_invalidate.append(self._invalidate)

    def context(self) -> Context:
        r, get = self._r, self.regs.stored

        def pair(name: str) -> int:
            return get(r[f"{name}_HI32"]) << 32 | get(r[f"{name}_LO32"])
        cntl, name = get(r["VM_CONTEXT0_CNTL"]), f"reg{HUB}VM_CONTEXT0_CNTL"
        field = self.regs.field
        fb = (get(r["MC_VM_FB_LOCATION_BASE"]) << FB_UNIT,
              get(r["MC_VM_FB_LOCATION_TOP"]) << FB_UNIT | (1 << FB_UNIT) - 1)
        return Context(bool(field(name, cntl, "enable_context")), field(name, cntl, "page_table_depth"),
                       field(name, cntl, "page_table_block_size"),
                       pair("VM_CONTEXT0_PAGE_TABLE_START_ADDR") << 12,
                       pair("VM_CONTEXT0_PAGE_TABLE_END_ADDR") << 12 | (PAGE - 1),
                       pair("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR"),
                       (get(r["MC_VM_SYSTEM_APERTURE_LOW_ADDR"]) << APERTURE_UNIT,
                        get(r["MC_VM_SYSTEM_APERTURE_HIGH_ADDR"]) << APERTURE_UNIT | (1 << APERTURE_UNIT) - 1), fb)

    def _cntl(self, addr: int, value: int) -> None:
        self.regs.store(addr, value)
        self.walk()

    def _invalidate(self, hub: str, vmids: int) -> None:
        if hub == HUB and vmids & 1:
            self.walk()

    # -- the walk -----------------------------------------------------------------------------------------------
    def runs(self) -> list[Run]:
        """What context 0 maps now: the system aperture's VRAM, then the page tables' runs outside it."""
        ctx = self.context()
        runs = TableWalk(ctx, self.gpu.gfx, self._read, self.vram_size).runs()
        lo, hi = max(ctx.aperture[0], ctx.fb[0]), min(ctx.aperture[1], ctx.fb[1], ctx.fb[0] + self.vram_size - 1)
        if ctx.aperture[0] <= ctx.aperture[1] and lo <= hi and lo % PAGE == 0:
            runs = without(runs, lo, hi) + clip([Run(lo, hi + 1 - lo, lo - ctx.fb[0], False, True)], 0, VA_LIMIT - 1,
                                                self.vram_size)
        return sorted(runs, key=lambda r: r.va)

    def _read(self, phys: int, system: bool, count: int) -> np.ndarray | None:
        """`count` entries of the table at `phys`: VRAM's, or system memory's page by page."""
        n = 8 * count
        if not system:
            return self.vram.array[phys:phys + n].view(np.uint64) if phys + n <= self.vram_size else None
        out = bytearray()
        for page in range(phys, phys + n, PAGE):
            host = self.memory.host_address(page)
            if host is None:
                return None
            out += ctypes.string_at(host, min(PAGE, phys + n - page))
        return np.frombuffer(bytes(out), np.uint64)

    def walk(self) -> None:
        """Read the tables again and make the VM map what they map (see the module docstring). A mapping whose
        pages still translate as they did stays as it is (an engine may be using it while the driver maps more);
        only what changed is unmapped, and only what is new is mapped."""
        with self._lock:
            self.walks += 1
            runs = self.runs()
            vas = [r.va for r in runs]
            kept = sorted((r for r in self.mapped if _inside(r, runs, vas)), key=lambda r: r.va)
            for run in set(self.mapped) - set(kept):
                self._drop(run)
            for run in subtract(runs, kept):
                self.mapped[run] = [self.gpu.vm.map(va, buf, writable=run.writable, name=f"gcvm {run.va:#x}")
                                    for va, buf in self._backing(run)]

    def _drop(self, run: Run) -> None:
        for m in self.mapped.pop(run):
            self.gpu.code.forget(self.gpu.vm.unmap(m.va))

    def _backing(self, run: Run) -> list[tuple[int, np.ndarray]]:
        """(va, host memory) pieces of a run: VRAM's slice, or each stretch of system pages contiguous on the host
        (frames the host never handed out are left unmapped)."""
        if not run.system:
            return [(run.va, self.vram.array[run.phys:run.phys + run.size])]
        out: list[tuple[int, int, int]] = []  # va, host, size
        first = run.phys // PAGE
        for frame in self.memory.frames(first, first + run.size // PAGE):
            va, host = run.va + (frame - first) * PAGE, self.memory.host_address(frame * PAGE)
            if out and out[-1][0] + out[-1][2] == va and out[-1][1] + out[-1][2] == host:
                out[-1] = (out[-1][0], out[-1][1], out[-1][2] + PAGE)
            else:
                out.append((va, host, PAGE))
        return [(va, np.frombuffer((ctypes.c_uint8 * n).from_address(host), np.uint8)) for va, host, n in out]

    def host_unmapped(self, addr: int, size: int) -> None:
        """The host unmapped [addr, addr+size): system runs backed there leave the VM (the next walk finds their
        frames gone)."""
        with self._lock:
            for run in [r for r, ms in self.mapped.items() if r.system and any(
                    m.host < addr + size and addr < m.host + m.size for m in ms)]:
                self._drop(run)
