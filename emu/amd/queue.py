"""Hardware queues and the engine that runs them.

A queue is a ring buffer in GPU memory with a read pointer the engine advances (and writes back to the client's
read-pointer address) and a write pointer the client publishes by storing it to the queue's doorbell, a plain
memory store, as on hardware. The `Engine` thread runs what the queues hold and, when they are idle, waits for a
doorbell to move (emu.amd.doorbell, without the GIL), so the device works asynchronously: nothing in the client is
patched or called back. The driver kicks it when a client starts waiting.

A queue's command processor (emu.amd.cp for PM4, emu.amd.sdma for SDMA) implements `step()`: run the packet
at the read pointer, returning whether it ran or must wait (WAIT_REG_MEM / POLL_REGMEM not yet true). A fault
of the GPU code or of the engine's own memory accesses halts the queue and is reported to the driver; a
malformed packet, a size beyond a limit or a queue whose own state is unusable (an AQL write pointer the GPU
cannot read) stops the queue for good (a CP error, reported as a hardware exception). Whatever one queue
raises stops that queue only: the engine thread goes on with the others.
"""
from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

from emu.amd.doorbell import Doorbells
from emu.amd.exec import threaded
from emu.amd.exec.wave import Cancel
from emu.amd.limits import LimitError
from emu.amd.memory import GPUFault

RUNNING, HALTED, STOPPED = "running", "halted", "stopped"
PACKETS_PER_TURN = 256  # packets a queue runs before the engine turns to the next queue
WATCHDOG_PACKETS = 1 << 20  # packets run without the read pointer moving (an indirect-buffer loop)
POLL = (0.00002, 0.001)  # seconds the idle engine waits before it looks at a waiting queue again: first, at most
IDLE_WAIT = 0.25  # seconds of one wait for a doorbell when no queue waits on memory (a rung doorbell's work
# starts within it when no client waits for it: Engine.ring; each wakeup of the idle engine costs a thread switch)
BUSY_WAIT = 0.05  # seconds a client waiting for a word the engine's work stores sleeps at most while it works
SWITCH_INTERVAL = 0.0002  # seconds: the interpreter's thread switch interval while a mock device runs
# packets (as Queue.count names them) that store nothing a client could be waiting to see: a client that waits for
# the engine's progress (Engine.wait_progress) is not woken for them
QUIET = frozenset({"NOP", "SET_SH_REG", "SET_UCONFIG_REG", "ACQUIRE_MEM", "EVENT_WRITE", "WAIT_REG_MEM",
                   "INDIRECT_BUFFER", "PRED_EXEC", "SDMA_NOP", "SDMA_INDIRECT", "SDMA_POLL_REGMEM", "SDMA_GCR"})


class _Here(threading.local):
    serving = False  # this thread is running an engine's queues


_HERE = _Here()


def serving(here: _Here = _HERE) -> bool:
    """Whether this thread is running an engine's queues: the device's work, on the engine's thread or on a waiting
    client's (Engine.serve). A client's finalizer that waits for the device must not run there. (The thread-local is
    bound at definition: finalizers call this at the interpreter's exit too, when module globals may be gone.)"""
    return here.serving


def _word(address: int) -> int:
    """The unsigned 64-bit word at a CPU address of this process (a client's signal, which it keeps mapped while it
    waits)."""
    return ctypes.c_uint64.from_address(address).value


class CPError(Exception):
    """A packet the command processor cannot execute."""


class Wait(Exception):
    """The packet at the read pointer waits for a condition; retry it later."""


