"""The PCI function's configuration space: the type-0 header (256 bytes) and the PCI Express extended space (to 4 KiB).

Every byte has a value, a mask of the bits software may write and a mask of the bits a write of 1 clears (RW1C, the
error-status bits); everything else is read-only, as the PCI and PCIe specifications make it. The layout:

- header: vendor 0x1002, the chip's device id, class "display controller, VGA compatible", revision, subsystem ids;
  COMMAND with memory space, bus master, parity and SERR enables and INTx disable writable (no I/O BAR is modelled,
  so I/O space stays 0); STATUS with its capability-list bit and RW1C error bits;
- the BARs (emu.pci_mock.bars) with the sizing protocol: the address bits below a BAR's size are read-only zeros,
  so writing all ones reads back the size mask with the BAR's type bits;
- capabilities from 0x34: power management (PMCSR power state and PME enable), PCI Express v2 endpoint (Link Control's
  ASPM bits as firmware leaves them enabled, for a driver to clear), MSI (64-bit, one vector);
- extended capabilities at 0x100: Resizable BAR for BAR0 (writing a supported size to its control register resizes
  BAR0; any other size encoding is ignored).

Offsets and bits are linux/pci_regs.h's, converted from the vendor header (emu.pci_mock.tables). Accesses are 1, 2 or
4 bytes, naturally aligned, within the 4 KiB (read/write), or any byte range within it (read_bytes/write_bytes, as
the sysfs config file allows); anything else raises ConfigSpaceError saying what and where.
"""
from __future__ import annotations

from collections.abc import Sequence

from emu.pci_mock.bars import Bar
from emu.pci_mock.tables import tables

P = tables()["pci"]
SIZE = P["PCI_CFG_SPACE_EXP_SIZE"]
VENDOR_AMD = 0x1002
CLASS_DISPLAY_VGA = 0x030000  # base class 03 (display controller), subclass 00 (VGA compatible), interface 00
CAPS_START = 0x50  # where the capability list begins (after the header, as AMD's GPUs place it)
EXT_CAPS_START = P["PCI_CFG_SPACE_SIZE"]
MiB = 1 << 20


class ConfigSpaceError(ValueError):
    """A config-space access the function refuses (out of range, misaligned, an unsupported size or value)."""


