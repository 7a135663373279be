"""MOCKPCI's PCI function (emu.pci_mock): the config space as the PCI specifications lay it out (BAR sizing,
capability lists, read-only bits), the IP discovery binary read back by a reader written here from amdgpu's
discovery.h (not by the builder's code) and by tinygrad's AM driver as a client, and the MMIO register file."""
from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from depth import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu.amd import target, topology
from emu.pci_mock import PCIFunction
from emu.pci_mock.config import ConfigSpaceError
from emu.pci_mock.mmio import MMIOError
from emu.pci_mock.tables import vendor_table

ROOT = Path(__file__).resolve().parents[1]
RDNA = [a for a, t in target.TARGETS.items() if t.mp0 is not None]
MiB = 1 << 20
# PCI header offsets and capability ids (PCI Local Bus 3.0, PCIe Base 4.0)
COMMAND, STATUS, BAR0, CAP_PTR = 0x04, 0x06, 0x10, 0x34
CAP_PM, CAP_EXP, CAP_MSI, EXT_REBAR = 0x01, 0x10, 0x05, 0x15
LNKCTL, ASPM = 0x10, 0x3
# discovery.h
BINARY_SIGNATURE, IPDS_SIGNATURE, GC_TABLE_ID = 0x28211407, 0x53445049, 0x4347
GC_HWID, SDMA0_HWID, MMHUB_HWID, NBIF_HWID = 11, 42, 34, 108
MP0_HWID, MP1_HWID, HDP_HWID, OSSSYS_HWID = 255, 1, 41, 40


@pytest.fixture(scope="module", params=["gfx1100", "gfx1201"])
def fn(request) -> PCIFunction:
    f = PCIFunction(request.param)
    yield f
    f.close()


# -- config space -----------------------------------------------------------------------------------------------------
def _caps(cfg) -> dict[int, int]:
    """Capability id -> offset, walked from 0x34 (bounded, as a careful driver walks it)."""
    out, at = {}, cfg.read(CAP_PTR, 1) & 0xFC
    while at and at not in out.values() and len(out) < 48:
        out[cfg.read(at, 1)] = at
        at = cfg.read(at + 1, 1) & 0xFC
    return out


def _ext_caps(cfg) -> dict[int, int]:
    out, at = {}, 0x100
    while at and len(out) < 64:
        header = cfg.read(at, 4)
        out[header & 0xFFFF] = at
        at = (header >> 20) & 0xFFC
    return out


def _bar_size(cfg, index: int, is64: bool) -> int:
    """The BAR sizing protocol: write all ones, read the mask back, restore."""
    reg = BAR0 + 4 * index
    old = [cfg.read(reg + 4 * i, 4) for i in range(1 + is64)]
    for i in range(1 + is64):
        cfg.write(reg + 4 * i, 4, 0xFFFFFFFF)
    mask = sum(cfg.read(reg + 4 * i, 4) << 32 * i for i in range(1 + is64))
    for i, v in enumerate(old):
        cfg.write(reg + 4 * i, 4, v)
    bits = 64 if is64 else 32
    return ((~(mask & ~0xF)) & ((1 << bits) - 1)) + 1 if mask else 0


@pytest.mark.parametrize("arch", RDNA)
def test_header_names_the_chip(arch):
    with PCIFunction(arch, vram=512 * MiB) as f:
        c, t = f.config, target.get(arch)
        assert (c.read(0, 2), c.read(2, 2)) == (0x1002, t.device_id)
        assert c.read(8, 4) >> 8 == 0x030000  # display controller, VGA compatible
        assert c.read(0x2C, 2) == 0x1002 and c.read(0x0E, 1) & 0x7F == 0


