"""Signals and KFD events: how the host learns that the GPU got somewhere, or faulted.

A signal is 16 bytes of CPU-visible memory {u64 value, u64 timestamp} that an engine writes (RELEASE_MEM, SDMA
FENCE); after writing it the engine writes the event id into the event's slot of the process's event page and
interrupts with that id, which wakes WAIT_EVENTS. Each GPU has a signal event (auto-reset), a MEMORY event (VM faults)
and a HW_EXCEPTION event; waiting watches all three, so a fault surfaces as GPUError instead of a hang.
"""
from __future__ import annotations

import ctypes
import time

from stack.hcq import kfd_ioctl as k
from stack.hcq.kfd import Kfd
from stack.hcq.memory import GTT_PUBLIC, GTT_UNCACHED, Buffer, Memory

EVENT_PAGE_SIZE = 0x8000
EVENT_SLOT_BYTES = 8
SIGNAL_BYTES = 16
SPIN_SECONDS = 0.002  # busy-poll this long before sleeping in WAIT_EVENTS
SLEEP_MS = 100  # WAIT_EVENTS timeout per round


class GPUError(RuntimeError):
    """The GPU reported a fault (memory or hardware exception), or did not finish in time."""


class Events:
    """One GPU's KFD events. The process's event page comes with the first GPU's signal event."""

    def __init__(self, kfd: Kfd, memory: Memory, name: str):
        self.kfd, self.name, self.gpu_id = kfd, name, memory.gpu_id
        first = kfd.events is None
        if first:
            page = memory.alloc(EVENT_PAGE_SIZE, GTT_UNCACHED)
            kfd.events = page
        else:
            page = kfd.events
            memory.map(page)
        self.page: Buffer = page
        sig = self._create(k.EVENT_SIGNAL, event_page_offset=page.handle if first else 0)
        self.signal_id, self.slot = sig.event_id, sig.event_slot_index
        self.memory_id = self._create(k.EVENT_MEMORY).event_id
        self.hw_id = self._create(k.EVENT_HW_EXCEPTION).event_id

    def _create(self, event_type: int, event_page_offset: int = 0) -> k.CreateEvent:
        return self.kfd.ioctl("CREATE_EVENT", k.CreateEvent(event_page_offset=event_page_offset,
                                                            event_type=event_type, auto_reset=1))

    def destroy(self) -> None:
        for eid in (self.signal_id, self.memory_id, self.hw_id):
            self.kfd.ioctl("DESTROY_EVENT", k.EventId(event_id=eid))

    @property
    def mailbox(self) -> int:
        """GPU address of this GPU's signal-event slot in the event page."""
        return self.page.va + self.slot * EVENT_SLOT_BYTES

    def wait(self, timeout_ms: int) -> None:
        """Sleep in WAIT_EVENTS until an event fires or the timeout passes; raise GPUError for a fault."""
        data = (k.EventData * 3)()
        for d, eid in zip(data, (self.signal_id, self.memory_id, self.hw_id), strict=True):
            d.event_id = eid
        args = k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=3, wait_for_all=0, timeout=timeout_ms)
        self.kfd.ioctl("WAIT_EVENTS", args)
        # memory and hw exception events fire for the whole process: each GPU's own events report its faults
        mem, hw = data[1].memory_exception_data, data[2].hw_exception_data
        if mem.gpu_id == self.gpu_id:
            f = mem.failure
            kinds = [n for n, v in (("NotPresent", f.NotPresent), ("ReadOnly", f.ReadOnly),
                                    ("NoExecute", f.NoExecute), ("imprecise", f.imprecise)) if v]
            ext = data[1].kfd_event_data_ext  # a mock driver's fault report (a C string); 0 from Linux
            raise GPUError(f"GPU memory fault on {self.name} (gpu_id {mem.gpu_id}) at VA {mem.va:#x}: "
                           f"{', '.join(kinds) or 'no failure bits'}" +
                           (f"\n{ctypes.string_at(ext).decode(errors='replace')}" if ext else ""))
        if hw.gpu_id == self.gpu_id:
            raise GPUError(f"GPU hardware exception on {self.name} (gpu_id {hw.gpu_id}): reset_type "
                           f"{hw.reset_type}, reset_cause {hw.reset_cause}, memory_lost {hw.memory_lost}")


class Timeline:
    """A monotonically increasing signal that every submission to one GPU waits for and then advances."""

    def __init__(self, memory: Memory, events: Events):
        self.page = memory.alloc(SIGNAL_BYTES, GTT_PUBLIC)
        self.events = events
        self.value = ctypes.c_uint64.from_address(self.page.va)
        self.issued = 0  # the last value a submission will write

    @property
    def va(self) -> int:
        return self.page.va

    def next(self) -> int:
        self.issued += 1
        return self.issued

    def wait(self, value: int, timeout: float) -> None:
        """Until the signal reaches `value`: spin briefly, then sleep in WAIT_EVENTS; faults raise GPUError."""
        start = time.monotonic()
        while self.value.value < value:
            if time.monotonic() - start < SPIN_SECONDS:
                time.sleep(0)  # poll, giving up the CPU (the engine may share this interpreter)
            else:
                self.events.wait(SLEEP_MS)
                if self.value.value < value and time.monotonic() - start > timeout:
                    raise GPUError(f"timeout: {self.events.name} did not reach signal value {value} in {timeout} s "
                                   f"(at {self.value.value})")
