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
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emu.amd import isa
from emu.amd.dispatch import (
    DISPATCH_PACKET_SIZE,
    DYNAMIC_STACK,
    Dispatch,
    Stats,
    check_launch,
    run_dispatch,
)
from emu.amd.exec.wave import Program
from emu.amd.memory import VM, FaultRecord, GPUFault
from emu.amd.memspace import PRIVATE_APERTURE, SHARED_APERTURE
from stack.hcq.codeobj import CodeObject, pack_kernargs
from stack.hcq.program import dispatch_packet, grid_dims, user_sgprs

DEFAULT_ARCH = {"rdna3": "gfx1100", "rdna4": "gfx1201", "cdna": "gfx942"}
# AMDGPUUsage, kernarg preloading: the first 256 bytes of such a kernel are a prologue for firmware without it
PRELOAD_SKIP = 256
SCRATCH_GRANULE = 256  # bytes: TMPRING_SIZE.WAVESIZE unit (gfx10+; gfx9 uses 1 KiB, a multiple)


@dataclass(frozen=True)
class Buffer:
    addr: int
    size: int


class Loaded:
    """A code object loaded into a GPU's memory."""

    def __init__(self, gpu: GPU, co: CodeObject):
        self.co = co
        self.base = gpu.vm.alloc(max(co.image_size, 1), name="code object")
        gpu.vm.write(self.base, bytes(co.image(self.base)))
        self._gpu = gpu
        self._programs: dict[int, Program] = {}

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(self.co.kernels)

    def program(self, lanes: int) -> Program:
        p = self._programs.get(lanes)
        if p is None:
            vm = self._gpu.vm
            p = Program(self._gpu.arch, lanes, lambda pc, n: fetch_code(vm, pc, n))
            for s in self.co.segments:
                if s.flags & 1:  # PF_X: decode the code once
                    p.predecode(s.data, self.base + s.vaddr)
            self._programs[lanes] = p
        return p


def fetch_code(vm: VM, pc: int, n: int) -> bytes:
    """Up to n bytes of code at pc (an instruction fetch: faults when pc is unmapped)."""
    m = vm.mapping(pc)
    if m is None:
        raise GPUFault(FaultRecord("unmapped", (pc,), (), 32, False, detail="instruction fetch"))
    return vm.read(pc, min(n, m.end - pc))


class GPU:
    def __init__(self, arch: str = "gfx1100"):
        fam = isa.family(arch)
        self.arch = DEFAULT_ARCH.get(arch.lower(), arch.lower())
        self.family = fam
        self.vm = VM()
        self.dispatches = 0
        self.last_stats: Stats | None = None
        self._queue = self.vm.alloc(256, name="queue")

    # -- memory ------------------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Buffer:
        if not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
            raise ValueError(f"alloc: size must be a positive integer, not {nbytes!r}")
        return Buffer(self.vm.alloc(int(nbytes), name="buffer"), int(nbytes))

    def write(self, buf: Buffer, data, offset: int = 0) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) \
            else np.frombuffer(memoryview(data).cast("B"), np.uint8)
        _check_range(buf, offset, raw.size, "write")
        self.vm.write(buf.addr + offset, raw)

    def read(self, buf: Buffer, nbytes: int | None = None, offset: int = 0) -> bytes:
        nbytes = buf.size - offset if nbytes is None else nbytes
        _check_range(buf, offset, nbytes, "read")
        return self.vm.read(buf.addr + offset, nbytes)

    # -- code --------------------------------------------------------------------------------------------------
    def load(self, code_object: bytes) -> Loaded:
        co = CodeObject.parse(code_object)
        if isa.family(co.arch) != self.family:
            raise ValueError(f"code object is for {co.arch}, this GPU is {self.arch} ({self.family})")
        return Loaded(self, co)

    def launch(self, prog: Loaded, name: str, grid=(1,), block=(1,), args=(), dynamic_lds: int = 0,
               kernargs: bytes | None = None) -> Stats:
        k = prog.co.kernels.get(name)
        if k is None:
            raise ValueError(f"no kernel {name!r} in the code object; it has: {', '.join(prog.kernels)}")
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        lanes = 32 if k.descriptor.wave32 else 64
        check_launch(k, grid, block, dynamic_lds)
        hidden = {"hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
                  "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
                  "hidden_grid_dims": 3 if grid[2] * block[2] > 1 else 2 if grid[1] * block[1] > 1 else 1,
                  "hidden_dynamic_lds_size": dynamic_lds, "hidden_queue_ptr": self._queue,
                  "hidden_private_base": PRIVATE_APERTURE >> 32, "hidden_shared_base": SHARED_APERTURE >> 32}
        kernargs = pack_kernargs(k, list(args), hidden, None if kernargs is None else bytes(kernargs))
        kd = k.descriptor
        private = kd.private_segment_fixed_size + (DYNAMIC_STACK if k.uses_dynamic_stack else 0)
        nwaves = -(-block[0] * block[1] * block[2] // lanes)
        wave_bytes = -(-private * lanes // SCRATCH_GRANULE) * SCRATCH_GRANULE
        lds = kd.group_segment_fixed_size + dynamic_lds
        ka = self.vm.alloc(max(len(kernargs), 1), name="kernargs")
        pkt = self.vm.alloc(DISPATCH_PACKET_SIZE, name="dispatch packet")
        scratch = self.vm.alloc(nwaves * wave_bytes, name="scratch") if private else 0
        try:
            self.vm.write(ka, kernargs)
            # what a runtime programs into the compute registers (workgroups run one at a time: one scratch slot
            # per wave of a workgroup)
            sgprs = user_sgprs(kd, ka, pkt, self._queue, self.dispatches, (0, 0, 0, 0), 0,
                               kd.private_segment_fixed_size)
            entry = prog.base + k.entry
            pre = kd.kernarg_preload
            if pre.length:  # firmware that preloads: the dwords follow the user SGPRs; the code skips its prologue
                words = np.frombuffer(kernargs.ljust(4 * (pre.offset + pre.length), b"\0"), "<u4")
                sgprs, entry = sgprs + [int(x) for x in words[pre.offset:pre.offset + pre.length]], entry + PRELOAD_SKIP
            d = Dispatch(prog.program(lanes), entry, grid, block, lanes, kd.rsrc2, tuple(sgprs), lds, scratch,
                         wave_bytes, nwaves, dispatch_id=self.dispatches, rsrc1=kd.rsrc1)
            self.vm.write(pkt, dispatch_packet(grid, block, grid_dims(grid, block), private, lds,
                                               prog.base + k.descriptor_address, ka))
            self.dispatches += 1
            self.last_stats = run_dispatch(self.vm, d, self.arch)
            return self.last_stats
        finally:
            for va in (ka, pkt, scratch):
                if va:
                    self.vm.unmap(va)


def _dims(v, what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(t) <= 3:
        raise ValueError(f"{what} {v!r}: give 1 to 3 dimensions")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def _check_range(buf: Buffer, offset: int, n: int, what: str) -> None:
    if offset < 0 or n < 0 or offset + n > buf.size:
        raise ValueError(f"{what} of {n} bytes at offset {offset} is outside the {buf.size}-byte buffer")


__all__ = ["GPU", "GPUFault", "Buffer", "Loaded"]