def test_bar_sizing_protocol(fn):
    c = fn.config
    assert _bar_size(c, 0, True) == fn.vram.size >= fn.vram_size
    assert _bar_size(c, 2, True) == fn.doorbells.size
    assert _bar_size(c, 5, False) == fn.mmio.size
    assert _bar_size(c, 4, False) == 0  # no BAR there
    assert c.read(BAR0, 4) & 0xF == 0xC and c.read(BAR0 + 8, 4) & 0xF == 0xC  # 64-bit prefetchable
    assert c.read(BAR0 + 20, 4) & 0xF == 0  # 32-bit, not prefetchable


def test_capability_walk_reaches_pcie_and_a_driver_clears_aspm(fn):
    c = fn.config
    caps = _caps(c)
    assert {CAP_PM, CAP_EXP, CAP_MSI} <= caps.keys()
    assert c.read(STATUS, 2) & 0x10  # the capability list is there
    lnkctl = caps[CAP_EXP] + LNKCTL
    assert c.read(lnkctl, 2) & ASPM == ASPM  # as firmware leaves it
    c.write(lnkctl, 2, c.read(lnkctl, 2) & ~ASPM)
    assert c.read(lnkctl, 2) & ASPM == 0
    c.write(lnkctl, 2, c.read(lnkctl, 2) | ASPM)


def test_command_register_keeps_only_the_bits_a_function_has():
    with PCIFunction("gfx1100", vram=512 * MiB) as f:
        f.config.write(COMMAND, 2, 0xFFFF)
        assert f.config.read(COMMAND, 2) == 0x0546  # memory, bus master, parity, SERR, INTx disable
        f.config.write(COMMAND, 2, 0)
        assert f.config.read(COMMAND, 2) == 0
        f.config.write(STATUS, 2, 0xFFFF)  # RW1C error bits: writing ones clears, never sets
        assert f.config.read(STATUS, 2) == 0x10


def test_extended_capabilities_reach_resizable_bar0():
    with PCIFunction("gfx1100") as f:
        c = f.config
        rebar = _ext_caps(c)[EXT_REBAR]
        cap, ctrl = c.read(rebar + 4, 4), c.read(rebar + 8, 4)
        sizes = [MiB << (bit - 4) for bit in range(4, 32) if cap >> bit & 1]
        assert sizes[0] == 256 * MiB and sizes[-1] == f.vram.size == 32 << 30
        assert ctrl & 7 == 0 and (ctrl >> 5) & 7 == 1 and MiB << ((ctrl >> 8) & 0x1F) == f.vram.size
        c.write(rebar + 8, 4, (ctrl & ~0x1F00) | 8 << 8)  # 256 MiB
        assert _bar_size(c, 0, True) == f.vram.size == 256 * MiB == len(f.vram.map())  # the host's window
        assert parse_discovery(f.vram.read(f.vram_size - (64 << 10), 8 << 10))["ips"]  # VRAM is all still there
        c.write(rebar + 8, 4, (ctrl & ~0x1F00) | 30 << 8)  # 1 PiB: not offered, ignored
        assert _bar_size(c, 0, True) == 256 * MiB and (c.read(rebar + 8, 4) >> 8) & 0x1F == 8


@pytest.mark.parametrize("offset,size,value", [(4096, 1, 0), (4095, 2, 0), (-1, 1, 0), (0, 3, 0), (2, 4, 0),
                                               (1, 2, 0), (0, 8, 0), (4, 2, 1 << 16), (4, 2, -1), (4, 4, None)])
def test_bad_config_accesses_say_what_and_where(offset, size, value):
    with PCIFunction("gfx1100", vram=512 * MiB) as f:
        before = f.config.read_bytes(0, 4096)
        with pytest.raises(ConfigSpaceError, match="config write"):
            f.config.write(offset, size, value)
        if value == 0:
            with pytest.raises(ConfigSpaceError, match="config read"):
                f.config.read(offset, size)
        assert f.config.read_bytes(0, 4096) == before
        with pytest.raises(ConfigSpaceError, match="outside"):
            f.config.read_bytes(4090, 7)


