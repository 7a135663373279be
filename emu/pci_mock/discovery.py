"""The IP discovery binary a driver reads from VRAM (at VRAM size - 64 KiB) to learn which IP blocks the chip has,
their versions and where their registers are.

Layout (amdgpu's discovery.h, through the vendor structs of emu.pci_mock.tables):

    binary_header       signature, version 1.0, checksum, size, table_list[IP_DISCOVERY, GC, ...]
    ip_discovery_header v4: signature, size, one die, 32-bit base addresses
    die_header          die 0, the number of IP entries
    ip_v4 entries       hw id, instance, version, then each register segment's base (dword address)
    gc_info             v1.2 (GC 11) / v1.3 (GC 12): shader engines, WGPs per shader array, wave and LDS figures

Checksums are the 16-bit byte sums the kernel verifies: each table's over its own size, the binary's over everything
after its checksum field. The versions are the chip's (emu.amd.target, the same the KFD topology reports); the
segment bases are the vendor's register map for gfx10 and later (am/navi_offsets.py), so that base[segment] + offset
from the vendor's register tables is where a register lives (emu.pci_mock.mmio). A segment the map lacks but a
block's register table uses (NBIO's sixth) gets a base of its own in register space nothing else uses (from
0x10000000, reached through the RSMU window), so that every register has one address.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from emu.amd.target import Target
from emu.pci_mock.tables import tables, vendor_table

_D = tables()["discovery"]
C = _D["consts"]
OFFSET_FROM_END = 64 << 10  # where the binary sits: VRAM size - 64 KiB (the discovery TMR)
MAX_SIZE = 8 << 10          # what a driver reads of it at least
IP_V4_HEADER = 8  # ip_v4's bytes before its base addresses: the wheel's struct omits the last byte (sub_revision and
# variant, 4 bits each), which discovery.h has
IP_DISCOVERY_VERSION = 4
SPARE_BASES, SPARE_STRIDE = 0x10000000, 0x01000000  # bases for segments the vendor's map lacks (unused space)
GC_INFO_VERSION = {11: (1, 2), 12: (1, 3)}  # gfx major -> gc_info version: v1 counts WGPs per shader array

# the blocks of the table: hw id name, the vendor's base-address name ({} = the instance), the Target fields of its
# version and of its instance count, the register tables (am/regs.py prefixes) that describe it
BLOCKS = (("GC_HWID", "GC", "gc", None, ("gc",)), ("SDMA0_HWID", "SDMA{}", "sdma", "sdma_engines", ("sdma",)),
          ("MMHUB_HWID", "MMHUB", "mmhub", None, ("mmhub",)), ("NBIF_HWID", "NBIO", "nbio", None, ("nbio", "nbif")),
          ("MP0_HWID", "MP0", "mp0", None, ("mp",)), ("MP1_HWID", "MP1", "mp1", None, ("mp",)),
          ("HDP_HWID", "HDP", "hdp", None, ("hdp",)), ("OSSSYS_HWID", "OSSSYS", "osssys", None, ("osssys",)))


@dataclass(frozen=True)
class IPBlock:
    """One instance of an IP block as the discovery table lists it."""
    name: str                      # the vendor's base-address name (GC, SDMA0, MP1, ...)
    hw_id: int
    instance: int
    version: tuple[int, int, int]
    bases: tuple[int, ...]         # dword address of each register segment
    tables: tuple[str, ...]        # am/regs.py table prefixes describing its registers


def ip_blocks(t: Target) -> list[IPBlock]:
    """The IP blocks of chip `t`'s discovery table (ValueError for a chip hwemu models no PCI function of)."""
    if any(getattr(t, b[2]) is None for b in BLOCKS) or t.gen.gfx not in GC_INFO_VERSION:
        raise ValueError(f"no PCI function model for {t.arch}: emu.amd.target lacks its SoC IP versions")
    bases, spare = tables()["bases"], iter(range(SPARE_BASES, 1 << 32, SPARE_STRIDE))
    out = []
    for hw, base_name, version, instances, regs in BLOCKS:
        for inst in range(getattr(t, instances) if instances else 1):
            name = base_name.format(inst)
            segs = bases.get(name, {}).get(0)
            if segs is None:
                raise RuntimeError(f"vendor am/navi_offsets.py: no register bases for {name}")
            segs = segs[:max((i + 1 for i, b in enumerate(segs) if b), default=1)]
            used = max((seg + 1 for _, seg in (vendor_table(regs, getattr(t, version)) or {}).values()), default=0)
            segs += [next(spare) for _ in range(len(segs), used)]
            out.append(IPBlock(name, C[hw], inst, getattr(t, version), tuple(segs), regs))
    return out


