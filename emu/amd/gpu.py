"""One emulated GPU and the host-side kernel runner API:

    from emu.amd import GPU, GPUFault
    gpu = GPU("gfx1100")                      # or "gfx1201", "gfx942", a family name ("rdna3", "rdna4", "cdna")
    buf = gpu.alloc(nbytes)                   # .addr (GPU VA), .size
    gpu.write(buf, data, offset=0)            # bytes / memoryview / numpy array
    data = gpu.read(buf, nbytes=None, offset=0)
    prog = gpu.load(code_object_bytes)        # HSA code object
    gpu.launch(prog, "kernel", grid=(gx, gy, gz), block=(bx, by, bz), args=[buf, np.float32(2.5), np.int32(7)])

`grid` counts workgroups per dimension, `block` is the workgroup size (shorter tuples are padded with 1).
`args` are the kernel's explicit arguments in order (a buffer becomes its address; numbers are packed by the
metadata's size and type); `kernargs=bytes` gives them raw instead (for a hand-assembled kernel whose metadata
lists none; where the metadata lists them, the bytes must cover them); hidden arguments are filled by the runner.
A fault raises `GPUFault` carrying the record; host memory is never touched and the GPU stays usable.

    gpu.free(buf)                             unmap the buffer and release its host memory
    gpu.unload(prog)                          the same for a code object; `with gpu.load(data) as prog:` unloads it

Arguments are checked, never guessed: a buffer must be live and from this GPU, kernel arguments must match the
metadata's types and ranges (objfile.kernargs.pack_kernargs), sizes must stay within the limits of emu.amd.limits
(`LimitError` names the field, its value and the limit; `alloc` never raises MemoryError).
"""
from __future__ import annotations

import itertools
import struct
import threading
from dataclasses import dataclass, field

import numpy as np

from emu.amd import kernel_stats, target
from emu.amd.aql import kernel_dispatch
from emu.amd.compute import scratch_slots, tmpring
from emu.amd.debug import fault
from emu.amd.dispatch import Stats, check_launch
from emu.amd.exec.wave import Program
from emu.amd.hw import aql as hsa
from emu.amd.icache import InstructionCache
from emu.amd.limits import MAX_BUFFER, LimitError, check_limit
from emu.amd.memory import VM, GPUFault
from emu.amd.memspace import PRIVATE_APERTURE, SHARED_APERTURE
from emu.amd.rsrc import private_segment
from objfile.codeobj import CodeObject
from objfile.codeobj import LimitError as RuntimeLimitError
from objfile.kernargs import pack_kernargs


@dataclass(frozen=True)
class Buffer:
    addr: int
    size: int
    gpu: int = field(default=0, repr=False, compare=False)  # serial number of the GPU that allocated it


class Loaded:
    """A code object loaded into a GPU's memory (a context manager: leaving the block unloads it)."""

    def __init__(self, gpu: GPU, co: CodeObject, data: bytes = b""):
        self.co, self.data = co, data  # data: the ELF, for fault reports (its DWARF line table)
        self.base = gpu.vm_alloc(max(co.image_size, 1), "code object")
        for vaddr, data in co.image_writes(self.base):  # only the file data: the rest stays untouched zero pages
            gpu.vm.write(self.base + vaddr, data)
        self._gpu = gpu
        self.loaded = True

    def __enter__(self) -> Loaded:
        return self

    def __exit__(self, *exc) -> None:
        if self.loaded:
            self._gpu.unload(self)

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(self.co.kernels)

    def program(self, lanes: int) -> Program:
        """The code object's decoded code for waves of `lanes` (emu.amd.icache)."""
        return self._gpu.code.program(self.base, lanes)


