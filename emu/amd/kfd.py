"""MOCKKFD: the amdkfd driver of the emulated GPUs, as one process sees it through /dev/kfd and the render nodes.

`KFD.ioctl(file, request, arg)` takes the request numbers and argument structs of linux/kfd_ioctl.h
(emu.amd.hw.kfd, from the header itself). As in the kernel, the argument is copied in (`_IOC_SIZE(request)`
bytes, zero-extended to the driver's struct), handled, and copied back; every check comes before any change, so a
failing ioctl changes nothing and raises `OSError(errno)` naming what was wrong: ENOTTY for a request that is not KFD's,
EINVAL for unknown commands and bad ids/handles/flags/sizes/alignment, ENOMEM when memory runs out, EFAULT
for user pointers that are not accessible, EBUSY for state conflicts.

Sizes in ioctl arguments are checked before anything is allocated, and the message names the field:
  ALLOC_MEMORY_OF_GPU size   non-zero; [va, va + size) inside the GPU VA range [GPUVM_BASE, GPUVM_LIMIT] (EINVAL);
                             VRAM / GTT: at most the heap's free bytes (the GPU's VRAM, the system's GTT) and one
                             free range that large (ENOMEM); USERPTR: mapped writable pages of the process (EFAULT);
                             DOORBELL: DOORBELL_SLICE bytes, MMIO_REMAP: one page (EINVAL)
  CREATE_QUEUE ring_size     a power of two >= MIN_QUEUE_RING_SIZE inside one buffer mapped on the GPU (EINVAL);
                             the EOP and context-save areas are not used by the model, their sizes not checked
  WAIT_EVENTS num_events     1 .. SIGNAL_EVENT_LIMIT; MAP/UNMAP_MEMORY n_devices 1 .. 8 x the GPUs (EINVAL)
  mmap sizes                 doorbells DOORBELL_SLICE, the event page EVENT_PAGE_SIZE, a buffer its size (EINVAL)

Memory: ALLOC_MEMORY_OF_GPU takes VRAM and GTT buffers from heaps (emu.amd.bo) and returns the render-node
mmap offset that maps them into the process at their VA; USERPTR buffers are the process's own pages.
MAP_MEMORY_TO_GPU maps a buffer into each listed GPU's VM at its VA (peer GPUs included); until then the GPU
faults on it. Queues are created on the GPU model (emu.amd.device), which rings no bell here: it polls its
doorbells like hardware. Events follow kfd_events.c: signal events own a slot of the event page (written by
RELEASE_MEM / SDMA fence, raised by the interrupt that follows), memory-exception events are signalled by GPU
VM faults with the faulting page, hw-exception events by a CP error.
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from emu.amd.bo import BufferObject, ByVA, Heap, page_round
from emu.amd.drm import GB_ADDR_CONFIG
from emu.amd.hw import kfd as k
from emu.amd.memory import PAGE, FaultRecord
from emu.amd.usermem import accessible, argument_bytes, copy_from_user, copy_to_user, host_array, store_argument

DOORBELL_SLICE = 0x2000  # bytes of doorbells per process and GPU (8-byte doorbells, 1024 queues)
EVENT_PAGE_SIZE = k.SIGNAL_EVENT_LIMIT * 8
DESTROY_WAIT = 30.0  # seconds DESTROY_QUEUE waits for the engine to leave the queue (a dispatch stops in far less)
UNSIGNALED = 0xFFFFFFFFFFFFFFFF  # an event slot nobody has written
FIRST_NONSIGNAL_EVENT_ID = 0x80000000
TIMEOUT_INFINITE = 0xFFFFFFFF
GPUVM_BASE, GPUVM_LIMIT = 0x1_0000, (1 << 47) - 1  # the process's GPU VA range (48-bit, canonical lower half)
RENDER_OFFSET_SHIFT = 40  # render-node mmap offsets: heap index << 40 | offset in the heap
KNOWN_FLAGS = k.ALLOC_PLACEMENT | k.ALLOC_ATTRIBUTES
RUNTIME_ENABLE_MODE_ENABLE = 1  # KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK
QUEUE_KINDS = {k.QUEUE_TYPE_COMPUTE: "pm4", k.QUEUE_TYPE_SDMA: "sdma", k.QUEUE_TYPE_COMPUTE_AQL: "aql",
               k.QUEUE_TYPE_SDMA_XGMI: "sdma"}


def _einval(what: str) -> OSError:
    return OSError(errno.EINVAL, what)


@dataclass(eq=False)
class Event:
    id: int
    type: int
    auto_reset: bool
    slot: int | None = None
    signaled: bool = False
    data: bytes = b""  # memory/hw exception data (the union of kfd_event_data, then kfd_event_data_ext)


@dataclass(eq=False)
class Process:
    """What the driver keeps for the process: VMs acquired, buffers, events, queues."""
    vms: dict[int, int] = field(default_factory=dict)  # gpu_id -> drm fd
    bos: dict[int, BufferObject] = field(default_factory=dict)
    by_va: ByVA = field(default_factory=ByVA)  # the same buffers by VA
    by_mmap: dict[int, BufferObject] = field(default_factory=dict)  # VRAM and GTT buffers by render-node offset
    events: dict[int, Event] = field(default_factory=dict)
    event_page: np.ndarray | None = None  # uint64 slots
    event_page_bo: BufferObject | None = None
    queues: dict[int, tuple[object, object]] = field(default_factory=dict)  # queue_id -> (gpu, queue)
    runtime_enabled: bool = False
    xnack: bool = False
    next_handle: int = 1
    next_queue: int = 0
    reports: list = field(default_factory=list)  # the last fault reports' C strings (kfd_event_data_ext points at one)


REPORTS = 16  # fault reports the driver keeps alive for kfd_event_data_ext


def fault_report(gpu, rec: FaultRecord) -> str:
    """The fault's report, also written to a file (HWEMU_REPORT_DIR, default the temporary directory) whose path
    is printed on stderr (as the kernel logs a VM fault) and ends the text."""
    text = str(rec)
    try:
        fd, path = tempfile.mkstemp(prefix=f"hwemu-fault-{os.getpid()}-", suffix=".txt",
                                    dir=os.environ.get("HWEMU_REPORT_DIR") or None)
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
    except OSError as e:
        return f"{text}\n(the report could not be written: {e})"
    kind = "memory fault" if rec.kind in ("unmapped", "read-only") else rec.kind
    print(f"hwemu: GPU {kind} on {gpu.name}: {rec.line()}; report: {path}", file=sys.stderr)
    return f"{text}\nreport written to {path}"


class KFD:
    """The driver for a set of emulated GPUs (emu.amd.gpu.GPU), one process."""

    def __init__(self, gpus: list, gtt: Heap, lock: threading.RLock):
        self.gpus = {g.gpu_id: g for g in gpus}
        self.gtt = gtt
        self.heaps = [gtt, *(g.vram for g in gpus)]
        self.lock = lock  # held by the GPUs' engines while they run a packet
        self.cond = threading.Condition(lock)  # event waiters
        self.proc = Process()
        self.calls: dict[str, int] = {}
        for g in gpus:
            g.driver = self

    # -- entry points -------------------------------------------------------------------------------------------
    def ioctl(self, request: int, arg, render_fds: dict[int, object]) -> int:
        if k.ioc_type(request) != k.IOCTL_BASE:
            raise OSError(errno.ENOTTY, f"MOCKKFD: request {request:#x} is not a KFD ioctl "
                                        f"(type {k.ioc_type(request):#x})")
        entry = k.IOCTLS.get(k.ioc_nr(request))
        if entry is None:
            raise _einval(f"MOCKKFD: unknown KFD command {k.ioc_nr(request):#x} (request {request:#x})")
        name, direction, struct = entry
        usize = k.ioc_size(request)
        raw = argument_bytes(arg, usize, name)
        if direction & k.IOC_READ:  # the result must be storable before anything happens, as copy_to_user's target
            store_argument(arg, raw, name)
        args = struct.from_buffer_copy(raw[:ctypes.sizeof(struct)].ljust(ctypes.sizeof(struct), b"\0"))
        with self.lock:
            try:
                getattr(self, "_" + name.lower())(args, render_fds)
            except OSError:
                raise
            except Exception as e:  # a driver bug must reach the caller as an errno, never as a crash
                raise OSError(errno.EIO, f"MOCKKFD {name}: internal error {type(e).__name__}: {e}") from e
            self.calls[name] = self.calls.get(name, 0) + 1
        if direction & k.IOC_READ:
            store_argument(arg, (bytes(args) + raw[ctypes.sizeof(struct):])[:usize], name)
        return 0

    def mmap_kfd(self, size: int, offset: int) -> tuple[np.ndarray, object]:
        """The heap an mmap of /dev/kfd at `offset` maps: doorbells, the MMIO remap page or the event page."""
        kind, gid = offset & k.MMAP_TYPE_MASK, (offset >> k.MMAP_GPU_ID_SHIFT) & 0xFFFF
        if kind == k.MMAP_TYPE_DOORBELL:
            g = self._gpu(gid, "mmap")
            if size != DOORBELL_SLICE:
                raise _einval(f"MOCKKFD mmap: doorbells map {DOORBELL_SLICE:#x} bytes, not {size:#x}")
            return g.doorbell_heap
        if kind == k.MMAP_TYPE_MMIO:  # the page of HDP flush registers an MMIO_REMAP allocation names
            g = self._gpu(gid, "mmap")
            if size != PAGE:
                raise _einval(f"MOCKKFD mmap: the MMIO remap page is {PAGE:#x} bytes, not {size:#x}")
            return g.mmio_heap
        if kind == k.MMAP_TYPE_EVENTS:
            if self.proc.event_page_bo is not None or self.proc.event_page is None:
                raise _einval("MOCKKFD mmap: no driver-allocated event page to map")
            if size > EVENT_PAGE_SIZE:
                raise _einval(f"MOCKKFD mmap: the event page is {EVENT_PAGE_SIZE:#x} bytes, not {size:#x}")
            return self._event_heap
        raise _einval(f"MOCKKFD mmap: offset {offset:#x} names no doorbell, MMIO or event page")

    def mmap_render(self, gpu, size: int, offset: int) -> tuple[Heap, int]:
        """(heap, offset in it) that an mmap of `gpu`'s render node at `offset` maps."""
        bo = self.proc.by_mmap.get(offset)
        if bo is None or bo.gpu is not gpu:
            raise _einval(f"MOCKKFD mmap: render node offset {offset:#x} names no buffer of {gpu.name}")
        if size > bo.size:
            raise _einval(f"MOCKKFD mmap: {size:#x} bytes exceed the {bo.size:#x}-byte buffer at offset {offset:#x}")
        return bo.heap, bo.offset

    # -- ioctls ------------------------------------------------------------------------------------------------
    def _get_version(self, a, _):
        a.major_version, a.minor_version = k.KFD_IOCTL_MAJOR_VERSION, k.KFD_IOCTL_MINOR_VERSION

    def _acquire_vm(self, a, render_fds):
        g = self._gpu(a.gpu_id, "ACQUIRE_VM")
        owner = render_fds.get(a.drm_fd)
        if owner is not g:
            raise _einval(f"ACQUIRE_VM: fd {a.drm_fd} is not an open render node of gpu_id {a.gpu_id}")
        bound = self.proc.vms.get(a.gpu_id)
        if bound is not None and bound != a.drm_fd and render_fds.get(bound) is g:  # that render file is still open
            raise OSError(errno.EBUSY, f"ACQUIRE_VM: gpu_id {a.gpu_id} already has a VM from fd "
                                       f"{self.proc.vms[a.gpu_id]}")
        self.proc.vms[a.gpu_id] = a.drm_fd

    def _runtime_enable(self, a, _):
        if not a.mode_mask & RUNTIME_ENABLE_MODE_ENABLE:  # a mode without the enable bit disables
            self.proc.runtime_enabled = False
            return
        if self.proc.runtime_enabled:
            raise OSError(errno.EBUSY, "RUNTIME_ENABLE: the runtime is already enabled")
        self.proc.runtime_enabled = True
        a.capabilities_mask = 0

    def _get_process_apertures(self, a, _):
        for i, g in enumerate(list(self.gpus.values())[:k.NUM_OF_SUPPORTED_GPUS]):
            self._apertures(a.process_apertures[i], g)
        a.num_of_nodes = min(len(self.gpus), k.NUM_OF_SUPPORTED_GPUS)

    def _get_process_apertures_new(self, a, _):
        n = len(self.gpus)
        if a.num_of_nodes == 0:  # a query of how many there are
            a.num_of_nodes = n
            return
        size = ctypes.sizeof(k.ProcessDeviceApertures)
        out = (k.ProcessDeviceApertures * min(n, a.num_of_nodes))()
        for i, g in enumerate(list(self.gpus.values())[:len(out)]):
            self._apertures(out[i], g)
        copy_to_user(a.kfd_process_device_apertures_ptr, bytes(out)[:size * len(out)], "GET_PROCESS_APERTURES_NEW")
        a.num_of_nodes = len(out)

    @staticmethod
    def _apertures(ap, g) -> None:
        from emu.amd.memspace import APERTURE_SIZE, PRIVATE_APERTURE, SHARED_APERTURE
        ap.lds_base, ap.lds_limit = SHARED_APERTURE, SHARED_APERTURE + APERTURE_SIZE - 1
        ap.scratch_base, ap.scratch_limit = PRIVATE_APERTURE, PRIVATE_APERTURE + APERTURE_SIZE - 1
        ap.gpuvm_base, ap.gpuvm_limit, ap.gpu_id = GPUVM_BASE, GPUVM_LIMIT, g.gpu_id

    def _alloc_memory_of_gpu(self, a, _):
        g = self._gpu(a.gpu_id, "ALLOC_MEMORY_OF_GPU")
        self._vm(a.gpu_id, "ALLOC_MEMORY_OF_GPU")
        flags, what = a.flags, f"ALLOC_MEMORY_OF_GPU (va {a.va_addr:#x}, size {a.size:#x}, flags {a.flags:#x})"
        placement = flags & k.ALLOC_PLACEMENT
        if flags & ~KNOWN_FLAGS & 0xFFFFFFFF:
            raise _einval(f"{what}: unknown flag bits {flags & ~KNOWN_FLAGS:#x}")
        if placement not in (k.ALLOC_VRAM, k.ALLOC_GTT, k.ALLOC_USERPTR, k.ALLOC_DOORBELL, k.ALLOC_MMIO_REMAP):
            raise _einval(f"{what}: flags must name exactly one of VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP")
        if a.size == 0 or a.va_addr % PAGE:
            raise _einval(f"{what}: size must be non-zero and va page-aligned")
        size = page_round(a.size)
        if not (GPUVM_BASE <= a.va_addr and a.va_addr + size - 1 <= GPUVM_LIMIT):
            raise _einval(f"{what}: outside the process's GPU VA range [{GPUVM_BASE:#x}, {GPUVM_LIMIT:#x}]")
        if (clash := self._bo_at(a.va_addr, size, g)) is not None:
            raise _einval(f"{what}: overlaps the buffer at {clash.va:#x} ({clash.size:#x} bytes)")
        heap, off, mem, mmap_offset = None, 0, None, 0
        if placement in (k.ALLOC_VRAM, k.ALLOC_GTT):
            heap = g.vram if placement == k.ALLOC_VRAM else self.gtt
            if size > heap.size - heap.used:
                raise OSError(errno.ENOMEM, f"{what}: size {size:#x} exceeds the {heap.size - heap.used:#x} bytes "
                                            f"free in {heap.name} ({heap.size:#x} in all)")
            try:
                off = heap.alloc(size)  # ENOMEM when no free range is that large: nothing changed yet
            except OSError as e:
                raise OSError(e.errno, f"{what}: size {size:#x}: {e.strerror}") from None
            mem = heap.mem[off:off + size]
            mmap_offset = self.heaps.index(heap) << RENDER_OFFSET_SHIFT | off
        elif placement == k.ALLOC_USERPTR:
            ptr = a.mmap_offset
            if ptr % PAGE:
                raise _einval(f"{what}: user pointer {ptr:#x} is not page-aligned")
            if not accessible(ptr, size):
                raise OSError(errno.EFAULT, f"{what}: user memory [{ptr:#x}, {ptr + size:#x}) is not mapped writable")
            mem, mmap_offset = host_array(ptr, size), ptr
        elif placement == k.ALLOC_DOORBELL:
            if size != DOORBELL_SLICE:
                raise _einval(f"{what}: a doorbell allocation is {DOORBELL_SLICE:#x} bytes")
            heap, mem = g.doorbell_heap, g.doorbell_heap.mem
            mmap_offset = k.MMAP_TYPE_DOORBELL | g.gpu_id << k.MMAP_GPU_ID_SHIFT
        else:
            if size != PAGE:
                raise _einval(f"{what}: an MMIO remap allocation is one page")
            heap, mem = g.mmio_heap, g.mmio_heap.mem
            mmap_offset = k.MMAP_TYPE_MMIO | g.gpu_id << k.MMAP_GPU_ID_SHIFT
        handle = a.gpu_id << 32 | self.proc.next_handle
        self.proc.next_handle += 1
        bo = BufferObject(handle, g, a.va_addr, size, flags, mem, heap if placement in (k.ALLOC_VRAM, k.ALLOC_GTT)
                          else None, off, mmap_offset)
        self.proc.bos[handle] = bo
        self.proc.by_va.add(bo)
        if bo.heap is not None:
            self.proc.by_mmap[mmap_offset] = bo
        a.handle, a.mmap_offset = handle, mmap_offset

    def _free_memory_of_gpu(self, a, _):
        bo = self._bo(a.handle, "FREE_MEMORY_OF_GPU")
        if bo.mapped_on:
            raise OSError(errno.EBUSY, f"FREE_MEMORY_OF_GPU: buffer {a.handle:#x} at {bo.va:#x} is still mapped "
                                       f"on {len(bo.mapped_on)} GPU(s)")
        if bo is self.proc.event_page_bo:
            raise OSError(errno.EBUSY, f"FREE_MEMORY_OF_GPU: buffer {a.handle:#x} is the event page")
        del self.proc.bos[a.handle]
        self.proc.by_va.remove(bo)
        if bo.heap is not None:
            del self.proc.by_mmap[bo.mmap_offset]
            bo.heap.release(bo.offset, bo.size)

    def _map_memory_to_gpu(self, a, _, unmap: bool = False):
        name = "UNMAP_MEMORY_FROM_GPU" if unmap else "MAP_MEMORY_TO_GPU"
        bo = self._bo(a.handle, name)
        if a.n_devices == 0 or a.n_success > a.n_devices or a.n_devices > len(self.gpus) * 8:
            raise _einval(f"{name}: n_devices {a.n_devices}, n_success {a.n_success}")
        ids = np.frombuffer(copy_from_user(a.device_ids_array_ptr, 4 * a.n_devices, name), np.uint32)
        gpus = [self._gpu(int(i), name) for i in ids[a.n_success:]]
        for g in gpus:
            self._vm(g.gpu_id, name)
            clash = self._bo_at(bo.va, bo.size, g)
            if not unmap and g not in bo.mapped_on and clash is not None and clash is not bo:
                raise _einval(f"{name}: [{bo.va:#x}, {bo.end:#x}) overlaps the buffer {clash.handle:#x} in the VM of "
                              f"gpu_id {g.gpu_id}")
        for g in gpus:
            if unmap and g in bo.mapped_on:
                g.unmap(bo)
                bo.mapped_on.discard(g)
            elif not unmap and g not in bo.mapped_on:
                g.map(bo)
                bo.mapped_on.add(g)
        a.n_success = a.n_devices

    def _unmap_memory_from_gpu(self, a, fds):
        self._map_memory_to_gpu(a, fds, unmap=True)

    def _create_queue(self, a, _):
        g = self._gpu(a.gpu_id, "CREATE_QUEUE")
        what = f"CREATE_QUEUE (type {a.queue_type}, ring {a.ring_base_address:#x}+{a.ring_size:#x})"
        if a.queue_type not in QUEUE_KINDS:
            raise _einval(f"{what}: unknown queue type {a.queue_type} (compute 0, SDMA 1, compute AQL 2, SDMA XGMI 3)")
        if a.queue_percentage & 0xFF > k.MAX_QUEUE_PERCENTAGE or a.queue_priority > k.MAX_QUEUE_PRIORITY:
            raise _einval(f"{what}: percentage {a.queue_percentage & 0xFF} / priority {a.queue_priority} out of range")
        if a.ring_size < k.MIN_QUEUE_RING_SIZE or a.ring_size & (a.ring_size - 1):
            raise _einval(f"{what}: ring size must be a power of two >= {k.MIN_QUEUE_RING_SIZE}")
        if a.ring_base_address % 256:
            raise _einval(f"{what}: ring base must be 256-byte aligned")
        bo = self._bo_at(a.ring_base_address, a.ring_size, g)
        if bo is None or g not in bo.mapped_on or not (bo.va <= a.ring_base_address
                                                         and a.ring_base_address + a.ring_size <= bo.end):
            raise _einval(f"{what}: the ring is not inside one buffer mapped on gpu_id {a.gpu_id}")
        for p, n in ((a.read_pointer_address, "read"), (a.write_pointer_address, "write")):
            if p % 8 or self._bo_at(p, 8, g) is None:
                raise OSError(errno.EFAULT, f"{what}: {n} pointer {p:#x} is not an aligned address in a buffer")
        qid = self.proc.next_queue
        q = g.create_queue(qid, QUEUE_KINDS[a.queue_type], a.ring_base_address, a.ring_size, a.read_pointer_address,
                           a.write_pointer_address)
        self.proc.next_queue += 1
        self.proc.queues[qid] = (g, q)
        a.queue_id = qid
        a.doorbell_offset = k.MMAP_TYPE_DOORBELL | g.gpu_id << k.MMAP_GPU_ID_SHIFT | q.doorbell * 8

    def _destroy_queue(self, a, _):
        if a.queue_id not in self.proc.queues:
            raise _einval(f"DESTROY_QUEUE: no queue {a.queue_id}")
        g, q = self.proc.queues.pop(a.queue_id)
        g.destroy_queue(q)
        end = time.monotonic() + DESTROY_WAIT
        while q.serving and time.monotonic() < end:  # as amdkfd waits for the preemption: nothing of the queue
            self.cond.wait(0.0005)  # runs after DESTROY_QUEUE returns (the lock is released while waiting)

    def _update_queue(self, a, _):
        if a.queue_id not in self.proc.queues:
            raise _einval(f"UPDATE_QUEUE: no queue {a.queue_id}")
        if a.queue_percentage & 0xFF > k.MAX_QUEUE_PERCENTAGE or a.queue_priority > k.MAX_QUEUE_PRIORITY:
            raise _einval("UPDATE_QUEUE: percentage or priority out of range")

    def _set_memory_policy(self, a, _):
        self._gpu(a.gpu_id, "SET_MEMORY_POLICY")
        if a.default_policy > 1 or a.alternate_policy > 1:
            raise _einval(f"SET_MEMORY_POLICY: policies {a.default_policy}/{a.alternate_policy} (0 coherent, "
                          "1 non-coherent)")

    def _get_clock_counters(self, a, _):
        g = self.gpus.get(a.gpu_id)  # a node without a GPU (the CPU's) reads 0, as amdkfd answers it
        a.gpu_clock_counter = g.clock() if g is not None else 0
        a.cpu_clock_counter = a.system_clock_counter = time.monotonic_ns()
        a.system_clock_freq = 1_000_000_000

    def _get_tile_config(self, a, _):
        self._gpu(a.gpu_id, "GET_TILE_CONFIG")
        a.num_tile_configs = a.num_macro_tile_configs = 0  # gfx9 and later have no tiling tables
        a.gb_addr_config, a.num_banks, a.num_ranks = GB_ADDR_CONFIG, 0, 0

    def _set_scratch_backing_va(self, a, _):
        self._gpu(a.gpu_id, "SET_SCRATCH_BACKING_VA")

    def _set_trap_handler(self, a, _):
        self._gpu(a.gpu_id, "SET_TRAP_HANDLER")

    def _set_xnack_mode(self, a, _):
        if a.xnack_enabled < 0:
            a.xnack_enabled = int(self.proc.xnack)
            return
        if self.proc.queues:
            raise OSError(errno.EBUSY, "SET_XNACK_MODE: the process has queues")
        if a.xnack_enabled and not all(g.chip.xnack for g in self.gpus.values()):
            raise OSError(errno.EPERM, "SET_XNACK_MODE: XNACK (recoverable page faults) needs gfx9 GPUs")
        self.proc.xnack = bool(a.xnack_enabled)

    def _available_memory(self, a, _):
        g = self._gpu(a.gpu_id, "AVAILABLE_MEMORY")
        a.available = g.vram.size - g.vram.used

    # -- events ------------------------------------------------------------------------------------------------
    def _create_event(self, a, _):
        p = self.proc
        if a.event_type not in (k.EVENT_SIGNAL, k.EVENT_NODECHANGE, k.EVENT_DEVICESTATECHANGE, k.EVENT_HW_EXCEPTION,
                                k.EVENT_SYSTEM_EVENT, k.EVENT_DEBUG_EVENT, k.EVENT_PROFILE_EVENT,
                                k.EVENT_QUEUE_EVENT, k.EVENT_MEMORY):
            raise _einval(f"CREATE_EVENT: unknown event type {a.event_type}")
        page_bo = None
        if p.event_page is None and a.event_page_offset:
            page_bo = self._bo(a.event_page_offset, "CREATE_EVENT (event page)")
            if page_bo.size < EVENT_PAGE_SIZE or page_bo.heap is None:
                raise _einval(f"CREATE_EVENT: event page buffer {a.event_page_offset:#x} must be VRAM/GTT of at "
                              f"least {EVENT_PAGE_SIZE:#x} bytes")
        if a.event_type in (k.EVENT_SIGNAL, k.EVENT_DEBUG_EVENT):
            used = {e.slot for e in p.events.values() if e.slot is not None}
            free = next((i for i in range(k.SIGNAL_EVENT_LIMIT) if i not in used), None)
            if free is None:
                raise OSError(errno.ENOSPC, f"CREATE_EVENT: all {k.SIGNAL_EVENT_LIMIT} signal slots are in use")
            if p.event_page is None:
                if page_bo is not None:
                    p.event_page_bo, mem = page_bo, page_bo.mem
                else:
                    self._event_heap = (h := Heap("events", EVENT_PAGE_SIZE))
                    mem = h.mem
                    a.event_page_offset = k.MMAP_TYPE_EVENTS
                p.event_page = mem[:EVENT_PAGE_SIZE].view(np.uint64)
                p.event_page[:] = UNSIGNALED
            ev = Event(free, a.event_type, bool(a.auto_reset), slot=free)
            p.event_page[free] = UNSIGNALED
            a.event_trigger_data, a.event_slot_index = free, free
        else:
            eid = max([FIRST_NONSIGNAL_EVENT_ID - 1, *p.events]) + 1
            ev = Event(eid, a.event_type, bool(a.auto_reset))
        p.events[ev.id] = ev
        a.event_id = ev.id

    def _destroy_event(self, a, _):
        self._event(a.event_id, "DESTROY_EVENT")
        del self.proc.events[a.event_id]

    def _set_event(self, a, _):
        ev = self._event(a.event_id, "SET_EVENT")
        if ev.type != k.EVENT_SIGNAL:
            raise _einval(f"SET_EVENT: event {a.event_id} is not a signal event")
        self._signal(ev)

    def _reset_event(self, a, _):
        self._event(a.event_id, "RESET_EVENT").signaled = False

    def _wait_events(self, a, _):
        if a.num_events == 0 or a.num_events > k.SIGNAL_EVENT_LIMIT:
            raise _einval(f"WAIT_EVENTS: num_events {a.num_events}")
        size = ctypes.sizeof(k.EventData)
        raw = copy_from_user(a.events_ptr, size * a.num_events, "WAIT_EVENTS")
        data = (k.EventData * a.num_events).from_buffer_copy(raw)
        evs = [self._event(d.event_id, "WAIT_EVENTS") for d in data]
        # the event data goes back there after the wait, which may reset auto-reset events: the array must be
        # writable first (the same bytes written back change nothing)
        copy_to_user(a.events_ptr, raw, "WAIT_EVENTS (events_ptr: the event data is returned there)")
        deadline = None if a.timeout == TIMEOUT_INFINITE else time.monotonic() + a.timeout / 1000

        def done() -> bool:
            hits = [e.signaled for e in evs]
            return all(hits) if a.wait_for_all else any(hits)
        for g in self.gpus.values():
            g.kick()
        while not done():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            self.cond.wait(left)
        complete = done()
        reported = any(e.type in (k.EVENT_MEMORY, k.EVENT_HW_EXCEPTION) and e.signaled for e in evs)
        for d, e in zip(data, evs, strict=True):
            if e.signaled and e.data:
                ctypes.memmove(ctypes.addressof(d), e.data, len(e.data))
            if complete and e.signaled and e.auto_reset:
                e.signaled = False
        copy_to_user(a.events_ptr, bytes(data), "WAIT_EVENTS")
        a.wait_result = k.WAIT_COMPLETE if complete else k.WAIT_TIMEOUT
        if reported:  # the process has been told of the fault: halted queues go on (auto-reset or not)
            for g in self.gpus.values():
                g.fault_reported()

    # -- from the GPUs -----------------------------------------------------------------------------------------
    def interrupt(self, ctxid: int, source: str = "") -> None:
        """An end-of-pipe / SDMA trap interrupt (either `source`) with a context id: signal that event, or scan the
        slots."""
        with self.cond:
            p = self.proc
            ev = p.events.get(ctxid)
            if ev is not None and ev.slot is not None:
                self._acknowledge(ev)
                return
            if p.event_page is None:
                return
            for e in list(p.events.values()):
                if e.slot is not None and p.event_page[e.slot] != UNSIGNALED:
                    self._acknowledge(e)

    def memory_fault(self, gpu, rec: FaultRecord) -> None:
        addr = rec.addresses[0] if rec.addresses else 0
        d = k.MemoryExceptionData()
        d.va, d.gpu_id = addr // PAGE * PAGE, gpu.gpu_id
        d.failure.NotPresent, d.failure.ReadOnly = int(rec.kind != "read-only"), int(rec.kind == "read-only")
        d.ErrorType = k.MEM_ERR_NO_RAS
        text = ctypes.create_string_buffer(fault_report(gpu, rec).encode())
        with self.cond:
            self.proc.reports = self.proc.reports[-(REPORTS - 1):] + [text]
        # kfd_event_data_ext (the driver's extension pointer, 0 on Linux) -> the report as a NUL-terminated string
        self._exception(k.EVENT_MEMORY, bytes(d) + ctypes.addressof(text).to_bytes(8, "little"))

    def hw_exception(self, gpu, rec: FaultRecord | None = None) -> None:
        """A hardware exception event; a wave's fault `rec` (the watchdog, an illegal instruction, ...) is also
        reported on stderr and in a report file (fault_report), as the event carries no text."""
        if rec is not None:
            fault_report(gpu, rec)
        d = k.HwExceptionData(k.HW_EXCEPTION_PER_ENGINE_RESET, k.HW_EXCEPTION_GPU_HANG, 0, gpu.gpu_id)
        self._exception(k.EVENT_HW_EXCEPTION, bytes(d))

    def _exception(self, etype: int, data: bytes) -> None:
        with self.cond:
            for e in self.proc.events.values():
                if e.type == etype:
                    e.data = data
                    self._signal(e)

    def _acknowledge(self, ev: Event) -> None:
        self.proc.event_page[ev.slot] = UNSIGNALED
        self._signal(ev)

    def _signal(self, ev: Event) -> None:
        ev.signaled = True
        self.cond.notify_all()

    # -- lookups -----------------------------------------------------------------------------------------------
    def _gpu(self, gpu_id: int, what: str):
        g = self.gpus.get(gpu_id)
        if g is None:
            raise _einval(f"{what}: no GPU with gpu_id {gpu_id} (have {', '.join(map(str, self.gpus))})")
        return g

    def _vm(self, gpu_id: int, what: str) -> None:
        if gpu_id not in self.proc.vms:
            raise _einval(f"{what}: gpu_id {gpu_id} has no VM yet (ACQUIRE_VM first)")

    def _bo(self, handle: int, what: str) -> BufferObject:
        bo = self.proc.bos.get(handle)
        if bo is None:
            raise _einval(f"{what}: no buffer with handle {handle:#x}")
        return bo

    def _bo_at(self, va: int, size: int, gpu) -> BufferObject | None:
        """A buffer in `gpu`'s VM (allocated on it or mapped into it) overlapping [va, va+size). Each GPU has a VM
        of its own: buffers of different GPUs may share VAs (a host buffer mapped to several GPUs, say)."""
        return next((b for b in self.proc.by_va.overlapping(va, size) if b.gpu is gpu or gpu in b.mapped_on), None)

    def _event(self, eid: int, what: str) -> Event:
        ev = self.proc.events.get(eid)
        if ev is None:
            raise _einval(f"{what}: no event {eid}")
        return ev