def _read_only(c) -> dict[int, int]:
    """byte offset -> the bits the specifications make read-only there: ids, class, header type, subsystem, the
    capability pointer, every capability's id and next pointer, PCIe's capabilities, the BARs' type bits, Resizable
    BAR's header and sizes, STATUS's capability-list bit."""
    ro: dict[int, int] = {}

    def mark(off: int, size: int, mask: int = -1) -> None:
        for i in range(size):
            ro[off + i] = ro.get(off + i, 0) | (mask >> 8 * i) & 0xFF

    for off, size in ((0, 4), (8, 4), (0x0E, 1), (0x2C, 4), (CAP_PTR, 1), (0x3D, 1), (0x100, 4)):
        mark(off, size)
    mark(STATUS, 1, 0x10)
    for idx in (0, 2, 5):
        mark(BAR0 + 4 * idx, 1, 0xF)
    caps = _caps(c)
    for at in caps.values():
        mark(at, 2)
    exp = caps[CAP_EXP]
    for off, size in ((2, 2), (4, 4), (0x0C, 4), (0x12, 2)):  # flags, DEVCAP, LNKCAP, LNKSTA
        mark(exp + off, size)
    mark(_ext_caps(c)[EXT_REBAR] + 4, 4)
    return ro


def _changed(c, ro: dict[int, int], before: bytes) -> list[int]:
    after = c.read_bytes(0, 4096)
    return [o for o, m in ro.items() if (before[o] ^ after[o]) & m]


def test_all_ones_then_zeros_everywhere_keep_read_only_bits():
    with PCIFunction("gfx1100") as f:
        c = f.config
        ro, before = _read_only(c), c.read_bytes(0, 4096)
        for value in (0xFFFFFFFF, 0):
            for off in range(0, 4096, 4):
                c.write(off, 4, value)
            assert _changed(c, ro, before) == []


OFFSETS = st.one_of(st.integers(-8, 4104), st.integers(0, 0x10F))  # anywhere, and often where the registers are
VALUES = st.one_of(st.integers(-1, 1 << 40), st.sampled_from([0, 0xFF, 0xFFFF, 0xFFFFFFFF]))


@settings(max_examples=examples(60, 600), deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(st.tuples(OFFSETS, st.sampled_from([0, 1, 2, 3, 4, 8]), VALUES), max_size=40))
def test_random_config_accesses_never_change_read_only_bits(ops):
    with PCIFunction("gfx1100") as f:
        c = f.config
        ro, before = _read_only(c), c.read_bytes(0, 4096)
        for offset, size, value in ops:
            try:
                c.write(offset, size, value)
            except ConfigSpaceError:
                pass
            try:
                c.read(offset, size)
            except ConfigSpaceError:
                pass
            assert _changed(c, ro, before) == []
            assert c.read(STATUS, 2) & 0xF900 == 0  # no write sets an RW1C error bit


@settings(max_examples=examples(40, 400), deadline=None, suppress_health_check=list(HealthCheck))
@given(offset=OFFSETS, data=st.one_of(st.binary(max_size=300), st.binary(min_size=4, max_size=16).map(
    lambda b: b"\xff" * len(b))))
def test_random_byte_range_accesses_keep_read_only_bits(offset, data):
    with PCIFunction("gfx1201") as f:
        c = f.config
        ro, before = _read_only(c), c.read_bytes(0, 4096)
        try:
            c.write_bytes(offset, data)
        except ConfigSpaceError:
            assert not 0 <= offset <= 4096 - len(data)
        assert _changed(c, ro, before) == []


# -- IP discovery, read back independently -------------------------------------------------------------------------
def _u(fmt: str, data: bytes, off: int) -> tuple:
    return struct.unpack_from("<" + fmt, data, off)


