"""A GPU as a program uses it: memory, copies (SDMA), kernel launches (PM4), waiting. Selected by DEV:

    DEV = [IFACE[:INDICES]+]DEVICE[:RENDERER][:ARCH]      (several targets may be joined with ';')
    MOCKKFD+AMD  MOCKKFD+AMD:LLVM:gfx1201  MOCKKFD:0,1+AMD  MOCKKFD+AMD::gfx942  MOCKKFD+AMD:gfx1100  KFD+AMD

IFACE is KFD (the operating system's /dev/kfd) or a mock (MOCKKFD, the default; MOCK is its other name); INDICES
pick GPUs of the topology (`0,2` or `0-3`; a mock system is built with max(indices)+1 GPUs); DEVICE is AMD; RENDERER
(LLVM, HIP, HIPCC) is recorded for callers that compile; ARCH picks the mock's chip (default gfx1100) or must match
the real GPU.

    dev = Device("MOCKKFD+AMD:gfx1100")   # Device() reads DEV; Device(..., index=i) is the i-th GPU of INDICES
    buf = dev.alloc(nbytes); dev.copyin(buf, data); out = dev.copyout(buf); dev.free(buf)
    prog = dev.program(code_object, "kernel"); prog(buf, np.float32(2), global_size=(g,), local_size=(l,))
    dev.synchronize()                      # a GPU fault raises stack.GPUError naming the VA
    dev.counters()                         # ioctls by name, PM4 and SDMA packets by name, launches
    dev.close()                            # or `with Device(...) as dev:`
"""
from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass

import numpy as np

from objfile.codeobj import MAX_BUFFER, CodeObject, check_limit
from objfile.kernargs import hidden_args, pack_kernargs
from stack.hcq import kfd_ioctl as k
from stack.hcq import pm4, sdma
from stack.hcq import program as hcqprogram
from stack.hcq.fileio import file_interface
from stack.hcq.kfd import SDMA0_HWID, Kfd
from stack.hcq.memory import GTT_PUBLIC, VRAM, VRAM_PUBLIC, Buffer, Memory
from stack.hcq.queue import Doorbells, Queue
from stack.hcq.scratch import node_scratch_layout, private_segment_buffer
from stack.hcq.signal import Events, GPUError, Timeline

DEFAULT_DEV, DEFAULT_ARCH = "MOCKKFD+AMD", "gfx1100"
INTERFACES = {"KFD": "KFD", "MOCKKFD": "MOCKKFD", "MOCK": "MOCKKFD"}
UNSUPPORTED_INTERFACES = ("PCI", "USB", "MOCKPCI", "MOCKUSB")
DEVICES, RENDERERS = ("AMD",), ("LLVM", "HIP", "HIPCC")
_IFACE = re.compile(r"[A-Z][A-Z0-9_]*", re.ASCII)
_ARCH = re.compile(r"gfx[0-9]{1,2}[0-9a-f]{2}", re.ASCII)
_INDEX = re.compile(r"([0-9]{1,3})(?:-([0-9]{1,3}))?", re.ASCII)
MAX_GPUS = 64
STAGING_BYTES = 4 << 20
KERNARG_ARENA_BYTES = 1 << 20
DEFAULT_TIMEOUT = 600.0  # seconds a wait may take before GPUError (the emulator is slow, not hung)


@dataclass(frozen=True)
class DevSpec:
    iface: str  # KFD or MOCKKFD
    indices: tuple[int, ...] | None  # GPUs picked from the topology; None: not given
    device: str  # AMD
    renderer: str  # '' when not given
    arch: str | None


def parse_dev(text: str) -> DevSpec:
    """The AMD target of a DEV string; ValueError naming what is wrong."""
    if not isinstance(text, str):
        raise TypeError(f"DEV must be a string, not {type(text).__name__}")
    targets = text.split(";")
    for target in targets:
        if target.rpartition("+")[2].partition(":")[0].strip().upper() in DEVICES:
            return _parse_target(target, text)
    if len(targets) == 1:
        return _parse_target(text, text)  # its own error says what is wrong
    raise ValueError(f"DEV {text!r} names no AMD target (expected e.g. {DEFAULT_DEV!r})")