class Layout:
    """A vendor struct's byte layout, its nested fields flattened ('header.size', 'table_list[1].offset')."""

    def __init__(self, name: str) -> None:
        s = _D["structs"][name]
        self.name, self.size, self.fields = name, s["size"], s["fields"]

    def pack_into(self, buf: bytearray, base: int, values: Mapping[str, int]) -> None:
        for field, value in values.items():
            off, size, bits, bit = self.fields[field]
            if not 0 <= value < 1 << (bits or 8 * size):
                raise ValueError(f"{self.name}.{field}: {value:#x} does not fit")
            fmt = "<" + {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
            if bits:
                (old,) = struct.unpack_from(fmt, buf, base + off)
                value = old & ~(((1 << bits) - 1) << bit) | value << bit
            struct.pack_into(fmt, buf, base + off, value)


def checksum(data: bytes) -> int:
    """The kernel's discovery checksum: the byte sum, 16 bits."""
    return sum(data) & 0xFFFF


def build(t: Target, blocks: list[IPBlock]) -> bytes:
    """Chip `t`'s discovery binary listing `blocks`."""
    bh, ih, dh = Layout("struct_binary_header"), Layout("struct_ip_discovery_header"), Layout("struct_die_header")
    major, minor = GC_INFO_VERSION[t.gen.gfx]
    gc = Layout(f"struct_gc_info_v{major}_{minor}")
    ip_at = _align(bh.size)
    die_at = ip_at + ih.size
    entries = b"".join(_ip_entry(b) for b in blocks)
    ip_end = die_at + dh.size + len(entries)
    gc_at = _align(ip_end)
    size = gc_at + gc.size
    if size > MAX_SIZE:
        raise RuntimeError(f"{t.arch}: the discovery binary ({size} bytes) outgrows the {MAX_SIZE} a driver reads")
    buf = bytearray(size)
    ih.pack_into(buf, ip_at, {"signature": C["DISCOVERY_TABLE_SIGNATURE"], "version": IP_DISCOVERY_VERSION,
                              "size": ip_end - ip_at, "num_dies": 1, "die_info[0].die_id": 0,
                              "die_info[0].die_offset": die_at, "base_addr_64_bit": 0})
    dh.pack_into(buf, die_at, {"die_id": 0, "num_ips": len(blocks)})
    buf[die_at + dh.size:ip_end] = entries
    gc.pack_into(buf, gc_at, _gc_info(t, major, minor, gc.size))
    tables_at = {C["IP_DISCOVERY"]: (ip_at, ip_end - ip_at), C["GC"]: (gc_at, gc.size)}
    bh.pack_into(buf, 0, {"binary_signature": C["BINARY_SIGNATURE"], "version_major": 1, "version_minor": 0,
                          "binary_size": size})
    for tid, (at, length) in tables_at.items():
        bh.pack_into(buf, 0, {f"table_list[{tid}].offset": at, f"table_list[{tid}].size": length,
                              f"table_list[{tid}].checksum": checksum(buf[at:at + length])})
    after = bh.fields["binary_checksum"][0] + 2
    bh.pack_into(buf, 0, {"binary_checksum": checksum(buf[after:size])})
    return bytes(buf)


def _ip_entry(b: IPBlock) -> bytes:
    """One ip_v4 entry: the vendor struct's fields, its sub_revision/variant byte (0), then 32-bit bases."""
    out = bytearray(IP_V4_HEADER) + struct.pack(f"<{len(b.bases)}I", *b.bases)
    Layout("struct_ip_v4").pack_into(out, 0, {"hw_id": b.hw_id, "instance_number": b.instance,
                                              "num_base_address": len(b.bases), "major": b.version[0],
                                              "minor": b.version[1], "revision": b.version[2]})
    return bytes(out)


def _gc_info(t: Target, major: int, minor: int, size: int) -> dict[str, int]:
    """The chip's figures in gc_info v1 (figures the descriptor lacks, such as render backends, stay 0)."""
    cu_per_sa = -(-t.cus // t.arrays)
    return {"header.table_id": C["GC_TABLE_ID"], "header.version_major": major, "header.version_minor": minor,
            "header.size": size, "gc_num_se": t.shader_engines, "gc_num_wgp0_per_sa": cu_per_sa // 2,
            "gc_num_wgp1_per_sa": 0, "gc_num_sa_per_se": t.arrays_per_engine, "gc_wave_size": t.wave_size,
            "gc_max_waves_per_simd": t.waves_per_simd, "gc_max_scratch_slots_per_cu": t.scratch_slots_per_cu,
            "gc_lds_size": t.lds_kb}


def _align(n: int, to: int = 8) -> int:
    return -(-n // to) * to
