"""User-mode queues: a ring buffer in GPU-visible memory, read/write pointers, a doorbell.

Submitting is plain memory stores: packets into the ring, the new write pointer into the queue's pointer page, the
same value into the doorbell. A PM4 compute queue counts dwords, an SDMA queue bytes (and a packet never straddles
the ring's end: the tail is padded with NOPs). The compute queue also needs an end-of-pipe buffer and a
context-save area (CWSR) sized as amdkfd sizes it for the node (kfd_queue_ctx_save_restore_size).
"""
from __future__ import annotations

import ctypes
import time
from collections import Counter

from stack.hcq import kfd_ioctl as k
from stack.hcq import pm4, sdma
from stack.hcq.fileio import MAP_SHARED, PROT_READ, PROT_WRITE
from stack.hcq.kfd import Kfd, Node
from stack.hcq.memory import GTT_PUBLIC, PAGE, VRAM, Memory
from stack.hcq.signal import GPUError

RING_BYTES = 1 << 20
POINTERS_BYTES = 0x100  # the queue's amd_queue_t-like page
WPTR_OFFSET, RPTR_OFFSET = 56, 128  # write_dispatch_id / read_dispatch_id in amd_queue_t
DOORBELL_PAGE = 0x2000  # doorbells of one process on one GPU
QUEUE_PERCENTAGE, QUEUE_PRIORITY = 100, 7
RING_FULL_TIMEOUT = 60.0  # seconds to wait for the engine to free ring space

# amdkfd's context-save sizing (kfd_queue.c)
SGPR_SIZE_PER_CU, HWREG_SIZE_PER_CU = 0x4000, 0x1000
CONTEXT_SAVE_HEADER_BYTES = 40
DEBUGGER_BYTES_PER_WAVE, DEBUGGER_BYTES_ALIGN = 32, 64
GFX_VERSION_NAVI10 = 100100


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def vgpr_size_per_cu(gfx_target_version: int) -> int:
    if gfx_target_version in (90402, 90010, 90008, 90500):
        return 0x80000
    if gfx_target_version in (110000, 110001, 120000, 120001):
        return 0x60000
    return 0x40000