class ConfigSpace:
    def __init__(self, device_id: int, revision: int, subsystem: tuple[int, int], bars: Sequence[Bar]) -> None:
        self._data, self._wmask, self._w1c = bytearray(SIZE), bytearray(SIZE), bytearray(SIZE)
        self._bars = {b.index: b for b in bars}
        self._header(device_id, revision, subsystem)
        for b in bars:
            self._bar_registers(b)
        self._capabilities()
        self._rebar = self._extended_capabilities()

    # -- access ----------------------------------------------------------------------------------------------------
    def read(self, offset: int, size: int) -> int:
        self._check("read", offset, size)
        return int.from_bytes(self._data[offset:offset + size], "little")

    def write(self, offset: int, size: int, value: int) -> None:
        self._check("write", offset, size)
        if not (isinstance(value, int) and 0 <= value < 1 << 8 * size):
            raise ConfigSpaceError(f"config write of {size} bytes at {offset:#x}: value {value!r} does not fit")
        self._store(offset, value.to_bytes(size, "little"))

    def read_bytes(self, offset: int, length: int) -> bytes:
        self._range("read", offset, length)
        return bytes(self._data[offset:offset + length])

    def write_bytes(self, offset: int, data: bytes) -> None:
        self._range("write", offset, len(data))
        self._store(offset, bytes(data))

    def _check(self, op: str, offset: int, size: int) -> None:
        if size not in (1, 2, 4):
            raise ConfigSpaceError(f"config {op} of {size!r} bytes at {offset!r}: accesses are 1, 2 or 4 bytes")
        self._range(op, offset, size)
        if offset % size:
            raise ConfigSpaceError(f"config {op} of {size} bytes at {offset:#x}: not aligned to its size")

    def _range(self, op: str, offset: int, length: int) -> None:
        if not (isinstance(offset, int) and isinstance(length, int) and 0 <= offset and 0 <= length
                and offset + length <= SIZE):
            raise ConfigSpaceError(f"config {op} of {length!r} bytes at {offset!r}: outside the {SIZE}-byte space")

    def _store(self, offset: int, data: bytes) -> None:
        for i, v in enumerate(data, offset):
            keep = self._data[i] & ~self._wmask[i] & ~(v & self._w1c[i])
            self._data[i] = keep | (v & self._wmask[i])
        ctrl = self._rebar + P["PCI_REBAR_CTRL"]
        if offset < ctrl + 4 and ctrl < offset + len(data):
            self._resize_bar0()

    # -- layout ----------------------------------------------------------------------------------------------------
    def _put(self, offset: int, size: int, value: int, wmask: int = 0, w1c: int = 0) -> None:
        for buf, v in ((self._data, value), (self._wmask, wmask), (self._w1c, w1c)):
            buf[offset:offset + size] = v.to_bytes(size, "little")

    def _header(self, device_id: int, revision: int, subsystem: tuple[int, int]) -> None:
        self._put(P["PCI_VENDOR_ID"], 2, VENDOR_AMD)
        self._put(P["PCI_DEVICE_ID"], 2, device_id)
        self._put(P["PCI_COMMAND"], 2, 0, wmask=P["PCI_COMMAND_MEMORY"] | P["PCI_COMMAND_MASTER"]
                  | P["PCI_COMMAND_PARITY"] | P["PCI_COMMAND_SERR"] | P["PCI_COMMAND_INTX_DISABLE"])
        self._put(P["PCI_STATUS"], 2, P["PCI_STATUS_CAP_LIST"], w1c=P["PCI_STATUS_PARITY"]
                  | P["PCI_STATUS_SIG_TARGET_ABORT"] | P["PCI_STATUS_REC_TARGET_ABORT"]
                  | P["PCI_STATUS_REC_MASTER_ABORT"] | P["PCI_STATUS_SIG_SYSTEM_ERROR"]
                  | P["PCI_STATUS_DETECTED_PARITY"])
        self._put(P["PCI_CLASS_REVISION"], 4, CLASS_DISPLAY_VGA << 8 | revision)
        self._put(P["PCI_CACHE_LINE_SIZE"], 1, 0, wmask=0xFF)
        self._put(P["PCI_HEADER_TYPE"], 1, P["PCI_HEADER_TYPE_NORMAL"])
        self._put(P["PCI_SUBSYSTEM_VENDOR_ID"], 2, subsystem[0])
        self._put(P["PCI_SUBSYSTEM_ID"], 2, subsystem[1])
        self._put(P["PCI_CAPABILITY_LIST"], 1, CAPS_START)
        self._put(P["PCI_INTERRUPT_LINE"], 1, 0, wmask=0xFF)
        self._put(P["PCI_INTERRUPT_PIN"], 1, 1)  # INTA#

    def _bar_registers(self, bar: Bar) -> None:
        """A BAR's address register(s): its type bits read-only, the address bits below its size read-only zeros."""
        reg = P["PCI_BASE_ADDRESS_0"] + 4 * bar.index
        mask = ~(bar.size - 1) & ((1 << 64) - 1 if bar.is64 else 0xFFFFFFFF) & ~0xF
        old = self.read(reg, 4) | (self.read(reg + 4, 4) << 32 if bar.is64 else 0)
        value = (old & mask) | bar.flags
        self._put(reg, 4, value & 0xFFFFFFFF, wmask=mask & 0xFFFFFFFF)
        if bar.is64:
            self._put(reg + 4, 4, value >> 32, wmask=mask >> 32)

    def _capabilities(self) -> None:
        """Power management -> PCI Express -> MSI, chained from CAPS_START."""
        pm, exp = CAPS_START, CAPS_START + P["PCI_PM_SIZEOF"]
        msi = exp + P["PCI_CAP_EXP_ENDPOINT_SIZEOF_V2"] + 2  # through Link Status 2, dword aligned
        for at, cap_id, nxt in ((pm, P["PCI_CAP_ID_PM"], exp), (exp, P["PCI_CAP_ID_EXP"], msi),
                                (msi, P["PCI_CAP_ID_MSI"], 0)):
            self._put(at + P["PCI_CAP_LIST_ID"], 1, cap_id)
            self._put(at + P["PCI_CAP_LIST_NEXT"], 1, nxt)
        self._put(pm + P["PCI_PM_PMC"], 2, 3)  # PM spec version 1.2
        self._put(pm + P["PCI_PM_CTRL"], 2, P["PCI_PM_CTRL_NO_SOFT_RESET"],
                  wmask=P["PCI_PM_CTRL_STATE_MASK"] | P["PCI_PM_CTRL_PME_ENABLE"], w1c=P["PCI_PM_CTRL_PME_STATUS"])
        self._pcie(exp)
        self._put(msi + P["PCI_MSI_FLAGS"], 2, P["PCI_MSI_FLAGS_64BIT"],
                  wmask=P["PCI_MSI_FLAGS_ENABLE"] | P["PCI_MSI_FLAGS_QSIZE"])
        self._put(msi + P["PCI_MSI_ADDRESS_LO"], 4, 0, wmask=0xFFFFFFFC)
        self._put(msi + P["PCI_MSI_ADDRESS_HI"], 4, 0, wmask=0xFFFFFFFF)
        self._put(msi + P["PCI_MSI_DATA_64"], 2, 0, wmask=0xFFFF)

    def _pcie(self, at: int) -> None:
        """A PCIe v2 endpoint on a 16 GT/s x16 link; Link Control's ASPM L0s and L1 enabled."""
        x16, gen4 = 16 << P["PCI_EXP_LNKSTA_NLW_SHIFT"], P["PCI_EXP_LNKCAP_SLS_16_0GB"]
        self._put(at + P["PCI_EXP_FLAGS"], 2, 2 | P["PCI_EXP_TYPE_ENDPOINT"] << 4)
        self._put(at + P["PCI_EXP_DEVCAP"], 4, 1)  # max payload 256 bytes
        self._put(at + P["PCI_EXP_DEVCTL"], 2, P["PCI_EXP_DEVCTL_RELAX_EN"] | P["PCI_EXP_DEVCTL_EXT_TAG"]
                  | P["PCI_EXP_DEVCTL_NOSNOOP_EN"] | 2 << 12, wmask=0x7FFF)  # max read request 512 bytes
        self._put(at + P["PCI_EXP_DEVSTA"], 2, 0, w1c=P["PCI_EXP_DEVSTA_CED"] | P["PCI_EXP_DEVSTA_NFED"]
                  | P["PCI_EXP_DEVSTA_FED"] | P["PCI_EXP_DEVSTA_URD"])
        self._put(at + P["PCI_EXP_LNKCAP"], 4, gen4 | x16 | P["PCI_EXP_LNKCAP_ASPMS"])
        self._put(at + P["PCI_EXP_LNKCTL"], 2, P["PCI_EXP_LNKCTL_ASPMC"],
                  wmask=P["PCI_EXP_LNKCTL_ASPMC"] | P["PCI_EXP_LNKCTL_RCB"] | P["PCI_EXP_LNKCTL_CCC"]
                  | P["PCI_EXP_LNKCTL_ES"] | P["PCI_EXP_LNKCTL_CLKREQ_EN"] | P["PCI_EXP_LNKCTL_HAWD"])
        self._put(at + P["PCI_EXP_LNKSTA"], 2, P["PCI_EXP_LNKSTA_CLS_16_0GB"] | x16 | P["PCI_EXP_LNKSTA_SLC"])
        self._put(at + P["PCI_EXP_LNKCAP2"], 4, P["PCI_EXP_LNKCAP2_SLS_2_5GB"] | P["PCI_EXP_LNKCAP2_SLS_5_0GB"]
                  | P["PCI_EXP_LNKCAP2_SLS_8_0GB"] | P["PCI_EXP_LNKCAP2_SLS_16_0GB"])
        self._put(at + P["PCI_EXP_LNKCTL2"], 2, gen4, wmask=P["PCI_EXP_LNKCTL2_TLS"])

    def _extended_capabilities(self) -> int:
        """Resizable BAR for BAR0 at 0x100, the only extended capability: its offset."""
        at, bar0 = EXT_CAPS_START, self._bars[0]
        self._put(at, 4, P["PCI_EXT_CAP_ID_REBAR"] | 1 << 16)  # version 1, no next
        sizes = sum(1 << (s.bit_length() - 1 - 20 + 4) for s in bar0.sizes)  # bit 4 + n: 2^n MiB
        self._put(at + P["PCI_REBAR_CAP"], 4, sizes)
        self._put(at + P["PCI_REBAR_CTRL"], 4, 1 << P["PCI_REBAR_CTRL_NBAR_SHIFT"] | _encode(bar0.size),
                  wmask=P["PCI_REBAR_CTRL_BAR_SIZE"])
        return at

    def rebar_sizes(self) -> int:
        """The BAR0 sizes Resizable BAR offers: bit n set for 2^n MiB (as Linux's resource0_resize shows them)."""
        return self.read(self._rebar + P["PCI_REBAR_CAP"], 4) >> 4

    def resize_bar0(self, n: int) -> None:
        """Write BAR0's size 2^n MiB into the Resizable BAR control (an unsupported size is dropped)."""
        ctrl = self._rebar + P["PCI_REBAR_CTRL"]
        field = P["PCI_REBAR_CTRL_BAR_SIZE"]
        self.write(ctrl, 4, (self.read(ctrl, 4) & ~field) | (n << P["PCI_REBAR_CTRL_BAR_SHIFT"] & field))

    def _resize_bar0(self) -> None:
        """After a write to the Resizable BAR control: BAR0 takes a supported size, any other encoding is dropped."""
        ctrl, bar0 = self._rebar + P["PCI_REBAR_CTRL"], self._bars[0]
        field = P["PCI_REBAR_CTRL_BAR_SIZE"]
        size = MiB << ((self.read(ctrl, 4) & field) >> P["PCI_REBAR_CTRL_BAR_SHIFT"])
        if size in bar0.sizes:
            bar0.size = size
            self._bar_registers(bar0)
        else:
            self._put(ctrl, 4, (self.read(ctrl, 4) & ~field) | _encode(bar0.size), wmask=field)


def _encode(size: int) -> int:
    """A BAR size as Resizable BAR's control field holds it (2^n MiB -> n, in place)."""
    return ((size // MiB).bit_length() - 1) << P["PCI_REBAR_CTRL_BAR_SHIFT"]
