"""HSA (AQL) compute queues: the packet processor of a KFD queue of type COMPUTE_AQL.

The ring holds 64-byte packets. The runtime publishes its write index in the amd_queue_t it points
write_pointer_address at (`write_dispatch_id`) and rings the doorbell; the packet processor runs packets in
order while their header is not INVALID, marks each INVALID when done and publishes `read_dispatch_id`.

Packet types, header fields and the amd_queue_t / amd_signal_t offsets are the vendor's (emu.amd.hw.aql); the
kernel descriptor's layout too (emu.amd.hw.kd), and the initial SGPRs are built here (`user_sgprs`), as the
firmware does, not by the runtime's code.

- KERNEL_DISPATCH: the processor reads the kernel descriptor at `kernel_object` (unlike a PM4 dispatch, where the
  runtime copied it into registers) and loads the user SGPRs it enables: the private-segment V# and the scratch
  of amd_queue_t, the packet itself as the dispatch pointer, the amd_queue_t as the queue pointer, the kernarg
  address, the packet index as dispatch id. On CDNA3/4 it also preloads kernargs (AMDGPUUsage, "Preloaded Kernel
  Arguments"): the dwords KERNARG_PRELOAD_SPEC names follow those SGPRs and the code starts past its 256-byte
  prologue for firmware without the feature. A grid that is not a multiple of the workgroup size ends in partial
  workgroups.
- BARRIER_AND / BARRIER_OR: wait until all / any dependent signals are 0.
- VENDOR_SPECIFIC with the AMD PM4-IB format: a PM4 INDIRECT_BUFFER run by the PM4 processor.
- A completion signal (amd_signal_t) is decremented; with an event mailbox, the event id is written there and an
  interrupt raised with it, as the KFD event interface expects.
"""
from __future__ import annotations

import dataclasses
import itertools
import struct

import numpy as np

from emu.amd import timeline
from emu.amd.compute import ComputeRegisters, CountingDevice, launch, with_lds
from emu.amd.cp import ComputeQueue
from emu.amd.debug import fault
from emu.amd.exec.wave import Cancel
from emu.amd.hw import aql as hsa
from emu.amd.hw import pm4
from emu.amd.hw.kd import PRELOAD_PROLOGUE_BYTES, DescriptorError, KernargPreload, KernelDescriptor
from emu.amd.limits import check_work
from emu.amd.memory import GPUFault
from emu.amd.queue import CPError, Wait

PACKET_BYTES = hsa.PACKET_BYTES
TYPE_VENDOR_SPECIFIC, TYPE_INVALID, TYPE_KERNEL_DISPATCH = (hsa.TYPE_VENDOR_SPECIFIC, hsa.TYPE_INVALID,
                                                            hsa.TYPE_KERNEL_DISPATCH)
TYPE_BARRIER_AND, TYPE_BARRIER_OR = hsa.TYPE_BARRIER_AND, hsa.TYPE_BARRIER_OR
AMD_AQL_FORMAT_PM4_IB = hsa.AMD_AQL_FORMAT_PM4_IB
PACKET_NAMES = {TYPE_VENDOR_SPECIFIC: "AQL_VENDOR", TYPE_KERNEL_DISPATCH: "AQL_KERNEL_DISPATCH",
                TYPE_BARRIER_AND: "AQL_BARRIER_AND", TYPE_BARRIER_OR: "AQL_BARRIER_OR"}  # the packet types run
WRITE_DISPATCH_ID = hsa.QUEUE_WRITE_DISPATCH_ID  # offsets in amd_queue_t
COMPUTE_TMPRING_SIZE = hsa.QUEUE_COMPUTE_TMPRING_SIZE
SCRATCH_RESOURCE_DESCRIPTOR = hsa.QUEUE_SCRATCH_RESOURCE_DESCRIPTOR
SCRATCH_BACKING_MEMORY_LOCATION = hsa.QUEUE_SCRATCH_BACKING_MEMORY_LOCATION
SIGNAL_VALUE, SIGNAL_MAILBOX, SIGNAL_EVENT_ID, SIGNAL_END_TS = (hsa.SIGNAL_VALUE, hsa.SIGNAL_MAILBOX,
                                                                hsa.SIGNAL_EVENT_ID, hsa.SIGNAL_END_TS)
