"""Buffer objects: device memory (a GPU's VRAM, the system memory GTT buffers live in) and the buffers in it.

Each heap is one sparse memfd: the device's own view is a numpy array over an mmap of all of it, and a client's
CPU mapping of a buffer (mmap of the render node) maps the same file range, so both see the same pages, as a
BO's CPU and GPU mappings do. Freed ranges are punched out, so memory is returned and reads back as zero.
"""
from __future__ import annotations

import bisect
import ctypes
import errno
import mmap
import os
from dataclasses import dataclass, field

import numpy as np

from emu.amd.memory import PAGE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


class Heap:
    """`size` bytes of device memory with a first-fit page allocator."""

    def __init__(self, name: str, size: int):
        self.name, self.size = name, size
        self.fd = os.memfd_create(f"hwemu-{name}", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.mem = np.frombuffer(mmap.mmap(self.fd, size), np.uint8)
        self._free: list[tuple[int, int]] = [(0, size)]  # (offset, size), sorted, coalesced
        self.used = 0

    def alloc(self, size: int) -> int:
        """Offset of a fresh zeroed page-aligned range of `size` (whole pages); OSError(ENOMEM) when full."""
        for i, (off, n) in enumerate(self._free):
            if n >= size:
                self._free[i:i + 1] = [(off + size, n - size)] if n > size else []
                self.used += size
                return off
        raise OSError(errno.ENOMEM, f"{self.name}: no room for {size:#x} bytes ({self.size - self.used:#x} free)")

    def release(self, off: int, size: int) -> None:
        _libc.fallocate(self.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, size)
        self.used -= size
        free = sorted([*self._free, (off, size)])
        merged = [free[0]]
        for o, n in free[1:]:
            lo, ln = merged[-1]
            merged[-1:] = [(lo, ln + n)] if lo + ln == o else [(lo, ln), (o, n)]
        self._free = merged


@dataclass(eq=False)
class BufferObject:
    """One allocation of ALLOC_MEMORY_OF_GPU."""
    handle: int
    gpu: object  # the GPU the buffer was allocated on
    va: int
    size: int  # whole pages
    flags: int
    mem: np.ndarray = field(repr=False)  # uint8 view of the backing, `size` bytes
    heap: Heap | None = None  # None for memory the process owns (USERPTR) or device pages (doorbells, MMIO)
    offset: int = 0  # in the heap
    mmap_offset: int = 0  # the render-node offset that maps it (USERPTR: the user address)
    mapped_on: set = field(default_factory=set)  # GPUs whose VM maps it

    @property
    def end(self) -> int:
        return self.va + self.size


class ByVA:
    """Buffers sorted by VA, for the overlap query every allocation and mapping makes (a process holds thousands).
    Buffers of different GPUs may share VAs."""

    def __init__(self) -> None:
        self._vas: list[int] = []
        self._bos: list[BufferObject] = []  # in the order of _vas
        self._widest = 0  # bytes of the largest buffer added: how far before va an overlapping one may start

    def add(self, bo: BufferObject) -> None:
        i = bisect.bisect_right(self._vas, bo.va)
        self._vas.insert(i, bo.va)
        self._bos.insert(i, bo)
        self._widest = max(self._widest, bo.size)

    def remove(self, bo: BufferObject) -> None:
        lo, hi = bisect.bisect_left(self._vas, bo.va), bisect.bisect_right(self._vas, bo.va)
        i = next(j for j in range(lo, hi) if self._bos[j] is bo)
        del self._vas[i], self._bos[i]

    def overlapping(self, va: int, size: int):
        """The buffers that overlap [va, va + size), highest VA first."""
        i = bisect.bisect_left(self._vas, va + size)
        while i > 0:
            i -= 1
            b = self._bos[i]
            if b.va + self._widest <= va:
                return
            if b.end > va:
                yield b


def page_round(n: int) -> int:
    return -(-n // PAGE) * PAGE
