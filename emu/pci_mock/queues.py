"""The queue registers a driver maps its compute and SDMA queues with, connected to the device's engines (the same
emu.amd command processor, AQL processor and SDMA engine MOCKKFD's queues run on).

Compute (gfx10+ MEC hardware queue descriptors, amdgpu's gfx_v11_0.c / gfx_v12_0.c kiq-less path): the HQD
registers (CP_HQD_*, CP_MQD_*) are banked: GRBM_GFX_CNTL's MEID / PIPEID / QUEUEID select which queue's copy a
register access reaches. Writing CP_HQD_ACTIVE = 1 starts the selected queue from its registers, as the CP does
from a loaded MQD: the ring at CP_HQD_PQ_BASE(_HI) << 8 of 2^(PQ_CONTROL.QUEUE_SIZE + 1) dwords, the read pointer
reported to CP_HQD_PQ_RPTR_REPORT_ADDR(_HI), the write pointer polled at CP_HQD_PQ_WPTR_POLL_ADDR(_HI) and rung on
the 64-bit doorbell at dword CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_OFFSET of the doorbell BAR, starting at
CP_HQD_PQ_WPTR_LO/HI; an AQL queue when CP_HQD_AQL_CONTROL is non-zero. CP_HQD_DEQUEUE_REQUEST stops it; ACTIVE
reads 1 until its last packet has finished. CP_HQD_PQ_RPTR reads the running queue's read pointer.

SDMA (sdma_v6_0.c / sdma_v7_0.c): SDMAn_QUEUEm_RB_CNTL.RB_ENABLE starts queue m of engine n from its registers: the
ring at RB_BASE(_HI) << 8 of 2^RB_SIZE dwords, RB_RPTR_ADDR_LO/HI, RB_WPTR_POLL_ADDR_LO/HI, the doorbell at dword
DOORBELL_OFFSET.OFFSET when DOORBELL.ENABLE is set, the write pointer (bytes) from RB_WPTR(_HI); clearing it stops
the queue.

A queue whose registers cannot describe one (no doorbell, a doorbell outside the BAR) is not started: the refusal is
recorded in `refusals` and written to stderr, and its ACTIVE / RB_ENABLE reads 0. Memory the registers name is
reached through the GPU VM when the queue runs: an unmapped ring faults there, as on the hardware.
"""
from __future__ import annotations

import itertools
import re
import sys

from emu.pci_mock.mmio import RegisterFile

PQ = "regCP_HQD_"
BANKED = ("regCP_HQD_", "regCP_MQD_")
NOT_BANKED = ("regCP_HQD_GFX_",)  # the graphics queue's, selected otherwise
_SDMA_QUEUE = re.compile(r"(regSDMA\d_QUEUE\d)_RB_CNTL")


class Refusal(Exception):
    """Registers that describe no queue."""


class _Rings:
    """What the compute and SDMA models share: the device, its queue ids and the refusals."""

    def __init__(self, regs: RegisterFile, gpu, ids: itertools.count, refusals: list[str]) -> None:
        self.regs, self.gpu, self.ids, self.refusals = regs, gpu, ids, refusals

    def _start(self, what: str, kind: str, ring: int, size: int, rptr: int, wptr: int, db_dword: int, enabled: bool,
               start: int):
        """A queue of the device, or None (refused, recorded)."""
        try:
            if not enabled:
                raise Refusal("its doorbell is not enabled (polled write pointers are not modelled)")
            slot = db_dword // 2  # 64-bit doorbells
            if not 0 <= slot < len(self.gpu.doorbells):
                raise Refusal(f"doorbell dword {db_dword:#x} is outside the {8 * len(self.gpu.doorbells):#x}-byte BAR")
            if slot in {q.doorbell for q in self.gpu.queues.values()}:
                raise Refusal(f"doorbell dword {db_dword:#x} is another running queue's")
            q = self.gpu.create_queue(next(self.ids), kind, ring, size, rptr, wptr, doorbell=slot, start=start)
            return q
        except Refusal as e:
            msg = f"{what}: not started: {e}"
            self.refusals.append(msg)
            print(f"hwemu: {msg}", file=sys.stderr)
            return None


