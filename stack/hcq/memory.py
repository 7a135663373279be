"""GPU memory through KFD: reserve a VA, ALLOC_MEMORY_OF_GPU at it, MAP_MEMORY_TO_GPU, and for CPU-visible
buffers mmap the render node over the reservation, so that the CPU and GPU use the same address."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from stack.hcq import kfd_ioctl as k
from stack.hcq.fileio import (
    MAP_ANONYMOUS,
    MAP_FIXED,
    MAP_NORESERVE,
    MAP_PRIVATE,
    MAP_SHARED,
    PROT_NONE,
    PROT_READ,
    PROT_WRITE,
)
from stack.hcq.kfd import Kfd

PAGE = 0x1000
BASE_FLAGS = k.ALLOC_WRITABLE | k.ALLOC_EXECUTABLE | k.ALLOC_NO_SUBSTITUTE
VRAM = BASE_FLAGS | k.ALLOC_VRAM  # device memory, GPU only
VRAM_PUBLIC = VRAM | k.ALLOC_PUBLIC  # device memory the CPU maps too
GTT_UNCACHED = BASE_FLAGS | k.ALLOC_GTT | k.ALLOC_COHERENT | k.ALLOC_UNCACHED  # system memory, GPU only
GTT_PUBLIC = GTT_UNCACHED | k.ALLOC_PUBLIC  # system memory the CPU maps: rings, signals, staging


@dataclass(eq=False)
class Buffer:
    """A GPU allocation at `va` (the same address for the CPU when `cpu` is true)."""
    va: int
    size: int  # as requested
    reserved: int  # size rounded up to pages: the VA range the buffer occupies
    handle: int
    flags: int
    cpu: bool
    owner: object = field(default=None, repr=False)  # the stack.Device it belongs to
    freed: bool = False

    @property
    def addr(self) -> int:  # what kernargs.pack_kernargs takes for a pointer argument
        return self.va

    def view(self, ctype=ctypes.c_uint32, offset: int = 0, count: int | None = None):
        """The CPU's view of a CPU-visible buffer as a ctypes array."""
        if not self.cpu:
            raise ValueError(f"buffer at {self.va:#x} is not CPU-visible")
        n = (self.size - offset) // ctypes.sizeof(ctype) if count is None else count
        return (ctype * n).from_address(self.va + offset)


class Memory:
    """Allocations of one GPU (gpu_id) through KFD; `render` is that GPU's opened render node."""

    def __init__(self, kfd: Kfd, gpu_id: int, render):
        self.kfd, self.gpu_id, self.render = kfd, gpu_id, render
        self.live: set[Buffer] = set()  # allocated here and not freed

    def alloc(self, size: int, flags: int = VRAM) -> Buffer:
        """`size` bytes (rounded up to pages) with KFD allocation `flags`; CPU-mapped when PUBLIC."""
        if not isinstance(size, int) or size <= 0:
            raise ValueError(f"allocation size must be a positive integer, not {size!r}")
        reserved = -(-size // PAGE) * PAGE
        io = self.kfd.io
        va = io.anon_mmap(0, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, 0)
        args = k.AllocMemoryOfGpu(va_addr=va, size=reserved, gpu_id=self.gpu_id, flags=flags)
        try:
            self.kfd.ioctl("ALLOC_MEMORY_OF_GPU", args)
        except OSError:
            io.munmap(va, reserved)
            raise
        buf = Buffer(va, size, reserved, args.handle, flags, cpu=bool(flags & k.ALLOC_PUBLIC))
        self.live.add(buf)
        self.map(buf)
        if buf.cpu:
            got = self.render.mmap(va, reserved, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, args.mmap_offset)
            if got != va:
                raise OSError(f"render node mmap of {reserved:#x} bytes at {va:#x} landed at {got:#x}")
        return buf

    def _map(self, name: str, buf: Buffer) -> None:
        ids = (ctypes.c_uint32 * 1)(self.gpu_id)
        args = k.MapMemoryToGpu(handle=buf.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
        self.kfd.ioctl(name, args)
        if args.n_success != 1:
            raise OSError(f"{name} of {buf.size:#x} bytes at {buf.va:#x} on gpu_id {self.gpu_id}: "
                          f"n_success {args.n_success} of 1")

    def map(self, buf: Buffer) -> None:
        """Map `buf` (this GPU's, or a buffer another GPU allocated) into this GPU's VM."""
        self._map("MAP_MEMORY_TO_GPU", buf)

    def free(self, buf: Buffer) -> None:
        if buf.freed:
            raise ValueError(f"buffer at {buf.va:#x} was already freed")
        self._map("UNMAP_MEMORY_FROM_GPU", buf)
        self.kfd.io.munmap(buf.va, buf.reserved)
        self.kfd.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(handle=buf.handle))
        buf.freed = True
        self.live.discard(buf)
