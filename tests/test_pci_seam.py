"""MOCKPCI's seam (emu.os.pci): the emulated GPU's PCI sysfs folder, its BAR mappings, the register window, and
/proc/self/pagemap, checked against Linux's formats (drivers/pci/pci-sysfs.c, fs/proc/task_mmu.c) and by tinygrad's
own PCI code as a client."""
from __future__ import annotations

import ctypes
import errno
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu.os import pci
from stack.hcq.fileio import MAP_SHARED, PROT_READ, PROT_WRITE

ROOT = Path(__file__).resolve().parents[1]
DEVICES = "/sys/bus/pci/devices"
BDF = "0000:03:00.0"
MAP_ANON_SHARED = MAP_SHARED | 0x20
RW = PROT_READ | PROT_WRITE
MiB = 1 << 20


@pytest.fixture(scope="module")
def io():
    return pci.interface("gfx1100", 1)


def _text(io, name: str) -> str:
    return io(f"{DEVICES}/{BDF}/{name}").read()


def test_the_folder_lists_only_the_mock_gpus(io):
    assert io(DEVICES).listdir() == [BDF]
    two = pci.interface("gfx1201", 2)
    assert two(DEVICES).listdir() == [BDF, "0000:04:00.0"]
    assert {"vendor", "device", "class", "config", "resource", "resource0", "resource2", "resource5",
            "enable"} <= set(io(f"{DEVICES}/{BDF}").listdir())


def test_ids_are_the_config_headers(io):
    """vendor/device/class as Linux prints them (0x%04x, 0x%06x), equal to the config header's bytes."""
    cfg = io(f"{DEVICES}/{BDF}/config").read(64, binary=True, offset=0)
    vendor, device = struct.unpack_from("<HH", cfg, 0)
    assert (vendor, device) == (0x1002, 0x744C)
    assert _text(io, "vendor") == "0x1002\n" and _text(io, "device") == "0x744c\n"
    assert _text(io, "class") == f"0x{int.from_bytes(cfg[9:12], 'little'):06x}\n" == "0x030000\n"


def test_resource_lines_are_the_bars_assigned_addresses_and_sizes(io):
    """`start end flags` per resource (13 for an endpoint); start is what the BAR register holds, and the size is
    what the BAR sizing protocol (all ones written through the config file, the mask read back) says."""
    lines = _text(io, "resource").splitlines()
    assert len(lines) == 13
    res = [tuple(int(x, 16) for x in line.split()) for line in lines]
    cfg = io(f"{DEVICES}/{BDF}/config", os.O_RDWR)
    for index, is64 in ((0, True), (2, True), (5, False)):
        reg = 0x10 + 4 * index
        raw = cfg.read(8 if is64 else 4, binary=True, offset=reg)
        start = int.from_bytes(raw, "little") & ~0xF
        cfg.write(b"\xff" * len(raw), binary=True, offset=reg)
        mask = int.from_bytes(cfg.read(len(raw), binary=True, offset=reg), "little") & ~0xF
        cfg.write(raw, binary=True, offset=reg)
        size = (~mask & ((1 << 8 * len(raw)) - 1)) + 1
        assert res[index][:2] == (start, start + size - 1), index
        assert res[index][2] & 0x200  # IORESOURCE_MEM
        assert bool(res[index][2] & 0x100000) == is64  # IORESOURCE_MEM_64
    assert res[1] == res[3] == res[4] == (0, 0, 0)  # upper halves of 64-bit BARs, no BAR4
    assert res[0][1] - res[0][0] + 1 == 32 << 30  # 24 GiB of VRAM behind a 32 GiB BAR


def test_unbind_enable_and_command_register():
    io = pci.interface("gfx1100", 3)  # a system of its own: this test changes its state
    d = f"{DEVICES}/0000:05:00.0"
    assert io.exists(f"{d}/driver")
    with pytest.raises(OSError) as e:
        io(f"{d}/driver/unbind", os.O_WRONLY).write("0000:04:00.0")
    assert e.value.errno == errno.ENODEV
    io(f"{d}/driver/unbind", os.O_WRONLY).write("0000:05:00.0")
    assert not io.exists(f"{d}/driver")
    assert io(f"{d}/enable").read() == "0\n"
    io(f"{d}/enable", os.O_RDWR).write("1")
    assert io(f"{d}/enable").read() == "1\n"
    assert int.from_bytes(io(f"{d}/config").read(2, binary=True, offset=4), "little") & 0x2  # memory space on


def test_vram_mapping_is_the_devices_memory(io):
    """A mapping of resource0 sees the discovery binary the device wrote at VRAM end - 64 KiB (its signature,
    discovery.h's BINARY_SIGNATURE), and the device sees what the mapping stores."""
    fn = io.system.functions[0]
    at = fn.discovery_offset
    f = io(f"{DEVICES}/{BDF}/resource0", os.O_RDWR)
    addr = f.mmap(0, 0x10000, RW, MAP_SHARED, at)
    try:
        assert ctypes.c_uint32.from_address(addr).value == 0x28211407
        ctypes.c_uint32.from_address(addr + 0x8000).value = 0xC0FFEE
        assert fn.vram.read(at + 0x8000, 4) == (0xC0FFEE).to_bytes(4, "little")
    finally:
        io.munmap(addr, 0x10000)


