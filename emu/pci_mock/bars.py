"""The PCI function's base address registers (BARs) and the memory behind them.

A BAR is a window of a power-of-two size; its type bits say 32- or 64-bit and prefetchable or not (the config space,
emu.pci_mock.config, presents them with the sizing protocol). VRAM (BAR0/1) and the doorbells (BAR2/3) are shared
memory: an anonymous memfd a client maps (`fd`, `map()`), as the KFD path's heaps are; the MMIO registers (BAR5) are
emu.pci_mock.mmio's register file, reached by dword accesses.
"""
from __future__ import annotations

import functools
import mmap
import os
import weakref

import numpy as np

from emu.pci_mock.tables import tables

P = tables()["pci"]


class Bar:
    """BAR `index`: its decoded `size` (bytes; one of `sizes` when it is resizable) and type."""

    def __init__(self, index: int, size: int, *, is64: bool, prefetch: bool, sizes: tuple[int, ...] = ()) -> None:
        if size <= 0 or size & (size - 1):
            raise ValueError(f"BAR{index}: size {size:#x} is not a power of two")
        self.index, self.size, self.is64, self.prefetch = index, size, is64, prefetch
        self.sizes = sizes or (size,)

    @property
    def flags(self) -> int:
        """The type bits of the BAR's low address register (memory space, 32/64-bit, prefetchable)."""
        return ((P["PCI_BASE_ADDRESS_MEM_TYPE_64"] if self.is64 else P["PCI_BASE_ADDRESS_MEM_TYPE_32"])
                | (P["PCI_BASE_ADDRESS_MEM_PREFETCH"] if self.prefetch else 0))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.index}, size={self.size:#x})"


class MemoryBar(Bar):
    """A BAR backed by shared memory: a memfd as large as the BAR's largest size (sparse: untouched pages cost
    nothing), zero-filled like freshly trained memory."""

    def __init__(self, index: int, name: str, size: int, *, is64: bool, prefetch: bool,
                 sizes: tuple[int, ...] = ()) -> None:
        super().__init__(index, size, is64=is64, prefetch=prefetch, sizes=sizes)
        self.capacity = max(self.sizes)
        self.fd = os.memfd_create(f"hwemu-{name}", os.MFD_CLOEXEC)
        self._closer = weakref.finalize(self, os.close, self.fd)
        os.ftruncate(self.fd, self.capacity)

    def map(self) -> mmap.mmap:
        """A shared mapping of the BAR's current size, as a client's mmap of its resource file gives."""
        return mmap.mmap(self.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    @functools.cached_property
    def array(self) -> np.ndarray:
        """The device's side as uint8 numpy memory: all of it, whatever window the BAR decodes now."""
        return np.frombuffer(mmap.mmap(self.fd, self.capacity, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE),
                             np.uint8)

    def read(self, offset: int, length: int) -> bytes:
        """The device's side: all of the memory, whatever window the BAR decodes now."""
        self._check(offset, length)
        return os.pread(self.fd, length, offset)

    def write(self, offset: int, data: bytes) -> None:
        self._check(offset, len(data))
        os.pwrite(self.fd, data, offset)

    def _check(self, offset: int, length: int) -> None:
        if not (0 <= offset and 0 <= length and offset + length <= self.capacity):
            raise ValueError(f"BAR{self.index}: {length:#x} bytes at {offset:#x} are outside its {self.capacity:#x}")

    def close(self) -> None:
        self._closer()