def parse_discovery(blob: bytes) -> dict:
    """amdgpu's discovery.h layout, read here from the public struct definitions: binary_header (signature u32,
    version u16 u16, checksum u16, size u16, table_list[6] of {offset, checksum, size, padding} u16),
    ip_discovery_header (signature u32, version u16, size u16, id u32, num_dies u16, die_info[16] {id, offset} u16,
    flags u8: base_addr_64_bit), die_header {die_id, num_ips} u16, ip_v4 {hw_id u16, instance u8, num_base u8,
    major, minor, revision u8, sub_revision/variant u8, bases u32 or u64}, gpu_info_header {table_id u32, version
    u16 u16, size u32}."""
    sig, vmaj, vmin, csum, size = _u("IHHHH", blob, 0)
    assert sig == BINARY_SIGNATURE and (vmaj, vmin) == (1, 0)
    assert sum(blob[10:size]) & 0xFFFF == csum, "binary checksum"
    tables = [_u("HHHH", blob, 12 + 8 * i)[:3] for i in range(6)]
    ip_off, ip_sum, ip_size = tables[0]
    isig, iver, isize, _id, ndies = _u("IHHIH", blob, ip_off)
    assert isig == IPDS_SIGNATURE and iver == 4 and isize == ip_size and ndies == 1
    assert sum(blob[ip_off:ip_off + isize]) & 0xFFFF == ip_sum, "IP discovery checksum"
    wide = blob[ip_off + 78] & 1
    _die_id, die_off = _u("HH", blob, ip_off + 14)
    _die, nips = _u("HH", blob, die_off)
    ips, at = {}, die_off + 4
    for _ in range(nips):
        hw, inst, nbase, major, minor, rev, _sub = _u("HBBBBBB", blob, at)
        bases = _u(("Q" if wide else "I") * nbase, blob, at + 8)
        ips.setdefault(hw, {})[inst] = ((major, minor, rev), bases)
        at += 8 + (8 if wide else 4) * nbase
    assert at <= ip_off + isize
    gc_off, gc_sum, gc_size = tables[1]
    tid, gmaj, gmin, gsize = _u("IHHI", blob, gc_off)
    assert tid == GC_TABLE_ID and gsize == gc_size and sum(blob[gc_off:gc_off + gsize]) & 0xFFFF == gc_sum
    names = ("se", "wgp0_per_sa", "wgp1_per_sa", "rb_per_se", "gl2c", "gprs", "max_gs_thds", "gs_table_depth",
             "gsprim_buff_depth", "parameter_cache_depth", "double_offchip_lds_buffer", "wave_size",
             "max_waves_per_simd", "max_scratch_slots_per_cu", "lds_size", "sc_per_se", "sa_per_se")
    gc = dict(zip(names, _u("17I", blob, gc_off + 12), strict=True))
    return {"ips": ips, "gc_version": (gmaj, gmin), "gc": gc}


@pytest.mark.parametrize("arch", RDNA)
def test_discovery_binary_read_back_independently(arch):
    with PCIFunction(arch) as f:
        t = f.target
        blob = f.vram.read(f.vram_size - (64 << 10), 8 << 10)
        d = parse_discovery(blob)
        ips = d["ips"]
        for hw, ver in topology.ip_versions(t).items():  # what the KFD topology reports
            assert {v for v, _ in ips[hw].values()} == {ver}
        assert len(ips[SDMA0_HWID]) == t.sdma_engines
        assert {hw: ips[hw][0][0] for hw in (MMHUB_HWID, MP0_HWID, MP1_HWID, HDP_HWID, OSSSYS_HWID)} == {
            MMHUB_HWID: t.mmhub, MP0_HWID: t.mp0, MP1_HWID: t.mp1, HDP_HWID: t.hdp, OSSSYS_HWID: t.osssys}
        gc = d["gc"]
        assert d["gc_version"][0] == 1
        assert (gc["se"], gc["sa_per_se"]) == (t.shader_engines, t.arrays_per_engine)
        assert 2 * (gc["wgp0_per_sa"] + gc["wgp1_per_sa"]) * gc["sa_per_se"] * gc["se"] == t.cus
        assert (gc["wave_size"], gc["lds_size"], gc["max_waves_per_simd"]) == (t.wave_size, t.lds_kb,
                                                                              t.waves_per_simd)
        # the driver's fixed first register: NBIF segment 2 + 0xC3 (RCC_CONFIG_MEMSIZE) is dword 0xDE3
        assert ips[NBIF_HWID][0][1][2] + 0xC3 == 0xDE3
        _bases_match_register_file(f, ips)