class GPU:
    _serials = itertools.count(1)

    def __init__(self, arch: str = "gfx1100"):
        self.chip = target.get(arch)
        self.arch, self.family = self.chip.arch, self.chip.isa
        self.vm = VM()
        self.dispatches = 0
        self.last_stats: Stats | None = None
        self.kernel_stats: dict[str, kernel_stats.KernelStats] = {}  # kernel name -> its launches (HWEMU_STATS)
        self.code = InstructionCache(self.vm, self.arch)
        self.sqtt = self.perfmon = None  # the runner has no thread trace nor performance counters
        self._queue = self.vm.alloc(hsa.QUEUE_BYTES, name="queue")  # its amd_queue_t
        self._serial = next(self._serials)
        self._buffers: dict[int, Buffer] = {}  # live buffers by address
        self._lock = threading.Lock()

    # -- memory ------------------------------------------------------------------------------------------------
    def vm_alloc(self, nbytes: int, name: str) -> int:
        """VM memory for the runner's own use (sizes already checked): LimitError, not MemoryError, when the host
        has none left."""
        try:
            return self.vm.alloc(nbytes, name=name)
        except MemoryError:
            raise LimitError(f"{name}: the host has no memory left for {nbytes} bytes") from None

    def alloc(self, nbytes: int) -> Buffer:
        if not isinstance(nbytes, (int, np.integer)) or isinstance(nbytes, bool) or nbytes <= 0:
            raise ValueError(f"alloc: size must be a positive integer, not {nbytes!r}")
        check_limit("alloc", "size", int(nbytes), MAX_BUFFER)
        buf = Buffer(self.vm_alloc(int(nbytes), "buffer"), int(nbytes), self._serial)
        with self._lock:
            self._buffers[buf.addr] = buf
        return buf

    def free(self, buf: Buffer) -> None:
        """Unmap `buf` and release its memory; using it afterwards is an error."""
        with self._lock:
            self._own(buf, "free")
            del self._buffers[buf.addr]
            self.vm.unmap(buf.addr)

    def write(self, buf: Buffer, data, offset: int = 0) -> None:
        self._own(buf, "write")
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) \
            else np.frombuffer(memoryview(data).cast("B"), np.uint8)
        offset, _ = _check_range(buf, offset, raw.size, "write")
        self.vm.write(buf.addr + offset, raw)

    def read(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> bytes:
        self._own(buf, "read")
        nbytes = buf.size - offset if nbytes is None else nbytes
        offset, nbytes = _check_range(buf, offset, nbytes, "read")
        return self.vm.read(buf.addr + offset, nbytes)

    def _own(self, buf, what: str) -> None:
        """ValueError unless `buf` is a live buffer of this GPU."""
        if not isinstance(buf, Buffer):
            raise ValueError(f"{what}: expected a Buffer from GPU.alloc, not {type(buf).__name__}")
        if buf.gpu != self._serial:
            raise ValueError(f"{what}: buffer at {buf.addr:#x} belongs to another GPU")
        if self._buffers.get(buf.addr) is not buf:
            raise ValueError(f"{what}: buffer at {buf.addr:#x} was freed")

    # -- code --------------------------------------------------------------------------------------------------
    def load(self, code_object: bytes) -> Loaded:
        co = CodeObject.parse(code_object)
        if target.generation(co.arch) is not self.chip.gen:
            raise ValueError(f"code object is for {co.arch}, this GPU is {self.arch} ({self.family})")
        return Loaded(self, co, bytes(memoryview(code_object)))

    def unload(self, prog: Loaded) -> None:
        """Unmap the code object and drop its decoded programs; launching it afterwards is an error."""
        with self._lock:
            self._check_loaded(prog, "unload")
            prog.loaded = False
            self.code.forget(self.vm.unmap(prog.base))

    def _check_loaded(self, prog, what: str) -> None:
        if not isinstance(prog, Loaded):
            raise ValueError(f"{what}: expected a Loaded code object from GPU.load, not {type(prog).__name__}")
        if prog._gpu is not self:
            raise ValueError(f"{what}: the code object was loaded into another GPU")
        if not prog.loaded:
            raise ValueError(f"{what}: the code object was unloaded")

    def launch(self, prog: Loaded, name: str, grid=(1,), block=(1,), args=(), dynamic_lds: int = 0,
               kernargs: bytes | None = None, timeout: float | None = None) -> Stats:
        """Run kernel `name` over `grid` workgroups of `block` work-items; `timeout`: seconds of CPU time the
        dispatch may run before the watchdog stops it with a fault (default HWEMU_TIMEOUT or 60; 0: no limit)."""
        self._check_loaded(prog, "launch")
        args = list(args)
        for i, a in enumerate(args):
            if isinstance(a, Buffer):
                self._own(a, f"launch argument {i}")
        k = prog.co.kernels.get(name)
        if k is None:
            raise ValueError(f"no kernel {name!r} in the code object; it has: {', '.join(prog.kernels)}")
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        private = check_launch(k, grid, block, self.arch, dynamic_lds)
        hidden = {"hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
                  "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
                  "hidden_grid_dims": 3 if grid[2] * block[2] > 1 else 2 if grid[1] * block[1] > 1 else 1,
                  "hidden_dynamic_lds_size": dynamic_lds, "hidden_queue_ptr": self._queue,
                  "hidden_private_base": PRIVATE_APERTURE >> 32, "hidden_shared_base": SHARED_APERTURE >> 32}
        try:
            kernargs = pack_kernargs(k, args, hidden, None if kernargs is None else bytes(memoryview(kernargs)))
        except RuntimeLimitError as e:  # the runner raises emu's LimitError for every size
            raise LimitError(str(e)) from None
        lanes = self.chip.gen.lanes(k.descriptor.wave32)
        # one scratch slot per wave of a workgroup: workgroups run one at a time
        ring = tmpring(self.chip, -(-block[0] * block[1] * block[2] // lanes), private * lanes) if private else 0
        waves, wave_bytes = scratch_slots(self.chip, ring)
        lds = k.descriptor.group_segment_fixed_size + dynamic_lds
        ka = pkt = scratch = 0
        try:
            ka = self.vm_alloc(max(len(kernargs), 1), "kernargs")
            pkt = self.vm_alloc(hsa.PACKET_BYTES, "dispatch packet")
            scratch = self.vm_alloc(waves * wave_bytes, "scratch") if private else 0
            self.vm.write(ka, kernargs)
            # the queue's scratch, as a runtime sets it up (emu.amd.aql reads it for each dispatch)
            self.vm.write(self._queue + hsa.QUEUE_COMPUTE_TMPRING_SIZE, struct.pack("<I", ring))
            self.vm.write(self._queue + hsa.QUEUE_SCRATCH_RESOURCE_DESCRIPTOR,
                          struct.pack("<4I", *private_segment(scratch).words()))
            self.vm.write(self._queue + hsa.QUEUE_SCRATCH_BACKING_MEMORY_LOCATION, struct.pack("<Q", scratch))
            packet = _dispatch_packet(grid, block, private, lds, prog.base + k.descriptor_address, ka)
            self.vm.write(pkt, packet)
            kernel_dispatch(self, pkt, packet, self._queue, self.dispatches, f"kernel {name!r}",
                            kernel=fault.Kernel(name, prog.data, prog.co, prog.base, kernargs, self._buffers),
                            timeout=timeout)
            return self.last_stats
        finally:
            for va in (ka, pkt, scratch):
                if va:
                    self.vm.unmap(va)

    def add_stats(self, s: Stats) -> None:
        self.last_stats = s
        if s.kernel:  # HWEMU_STATS: the table is printed at exit
            if not self.kernel_stats:
                kernel_stats.report_at_exit(f"runner {self.arch} #{self._serial}", self.kernel_stats)
            kernel_stats.add(self.kernel_stats, s)


def _dims(v, what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v) if isinstance(v, (tuple, list)) else ()
    if not 1 <= len(t) <= 3 or any(not isinstance(x, (int, np.integer)) or isinstance(x, bool) for x in t):
        raise ValueError(f"{what} {v!r}: give 1 to 3 integers")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def _check_range(buf: Buffer, offset: int, n: int, what: str) -> tuple[int, int]:
    """(offset, n) as ints when the n bytes at offset lie inside buf, else ValueError."""
    if any(not isinstance(x, (int, np.integer)) or isinstance(x, bool) for x in (offset, n)):
        raise ValueError(f"{what}: offset and size must be integers, not {offset!r} and {n!r}")
    offset, n = int(offset), int(n)
    if offset < 0 or n < 0 or offset + n > buf.size:
        raise ValueError(f"{what} of {n} bytes at offset {offset} is outside the {buf.size}-byte buffer")
    return offset, n


__all__ = ["GPU", "GPUFault", "Buffer", "Loaded", "LimitError"]


def _dispatch_packet(groups: tuple[int, int, int], block: tuple[int, int, int], private: int, lds: int,
                     kernel_object: int, kernarg: int) -> bytes:
    """The hsa_kernel_dispatch_packet the dispatch pointer points at (vendor offsets; grid sizes in work-items)."""
    grid = [g * b for g, b in zip(groups, block, strict=True)]
    dims = 3 if grid[2] > 1 else 2 if grid[1] > 1 else 1
    header = hsa.TYPE_KERNEL_DISPATCH | 1 << hsa.HEADER_BARRIER \
        | hsa.FENCE_SCOPE_SYSTEM << hsa.HEADER_ACQUIRE_FENCE_SCOPE \
        | hsa.FENCE_SCOPE_SYSTEM << hsa.HEADER_RELEASE_FENCE_SCOPE
    out = bytearray(hsa.PACKET_BYTES)
    o = hsa.DISPATCH
    for name, fmt, value in (("header", "H", header), ("setup", "H", dims), ("workgroup_size_x", "H", block[0]),
                              ("workgroup_size_y", "H", block[1]), ("workgroup_size_z", "H", block[2]),
                              ("grid_size_x", "I", grid[0]), ("grid_size_y", "I", grid[1]),
                              ("grid_size_z", "I", grid[2]), ("private_segment_size", "I", private),
                              ("group_segment_size", "I", lds), ("kernel_object", "Q", kernel_object),
                              ("kernarg_address", "Q", kernarg)):
        struct.pack_into("<" + fmt, out, o[name], value)
    return bytes(out)