class ComputeQueues(_Rings):
    """The MEC's hardware queue descriptors, banked by GRBM_GFX_CNTL (see the module docstring)."""

    def __init__(self, regs: RegisterFile, gpu, ids: itertools.count, refusals: list[str]) -> None:
        super().__init__(regs, gpu, ids, refusals)
        self.banks: dict[tuple[int, int, int], dict[str, int]] = {}
        self.queues: dict[tuple[int, int, int], object] = {}
        self.draining: dict[tuple[int, int, int], object] = {}  # dequeued, maybe still finishing a packet
        self._cntl = regs.names["regGRBM_GFX_CNTL"]
        for name, addrs in regs.names.items():
            if name.startswith(BANKED) and not name.startswith(NOT_BANKED):
                for a in addrs:
                    regs.on_read(a, lambda _a, name=name: self._read(name))
                    regs.on_write(a, lambda _a, v, name=name: self._write(name, v))

    def _selected(self) -> tuple[int, int, int]:
        v, f = self.regs.stored(self._cntl[0]), self.regs.field
        return (f("regGRBM_GFX_CNTL", v, "meid"), f("regGRBM_GFX_CNTL", v, "pipeid"),
                f("regGRBM_GFX_CNTL", v, "queueid"))

    def _read(self, name: str) -> int:
        key = self._selected()
        q = self.queues.get(key)
        if name == PQ + "ACTIVE":
            if q is None and (d := self.draining.get(key)) is not None:
                return int(d.serving)
            return int(q is not None)
        if name == PQ + "PQ_RPTR" and q is not None:
            return q.rptr & 0xFFFFFFFF
        return self.banks.get(key, {}).get(name, 0)

    def _write(self, name: str, value: int) -> None:
        key = self._selected()
        bank = self.banks.setdefault(key, {})
        bank[name] = value
        if name == PQ + "ACTIVE" and value & 1 and key not in self.queues:
            q = self._activate(key, bank)
            if q is not None:
                self.queues[key] = q
                self.draining.pop(key, None)
        elif name == PQ + "DEQUEUE_REQUEST" and value and key in self.queues:
            q = self.draining[key] = self.queues.pop(key)
            if q.id in self.gpu.queues:
                self.gpu.destroy_queue(q)

    def _activate(self, key: tuple[int, int, int], bank: dict[str, int]):
        def get(n: str) -> int:
            return bank.get(PQ + n, 0)

        def pair(n: str) -> int:
            return get(n + "_HI") << 32 | get(n)
        f = self.regs.field
        db = get("PQ_DOORBELL_CONTROL")
        size = 4 << (f(PQ + "PQ_CONTROL", get("PQ_CONTROL"), "queue_size") + 1)
        return self._start(f"compute queue (me {key[0]}, pipe {key[1]}, queue {key[2]})",
                           "aql" if get("AQL_CONTROL") else "pm4", pair("PQ_BASE") << 8, size,
                           pair("PQ_RPTR_REPORT_ADDR") & ~3, pair("PQ_WPTR_POLL_ADDR") & ~3,
                           f(PQ + "PQ_DOORBELL_CONTROL", db, "doorbell_offset"),
                           bool(f(PQ + "PQ_DOORBELL_CONTROL", db, "doorbell_en")),
                           get("PQ_WPTR_HI") << 32 | get("PQ_WPTR_LO"))


class SDMAQueues(_Rings):
    """Each SDMA queue's ring-buffer registers (see the module docstring)."""

    def __init__(self, regs: RegisterFile, gpu, ids: itertools.count, refusals: list[str]) -> None:
        super().__init__(regs, gpu, ids, refusals)
        self.queues: dict[str, object] = {}
        for name in regs.names:
            m = _SDMA_QUEUE.fullmatch(name)
            if m and f"{m[1]}_DOORBELL_OFFSET" in regs.names:
                regs.on_write(regs.addr(name), lambda a, v, p=m[1]: self._cntl(p, a, v))

    def _cntl(self, prefix: str, addr: int, value: int) -> None:
        regs, f = self.regs, self.regs.field
        on = bool(f(f"{prefix}_RB_CNTL", value, "rb_enable"))
        q = self.queues.get(prefix)
        if not on and q is not None:
            del self.queues[prefix]
            if q.id in self.gpu.queues:
                self.gpu.destroy_queue(q)
        if on and q is None:
            def get(n: str) -> int:
                return regs.stored(regs.addr(f"{prefix}_{n}"))
            db = get("DOORBELL")
            q = self._start(prefix.removeprefix("reg") + " ring", "sdma",
                            (get("RB_BASE_HI") << 32 | get("RB_BASE")) << 8,
                            4 << f(f"{prefix}_RB_CNTL", value, "rb_size"),
                            (get("RB_RPTR_ADDR_HI") << 32 | get("RB_RPTR_ADDR_LO")) & ~3,
                            (get("RB_WPTR_POLL_ADDR_HI") << 32 | get("RB_WPTR_POLL_ADDR_LO")) & ~3,
                            f(f"{prefix}_DOORBELL_OFFSET", get("DOORBELL_OFFSET"), "offset"),
                            bool(f(f"{prefix}_DOORBELL", db, "enable")), get("RB_WPTR_HI") << 32 | get("RB_WPTR"))
            if q is None:
                value &= ~1
            else:
                self.queues[prefix] = q
        regs.store(addr, value)
