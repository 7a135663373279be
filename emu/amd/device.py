"""One emulated GPU behind MOCKKFD: its VRAM, GPU VM, doorbells, queues and engines.

The driver (emu.amd.kfd; under MOCKPCI the PCI function's interrupt handler, emu.pci_mock.ih) maps buffers into the
VM (MOCKPCI: the GFX hub's page tables, emu.pci_mock.vmhub), creates queues on it and receives its interrupts and
faults.
Queues are run by the system's engine thread (emu.amd.queue.Engine); their dispatches decode code through the
GPU's instruction cache (emu.amd.icache).
"""
from __future__ import annotations

import errno
import sys
import time

import numpy as np

from emu.amd import kernel_stats, topology
from emu.amd.aql import AQLQueue
from emu.amd.bo import BufferObject, Heap
from emu.amd.cp import ComputeQueue
from emu.amd.dispatch import Stats
from emu.amd.grbm import GfxIndex
from emu.amd.icache import InstructionCache
from emu.amd.memory import PAGE, VM, FaultRecord
from emu.amd.perfmon import PerfMonitor
from emu.amd.queue import HALTED, RUNNING, Queue
from emu.amd.sdma import SDMAQueue
from emu.amd.sqtt import ThreadTrace
from emu.amd.usermem import inaccessible

DOORBELLS = 1024
QUEUE_CLASSES = {"pm4": ComputeQueue, "aql": AQLQueue, "sdma": SDMAQueue}