def test_register_window_reaches_the_register_file(io):
    """resource5's mapping has no memory behind it; its view is the register file: RCC_CONFIG_MEMSIZE (dword 0xde3,
    the driver's first read) is VRAM in MiB, and a register written through the view reads back in the file."""
    fn = io.system.functions[0]
    f = io(f"{DEVICES}/{BDF}/resource5", os.O_RDWR)
    addr = f.mmap(0, fn.mmio.size, RW, MAP_SHARED, 0)
    try:
        regs = io.system.register_view(addr, fn.mmio.size).cast("I")
        assert len(regs) == fn.mmio.size // 4
        assert regs[0xDE3] == 24 * 1024
        scratch = fn.regs.addr("regSCRATCH_REG7")
        regs[scratch] = 0xA0000008
        assert fn.regs.read(scratch) == 0xA0000008
        assert regs[scratch:scratch + 1].tolist() == [0xA0000008]
        assert io.system.register_view(addr + fn.mmio.size, 4) is None
        with pytest.raises(Exception, match="dwords"):
            io.system.register_view(addr, 16)[1]
    finally:
        io.munmap(addr, fn.mmio.size)
    assert io.system.register_view(addr, 4) is None


def test_pagemap_gives_consecutive_frames_for_shared_memory(io):
    """Shared anonymous memory gets consecutive page frames (contiguous, as a hugepage allocation); pagemap
    entries have bit 63 (present) and the frame in bits 0-54; the frame leads back to the host page."""
    size = 4 * 0x1000
    addr = io.anon_mmap(0, size, RW, MAP_ANON_SHARED | 0x40000)  # MAP_HUGETLB: dropped
    try:
        pm = io("/proc/self/pagemap")
        pm.seek(addr // 0x1000 * 8)
        entries = struct.unpack("<4Q", pm.read(32, binary=True))
        assert all(e >> 63 for e in entries)
        pfns = [e & ((1 << 55) - 1) for e in entries]
        assert pfns == list(range(pfns[0], pfns[0] + 4))
        assert io.system.memory.host_address(pfns[2] * 0x1000 + 0x10) == addr + 0x2010
    finally:
        io.munmap(addr, size)
    assert io.system.memory.host_address(pfns[2] * 0x1000) is None
    assert io("/proc/sys/vm/compact_unevictable_allowed").read() == "0\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["config", "enable", "resource0_resize", "vendor", "resource", "driver/unbind"]),
       data=st.binary(max_size=24), offset=st.integers(-8, 5000))
def test_bad_writes_are_errnos(io, name, data, offset):
    """Any write to any file: done, or an OSError with an errno and the file's name, never another exception."""
    path = f"{DEVICES}/{BDF}/{name}"
    if not io.exists(path):
        return
    try:
        io(path, os.O_RDWR).write(data, binary=True, offset=offset)
    except OSError as e:
        assert e.errno in (errno.EINVAL, errno.EACCES, errno.ENODEV, errno.EBUSY) and BDF in str(e), e


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bar=st.sampled_from([0, 1, 2, 4, 5]), size=st.integers(-1, 1 << 36), offset=st.integers(-1, 1 << 36),
       flags=st.sampled_from([MAP_SHARED, 0x02]))
def test_bad_bar_mappings_are_errnos(io, bar, size, offset, flags):
    path = f"{DEVICES}/{BDF}/resource{bar}"
    if not io.exists(path):
        assert bar in (1, 4)
        return
    fits = flags == MAP_SHARED and 0 < size and offset >= 0 and offset % 0x1000 == 0 and \
        offset + size <= io.system.functions[0].bars[bar].size
    if fits:  # a mapping Linux gives (of any size the BAR holds): not the errnos this test is about
        return
    with pytest.raises(OSError) as e:
        io(path, os.O_RDWR).mmap(0, size, RW, flags, offset)
    assert e.value.errno in (errno.EINVAL, errno.ENODEV)


def test_tinygrads_pci_code_finds_and_maps_the_function():
    """tinygrad's own PCI code (its bus scan, PCIDevice's claim: enable, unbind, config; BAR mapping) as a client,
    under DEV=MOCKPCI+AMD: it finds the GPU, reads the VRAM size through its u32 view of BAR5, and the discovery
    signature through its view of BAR0."""
    pytest.importorskip("tinygrad")
    code = """
import os, tempfile
from tinygrad.runtime.support import hcq  # the mock interface is chosen on this import
from tinygrad.runtime.support.system import System, PCIDevice
buses = System.pci_scan_bus(0x1002, ((0xffff, (0x744c,)),))
dev = PCIDevice("AM", buses[0])
mmio, vram = dev.map_bar(5, fmt="I"), dev.map_bar(0)
size = mmio[0xde3] << 20
sig = vram.view(size - (64 << 10), 4, fmt="I")[0]
print(buses, hex(size), hex(sig), dev.read_config(4, 2) & 6)
"""
    env = {**os.environ, "DEV": "MOCKPCI+AMD", "PYTHONPATH": f"{ROOT / 'emu/os/boot'}:{ROOT}", "HWEMU": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["['0000:03:00.0']", hex(24 << 30), "0x28211407", "2"]