class Queue:
    """Ring, pointers and state common to PM4 and SDMA queues. `unit` is what the pointers count (4: dwords,
    1: bytes); the pointers grow monotonically and index the ring modulo its size."""
    unit = 4

    def __init__(self, gpu, qid: int, doorbell: int, ring: int, ring_size: int, rptr_addr: int, wptr_addr: int):
        self.gpu, self.id, self.doorbell = gpu, qid, doorbell
        self.ring, self.ring_size, self.rptr_addr, self.wptr_addr = ring, ring_size, rptr_addr, wptr_addr
        self.rptr = 0
        self._words: np.ndarray | None = None
        self.state = RUNNING
        self.rang, self.again = 0, True  # the doorbell value at the last turn; whether that turn left work
        self.polls = False  # the last turn ended on a packet that waits for memory (someone must look again)
        self.error = ""
        self.packets: dict[str, int] = {}
        self.cancel = Cancel()  # set by destroy: the queue runs no more packets, its dispatch stops
        self.serving = False  # the engine is in a turn of this queue (destroy waits for it to end)
        self.stored = False  # a packet of this turn stored to memory since the engine last reported progress
        self.limit: int | None = None  # during a turn: the write pointer at its start

    @property
    def wptr(self) -> int:
        """The write pointer, within a turn no further than at its start (`_turn`)."""
        w = self.read_wptr()
        return w if self.limit is None else min(w, self.limit)

    def read_wptr(self) -> int:
        """The write pointer the client last gave (PM4 and SDMA: its doorbell)."""
        return int(self.gpu.doorbells[self.doorbell])

    def turn_limit(self) -> int:
        """The write pointer a turn runs to, read before the turn revalidates user pages."""
        return self.read_wptr()

    def pending(self) -> bool:
        return self.state == RUNNING and self.wptr > self.rptr

    def read_ring(self, pos: int, ndw: int) -> np.ndarray:
        """ndw dwords of the ring from pointer position `pos` (wrapping at the ring end)."""
        words = self._words
        if words is None:  # the ring's pages as the GPU VM maps them, looked up once per turn
            self.gpu.vm.check_range(self.ring, self.ring_size, False)
            m = self.gpu.vm.mapping(self.ring)
            words = self._words = m.buf[self.ring - m.va:self.ring - m.va + self.ring_size].view(np.uint32)
        start = pos * self.unit // 4 % len(words)
        if start + ndw <= len(words):
            return words[start:start + ndw].copy()
        return np.concatenate([words[start:], words[:ndw - (len(words) - start)]])

    def rung(self) -> bool:
        """Whether the doorbell changed since the last look: the write pointer it carries moved."""
        bell = int(self.gpu.doorbells[self.doorbell])
        changed, self.rang = bell != self.rang, bell
        return changed

    def service(self) -> bool:
        """Run packets until the queue is empty, waits, or has had its turn; True if any ran. A queue the last turn
        ran dry is looked at again when its doorbell changes (as the hardware's CP is woken by a doorbell write).
        Whatever goes wrong stops or halts this queue only: a GPU fault halts it, a CP error (a packet, or the
        queue's own state such as an unmapped write pointer, or a size beyond a limit) or an emulator bug stops
        it. A destroyed queue (`cancel` set) runs nothing more."""
        self.serving = True  # before `cancel` is looked at: destroy sets that first, then waits while this is set
        try:
            return not self.cancel.why and self._turn()
        finally:
            self.serving = False

    def _turn(self) -> bool:
        if not self.rung() and not self.again:  # nothing rung since a turn that ran the queue dry
            return False
        ran, dry, self.polls = 0, False, False
        self._words = None
        try:
            # Only packets written before the revalidation run in this turn: a client that sees the turn's first
            # results may unmap user pages and submit more while the turn goes on; those wait for the next turn,
            # which revalidates again (as the hardware's page tables change before the doorbell that follows).
            self.limit = self.turn_limit()
            self.gpu.revalidate()  # user pages the client unmapped since the last turn are not touched
            while ran < PACKETS_PER_TURN and not self.cancel.why:
                if not self.pending():
                    dry = True
                    break
                try:
                    if not self.step():
                        self.polls = True
                        break
                except Wait:
                    self.polls = True
                    break
                except GPUFault as e:
                    self.state = HALTED
                    if not self.cancel.why:  # a dispatch stopped by the queue's destruction is no fault to report
                        self.gpu.fault(self, e.record)
                ran += 1
                if self.stored:
                    self.stored = False
                    self.gpu.engine.progress()
                    if self.gpu.engine.others_have_work(self):  # they go on first (Engine.others_have_work)
                        break
        except (CPError, LimitError) as e:
            self.stop(str(e))
            ran += 1
        except Exception as e:  # an emulator bug stops this queue, never the engine or the host
            self.stop(f"emulator error: {type(e).__name__}: {e}")
            ran += 1
        self.limit = None
        self.again = not dry
        if ran:
            self.publish_rptr()
            self.gpu.engine.progress()
        return ran > 0

    def publish_rptr(self) -> None:
        """Write the read pointer back to the client's address (after each turn)."""
        try:
            self.gpu.vm.check_range(self.rptr_addr, 8, True)
            self.gpu.vm.write(self.rptr_addr, self.rptr.to_bytes(8, "little"))
        except GPUFault:
            pass  # the client unmapped its read-pointer page: the queue still runs

    def stop(self, why: str) -> None:
        self.state, self.error = STOPPED, why
        self.gpu.cp_error(self, why)

    def count(self, name: str) -> None:
        """A packet ran (its name as the queue's statistics give it)."""
        self.stored |= name not in QUIET
        self.packets[name] = self.packets.get(name, 0) + 1
        self.gpu.stats[name] = self.gpu.stats.get(name, 0) + 1

    def step(self) -> bool:
        raise NotImplementedError