class GPUDevice:
    def __init__(self, arch: str, node: int, render_minor: int, engine, doorbells: np.ndarray | None = None):
        """`doorbells`: the uint64 doorbell memory the queues' write pointers are read from (default: the device's
        own page of DOORBELLS, which the KFD maps for clients)."""
        self.chip = topology.chip(arch)
        self.arch, self.family, self.gfx = self.chip.arch, self.chip.isa, self.chip.gen.gfx
        self.node, self.render_minor, self.engine = node, render_minor, engine
        self.gpu_id = topology.gpu_id(self.chip, node)
        self.name = f"{self.arch} (node {node}, gpu_id {self.gpu_id})"
        self.vm = VM()
        self.vram = Heap(f"vram{node}", self.chip.vram)
        self.doorbell_heap = Heap(f"doorbells{node}", DOORBELLS * 8)
        self.doorbells = self.doorbell_heap.mem.view(np.uint64) if doorbells is None else doorbells
        self.mmio_heap = Heap(f"mmio{node}", PAGE)
        self.queues: dict[int, Queue] = {}
        self.driver = None  # the driver (emu.amd.kfd.KFD, emu.pci_mock.ih.InterruptHandler), set when it takes the GPU
        self.faults: list[FaultRecord] = []
        self.stats: dict[str, int] = {}
        self.kernel_stats: dict[str, kernel_stats.KernelStats] = {}  # kernel name -> its dispatches (HWEMU_STATS)
        self.dispatches = 0
        self._validated: tuple = ()  # (engine kicks, doorbells) when revalidate last queried the USERPTR mappings
        self._validated_user: tuple = ()  # and those mappings
        self.code = InstructionCache(self.vm, self.arch)
        self.grbm = GfxIndex(self.chip)  # GRBM_GFX_INDEX, which the units below select their instances by
        self.sqtt = ThreadTrace(self.chip, self.vm, lambda rec: self.fault(None, rec), self.grbm) \
            if self.chip.gen.sqtt_layout else None
        self.perfmon = PerfMonitor(self.chip, self.grbm) if self.chip.gen.sqtt_layout else None

    # -- memory ------------------------------------------------------------------------------------------------
    def map(self, bo: BufferObject) -> None:
        from emu.amd.hw.kfd import ALLOC_USERPTR, ALLOC_WRITABLE
        self.vm.map(bo.va, bo.mem, writable=bool(bo.flags & ALLOC_WRITABLE), name=f"bo {bo.handle:#x}",
                    user=bool(bo.flags & ALLOC_USERPTR))

    def unmap(self, bo: BufferObject) -> None:
        self.code.forget(self.vm.unmap(bo.va))

    def revalidate(self) -> bool:
        """Before the engine touches memory (each turn of a queue with work): a USERPTR buffer whose pages the
        client unmapped or protected (no longer readable, or writable when the buffer is) is taken out of the VM, so
        the GPU faults on it instead of touching a stale view of the host address (the driver's MMU-notifier
        invalidation; the buffer stays invalid until it is unmapped from the GPU and mapped again). A query per
        USERPTR mapping (emu.amd.usermem.inaccessible), made when the client may have unmapped pages since the last
        one and then rung a doorbell or kicked the engine (a submission or a wait): work it submitted after unmapping
        never touches the pages. (Pages unmapped while work submitted before still uses them are the client's
        use-after-free, as on the hardware.) True if a mapping was invalidated."""
        user = self.vm.user
        if not user:
            return False
        queues = list(self.queues.values())  # a copy: the client adds and removes queues meanwhile
        kicks, bells = self.engine.doorbells.kicks, tuple(int(self.doorbells[q.doorbell]) for q in queues)
        if self._validated == (kicks, bells) and self._validated_user is user:
            return False
        gone = [user[i] for i in inaccessible([(m.host, m.size, m.writable) for m in user])]
        for m in gone:
            self.vm.invalidate(m)
            self.code.forget(m)
        self._validated, self._validated_user = (kicks, bells), self.vm.user
        return bool(gone)

    # -- queues ------------------------------------------------------------------------------------------------
    def create_queue(self, qid: int, kind: str, ring: int, ring_size: int, rptr: int, wptr: int,
                     doorbell: int | None = None, start: int = 0) -> Queue:
        """A queue on doorbell slot `doorbell` (default: a free one) whose write pointer starts at `start`."""
        used = {q.doorbell for q in self.queues.values()}
        slot = next((i for i in range(DOORBELLS) if i not in used), None) if doorbell is None else doorbell
        if slot is None:
            raise OSError(errno.ENOSPC, f"CREATE_QUEUE: all {DOORBELLS} doorbells of {self.name} are in use")
        self.doorbells[slot] = start
        q = QUEUE_CLASSES[kind](self, qid, slot, ring, ring_size, rptr, wptr)
        self.queues[qid] = q
        if kind != "sdma":
            self.engine.compute_queue(self.chip.gen.wave_size)
        self.engine.kick()
        return q

    def destroy_queue(self, q: Queue) -> None:
        """The queue runs no more packets and its dispatch in flight stops at its next watchdog check; the caller
        waits for `q.serving` to clear before the queue's memory may be reused."""
        q.cancel.why = f"queue {q.id} was destroyed while this dispatch ran (DESTROY_QUEUE preempts it)"
        del self.queues[q.id]

    def kick(self) -> None:
        self.engine.kick()

    # -- events to the driver ------------------------------------------------------------------------------------
    def interrupt(self, ctxid: int, source: str = "CP_EOP_INTERRUPT") -> None:
        """An interrupt with a context id from `source` (the vendor's source name: CP_EOP_INTERRUPT, SDMA_TRAP)."""
        self.driver.interrupt(ctxid, source)

    def inject_fault(self, addr: int, write: bool = False) -> FaultRecord:
        """Fault injection: a GPU VM fault at `addr` raised now, as if an engine's access there had missed the page
        tables, recorded and delivered to the driver like any other (a memory-exception event naming its page)."""
        if not 0 <= addr < 1 << 64:
            raise OSError(errno.EINVAL, f"{self.name}: fault injection address {addr:#x} is not a 64-bit address")
        rec = FaultRecord("unmapped", (addr,), (0,), 32, write, detail="injected by hwemu's fault injection")
        self.fault(None, rec)
        return rec

    def fault(self, q: Queue | None, rec: FaultRecord) -> None:
        self.faults.append(rec)
        if rec.kind in ("unmapped", "read-only"):
            self.driver.memory_fault(self, rec)
        else:  # a hang (the watchdog), an illegal instruction, a trap: the hardware reports a hang of the queue
            self.driver.hw_exception(self, rec)

    def cp_error(self, q: Queue, why: str) -> None:
        self.faults.append(FaultRecord("cp-error", detail=f"queue {q.id}: {why}"))
        print(f"hwemu: CP error on {self.name}: queue {q.id}: {why}", file=sys.stderr)  # the event carries no text
        self.driver.hw_exception(self)

    def fault_reported(self) -> None:
        """The driver delivered the fault to the process: halted queues resume after the packet that faulted."""
        for q in list(self.queues.values()):
            if q.state == HALTED:
                q.state, q.again = RUNNING, True
        self.engine.kick()

    # -- clocks and counters -------------------------------------------------------------------------------------
    @staticmethod
    def clock() -> int:
        """The GPU's 100 MHz reference counter."""
        return time.perf_counter_ns() // 10

    def add_stats(self, s: Stats) -> None:
        for k in ("waves", "wave_instructions", "lane_instructions"):
            self.stats[k] = self.stats.get(k, 0) + getattr(s, k)
        if s.kernel:
            kernel_stats.add(self.kernel_stats, s)