def _parse_target(t: str, text: str) -> DevSpec:
    where = f"DEV {text!r}"
    if t.count("+") > 1:
        raise ValueError(f"{where}: more than one '+' in {t!r}; the form is [IFACE[:INDICES]+]DEVICE[:RENDERER][:ARCH]")
    iface_part, plus, dev_part = t.rpartition("+")
    iface, indices = "MOCKKFD", None
    if plus:
        name, colon, idx = iface_part.partition(":")
        if not _IFACE.fullmatch(name):
            raise ValueError(f"{where}: interface {name!r} is not a name like MOCKKFD or KFD")
        if name in UNSUPPORTED_INTERFACES:
            raise ValueError(f"{where}: interface {name} is not supported by stack (use KFD or MOCKKFD)")
        if name not in INTERFACES:
            raise ValueError(f"{where}: unknown interface {name!r} (known: {', '.join(INTERFACES)})")
        iface = INTERFACES[name]
        if colon:
            indices = _parse_indices(idx, where)
    fields = dev_part.split(":")
    device = fields[0].strip().upper()
    if device not in DEVICES:
        raise ValueError(f"{where}: device {fields[0]!r} is not one of {', '.join(DEVICES)}")
    if len(fields) > 3:
        raise ValueError(f"{where}: too many ':' fields after {device}; the form is {device}[:RENDERER][:ARCH]")
    rest = fields[1:]
    if len(rest) == 1 and _ARCH.fullmatch(rest[0].lower()):
        rest = ["", rest[0]]
    renderer, arch = (rest + ["", ""])[:2]
    if renderer and renderer.upper() not in RENDERERS:
        raise ValueError(f"{where}: renderer {renderer!r} is not one of {', '.join(RENDERERS)} "
                         "(or an arch like gfx1100)")
    if arch and not _ARCH.fullmatch(arch.lower()):
        raise ValueError(f"{where}: arch {arch!r} is not a gfx processor name like gfx1100, gfx1201 or gfx942")
    return DevSpec(iface, indices, device, renderer.upper(), arch.lower() or None)


def _parse_indices(text: str, where: str) -> tuple[int, ...]:
    out: list[int] = []
    for item in text.split(","):
        m = _INDEX.fullmatch(item.strip())
        if m is None:
            raise ValueError(f"{where}: GPU index {item!r} is not a number or a range like 0-2")
        lo = int(m[1])
        hi = int(m[2]) if m[2] is not None else lo
        if hi < lo:
            raise ValueError(f"{where}: GPU index range {item!r} runs backwards")
        out += range(lo, hi + 1)
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: GPU indices {text!r} repeat a GPU")
    if max(out) >= MAX_GPUS:
        raise ValueError(f"{where}: GPU index {max(out)} is beyond {MAX_GPUS - 1}")
    return tuple(out)


def _as_bytes(data) -> memoryview:
    if isinstance(data, np.ndarray):
        return memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
    try:
        return memoryview(data).cast("B")
    except TypeError:
        raise TypeError(f"copyin takes bytes, a memoryview or a numpy array, not {type(data).__name__}") from None