U64 = np.uint64


def user_sgprs(kd: KernelDescriptor, *, kernarg: int, dispatch_ptr: int, queue_ptr: int, dispatch_id: int,
               scratch_vsharp: tuple[int, int, int, int] = (0, 0, 0, 0), flat_scratch: int = 0,
               kernargs: bytes | None = None) -> tuple[int, ...]:
    """The user SGPRs a dispatch starts with, as the CP firmware loads them (AMDGPUUsage "Initial Kernel Execution
    State"): those kernel_code_properties enables, in order (private segment buffer V#, dispatch ptr, queue ptr,
    kernarg segment ptr, dispatch id, flat scratch init, private segment size), then the kernarg dwords
    kernarg_preload names, taken from `kernargs` (zero past their end). CPError when they pass the
    COMPUTE_USER_DATA registers or the descriptor preloads and no kernarg bytes are given."""
    p, out = kd.code_properties, []

    def put(value: int, ndwords: int) -> None:
        out.extend((value >> (32 * i)) & 0xFFFFFFFF for i in range(ndwords))
    if p.enable_sgpr_private_segment_buffer:
        out.extend(int(w) & 0xFFFFFFFF for w in scratch_vsharp)
    for enabled, value, n in ((p.enable_sgpr_dispatch_ptr, dispatch_ptr, 2), (p.enable_sgpr_queue_ptr, queue_ptr, 2),
                              (p.enable_sgpr_kernarg_segment_ptr, kernarg, 2),
                              (p.enable_sgpr_dispatch_id, dispatch_id, 2),
                              (p.enable_sgpr_flat_scratch_init, flat_scratch, 2),
                              (p.enable_sgpr_private_segment_size, kd.private_segment_fixed_size, 1)):
        if enabled:
            put(value, n)
    pre = kd.kernarg_preload
    if pre.length:
        if kernargs is None:
            raise CPError(f"the kernel preloads {pre.length} kernarg dwords into SGPRs and no kernargs were given")
        words = bytes(kernargs[4 * pre.offset:4 * (pre.offset + pre.length)]).ljust(4 * pre.length, b"\0")
        out.extend(struct.unpack(f"<{pre.length}I", words))
    if len(out) > pm4.NUM_USER_DATA:
        raise CPError(f"{len(out)} user SGPRs (kernel_code_properties {p.value:#06x}, kernarg_preload "
                      f"{pre.value:#06x}) do not fit the {pm4.NUM_USER_DATA} COMPUTE_USER_DATA registers")
    return tuple(out)


