"""The GFX hub's VMID 0 translation (emu.pci_mock.vmhub): page tables written into VRAM as amdgpu_vm.h lays the
entries out (bit 0 valid, 1 system, 6 writeable, 47:12 the address; PDE-is-PTE bit 54 on gfx11, 63 on gfx12), the
context registers programmed as a driver does, then the device's GPU VM read and written at the virtual addresses.
The expected translation comes from a page-at-a-time reference walker written here from those facts, not from the
model's code."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from emu.amd.memory import GPUFault
from emu.pci_mock import PCIFunction

MiB = 1 << 20
V, S, W = 1 << 0, 1 << 1, 1 << 6
HUGE = {"gfx1100": 1 << 54, "gfx1201": 1 << 63}
ADDR = 0x0000_FFFF_FFFF_F000
START = 0x2000_0000_0000  # the context's first address (tinygrad's AM driver's VA base)
SHIFTS = (39, 30, 21, 12)  # depth 3, block size 0: PDB2, PDB1, PDB0, PTB
TABLES = 0x100000  # the tables live in VRAM from here, one 4 KiB page each
SYS_FRAMES = 0x100000  # system memory: frames from 4 GiB, backed by `host_pages` below
host_pages = np.zeros(64 * 4096, np.uint8)


def host(phys: int) -> int | None:
    k = phys // 4096 - SYS_FRAMES
    return host_pages.ctypes.data + k * 4096 + phys % 4096 if 0 <= k < 64 else None


class Memory:
    """64 system pages, frames SYS_FRAMES on, in host_pages."""
    host_address = staticmethod(host)

    @staticmethod
    def frames(first: int, end: int) -> list[int]:
        return list(range(max(first, SYS_FRAMES), min(end, SYS_FRAMES + 64)))


@pytest.fixture(scope="module", params=["gfx1100", "gfx1201"])
def fn(request):
    f = PCIFunction(request.param, vram=512 * MiB, memory=Memory())
    f.arch = request.param
    yield f
    f.close()


def reg(f, name: str, value: int) -> None:
    f.mmio.write(f.regs.addr(name) * 4, value)


def program(f, root: int, end: int = 0x7FFF_FFFF_FFFF) -> None:
    """What a driver writes to enable context 0 (amdgpu gfxhub_v3_0's order), then a TLB flush of VMID 0."""
    for name, v in (("START", START >> 12), ("END", end >> 12), ("BASE", root | V)):
        kind = "PAGE_TABLE_BASE_ADDR" if name == "BASE" else f"PAGE_TABLE_{name}_ADDR"
        reg(f, f"regGCVM_CONTEXT0_{kind}_LO32", v & 0xFFFFFFFF)
        reg(f, f"regGCVM_CONTEXT0_{kind}_HI32", v >> 32)
    reg(f, "regGCVM_CONTEXT0_CNTL", f.regs.encode("regGCVM_CONTEXT0_CNTL", enable_context=1, page_table_depth=3))
    reg(f, "regGCVM_INVALIDATE_ENG17_REQ", 1)


def put(f, table: int, index: int, entry: int) -> None:
    f.vram.write(table + 8 * index, entry.to_bytes(8, "little"))


def clear(f) -> None:
    f.vram.write(TABLES, bytes(64 * 4096))


def chain(f) -> tuple[int, int]:
    """Cleared tables with one chain from the root through entry 0 of each level: (the root, the page table)."""
    clear(f)
    pdb2, pdb1, pdb0, ptb = (TABLES + i * 4096 for i in range(4))
    for t, nxt in ((pdb2, pdb1), (pdb1, pdb0), (pdb0, ptb)):
        put(f, t, 0, nxt | V)
    return pdb2, ptb


def reference(f, va: int) -> tuple[int, bool, bool] | None:
    """(address, system, writable) of byte `va`, walked a level at a time from the root entry; None: no page."""
    entry = f.regs.read(f.regs.addr("regGCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"))
    off = va - START
    if not 0 <= off < 1 << 47:
        return None
    for level, shift in enumerate(SHIFTS):
        if not entry & V:
            return None
        at = (entry & ADDR) + 8 * (off >> shift & 0x1FF)
        if entry & S:
            h = host(at)
            if h is None:
                return None
            entry = int.from_bytes(ctypes.string_at(h, 8), "little")
        elif (entry & ADDR) + 4096 > 512 * MiB:
            return None
        else:
            entry = int.from_bytes(f.vram.read(at, 8), "little")
        if entry & V and (level == 3 or entry & HUGE[f.arch]):
            return (entry & ADDR) + (off & ((1 << shift) - 1)), bool(entry & S), bool(entry & W)
    return None


def translated(f, va: int) -> tuple[int, bool] | None:
    """Where the device's VM puts byte `va`: (host address, writable), or None."""
    m = f.gpu.vm.mapping(va)
    return None if m is None else (m.host + va - m.va, m.writable)


def expected_host(f, ref) -> int | None:
    addr, system, _w = ref
    if system:
        return host(addr)
    return f.vram.array.ctypes.data + addr if addr < 512 * MiB else None


def test_a_hand_built_table_maps_as_its_entries_say(fn):
    clear(fn)
    pdb2, pdb1, pdb0, ptb = (TABLES + i * 4096 for i in range(4))
    put(fn, pdb2, 0, pdb1 | V)
    put(fn, pdb1, 0, pdb0 | V)
    put(fn, pdb0, 0, ptb | V)
    put(fn, ptb, 0, 0x200000 | V | W)                               # VA START: VRAM page 0x200000
    put(fn, ptb, 1, SYS_FRAMES * 4096 + 0x3000 | V | S | W)         # a system page
    put(fn, ptb, 2, 0x300000 | V)                                   # read-only
    put(fn, ptb, 3, 0x400000 | W)                                   # not valid
    put(fn, pdb0, 1, 0x800000 | V | W | HUGE[fn.arch])              # a 2 MiB page at START + 2 MiB
    program(fn, pdb2)
    vm = fn.gpu.vm
    vm.write(START + 8, b"vram page")
    assert fn.vram.read(0x200008, 9) == b"vram page"
    vm.write(START + 0x1000, b"host page")
    assert bytes(host_pages[0x3000:0x3009]) == b"host page"
    fn.vram.write(0x300010, b"ro")
    assert vm.read(START + 0x2010, 2) == b"ro"
    with pytest.raises(GPUFault) as e:
        vm.store(np.array([START + 0x2000], np.uint64), 32, np.array([1], np.uint64))
    assert e.value.record.kind == "read-only"
    with pytest.raises(GPUFault) as e:
        vm.load(np.array([START + 0x3000], np.uint64), 32)
    assert e.value.record.kind == "unmapped" and e.value.record.addresses == (START + 0x3000,)
    vm.write(START + 2 * MiB + 0x1FFFF8, b"huge end")
    assert fn.vram.read(0x800000 + 0x1FFFF8, 8) == b"huge end"
    # the system aperture: MC addresses of the frame buffer are VRAM, no table involved
    fb = fn.regs.read(fn.regs.addr("regGCMC_VM_FB_LOCATION_BASE")) << 24
    reg(fn, "regGCMC_VM_SYSTEM_APERTURE_LOW_ADDR", fb >> 18)
    reg(fn, "regGCMC_VM_SYSTEM_APERTURE_HIGH_ADDR", (fb + 512 * MiB - 1) >> 18)
    reg(fn, "regGCVM_INVALIDATE_ENG17_REQ", 1)
    assert vm.read(fb + 0x200008, 9) == b"vram page"


def test_unmapping_and_invalidating_takes_pages_out(fn):
    pdb2, ptb = chain(fn)
    put(fn, ptb, 5, 0x200000 | V | W)
    program(fn, pdb2)
    assert translated(fn, START + 5 * 4096) is not None
    put(fn, ptb, 5, 0)
    assert translated(fn, START + 5 * 4096) is not None  # the TLB holds it until the driver invalidates
    reg(fn, "regGCVM_INVALIDATE_ENG17_REQ", 1)
    assert translated(fn, START + 5 * 4096) is None


def test_a_mapping_in_use_stays_while_the_driver_maps_next_to_it(fn):
    pdb2, ptb = chain(fn)
    put(fn, ptb, 8, 0x200000 | V | W)
    program(fn, pdb2)
    before = fn.gpu.vm.mapping(START + 8 * 4096)
    put(fn, ptb, 9, 0x201000 | V | W)  # the next page, contiguous in VA and in VRAM
    reg(fn, "regGCVM_INVALIDATE_ENG17_REQ", 1)
    assert fn.gpu.vm.mapping(START + 8 * 4096) is before  # never unmapped: an engine may be using it
    assert translated(fn, START + 9 * 4096) == (fn.vram.array.ctypes.data + 0x201000, True)


def test_system_pages_the_host_unmaps_leave_the_vm(fn):
    pdb2, ptb = chain(fn)
    put(fn, ptb, 0, SYS_FRAMES * 4096 | V | S | W)
    program(fn, pdb2)
    assert translated(fn, START) == (host_pages.ctypes.data, True)
    fn.gfxhub.host_unmapped(host_pages.ctypes.data, 4096)
    assert translated(fn, START) is None


ENTRY_ADDRS = [TABLES + i * 4096 for i in range(6)] + [0x200000, 0x201000, 0x600000, 0x1FFFF000, 512 * MiB,
                                                     SYS_FRAMES * 4096, (SYS_FRAMES + 5) * 4096, 0xFFFF_FFFF_F000]


@st.composite
def entries(draw, arch: str):
    flags = draw(st.sampled_from([0, V, V | W, V | S, V | S | W, W]))
    huge = HUGE[arch] if draw(st.integers(0, 3)) == 0 else 0
    junk = draw(st.integers(0, (1 << 64) - 1)) & ~(ADDR | V | S | W | HUGE[arch]) if draw(st.booleans()) else 0
    return draw(st.sampled_from(ENTRY_ADDRS)) | flags | huge | junk


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_tables_never_crash_and_map_as_the_reference_walk_says(fn, data):
    clear(fn)
    for t in range(6):
        for i in data.draw(st.lists(st.integers(0, 3), max_size=4, unique=True)):
            put(fn, TABLES + t * 4096, i, data.draw(entries(fn.arch)))
        if t < 3 and data.draw(st.booleans()):  # often a chain of tables down to the leaves
            put(fn, TABLES + t * 4096, 0, TABLES + (t + 1) * 4096 | V)
    end = data.draw(st.sampled_from([0x7FFF_FFFF_FFFF, START + 3 * MiB - 1]))
    program(fn, TABLES, end)
    probes = {START + (a << 39 | b << 30 | c << 21 | d << 12) + k
              for a in range(4) for b in range(4) for c in range(4) for d in (0, 1, 3) for k in (0, 0xFF8)}
    for m in fn.gpu.vm.mappings:
        if m.va >= START:  # the tables' mappings (the system aperture's, below, is the first test's)
            probes |= {m.va, m.va + m.size - 8}
    mapped = 0
    for va in sorted(probes):
        ref = reference(fn, va)
        if ref is not None and (va > end or expected_host(fn, ref) is None):
            ref = None
        got = translated(fn, va)
        if ref is None:
            assert got is None, hex(va)
        else:
            assert got == (expected_host(fn, ref), ref[2]), hex(va)
            mapped += 1
    event(f"probes mapped: {'some' if mapped else 'none'}")
    reg(fn, "regGCVM_CONTEXT0_CNTL", 0)  # disabled: the tables map nothing (the aperture, below START, stays)
    assert all(m.va < START for m in fn.gpu.vm.mappings)