class Device:
    """One GPU through KFD: a compute (PM4) queue, a copy (SDMA) queue, a timeline signal, events."""

    def __init__(self, dev: str | None = None, index: int = 0):
        text = os.environ.get("DEV", DEFAULT_DEV) if dev is None else dev
        spec = parse_dev(text)
        indices = spec.indices or (0,)
        if not isinstance(index, int) or not 0 <= index < len(indices):
            raise ValueError(f"Device index {index!r}: DEV {text!r} selects {len(indices)} GPU(s) "
                             f"{list(indices)}; name more with indices, e.g. MOCKKFD:0,1+AMD")
        gpu = indices[index]
        mock = spec.iface.startswith("MOCK")
        self.spec, self.timeout = spec, DEFAULT_TIMEOUT
        self.kfd = kfd = Kfd.open(file_interface(spec.iface, spec.arch or DEFAULT_ARCH if mock else None,
                                                 max(indices) + 1))
        if gpu >= len(kfd.nodes):
            raise ValueError(f"DEV {text!r}: GPU index {gpu}, but the topology has {len(kfd.nodes)} GPU(s)")
        self.node = node = kfd.nodes[gpu]
        if spec.arch and node.arch != spec.arch:
            raise ValueError(f"DEV {text!r} asks for {spec.arch}; GPU {gpu} is {node.arch}")
        self.arch, self.gfx, self.name = node.arch, node.gfx_version[0], f"{spec.device}:{gpu}"
        if node.xccs != 1:  # several XCCs need per-XCC scratch bases under PRED_EXEC (or AQL queues)
            raise ValueError(f"{self.name} ({node.arch}) has {node.xccs} XCCs; stack drives single-XCC GPUs only")
        self.memory = Memory(kfd, node.gpu_id, kfd.acquire(node))
        self.apertures = kfd.apertures(node.gpu_id)
        self.sdma_version = kfd.ip_version(node, SDMA0_HWID)[0]
        self.events = Events(kfd, self.memory, self.name)
        self.timeline = Timeline(self.memory, self.events)
        self.doorbells = Doorbells(kfd)
        self.compute = Queue(kfd, self.memory, node, self.doorbells, k.QUEUE_TYPE_COMPUTE)
        self.copy = Queue(kfd, self.memory, node, self.doorbells, k.QUEUE_TYPE_SDMA)
        self.staging = self.memory.alloc(STAGING_BYTES, GTT_PUBLIC)
        self._staging_free = 0  # timeline value after which the staging buffer may be rewritten
        self.kernargs = self.memory.alloc(KERNARG_ARENA_BYTES, VRAM_PUBLIC)
        self._kernarg_at = 0
        self.scratch: Buffer | None = None
        self.scratch_layout = node_scratch_layout(0, node)
        self.launches = 0
        self.fault_log: list[str] | None = None  # where GPU errors are also recorded (the pytest plugin's)
        self.closed = False

    def __repr__(self) -> str:
        return f"Device({self.name}, {self.arch}, {self.spec.iface})"

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Wait for the work issued, then destroy the queues and events and free this device's memory (the process's
        event page stays). A closed device rejects further use."""
        if self.closed:
            return
        try:
            self.synchronize()
        finally:
            self.closed = True
            self.compute.destroy()
            self.copy.destroy()
            self.events.destroy()
            self.doorbells.unmap()
            for buf in list(self.memory.live):
                if buf is not self.kfd.events:
                    self.memory.free(buf)

    def _check_open(self, what: str) -> None:
        if self.closed:
            raise ValueError(f"{what}: {self!r} is closed")

    # -- memory ----------------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Buffer:
        """`nbytes` of device memory (VRAM)."""
        self._check_open("alloc")
        if not isinstance(nbytes, (int, np.integer)) or isinstance(nbytes, bool) or nbytes <= 0:
            raise ValueError(f"alloc: size must be a positive integer, not {nbytes!r}")
        check_limit("alloc", "size", int(nbytes), MAX_BUFFER)
        buf = self.memory.alloc(int(nbytes), VRAM)
        buf.owner = self
        return buf

    def free(self, buf: Buffer) -> None:
        """Release `buf` once the work issued so far is done."""
        self._own(buf, "free")
        self.synchronize()
        self.memory.free(buf)

    def _own(self, buf, what: str) -> None:
        self._check_open(what)
        if not isinstance(buf, Buffer):
            raise TypeError(f"{what}: expected a Buffer from Device.alloc, not {type(buf).__name__}")
        if buf.owner is not self:
            raise ValueError(f"{what}: buffer at {buf.va:#x} belongs to {buf.owner!r}, not {self!r}")
        if buf.freed:
            raise ValueError(f"{what}: buffer at {buf.va:#x} was freed")

    def copyin(self, buf: Buffer, data, offset: int = 0) -> None:
        """Copy `data` (bytes, memoryview, numpy array) to `buf` at `offset` through SDMA (asynchronous)."""
        self._own(buf, "copyin")
        raw = _as_bytes(data)
        if not isinstance(offset, int) or offset < 0 or offset + raw.nbytes > buf.size:
            raise ValueError(f"copyin: {raw.nbytes} bytes at offset {offset!r} do not fit the {buf.size}-byte buffer "
                             f"at {buf.va:#x}")
        for off in range(0, raw.nbytes, STAGING_BYTES):
            n = min(STAGING_BYTES, raw.nbytes - off)
            self._wait(self._staging_free)
            ctypes.memmove(self.staging.va, bytes(raw[off:off + n]), n)
            self._staging_free = self._copy(buf.va + offset + off, self.staging.va, n)

    def _zero(self, buf: Buffer, offset: int, n: int) -> None:
        """Zero `n` bytes of `buf` at `offset` through SDMA (asynchronous): dword fills, without host memory of
        their size; the unaligned ends are copied in."""
        head = min(-offset % 4, n)
        body = (n - head) & ~3
        for at, m in ((offset, head), (offset + head + body, n - head - body)):
            if m:
                self.copyin(buf, bytes(m), at)
        step, start = min(sdma.max_copy_bytes(self.sdma_version), STAGING_BYTES), buf.va + offset + head
        if body:
            self._submit_copy([sdma.constant_fill(self.sdma_version, start + o, 0, min(step, body - o))
                               for o in range(0, body, step)])

    def copyout(self, buf: Buffer, nbytes: int | None = None) -> bytes:
        """The first `nbytes` (default: all) of `buf`, through SDMA, after all work issued before."""
        self._own(buf, "copyout")
        n = buf.size if nbytes is None else nbytes
        if not isinstance(n, int) or not 0 <= n <= buf.size:
            raise ValueError(f"copyout: {nbytes!r} bytes from the {buf.size}-byte buffer at {buf.va:#x}")
        out = bytearray()
        for off in range(0, n, STAGING_BYTES):
            m = min(STAGING_BYTES, n - off)
            self._staging_free = self._copy(self.staging.va, buf.va + off, m)
            self._wait(self._staging_free)
            out += ctypes.string_at(self.staging.va, m)
        return bytes(out)

    def _copy(self, dst: int, src: int, n: int) -> int:
        step = sdma.max_copy_bytes(self.sdma_version)
        return self._submit_copy([sdma.copy_linear(self.sdma_version, dst + o, src + o, min(step, n - o))
                                  for o in range(0, n, step)])

    # -- submission ----------------------------------------------------------------------------------------
    def _submit_copy(self, packets: list[list[int]]) -> int:
        """SDMA: wait for the timeline's previous value, run `packets`, advance the timeline; returns its value."""
        tl, value = self.timeline, self.timeline.next()
        self.copy.submit([sdma.poll_regmem(tl.va, value - 1), *packets, sdma.fence(self.sdma_version, tl.va, value),
                          sdma.fence(self.sdma_version, self.events.mailbox, self.events.signal_id),
                          sdma.trap(self.events.signal_id)])
        return value

    def _submit_compute(self, packets: list[list[int]]) -> int:
        """PM4: the same protocol as _submit_copy on the compute queue."""
        tl, value, ev = self.timeline, self.timeline.next(), self.events
        self.compute.submit([pm4.wait_reg_mem(tl.va, value - 1), *packets,
                             pm4.release_mem(self.gfx, tl.va, value, pm4.DATA_SEL_SEND_64_BIT_DATA),
                             pm4.release_mem(self.gfx, ev.mailbox, ev.signal_id, pm4.DATA_SEL_SEND_32_BIT_LOW,
                                             pm4.INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM, ev.signal_id,
                                             cache_flush=False)])
        return value

    def synchronize(self) -> None:
        """Wait until everything issued has finished; a GPU fault raises stack.GPUError."""
        self._wait(self.timeline.issued)

    def _wait(self, value: int) -> None:
        try:
            self.timeline.wait(value, self.timeout)
        except GPUError as e:
            if self.fault_log is not None:
                self.fault_log.append(str(e))
            raise

    # -- programs ------------------------------------------------------------------------------------------
    def program(self, code: bytes, name: str) -> Program:
        self._check_open("program")
        return Program(self, code, name)

    def _ensure_scratch(self, private_bytes: int) -> None:
        if not private_bytes or self.scratch is not None and private_bytes <= self.scratch_layout.lane_bytes:
            return
        layout = node_scratch_layout(private_bytes, self.node)
        new = self.memory.alloc(layout.size, VRAM)
        if self.scratch is not None:
            self.synchronize()  # launches issued so far use the old buffer
            self.memory.free(self.scratch)
        self.scratch, self.scratch_layout = new, layout

    def _kernarg_space(self, nbytes: int) -> int:
        if nbytes > KERNARG_ARENA_BYTES:
            raise ValueError(f"{nbytes} bytes of kernel arguments exceed the {KERNARG_ARENA_BYTES}-byte arena")
        if self._kernarg_at + nbytes > KERNARG_ARENA_BYTES:
            self.synchronize()  # every launch that used the arena has finished
            self._kernarg_at = 0
        at = self.kernargs.va + self._kernarg_at
        self._kernarg_at += -(-nbytes // hcqprogram.KERNARG_ALIGN) * hcqprogram.KERNARG_ALIGN
        return at

    def counters(self) -> dict:
        """What went through the driver: ioctls by name (whole process), packets by queue and name, launches."""
        return {"ioctls": dict(self.kfd.ioctls), "pm4": dict(self.compute.packets), "sdma": dict(self.copy.packets),
                "launches": self.launches}


class Program:
    """A kernel of a code object loaded into a Device's memory; call it to launch."""

    def __init__(self, device: Device, code: bytes, name: str):
        if not isinstance(code, (bytes, bytearray, memoryview)):
            raise TypeError(f"program: code object must be bytes, not {type(code).__name__}")
        co = CodeObject.parse(code)
        if co.arch != device.arch:
            raise ValueError(f"program: the code object is for {co.arch}, {device.name} is {device.arch}")
        if name not in co.kernels:
            raise ValueError(f"program: no kernel {name!r} in the code object; it has {', '.join(co.kernels)}")
        self.device, self.name, self.kernel = device, name, co.kernels[name]
        self.private_bytes = hcqprogram.check_private(self.kernel)  # parsing checked the other sizes
        self.code = device.alloc(max(co.image_size, 1))
        for seg in co.segments:  # memory a segment has beyond its file data (.bss) reads zero
            device._zero(self.code, seg.vaddr + len(seg.data), seg.memsz - len(seg.data))
        for vaddr, data in co.image_writes(self.code.va):  # the file data, relocated: no host copy of the image
            device.copyin(self.code, data, vaddr)
        self.regs = hcqprogram.kernel_registers(self.kernel, self.code.va, device.gfx)

    def __call__(self, *args, global_size=(1, 1, 1), local_size=(1, 1, 1)) -> None:
        """Launch global_size workgroups (not work-items) of local_size work-items each; asynchronous."""
        dev, kernel = self.device, self.kernel
        dev._check_open(f"kernel {self.name!r}")
        groups, local = hcqprogram.shape(global_size, "global_size"), hcqprogram.shape(local_size, "local_size")
        items = local[0] * local[1] * local[2]
        limit = min(kernel.max_flat_workgroup_size or hcqprogram.MAX_WORKGROUP_ITEMS, hcqprogram.MAX_WORKGROUP_ITEMS)
        if items > limit:
            raise ValueError(f"local_size {local} has {items} work-items; kernel {self.name!r} allows at most {limit}")
        for a in args:
            if isinstance(a, Buffer):
                dev._own(a, f"kernel {self.name!r} argument")
        hcqprogram.check_grid(kernel, groups, local)
        dev._ensure_scratch(self.private_bytes)
        hidden = hidden_args(tuple(g * n for g, n in zip(groups, local, strict=True)), local)
        hidden |= {"hidden_grid_dims": hcqprogram.grid_dims(groups, local),
                   "hidden_queue_ptr": dev.compute.pointers.va,
                   "hidden_private_base": dev.apertures.scratch_base >> 32,
                   "hidden_shared_base": dev.apertures.lds_base >> 32}
        kernargs = pack_kernargs(kernel, list(args), hidden)
        ka_bytes = -(-len(kernargs) // hcqprogram.KERNARG_ALIGN) * hcqprogram.KERNARG_ALIGN
        ka = dev._kernarg_space(ka_bytes + hcqprogram.DISPATCH_PACKET_BYTES)
        kd = kernel.descriptor
        packet = hcqprogram.dispatch_packet(groups, local, hcqprogram.grid_dims(groups, local), self.private_bytes,
                                            kd.group_segment_fixed_size, self.code.va + kernel.descriptor_address, ka)
        ctypes.memmove(ka, kernargs, len(kernargs))
        ctypes.memmove(ka + ka_bytes, packet, len(packet))
        scratch = dev.scratch.va if dev.scratch is not None else 0
        sgprs = hcqprogram.user_sgprs(kd, ka, ka + ka_bytes, dev.compute.pointers.va, dev.launches,
                                      private_segment_buffer(dev.gfx, scratch), scratch, self.private_bytes,
                                      kernargs)
        tmpring = dev.scratch_layout.tmpring_size if scratch else 0
        dev._submit_compute(hcqprogram.dispatch(dev.gfx, self.regs, sgprs, tmpring, scratch, groups, local))
        dev.launches += 1
