"""The MMIO register file behind BAR5, dword addressed as the hardware is.

Each IP block of the discovery table (emu.pci_mock.discovery) brings the registers of the vendor table for its
version (am/regs.py through emu.pci_mock.tables: the table of the same major version at or below the block's, as
the driver's register headers are shared by minor revisions); a register lives at base[segment] + offset of its
block instance. Registers of a segment the block has no base for are not addressable. The MP tables hold both the
PSP's (MP0) and the SMU's (MP1) registers: `regMP1_*` are the SMU's.

Storage is plain: a register reads what was last written (0 at reset). A later step attaches models through hooks:
`on_read(addr, fn)` answers reads of one register, `on_write(addr, fn)` takes its writes (the hook decides what to
store with `store`). Two are attached here because the BAR needs them before any model exists:

- RCC_CONFIG_MEMSIZE, the register a driver reads first, answers the VRAM size in MiB (read-only);
- BIF's RSMU index/data window reaches registers past the end of the BAR (index = byte address).

Addresses outside the 32-bit register space, values outside 32 bits and BAR accesses that are not an aligned dword
inside the BAR raise MMIOError saying what and where.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from emu.pci_mock.bars import Bar
from emu.pci_mock.discovery import IPBlock
from emu.pci_mock.tables import vendor_table

# regRCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE of NBIO 4.3 / NBIF 6.3 (amdgpu's offset headers; the wheel's NBIO tables leave
# it out): (segment, dword offset) in the NBIF block
RCC_CONFIG_MEMSIZE = (2, 0xC3)
RSMU_INDEX, RSMU_DATA = "regBIF_BX_PF0_RSMU_INDEX", "regBIF_BX_PF0_RSMU_DATA"
OWNER_PREFIX = {"regMP1_": "MP1"}  # registers of a shared table that belong to one of its blocks
ADDRESS_SPACE = 1 << 32            # dwords
ReadHook = Callable[[int], int]
WriteHook = Callable[[int, int], None]


class MMIOError(ValueError):
    """A register access the function refuses: what and where."""


class RegisterFile:
    """Every register of the chip's IP blocks by name and by dword address, with hooks for models."""

    def __init__(self, blocks: Iterable[IPBlock], vram_size: int) -> None:
        self.blocks = list(blocks)
        self._values: dict[int, int] = {}
        self._read_hooks: dict[int, ReadHook] = {}
        self._write_hooks: dict[int, WriteHook] = {}
        self.fields: dict[str, dict[str, tuple[int, int]]] = {}  # register name -> field -> (lowest, highest bit)
        self.names: dict[str, tuple[int, ...]] = self._name_registers()
        nbif = next(b for b in self.blocks if b.name == "NBIO")
        memsize = nbif.bases[RCC_CONFIG_MEMSIZE[0]] + RCC_CONFIG_MEMSIZE[1]
        self.on_read(memsize, lambda _addr: vram_size >> 20)
        self.on_write(memsize, lambda _addr, _value: None)
        if RSMU_INDEX in self.names and RSMU_DATA in self.names:
            self._window(self.addr(RSMU_INDEX), self.addr(RSMU_DATA))

    def _window(self, index: int, data: int) -> None:
        """An index/data pair: DATA reads and writes the register whose byte address INDEX holds (the pair itself
        through the window is plain storage, not the window again)."""
        def target() -> int:
            return self._values.get(index, 0) >> 2

        def read(_addr: int) -> int:
            t = target()
            return self._values.get(t, 0) if t in (index, data) else self.read(t)

        def write(_addr: int, value: int) -> None:
            t = target()
            if t in (index, data):
                self._values[t] = value
            else:
                self.write(t, value)
        self.on_read(data, read)
        self.on_write(data, write)

    def _name_registers(self) -> dict[str, tuple[int, ...]]:
        """register name -> its address in each instance of its block."""
        out: dict[str, list[int]] = {}
        block_of: dict[str, IPBlock] = {}  # one name, one block (its instances differ only in their bases)
        for b in self.blocks:
            regs = vendor_table(b.tables, b.version) or {}
            fields = vendor_table(b.tables, b.version, "fields") or {}
            for name, (off, seg) in regs.items():
                owner = next((o for p, o in OWNER_PREFIX.items() if name.startswith(p)), None)
                if seg >= len(b.bases) or (owner is not None and owner != b.name) or (
                        owner is None and b.name in OWNER_PREFIX.values()):
                    continue
                if block_of.setdefault(name, b).hw_id != b.hw_id:
                    raise RuntimeError(f"vendor register tables: {name} in both {block_of[name].name} and {b.name}")
                self.fields.setdefault(name, fields.get(name, {}))
                insts = out.setdefault(name, [])
                insts.extend([-1] * (b.instance + 1 - len(insts)))
                insts[b.instance] = b.bases[seg] + off
        return {name: tuple(a) for name, a in out.items()}

    def addr(self, name: str, instance: int = 0) -> int:
        """The dword address of register `name` (the vendor's name, 'regSCRATCH_REG7') in block instance `instance`."""
        insts = self.names.get(name)
        if insts is None or not 0 <= instance < len(insts) or insts[instance] < 0:
            raise MMIOError(f"no register {name!r} instance {instance} on this chip")
        return insts[instance]

    def field(self, name: str, value: int, field: str) -> int:
        """Field `field` of register `name` (the vendor's lower-case field name) in `value`."""
        lo, hi = self._field(name, field)
        return value >> lo & ((1 << (hi - lo + 1)) - 1)

    def encode(self, name: str, **values: int) -> int:
        """A value of register `name` with the given fields (the others 0)."""
        out = 0
        for f, v in values.items():
            lo, hi = self._field(name, f)
            out |= (v & ((1 << (hi - lo + 1)) - 1)) << lo
        return out

    def _field(self, name: str, field: str) -> tuple[int, int]:
        f = self.fields.get(name, {}).get(field)
        if f is None:
            raise MMIOError(f"register {name!r} has no field {field!r} on this chip")
        return f

    def on_read(self, addr: int, hook: ReadHook) -> None:
        self._read_hooks[self._check(addr)] = hook

    def on_write(self, addr: int, hook: WriteHook) -> None:
        self._write_hooks[self._check(addr)] = hook

    def stored(self, addr: int) -> int:
        """What register `addr` holds, bypassing its hooks (for the models that own it)."""
        return self._values.get(self._check(addr), 0)

    def drop_hooks(self, addr: int) -> None:
        """Make register `addr` plain storage again."""
        self._read_hooks.pop(addr, None)
        self._write_hooks.pop(addr, None)

    def read(self, addr: int) -> int:
        hook = self._read_hooks.get(self._check(addr))
        return hook(addr) & 0xFFFFFFFF if hook else self._values.get(addr, 0)

    def write(self, addr: int, value: int) -> None:
        if not (isinstance(value, int) and 0 <= value <= 0xFFFFFFFF):
            raise MMIOError(f"register write of {value!r} to {addr!r}: not a 32-bit value")
        hook = self._write_hooks.get(self._check(addr))
        if hook:
            hook(addr, value)
        else:
            self._values[addr] = value

    def store(self, addr: int, value: int) -> None:
        """Set what a register holds, bypassing its hooks (for the models that own it)."""
        self._values[self._check(addr)] = value & 0xFFFFFFFF

    def _check(self, addr: int) -> int:
        if not (isinstance(addr, int) and 0 <= addr < ADDRESS_SPACE):
            raise MMIOError(f"register address {addr!r}: outside the 32-bit dword register space")
        return addr


class RegisterBar(Bar):
    """BAR5: the first `size` bytes of the register space, one aligned dword per access."""

    def __init__(self, index: int, size: int, regs: RegisterFile) -> None:
        super().__init__(index, size, is64=False, prefetch=False)
        self.regs = regs

    def read(self, offset: int, size: int = 4) -> int:
        return self.regs.read(self._dword("read", offset, size))

    def write(self, offset: int, value: int, size: int = 4) -> None:
        self.regs.write(self._dword("write", offset, size), value)

    def _dword(self, op: str, offset: int, size: int) -> int:
        if size != 4:
            raise MMIOError(f"MMIO {op} of {size!r} bytes at {offset!r}: registers are accessed as dwords")
        if not (isinstance(offset, int) and 0 <= offset <= self.size - 4):
            raise MMIOError(f"MMIO {op} at {offset!r}: outside BAR{self.index}'s {self.size:#x} bytes")
        if offset % 4:
            raise MMIOError(f"MMIO {op} at {offset:#x}: not dword aligned")
        return offset >> 2