def cwsr_sizes(node: Node) -> tuple[int, int, int]:
    """(ctl_stack_size, ctx_save_restore_size, debug_memory_size) per XCC, as amdkfd computes them."""
    p, gfxv = node.props, node.props["gfx_target_version"]
    cu = node.cu_count
    waves = min(cu * 40, p["array_count"] // p["simd_arrays_per_engine"] * 512) if gfxv < GFX_VERSION_NAVI10 \
        else cu * 32
    wg_data = _align(cu * (vgpr_size_per_cu(gfxv) + SGPR_SIZE_PER_CU + (p["lds_size_in_kb"] << 10)
                           + HWREG_SIZE_PER_CU), PAGE)
    ctl = _align(CONTEXT_SAVE_HEADER_BYTES + waves * (12 if gfxv >= GFX_VERSION_NAVI10 else 8) + 8, PAGE)
    if gfxv // 10000 * 10000 == 100000:
        ctl = min(ctl, 0x7000)  # gfx10 hardware limit
    return ctl, ctl + wg_data, _align(waves * DEBUGGER_BYTES_PER_WAVE, DEBUGGER_BYTES_ALIGN)


def eop_buffer_size(node: Node) -> int:
    return 4096 if node.props["gfx_target_version"] // 100 * 100 == 90400 else 2048


PM4_NAMES = {v: n.removeprefix("PACKET3_") for n, v in vars(pm4).items()
             if n.startswith("PACKET3_") and isinstance(v, int) and not n.endswith(("_START", "_END"))}
SDMA_NAMES = {v: n.removeprefix("SDMA_OP_") for n, v in vars(sdma).items() if n.startswith("SDMA_OP_")}


class Queue:
    """One KFD user-mode queue of `queue_type` on a GPU."""

    def __init__(self, kfd: Kfd, memory: Memory, node: Node, doorbells: Doorbells, queue_type: int,
                 ring_bytes: int = RING_BYTES):
        self.kfd, self.sdma, self.ring_bytes = kfd, queue_type == k.QUEUE_TYPE_SDMA, ring_bytes
        self.unit = 1 if self.sdma else 4  # bytes per write-pointer step
        self.ring = memory.alloc(ring_bytes, GTT_PUBLIC)
        self.pointers = memory.alloc(POINTERS_BYTES, GTT_PUBLIC)
        args = k.CreateQueue(ring_base_address=self.ring.va, ring_size=ring_bytes, gpu_id=node.gpu_id,
                             queue_type=queue_type, queue_percentage=QUEUE_PERCENTAGE, queue_priority=QUEUE_PRIORITY,
                             write_pointer_address=self.pointers.va + WPTR_OFFSET,
                             read_pointer_address=self.pointers.va + RPTR_OFFSET)
        self.save_areas: list = []  # end-of-pipe buffer and context-save area (compute queues)
        if not self.sdma:
            ctl, ctx, debug = cwsr_sizes(node)
            eop = memory.alloc(PAGE, VRAM)
            cwsr = memory.alloc((ctx + debug) * node.xccs, VRAM)
            self.save_areas = [eop, cwsr]
            args.eop_buffer_address, args.eop_buffer_size = eop.va, eop_buffer_size(node)
            args.ctx_save_restore_address, args.ctx_save_restore_size, args.ctl_stack_size = cwsr.va, ctx, ctl
        kfd.ioctl("CREATE_QUEUE", args)
        self.queue_id = args.queue_id
        self.words = self.ring.view(ctypes.c_uint32)
        self.wptr = ctypes.c_uint64.from_address(args.write_pointer_address)
        self.rptr = ctypes.c_uint64.from_address(args.read_pointer_address)
        self.doorbell = doorbells.slot(args.doorbell_offset)
        self.put = 0  # write pointer, in `unit`s, never wrapped
        self.packets: Counter[str] = Counter()

    def submit(self, packets: list[list[int]]) -> None:
        """Append the packets to the ring and ring the doorbell."""
        dwords: list[int] = []
        ring_dwords = self.ring_bytes // 4
        for p in packets:
            self.packets[SDMA_NAMES.get(sdma.HEADER_OP.get(p[0]), "?") if self.sdma else
                         PM4_NAMES.get(pm4.HEADER_OPCODE.get(p[0]), "?")] += 1
            at = (self.put * self.unit // 4 + len(dwords)) % ring_dwords
            if self.sdma and at + len(p) > ring_dwords:  # SDMA packets never wrap: pad to the end
                dwords += sdma.nops(ring_dwords - at)
            dwords += p
        self._reserve(len(dwords))
        at = self.put * self.unit // 4 % ring_dwords
        first = min(len(dwords), ring_dwords - at)
        self.words[at:at + first] = dwords[:first]
        self.words[:len(dwords) - first] = dwords[first:]
        self.put += len(dwords) * 4 // self.unit
        self.wptr.value = self.put
        self.doorbell.value = self.put

    def destroy(self) -> None:
        self.kfd.ioctl("DESTROY_QUEUE", k.DestroyQueue(queue_id=self.queue_id))

    def _reserve(self, ndwords: int) -> None:
        if ndwords * 4 > self.ring_bytes:
            raise ValueError(f"{ndwords} dwords do not fit a {self.ring_bytes:#x}-byte ring")
        start = time.monotonic()
        while (self.put - self.rptr.value) * self.unit + ndwords * 4 > self.ring_bytes:
            if time.monotonic() - start > RING_FULL_TIMEOUT:
                raise GPUError(f"queue {self.queue_id}: the ring stayed full for {RING_FULL_TIMEOUT} s "
                               f"(read pointer {self.rptr.value}, write pointer {self.put})")
            time.sleep(0.0005)


class Doorbells:
    """The process's doorbell page of one GPU: /dev/kfd mmapped at the queue's doorbell offset (page part)."""

    def __init__(self, kfd: Kfd):
        self.kfd, self.base, self.va = kfd, None, 0

    def slot(self, doorbell_offset: int) -> ctypes.c_uint64:
        base = doorbell_offset & ~(DOORBELL_PAGE - 1)
        if self.base is None:
            self.va = self.kfd.file.mmap(0, DOORBELL_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, base)
            self.base = base
        elif base != self.base:
            raise OSError(f"doorbell offset {doorbell_offset:#x} is outside this GPU's doorbell page {self.base:#x}")
        return ctypes.c_uint64.from_address(self.va + doorbell_offset - base)

    def unmap(self) -> None:
        if self.base is not None:
            self.kfd.io.munmap(self.va, DOORBELL_PAGE)
            self.base = None