class Engine:
    """The thread that runs every queue of a set of GPUs (one per mock system)."""

    def __init__(self, gpus: list):
        self.gpus = gpus
        self.doorbells = Doorbells()
        self._thread: threading.Thread | None = None
        self.served = 0  # progress reports so far (see wait_progress)
        self._moved = threading.Condition(threading.Lock())
        self._waiters: list[tuple[int, int] | None] = []  # what each sleeping wait_progress waits for
        self._running = threading.Lock()  # held by the thread running the queues (`serve`)
        self._warmed: set[int] = set()  # the wave sizes compute_queue warmed the native tiers for
        self.stopped = False  # the process is exiting (stop): the engine has no thread any more

    def progress(self) -> None:
        """A packet that stores to memory ran, or a queue's turn ended (their memory effects, such as a signal, are
        visible): wake the threads waiting for that."""
        self.served += 1
        if self._waiters:
            with self._moved:
                if any(w is None or _word(w[0]) >= w[1] for w in self._waiters):
                    self._moved.notify_all()

    def serve(self, until: tuple[int, int] | None = None) -> bool:
        """Run the queues' pending work on this thread until they have none (or the word of `until` reaches its
        value), unless another thread is running them; True if a packet ran. Afterwards the sleeping waiters look
        again (their word may be a CPU's to store, or there is work left for them to run), and a client's thread that
        leaves a queue waiting on memory kicks the engine, which looks at such queues again and again. Work left
        behind the word's store runs at the next wait, or within IDLE_WAIT at the idle engine's next look."""
        if not self._running.acquire(blocking=False):
            return False
        try:
            ran = self._drain(until)
        finally:
            self._running.release()
        if threading.current_thread() is not self._thread and any(
                q.polls for g in self.gpus for q in list(g.queues.values())):
            self.kick()  # a queue waits on memory: the engine looks at it again and again
        if self._waiters:
            with self._moved:
                self._moved.notify_all()
        return ran

    def others_have_work(self, q: Queue) -> bool:
        """Whether a running queue other than `q` has work: its last turn did not run it dry (it waits on memory or
        had more), or its doorbell moved since. The engine runs one queue at a time where the hardware's engines run
        side by side, so a queue whose packet has just made its effects visible (a dispatch, a signal) ends its turn
        for them: each queue's work then lands in about the order it was submitted (an SDMA copy submitted before
        a compute queue's next signal writes its own signal first, as the hardware's would, and a copy waiting on
        a signal sees it before a later one overwrites it)."""
        return any(o is not q and o.state == RUNNING and (o.again or int(o.gpu.doorbells[o.doorbell]) != o.rang)
                   for g in self.gpus for o in list(g.queues.values()))  # a copy: the client adds queues

    def _drain(self, until: tuple[int, int] | None = None) -> bool:
        """Run the queues until they have no work (or the word of `until` reaches its value), marked as the device's
        work (`serving`); the caller holds `_running`. True if a packet ran."""
        ran, _HERE.serving = False, True
        try:
            while self.run_pending():
                ran = True
                if until is not None and _word(until[0]) >= until[1]:
                    break
        finally:
            _HERE.serving = False
        return ran

    def wait_progress(self, seen: int, timeout: float, until: tuple[int, int] | None = None) -> int:
        """Until the engine has reported progress (a packet that stores to memory, the end of a queue's turn) since
        the count `seen` (which this returned before), or `timeout` seconds; returns the count then. A client that
        polls memory the device writes (a signal) can wait here between looks instead of spinning: on a machine with
        few cores the spin takes the CPU (and the GIL) the engine needs to make the progress it waits for.
        The waiter first runs the queues' pending work itself (`serve`) when no other thread is running them: no
        thread to wake, no GIL to hand over and back. Otherwise it sleeps. With `until` = (address, value), it waits
        for the 64-bit word at that CPU address to reach `value` (unsigned): woken only by the progress that makes it
        so, or when the running thread runs out of work, it sleeps up to BUSY_WAIT rather than `timeout` while the
        queues run (their stores will wake it). Each wakeup takes the GIL from the engine, so the engine's many stores
        must not each wake a client waiting for one."""
        if self.serve(until):
            return self.served
        with self._moved:
            if self.served == seen if until is None else _word(until[0]) < until[1]:
                if not self.doorbells.announced:  # the idle engine naps up to milliseconds between looks
                    self.doorbells.kick()
                self._waiters.append(until)
                try:
                    busy = until is not None and self._running.locked()
                    self._moved.wait(max(timeout, BUSY_WAIT) if busy else timeout)
                finally:
                    self._waiters.remove(until)
            return self.served

    def ring(self) -> None:
        """A doorbell store the client announces (the adapter's, as an MMIO store reaches the command processor):
        its work runs when a client waits for it (wait_progress runs it on the waiting thread), else when the idle
        engine next looks, within IDLE_WAIT. Waking the engine thread for work its client is about to wait for
        would cost a thread switch each way."""
        if self.stopped or self._thread is None:
            self.kick()

    def kick(self) -> None:
        """Wake the engine now: a client waits for its work (the driver's WAIT_EVENTS), or the process exits (then
        the kicking thread runs the work)."""
        if self.stopped and not (self._thread and self._thread.is_alive()):  # whoever kicks runs the queues' work
            with self._running:
                self._drain()
            return
        if self._thread is None:
            # clients busy-poll signals in Python: switch threads often so the device answers within ~0.2 ms
            # instead of CPython's default 5 ms slices
            sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
            self._thread = threading.Thread(target=self._loop, name="hwemu-engine", daemon=True)
            self._thread.start()
        self.doorbells.kick()

    def compute_queue(self, lanes: int) -> None:
        """A queue that dispatches waves of `lanes` lanes was made: the native tiers' first needs are warmed for it
        (once per wave size; a client that makes no such queue, e.g. rocminfo, compiles nothing)."""
        if lanes not in self._warmed:
            self._warmed.add(lanes)
            threaded.warm(lanes)

    def stop(self, timeout: float) -> bool:
        """The process is exiting: the engine's thread ends once the packets it is running have run, and is joined
        (up to `timeout` seconds: whether it ended). Afterwards a kick runs the queues' pending work on the kicking
        thread, so a client's exit handler that waits for its work still gets it."""
        self.stopped = True
        if self._thread is None:
            return True
        self.doorbells.kick()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def run_pending(self) -> bool:
        """One pass over all queues; True if any packet ran. The driver's lock is not held: the process's ioctls
        (allocations, mappings, waits) go on while a dispatch runs, as they do beside real hardware; the VM is
        safe to change meanwhile, and a queue destroyed meanwhile finishes the packet it is on."""
        busy = False
        for g in self.gpus:
            for q in list(g.queues.values()):
                try:
                    busy |= q.service()
                except Exception as e:  # reporting the queue's error failed: the queue stops, the engine goes on
                    q.state, q.error = STOPPED, f"{q.error or 'error'}; then {type(e).__name__}: {e}"
        return busy

    def _loop(self) -> None:
        nap = POLL[0]
        while not self.stopped:
            if self.serve():
                nap = POLL[0]
                continue
            if self._running.locked():  # a waiting client runs the queues: it kicks what it leaves waiting
                self.doorbells.wait([], IDLE_WAIT)
                continue
            queues = [q for g in self.gpus for q in list(g.queues.values())]
            # a queue that waits on memory is looked at again soon, then less and less often; the others when
            # their doorbell moves
            self.doorbells.wait(queues, nap if any(q.again for q in queues) else IDLE_WAIT)
            nap = min(2 * nap, POLL[1])