def _bases_match_register_file(f: PCIFunction, ips: dict) -> None:
    """Every named register sits at its block's parsed base[segment] + the vendor table's offset."""
    checked = 0
    for b in f.blocks:
        table = vendor_table(b.tables, b.version) or {}
        bases = ips[b.hw_id][b.instance][1]
        for name, (off, seg) in table.items():
            addrs = f.regs.names.get(name, ())
            if b.instance < len(addrs) and addrs[b.instance] == bases[seg] + off:
                checked += 1
    assert checked >= len(f.regs.names) > 1000


def test_building_a_function_does_not_import_tinygrad():
    """The vendor tables are read as data (and cached): the emulator never imports the wheel it reads."""
    code = ("import sys; from emu.pci_mock import PCIFunction; PCIFunction('gfx1201', vram=512 << 20).close(); "
            "assert 'tinygrad' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd="/")


def test_chips_without_a_pci_model_are_refused():
    with pytest.raises(ValueError, match="no PCI function model for gfx942"):
        PCIFunction("gfx942")


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1102", "gfx1201"])
def test_tinygrads_am_driver_reads_the_discovery_table(arch):
    """tinygrad's own AM driver (as a client: its discovery and register-map code, run on our BARs) finds the same
    VRAM size, IP versions, gc_info and register addresses."""
    amdev = pytest.importorskip("tinygrad.runtime.support.am.amdev")
    from tinygrad.runtime.autogen.am import am
    from tinygrad.runtime.support.hcq import MMIOInterface

    class Registers:  # BAR5 as the driver indexes its u32 view
        def __len__(self) -> int:
            return f.mmio.size // 4

        def __getitem__(self, i: int) -> int:
            return f.mmio.read(i * 4)

        def __setitem__(self, i: int, v: int) -> None:
            f.mmio.write(i * 4, v)

    with PCIFunction(arch) as f:
        vram = f.vram.map()
        dev = amdev.AMDev.__new__(amdev.AMDev)
        dev.vram = MMIOInterface(ctypes.addressof(ctypes.c_char.from_buffer(vram)), f.vram.size)
        dev.mmio = Registers()
        dev._run_discovery()
        t = f.target
        assert dev.vram_size == t.vram and dev.large_bar
        assert dev.ip_ver[am.GC_HWIP] == t.gc and dev.ip_ver[am.SDMA0_HWIP] == t.sdma
        assert dev.ip_ver[am.NBIO_HWIP] == t.nbio and dev.ip_ver[am.MP0_HWIP] == t.mp0
        assert dev.gc_info.gc_num_se == t.shader_engines
        dev._build_regs()
        for name in ("regSCRATCH_REG7", "regCP_HQD_ACTIVE", "regIH_RB_CNTL", "regMP1_SMN_C2PMSG_66",
                     "regBIF_BX_PF0_RSMU_INDEX"):
            assert dev.reg(name).addr[0] == f.regs.addr(name), name
        del dev
        vram.close()


# -- MMIO register file ---------------------------------------------------------------------------------------------
def test_vram_size_register_reads_mib_and_ignores_writes(fn):
    assert fn.mmio.read(0xDE3 * 4) == fn.target.vram >> 20
    fn.mmio.write(0xDE3 * 4, 1)
    assert fn.mmio.read(0xDE3 * 4) == fn.target.vram >> 20
    with PCIFunction("gfx1100", vram=768 * MiB) as small:
        assert small.mmio.read(0xDE3 * 4) == 768


def test_register_written_and_read_back_at_base_plus_offset(fn):
    gc = next(b for b in fn.blocks if b.name == "GC")
    off, seg = vendor_table(gc.tables, gc.version)["regSCRATCH_REG7"]
    addr = gc.bases[seg] + off
    assert fn.regs.addr("regSCRATCH_REG7") == addr
    fn.mmio.write(addr * 4, 0xA0000008)
    assert fn.regs.read(addr) == fn.mmio.read(addr * 4) == 0xA0000008
    fn.mmio.write(addr * 4, 0)


def test_hooks_take_reads_and_writes_of_one_register(fn):
    addr, seen = fn.regs.addr("regGRBM_SCRATCH_REG5"), []  # a register no model owns
    fn.regs.on_write(addr, lambda a, v: (seen.append(v), fn.regs.store(a, v | 1)))
    fn.mmio.write(addr * 4, 6)
    assert seen == [6] and fn.mmio.read(addr * 4) == 7
    fn.regs.on_read(addr, lambda a: 0x1234)
    assert fn.mmio.read(addr * 4) == 0x1234


def test_rsmu_window_reaches_registers_past_the_bar(fn):
    index, data = fn.regs.addr("regBIF_BX_PF0_RSMU_INDEX"), fn.regs.addr("regBIF_BX_PF0_RSMU_DATA")
    far = max(a for addrs in fn.regs.names.values() for a in addrs)
    assert far * 4 >= fn.mmio.size
    fn.mmio.write(index * 4, far * 4)
    fn.mmio.write(data * 4, 0x5EED)
    assert fn.regs.read(far) == 0x5EED == fn.mmio.read(data * 4)
    fn.mmio.write(index * 4, data * 4)  # the window pointed at itself: plain storage, no recursion
    fn.mmio.write(data * 4, 3)
    assert fn.mmio.read(data * 4) == 3


@pytest.mark.parametrize("offset,size,value,what", [
    (2, 4, 0, "not dword aligned"), (1 << 20, 4, 0, "outside BAR5"), (-4, 4, 0, "outside BAR5"),
    (0, 2, 0, "as dwords"), (0, 8, 0, "as dwords"), (0, 4, 1 << 32, "not a 32-bit value"), (0, 4, -1, "32-bit"),
    (None, 4, 0, "outside")])
def test_bad_mmio_accesses_say_what_and_where(fn, offset, size, value, what):
    with pytest.raises(MMIOError, match=what):
        fn.mmio.write(offset, value, size)
    with pytest.raises(MMIOError):
        fn.regs.read(1 << 32)
    with pytest.raises(MMIOError, match="no register 'regNOT_A_REGISTER'"):
        fn.regs.addr("regNOT_A_REGISTER")


@settings(max_examples=examples(60, 600), deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(st.tuples(st.booleans(), st.one_of(st.integers(-8, (1 << 20) + 8),
                                                       st.sampled_from(["index", "data", "memsize"])),
                              st.sampled_from([1, 2, 4, 4, 8]), st.integers(-1, 1 << 33)), max_size=40))
def test_random_mmio_accesses_raise_only_the_documented_error(ops):
    """Any access, the RSMU window aimed anywhere (itself included): an MMIOError or a 32-bit value."""
    with PCIFunction("gfx1201", vram=512 * MiB) as f:
        named = {"index": f.regs.addr("regBIF_BX_PF0_RSMU_INDEX") * 4,
                 "data": f.regs.addr("regBIF_BX_PF0_RSMU_DATA") * 4, "memsize": 0xDE3 * 4}
        for is_write, offset, size, value in ops:
            offset = named.get(offset, offset)
            try:
                if is_write:
                    f.mmio.write(offset, value, size)
                else:
                    assert 0 <= f.mmio.read(offset, size) <= 0xFFFFFFFF
            except MMIOError:
                pass
        assert f.mmio.read(0xDE3 * 4) == 512
