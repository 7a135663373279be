"""The compute command processor: PM4 type-3 packets of a compute queue (MEC), gfx9 (soc15) and gfx10+ (nv).

Packets run in order from the ring and from indirect buffers (chained or nested). DISPATCH_DIRECT takes
everything from the registers a runtime set with SET_SH_REG, as the hardware does; the kernel descriptor is
never read. Dispatches run to completion before the next packet, so end-of-pipe events (RELEASE_MEM) and
partial flushes need no waiting, and caches are coherent (ACQUIRE_MEM changes nothing; code is re-read when
the memory it was decoded from changed). Register-space accesses go to a small register file in which a
write-then-wait request (the HDP flush handshake) is acknowledged at once.

Opcodes, packet fields and compute registers are the vendor's (emu.amd.hw.pm4), not the runtime's.

Sizes a packet gives are checked before anything is built (a CP error names the packet and the limit): a
dispatch's registers as it starts (emu.amd.compute), a packet's length against the ring, an indirect buffer's
whole range against the GPU VM, nesting against MAX_IB_DEPTH, and the indirect buffers one ring packet enters
in all (called or chained) against MAX_IB_ENTRIES, so that an indirect buffer chained to itself stops within a
few thousand packets.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from emu.amd import timeline
from emu.amd.compute import ComputeRegisters, launch
from emu.amd.hw import pm4 as p
from emu.amd.hw.kd import Rsrc1, Rsrc2
from emu.amd.memory import GPUFault
from emu.amd.queue import RUNNING, WATCHDOG_PACKETS, CPError, Queue, Wait

MAX_IB_DEPTH = 4  # indirect buffers nest at most this deep
MAX_IB_ENTRIES = 4096  # indirect buffers one packet of the ring may enter in all, called or chained (a loop stops)
U64 = np.uint64
NAMES = p.NAMES
COMPARE = {p.WAIT_REG_MEM_FUNCTION_ALWAYS: lambda v, r: True, p.WAIT_REG_MEM_FUNCTION_LT: lambda v, r: v < r,
           p.WAIT_REG_MEM_FUNCTION_LE: lambda v, r: v <= r, p.WAIT_REG_MEM_FUNCTION_EQ: lambda v, r: v == r,
           p.WAIT_REG_MEM_FUNCTION_NE: lambda v, r: v != r, p.WAIT_REG_MEM_FUNCTION_GE: lambda v, r: v >= r,
           p.WAIT_REG_MEM_FUNCTION_GT: lambda v, r: v > r}
# COPY_DATA source / destination selects
COPY_SRC_SEL, COPY_DST_SEL, COPY_COUNT_SEL = p.COPY_DATA_SRC_SEL, p.COPY_DATA_DST_SEL, p.COPY_DATA_COUNT_SEL
SEL_REGISTER, SEL_MEMORY, SEL_TC_L2, SEL_PERFCOUNTERS, SEL_IMMEDIATE = 0, 1, 2, 4, 5
SEL_GPU_CLOCK, SEL_SYSTEM_CLOCK, SEL_MEMORY_ASYNC = 9, 10, 5
PRED_EXEC_COUNT, PRED_EXEC_DEVICE_SELECT = p.PRED_EXEC_EXEC_COUNT, p.PRED_EXEC_DEVICE_SELECT
PACKET_TYPE2 = p.PACKET_TYPE2


@dataclasses.dataclass
class IndirectBuffer:
    """An indirect buffer the CP entered: its dwords as fetched then, and the position of the next packet."""
    addr: int
    words: np.ndarray
    pos: int = 0


class ComputeQueue(Queue):
    """A PM4 compute queue: pointers count dwords."""
    unit = 4

    def __init__(self, *args):
        super().__init__(*args)
        self.regs: dict[int, int] = {}
        self.ibs: list[IndirectBuffer] = []  # the active indirect buffers, innermost last
        self.skip = 0  # dwords PRED_EXEC told the CP to skip
        self.since_progress = 0  # packets run from indirect buffers since the ring's packet that entered them
        self.ib_entries = 0  # indirect buffers entered (called or chained) since then

    @property
    def thread_trace(self) -> bool:
        """COMPUTE_THREAD_TRACE_ENABLE: the queue's dispatches are traced (emu.amd.sqtt)."""
        return bool(self.regs.get(p.COMPUTE_THREAD_TRACE_ENABLE, 0) & 1)

    def pending(self) -> bool:
        return self.state == RUNNING and (bool(self.ibs) or self.wptr > self.rptr)

    # -- fetch -------------------------------------------------------------------------------------------------
    def step(self) -> bool:
        if self.ibs:
            return self._step_ib()
        avail = self.wptr - self.rptr
        header = int(self.read_ring(self.rptr, 1)[0])
        n = self._length(header)
        if n > avail:
            if n > self.ring_size // 4:
                raise CPError(f"packet header {header:#010x} at ring dword {self.rptr} claims {n} dwords, more than "
                              f"the {self.ring_size // 4}-dword ring")
            raise Wait  # the rest of the packet is not published yet
        pkt = self.read_ring(self.rptr, n)
        self.since_progress = self.ib_entries = 0
        self._run(pkt, self.rptr, advance=lambda: setattr(self, "rptr", self.rptr + n))
        return True

    def _step_ib(self) -> bool:
        ib = self.ibs[-1]
        pos, size = ib.pos, ib.words.size
        if pos >= size:
            self.ibs.pop()
            return True
        self.since_progress += 1
        if self.since_progress > WATCHDOG_PACKETS:
            raise CPError(f"watchdog: {WATCHDOG_PACKETS} indirect-buffer packets without the ring advancing")
        header = int(ib.words[pos])
        n = self._length(header)
        if pos + n > size:
            raise CPError(f"packet header {header:#010x} at dword {pos} of the indirect buffer at {ib.addr:#x} runs "
                          f"past its {size} dwords")

        def advance() -> None:
            ib.pos = pos + n
        self._run(ib.words[pos:pos + n], pos, advance)
        return True

    @staticmethod
    def _length(header: int) -> int:
        kind = p.HEADER_TYPE.get(header)
        if kind == PACKET_TYPE2:
            return 1
        if kind != p.PACKET_TYPE3:
            raise CPError(f"PM4 type-{kind} packet {header:#010x}: compute queues take type-3 (and type-2 filler)")
        return p.body_dwords(header) + 1

    def _run(self, pkt: np.ndarray, where: int, advance) -> None:
        """Run one packet; `advance` moves past it (not called while it waits)."""
        if self.skip:
            self.skip = max(0, self.skip - len(pkt))
            advance()
            return
        header = int(pkt[0])
        if p.HEADER_TYPE.get(header) == PACKET_TYPE2:
            advance()
            return
        op = p.HEADER_OPCODE.get(header)
        handler = self.HANDLERS.get(op)
        if handler is None:
            raise CPError(f"unknown PM4 opcode {op:#04x} (header {header:#010x}) at dword {where}")
        body = [int(x) for x in pkt[1:]]
        with timeline.packet(self, NAMES[op], len(pkt)):
            try:
                ok = handler(self, body)
            except GPUFault:
                advance()  # a halted queue resumes after the packet that faulted
                raise
            if ok is False:
                raise Wait
        self.count(NAMES[op])
        if ok != "chained":
            advance()

    def _need(self, body: list[int], n: int, what: str) -> None:
        if len(body) < n:
            raise CPError(f"{what}: body of {len(body)} dwords, needs {n}")

    # -- packets -----------------------------------------------------------------------------------------------
    def _nop(self, body):
        return True

    def _set_sh_reg(self, body, base=p.PACKET3_SET_SH_REG_START, end=p.PACKET3_SET_SH_REG_END, what="SET_SH_REG"):
        self._need(body, 2, what)
        start = base + (body[0] & 0xFFFF)
        if start + len(body) - 1 > end:
            raise CPError(f"{what}: registers {start:#x}..{start + len(body) - 2:#x} leave the space ending {end:#x}")
        for i, v in enumerate(body[1:]):
            self._set_reg(start + i, v)
        return True

    def _set_uconfig_reg(self, body):
        return self._set_sh_reg(body, p.PACKET3_SET_UCONFIG_REG_START, p.uconfig_end(self.gpu.gfx), "SET_UCONFIG_REG")

    def _acquire_mem(self, body):
        self._need(body, 5 if self.gpu.gfx == 9 else 7, "ACQUIRE_MEM")
        return True

    def _event_write(self, body):
        self._need(body, 1, "EVENT_WRITE")
        if self.gpu.sqtt is not None:
            self.gpu.sqtt.event(p.EVENT_WRITE_EVENT_TYPE.get(body[0]))
        return True

    def _release_mem(self, body):
        self._need(body, 7 if self.gpu.gfx >= 10 else 6, "RELEASE_MEM")
        ctl = body[1]
        addr = body[2] | body[3] << 32
        data_sel, int_sel = p.RELEASE_MEM_DATA_SEL.get(ctl), p.RELEASE_MEM_INT_SEL.get(ctl)
        value = {p.DATA_SEL_SEND_32_BIT_LOW: body[4], p.DATA_SEL_SEND_64_BIT_DATA: body[4] | body[5] << 32,
                 p.DATA_SEL_SEND_GPU_CLOCK_COUNTER: self.gpu.clock()}.get(data_sel)
        if data_sel not in (p.DATA_SEL_NONE, p.DATA_SEL_SEND_32_BIT_LOW, p.DATA_SEL_SEND_64_BIT_DATA,
                            p.DATA_SEL_SEND_GPU_CLOCK_COUNTER):
            raise CPError(f"RELEASE_MEM: DATA_SEL {data_sel} is not supported")
        if value is not None:
            self._store(addr, 32 if data_sel == p.DATA_SEL_SEND_32_BIT_LOW else 64, value)
        if int_sel in (p.INT_SEL_SEND_INTERRUPT_ONLY, p.INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM):
            self.gpu.interrupt(body[6] if self.gpu.gfx >= 10 and len(body) > 6 else 0)
        return True

    def _wait_reg_mem(self, body):
        self._need(body, 6, "WAIT_REG_MEM")
        ctl, lo, hi, ref, mask = body[:5]
        func = p.WAIT_REG_MEM_FUNCTION.get(ctl)
        if func not in COMPARE:
            raise CPError(f"WAIT_REG_MEM: compare function {func}")
        if p.WAIT_REG_MEM_MEM_SPACE.get(ctl) == p.WAIT_REG_MEM_MEM_SPACE_MEMORY:
            value = self._load(lo | hi << 32, 32)
        else:
            if p.WAIT_REG_MEM_OPERATION.get(ctl) == p.WAIT_REG_MEM_OPERATION_WR_WAIT_WR_REG:
                self._set_reg(lo, ref)  # a request register; its block acknowledges in the done register at once
                self._set_reg(hi, self._reg(hi) | ref)
            value = self._reg(hi if p.WAIT_REG_MEM_OPERATION.get(ctl) else lo)
        return COMPARE[func](value & mask, ref & mask)

    def _indirect_buffer(self, body):
        self._need(body, 3, "INDIRECT_BUFFER")
        addr, ctl = (body[0] & ~3) | body[1] << 32, body[2]
        size = p.INDIRECT_BUFFER_IB_SIZE.get(ctl)
        if not p.INDIRECT_BUFFER_VALID.get(ctl) and self.gpu.gfx >= 10:
            raise CPError(f"INDIRECT_BUFFER at {addr:#x}: VALID bit clear")
        try:  # the CP fetches the whole buffer as it enters it, which must be mapped (a CP error names it otherwise)
            words = np.frombuffer(self.gpu.vm.read(addr, 4 * size), np.uint32)
        except GPUFault:
            raise CPError(f"INDIRECT_BUFFER at {addr:#x} ({size} dwords) is not mapped on the GPU") from None
        self.ib_entries += 1
        if self.ib_entries > MAX_IB_ENTRIES:
            raise CPError(f"INDIRECT_BUFFER at {addr:#x}: more than {MAX_IB_ENTRIES} indirect buffers entered "
                          f"(called or chained) from the packet at ring dword {self.rptr}: a loop")
        if p.INDIRECT_BUFFER_CHAIN.get(ctl) and self.ibs:
            self.ibs[-1] = IndirectBuffer(addr, words)
            return "chained"
        if len(self.ibs) >= MAX_IB_DEPTH:
            raise CPError(f"INDIRECT_BUFFER at {addr:#x}: nested deeper than {MAX_IB_DEPTH} levels")
        if size:
            self.ibs.append(IndirectBuffer(addr, words))
        return True

    def _write_data(self, body):
        self._need(body, 4, "WRITE_DATA")
        ctl, addr, data = body[0], body[1] | body[2] << 32, body[3:]
        dst = p.WRITE_DATA_DST_SEL.get(ctl)
        step = 0 if p.WRITE_DATA_ADDR_INCR.get(ctl) else 1
        for i, v in enumerate(data):
            if dst == SEL_REGISTER:
                self._set_reg(body[1] + i * step, v)
            elif dst in (SEL_MEMORY, SEL_TC_L2, p.WRITE_DATA_DST_SEL_MEMORY):
                self._store(addr + 4 * i * step, 32, v)
            else:
                raise CPError(f"WRITE_DATA: DST_SEL {dst} is not supported")
        return True

    def _copy_data(self, body):
        self._need(body, 5, "COPY_DATA")
        ctl, src, dst = body[0], body[1] | body[2] << 32, body[3] | body[4] << 32
        bits = 64 if COPY_COUNT_SEL.get(ctl) else 32
        s = COPY_SRC_SEL.get(ctl)
        if s in (SEL_REGISTER, SEL_PERFCOUNTERS):  # counters are the registers of the GPU's units (emu.amd.perfmon)
            value = self._reg(body[1])
        elif s in (SEL_MEMORY, SEL_TC_L2):
            value = self._load(src, bits)
        elif s == SEL_IMMEDIATE:
            value = src if bits == 64 else body[1]
        elif s in (SEL_GPU_CLOCK, SEL_SYSTEM_CLOCK):
            value = self.gpu.clock()
        else:
            raise CPError(f"COPY_DATA: SRC_SEL {s} is not supported")
        d = COPY_DST_SEL.get(ctl)
        if d == SEL_REGISTER:
            self._set_reg(body[3], value & 0xFFFFFFFF)
        elif d in (SEL_MEMORY, SEL_TC_L2, SEL_MEMORY_ASYNC):
            self._store(dst, bits, value)
        else:
            raise CPError(f"COPY_DATA: DST_SEL {d} is not supported")
        return True

    def _pred_exec(self, body):
        self._need(body, 1, "PRED_EXEC")
        if not PRED_EXEC_DEVICE_SELECT.get(body[0]) & 1:  # this GPU has one XCC, number 0
            self.skip = PRED_EXEC_COUNT.get(body[0])
        return True

    def _dispatch_direct(self, body):
        self._need(body, 4, "DISPATCH_DIRECT")
        return self._dispatch(tuple(body[:3]), body[3])

    def _dispatch_indirect(self, body):
        self._need(body, 3, "DISPATCH_INDIRECT")
        addr = body[0] | body[1] << 32
        dims = np.frombuffer(self.gpu.vm.read(addr, 12), np.uint32)
        return self._dispatch(tuple(int(x) for x in dims), body[2])

    # -- dispatch ----------------------------------------------------------------------------------------------
    def _dispatch(self, grid: tuple[int, ...], initiator: int) -> bool:
        r = self.regs.get
        if p.DISPATCH_INITIATOR_USE_THREAD_DIMENSIONS.get(initiator):
            raise CPError("DISPATCH: thread-dimension dispatches (USE_THREAD_DIMENSIONS) are not supported")
        if not p.DISPATCH_INITIATOR_COMPUTE_SHADER_EN.get(initiator) or not all(grid):
            return True
        regs = ComputeRegisters(
            (r(p.COMPUTE_PGM_LO, 0) | r(p.COMPUTE_PGM_HI, 0) << 32) << p.PGM_ADDRESS_SHIFT,
            Rsrc1.decode(r(p.COMPUTE_PGM_RSRC1, 0)), Rsrc2.decode(r(p.COMPUTE_PGM_RSRC2, 0)),
            tuple(r(p.COMPUTE_USER_DATA_0 + i, 0) for i in range(p.NUM_USER_DATA)),
            tuple(p.NUM_THREAD_FULL.get(r(p.COMPUTE_NUM_THREAD_X + i, 1)) for i in range(3)),
            bool(p.DISPATCH_INITIATOR_CS_W32_EN.get(initiator)), r(p.COMPUTE_TMPRING_SIZE, 0),
            (r(p.COMPUTE_DISPATCH_SCRATCH_BASE_LO, 0) | r(p.COMPUTE_DISPATCH_SCRATCH_BASE_HI, 0) << 32)
            << p.SCRATCH_BASE_SHIFT, tuple(r(p.COMPUTE_START_X + i, 0) for i in range(3)), self.thread_trace,
            bool(r(p.COMPUTE_PERFCOUNT_ENABLE, 0) & 1))
        gpu = self.gpu
        gpu.dispatches += 1
        gpu.add_stats(launch(gpu, regs, grid, f"DISPATCH at queue {self.id} dword {self.rptr}",
                             dispatch_id=gpu.dispatches - 1, cancel=self.cancel))
        return True

    # -- the register file: the thread-trace and performance-counter units' registers are the GPU's, the others
    # this queue's ------------------------------------------------------------------------------------------------
    def _unit(self, addr: int):
        """The GPU's unit (emu.amd.sqtt, emu.amd.perfmon) that holds register `addr`, or None."""
        return next((u for u in (self.gpu.sqtt, self.gpu.perfmon) if u is not None and u.owns(addr)), None)

    def _reg(self, addr: int) -> int:
        u = self._unit(addr)
        return u.read(addr) if u is not None else self.regs.get(addr, 0)

    def _set_reg(self, addr: int, value: int) -> None:
        u = self._unit(addr)
        if u is not None:
            u.write(addr, value)
        else:
            self.regs[addr] = value

    # -- memory through the GPU VM -----------------------------------------------------------------------------
    def _load(self, addr: int, bits: int) -> int:
        return int(self.gpu.vm.load(np.array([addr], U64), bits)[0])

    def _store(self, addr: int, bits: int, value: int) -> None:
        self.gpu.vm.store(np.array([addr], U64), bits, np.array([value & ((1 << bits) - 1)], U64))

    HANDLERS = {p.PACKET3_NOP: _nop, p.PACKET3_SET_SH_REG: _set_sh_reg, p.PACKET3_SET_UCONFIG_REG: _set_uconfig_reg,
                p.PACKET3_ACQUIRE_MEM: _acquire_mem, p.PACKET3_EVENT_WRITE: _event_write,
                p.PACKET3_RELEASE_MEM: _release_mem, p.PACKET3_WAIT_REG_MEM: _wait_reg_mem,
                p.PACKET3_INDIRECT_BUFFER: _indirect_buffer, p.PACKET3_WRITE_DATA: _write_data,
                p.PACKET3_COPY_DATA: _copy_data, p.PACKET3_PRED_EXEC: _pred_exec,
                p.PACKET3_DISPATCH_DIRECT: _dispatch_direct, p.PACKET3_DISPATCH_INDIRECT: _dispatch_indirect}