def kernel_dispatch(gpu: CountingDevice, addr: int, pkt: bytes, amd_queue: int, index: int, where: str, *,
                    cancel: Cancel | None = None, kernel: fault.Kernel | None = None, timeout: float | None = None,
                    thread_trace: bool = False) -> None:
    """Run the KERNEL_DISPATCH packet `pkt` (at `addr`, packet `index` of the queue whose amd_queue_t is at
    `amd_queue`) as the firmware does: program the compute registers from the packet, the kernel descriptor and the
    queue's scratch, and start the dispatch (emu.amd.compute), in parts when the grid ends in partial workgroups.
    `gpu` counts it (`dispatches`) and is given each part's statistics (`add_stats`); `thread_trace`: the queue's
    COMPUTE_THREAD_TRACE_ENABLE."""
    setup, bx, by, bz, _, gx, gy, gz, _, group, kobj, kernarg = struct.unpack_from("<HHHHHIIIIIQQ", pkt, 2)
    block, grid = (bx, by, bz), (gx, gy, gz)
    if not all(block) or bx * by * bz > 1024 or not 1 <= setup & 3 <= 3:
        raise CPError(f"{where}: workgroup {block}, {setup & 3} dimensions")
    if not all(grid):
        return
    check_work(where, gx * gy * gz, f"(grid_size {grid})", group, "group_segment_size", gpu.chip.arch)
    try:
        kd = KernelDescriptor.parse(gpu.vm.read(kobj, 64), f"kernel descriptor at {kobj:#x}")
    except DescriptorError as e:
        raise CPError(f"{where}: {e}") from None
    q = gpu.vm.read(amd_queue, hsa.QUEUE_BYTES)
    tmpring, = struct.unpack_from("<I", q, COMPUTE_TMPRING_SIZE)
    vsharp = struct.unpack_from("<4I", q, SCRATCH_RESOURCE_DESCRIPTOR)
    scratch, = struct.unpack_from("<Q", q, SCRATCH_BACKING_MEMORY_LOCATION)
    entry = kobj + kd.kernel_code_entry_byte_offset
    pre = kd.kernarg_preload
    kernargs = None
    if pre.length and gpu.chip.kernarg_preload:  # elsewhere the field is reserved
        kernargs = gpu.vm.read(kernarg, 4 * (pre.offset + pre.length))
        entry += PRELOAD_PROLOGUE_BYTES
    elif pre.length:
        kd = dataclasses.replace(kd, kernarg_preload=KernargPreload(0))
    sgprs = user_sgprs(kd, kernarg=kernarg, dispatch_ptr=addr, queue_ptr=amd_queue, dispatch_id=index,
                       scratch_vsharp=vsharp, flat_scratch=scratch, kernargs=kernargs)
    rsrc2 = with_lds(kd.rsrc2, group)
    # whole workgroups, then the partial ones at the far edge of each dimension
    spans = [[(0, g // b, b)] + ([(g // b, 1, g % b)] if g % b else []) for g, b in zip(grid, block, strict=True)]
    try:
        for (sx, nx, wx), (sy, ny, wy), (sz, nz, wz) in itertools.product(*spans):
            if nx and ny and nz:
                regs = ComputeRegisters(entry, kd.rsrc1, rsrc2, sgprs, (wx, wy, wz), kd.wave32, tmpring, scratch,
                                        (sx, sy, sz), thread_trace)
                gpu.add_stats(launch(gpu, regs, (nx, ny, nz), where, dispatch_id=gpu.dispatches, cancel=cancel,
                                     kernel=kernel, timeout=timeout))
    finally:
        gpu.dispatches += 1


def _field(signal: int, offset: int) -> int:
    """The address of a field of the amd_signal_t at `signal`: 64-bit arithmetic, as the packet processor's."""
    return (signal + offset) & 0xFFFF_FFFF_FFFF_FFFF


class AQLQueue(ComputeQueue):
    unit = PACKET_BYTES

    def __init__(self, *args):
        super().__init__(*args)
        self.amd_queue = self.wptr_addr - WRITE_DISPATCH_ID
        self._in_ib: tuple[int, int] | None = None  # (packet address, completion signal) of a running PM4-IB packet

    def rung(self) -> bool:
        """Always: an AQL doorbell carries the index of the packet written, which may repeat (the first is 0), so
        the write pointer in amd_queue_t is looked at each time."""
        super().rung()
        return True

    def turn_limit(self) -> int:
        """One past the packet index the doorbell carries: the write pointer lives in the client's memory, which is
        read only once the turn has revalidated it, so the doorbell bounds the turn (a client writes a packet, then
        write_dispatch_id, then rings with the packet's index)."""
        return int(self.gpu.doorbells[self.doorbell]) + 1

    def read_wptr(self) -> int:
        try:
            return self._u64(self.wptr_addr)
        except GPUFault:
            raise CPError(f"AQL queue {self.id}: its write pointer at {self.wptr_addr:#x} (amd_queue_t "
                          "write_dispatch_id) is not mapped on the GPU") from None

    def step(self) -> bool:
        if self.ibs:
            self._step_ib()
            if not self.ibs and self._in_ib is not None:
                self._finish(*self._in_ib)
                self._in_ib = None
            return True
        addr = self.ring + self.rptr * PACKET_BYTES % self.ring_size
        pkt = self.gpu.vm.read(addr, PACKET_BYTES)
        header, = struct.unpack_from("<H", pkt)
        kind = header & 0xFF
        if kind == TYPE_INVALID:
            raise Wait  # the runtime reserved the slot but has not published the packet yet
        name = PACKET_NAMES.get(kind)
        if name is None:
            raise CPError(f"AQL packet {self.rptr}: type {kind} (header {header:#06x}) is not supported")
        signal = struct.unpack_from("<Q", pkt, hsa.COMPLETION_SIGNAL)[0]
        with timeline.packet(self, name, PACKET_BYTES // 4):  # a barrier's slice spans its retries
            if kind in (TYPE_BARRIER_AND, TYPE_BARRIER_OR) and not self._released(kind, pkt):
                raise Wait  # retried until its dependencies release it
            self.count(name)  # once a packet
            if kind == TYPE_KERNEL_DISPATCH:
                try:
                    self._kernel_dispatch(addr, pkt)
                except GPUFault:
                    self._finish(addr, 0)  # a halted queue resumes after the packet that faulted
                    raise
            elif kind == TYPE_VENDOR_SPECIFIC and struct.unpack_from("<H", pkt, 2)[0] == AMD_AQL_FORMAT_PM4_IB:
                ib = np.frombuffer(pkt[4:20], np.uint32)
                if pm4.HEADER_OPCODE.get(int(ib[0])) != pm4.PACKET3_INDIRECT_BUFFER:
                    raise CPError(f"AQL packet {self.rptr}: the AMD PM4-IB packet holds no INDIRECT_BUFFER")
                self.since_progress = self.ib_entries = 0
                self._run(ib, self.rptr, lambda: None)
                if self.ibs:  # the packet completes when its indirect buffer has run
                    self._in_ib = (addr, signal)
                    return True
            elif kind == TYPE_VENDOR_SPECIFIC:
                raise CPError(f"AQL packet {self.rptr}: vendor-specific format {struct.unpack_from('<H', pkt, 2)[0]} "
                              "(the AMD PM4-IB format 1 is supported)")
            self._finish(addr, signal)
        return True

    def _released(self, kind: int, pkt: bytes) -> bool:
        """Whether a barrier packet's dependent signals are all (AND) / any (OR; none given: released) at 0."""
        deps = [s for s in struct.unpack_from(f"<{hsa.BARRIER_DEP_SIGNALS}Q", pkt, hsa.BARRIER_DEP_SIGNAL) if s]
        done = [self._u64(_field(s, SIGNAL_VALUE)) == 0 for s in deps]
        return all(done) if kind == TYPE_BARRIER_AND else any(done) or not deps

    def _finish(self, addr: int, signal: int) -> None:
        """The packet at `addr` is done: signal its completion, hand the slot back (INVALID), advance."""
        self._complete(signal)
        self.gpu.vm.write(addr, struct.pack("<H", TYPE_INVALID))
        self.rptr += 1

    def _kernel_dispatch(self, addr: int, pkt: bytes) -> None:
        kernel_dispatch(self.gpu, addr, pkt, self.amd_queue, self.rptr, f"AQL dispatch {self.rptr} of queue {self.id}",
                        cancel=self.cancel, thread_trace=self.thread_trace)

    def _complete(self, signal: int) -> None:
        if not signal:
            return
        value = self._u64(_field(signal, SIGNAL_VALUE))
        self.gpu.vm.write(_field(signal, SIGNAL_VALUE), struct.pack("<q", np.int64(np.uint64(value) - U64(1))))
        self.gpu.vm.write(_field(signal, SIGNAL_END_TS), struct.pack("<Q", self.gpu.clock()))
        mailbox = self._u64(_field(signal, SIGNAL_MAILBOX))
        if mailbox:
            event = self._u64(_field(signal, SIGNAL_EVENT_ID)) & 0xFFFFFFFF
            self.gpu.vm.write(mailbox, struct.pack("<Q", event))
            self.gpu.interrupt(event)

    def _u64(self, addr: int) -> int:
        return struct.unpack("<Q", self.gpu.vm.read(addr, 8))[0]
