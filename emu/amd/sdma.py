"""The SDMA engine: system-DMA packets of an SDMA queue (pointers count bytes).

Copies, writes, fills, fences and timestamps are GPU memory accesses through the VM, so an unmapped address
faults like a shader access does. TRAP raises an interrupt carrying its context (the KFD event id);
POLL_REGMEM waits until a memory dword compares true. Packets may not run past the published write pointer.
"""
from __future__ import annotations

import numpy as np

from emu.amd import timeline
from emu.amd.cp import COMPARE
from emu.amd.hw import sdma as s
from emu.amd.memory import GPUFault
from emu.amd.queue import RUNNING, CPError, Queue, Wait

U64 = np.uint64
CHUNK = 1 << 20  # bytes a copy or fill moves at a time
SDMA_OP_GCR = s.SDMA_OP_GCR  # cache control request (v5+): 5 dwords
NAMES = {s.SDMA_OP_NOP: "NOP", s.SDMA_OP_COPY: "COPY_LINEAR", s.SDMA_OP_WRITE: "WRITE", s.SDMA_OP_INDIRECT: "INDIRECT",
         s.SDMA_OP_FENCE: "FENCE", s.SDMA_OP_TRAP: "TRAP", s.SDMA_OP_POLL_REGMEM: "POLL_REGMEM",
         s.SDMA_OP_CONST_FILL: "CONSTANT_FILL", s.SDMA_OP_TIMESTAMP: "TIMESTAMP", SDMA_OP_GCR: "GCR"}


class _Entered(Exception):
    """INDIRECT moved the engine into an indirect buffer (the ring pointer already advanced)."""


def _get(fields: dict, name: str, pkt) -> int:
    f = fields[name]
    return f.get(int(pkt[f.dw]))


def _addr(fields: dict, name: str, pkt) -> int:
    return _get(fields, f"{name}_31_0", pkt) | _get(fields, f"{name}_63_32", pkt) << 32


class SDMAQueue(Queue):
    unit = 1

    def __init__(self, *args):
        super().__init__(*args)
        self.version = self.gpu.chip.sdma[0]
        self.pkts = s.packets(self.version)  # the vendor's layouts of this engine's version
        self.ib: list[int] | None = None  # the indirect buffer being run: [address, dwords, position]

    def pending(self) -> bool:
        return self.state == RUNNING and (self.ib is not None or self.wptr > self.rptr)

    def step(self) -> bool:
        ib = self.ib
        if ib is not None and ib[2] >= ib[1]:
            self.ib = None
            return True
        if ib is None:
            avail = (self.wptr - self.rptr) // 4

            def fetch(n: int) -> np.ndarray:
                self._fits(n)
                return self.read_ring(self.rptr, n)
        else:
            avail = ib[1] - ib[2]

            def fetch(n: int) -> np.ndarray:
                return np.frombuffer(self._read(ib[0] + 4 * ib[2], 4 * n), np.uint32)
        header = int(fetch(1)[0])
        op = s.HEADER_OP.get(header)
        n = self._length(op, header, fetch, avail)
        if n > avail:
            if ib is not None:
                raise CPError(f"SDMA packet {header:#010x} runs past the end of the indirect buffer at {ib[0]:#x}")
            self._fits(n)  # larger than the ring: an error, not a wait
            raise Wait
        pkt = fetch(n)

        def advance() -> None:
            if ib is None:
                self.rptr += 4 * n
            else:
                ib[2] += n
        try:
            with timeline.packet(self, NAMES[op], n) as ev:
                if not self._run(op, header, pkt, ev):
                    raise Wait
        except _Entered:
            return True
        except GPUFault:
            advance()  # a halted queue resumes after the packet that faulted
            raise
        self.count("SDMA_" + NAMES[op])
        advance()
        return True

    def _fits(self, n: int) -> None:
        """A read of n dwords of the ring: more than it holds would wrap onto itself."""
        if 4 * n > self.ring_size:
            raise CPError(f"SDMA packet at ring byte {self.rptr} needs {n} dwords, more than the {self.ring_size}-byte "
                          "ring")

    def _length(self, op: int, header: int, fetch, avail: int) -> int:
        if op == s.SDMA_OP_NOP:
            return 1 + self.pkts["NOP"]["count"].get(header)
        if op == s.SDMA_OP_WRITE:
            if avail < 4:
                return 4
            return 4 + self.pkts["WRITE_UNTILED"]["count"].get(int(fetch(4)[3])) + 1
        if op == SDMA_OP_GCR:
            return 5
        fixed = {s.SDMA_OP_COPY: "COPY_LINEAR", s.SDMA_OP_INDIRECT: "INDIRECT", s.SDMA_OP_FENCE: "FENCE",
                 s.SDMA_OP_TRAP: "TRAP", s.SDMA_OP_POLL_REGMEM: "POLL_REGMEM", s.SDMA_OP_CONST_FILL: "CONSTANT_FILL",
                 s.SDMA_OP_TIMESTAMP: "TIMESTAMP_GET_GLOBAL"}.get(op)
        if fixed is None:
            raise CPError(f"SDMA: unknown opcode {op} (header {header:#010x}) at ring byte {self.rptr}")
        return s.dwords(self.version, fixed)

    def _run(self, op: int, header: int, pkt: np.ndarray, ev) -> bool:
        """Run one packet; `ev` (a timeline packet context) is told the bytes a copy, write or fill moves."""
        vm, sub, k = self.gpu.vm, s.HEADER_SUB_OP.get(header), self.pkts
        if op in (s.SDMA_OP_NOP, SDMA_OP_GCR):
            return True
        if op == s.SDMA_OP_COPY:
            if sub != s.SDMA_SUBOP_COPY_LINEAR:
                raise CPError(f"SDMA COPY: sub-op {sub} (only linear copies are modelled)")
            n = _get(k["COPY_LINEAR"], "count", pkt) + 1
            ev.set(bytes=n)
            self._copy(_addr(k["COPY_LINEAR"], "dst_addr", pkt), _addr(k["COPY_LINEAR"], "src_addr", pkt), n)
        elif op == s.SDMA_OP_WRITE:
            ev.set(bytes=4 * (len(pkt) - 4))
            self._write(_addr(k["WRITE_UNTILED"], "dst_addr", pkt), pkt[4:].tobytes())
        elif op == s.SDMA_OP_CONST_FILL:
            n = _get(k["CONSTANT_FILL"], "count", pkt) + 1
            ev.set(bytes=n)
            self._fill(_addr(k["CONSTANT_FILL"], "dst_addr", pkt), _get(k["CONSTANT_FILL"], "src_data_31_0", pkt), n)
        elif op == s.SDMA_OP_FENCE:
            self._write(_addr(k["FENCE"], "addr", pkt), np.array([_get(k["FENCE"], "data", pkt)], np.uint32).tobytes())
        elif op == s.SDMA_OP_TRAP:
            self.gpu.interrupt(_get(k["TRAP"], "int_context", pkt), "SDMA_TRAP")
        elif op == s.SDMA_OP_POLL_REGMEM:
            func = _get(k["POLL_REGMEM"], "func", pkt)
            if func not in COMPARE or not _get(k["POLL_REGMEM"], "mem_poll", pkt):
                raise CPError(f"SDMA POLL_REGMEM: function {func}, mem_poll {_get(k['POLL_REGMEM'], 'mem_poll', pkt)} "
                              "(memory polls with functions 0-6 are modelled)")
            addr = _addr(k["POLL_REGMEM"], "addr", pkt)
            value = int(vm.load(np.array([addr], U64), 32)[0]) & _get(k["POLL_REGMEM"], "mask", pkt)
            return COMPARE[func](value, _get(k["POLL_REGMEM"], "value", pkt) & _get(k["POLL_REGMEM"], "mask", pkt))
        elif op == s.SDMA_OP_TIMESTAMP:
            addr = _get(k["TIMESTAMP_GET_GLOBAL"], "write_addr_31_3", pkt) << 3 \
                | _get(k["TIMESTAMP_GET_GLOBAL"], "write_addr_63_32", pkt) << 32
            self._write(addr, np.array([self.gpu.clock()], np.uint64).tobytes())
        elif op == s.SDMA_OP_INDIRECT:
            if self.ib is not None:
                raise CPError("SDMA INDIRECT inside an indirect buffer (they do not nest)")
            self.ib = [_addr(k["INDIRECT"], "ib_base", pkt), _get(k["INDIRECT"], "ib_size", pkt), 0]
            self.rptr += 4 * len(pkt)
            self.count("SDMA_INDIRECT")
            raise _Entered
        return True

    # GPU memory accesses: checked through the VM before any byte moves
    def _copy(self, dst: int, src: int, n: int) -> None:
        """Both ranges checked first, then copied CHUNK bytes at a time (never a second copy of up to 1 GiB)."""
        self._check(src, n, False)
        self._check(dst, n, True)
        for pos in range(0, n, CHUNK):
            self.gpu.vm.write(dst + pos, self.gpu.vm.read(src + pos, min(CHUNK, n - pos)))

    def _read(self, addr: int, n: int) -> bytes:
        self._check(addr, n, False)
        return self.gpu.vm.read(addr, n)

    def _write(self, addr: int, data: bytes) -> None:
        self._check(addr, len(data), True)
        self.gpu.vm.write(addr, data)

    def _fill(self, addr: int, word: int, n: int) -> None:
        """n bytes of the repeated little-endian dword `word` at addr: the range checked first, then written
        CHUNK bytes at a time (a fill of up to 1 GiB never builds its data whole)."""
        self._check(addr, n, True)
        chunk = np.full(min(n, CHUNK) // 4 + 1, word, np.uint32).view(np.uint8)
        for pos in range(0, n, CHUNK):
            self.gpu.vm.write(addr + pos, chunk[:min(CHUNK, n - pos)])

    def _check(self, addr: int, n: int, write: bool) -> None:
        """Fault like the GPU would on the first page of [addr, addr+n) that is unmapped (or read-only)."""
        self.gpu.vm.check_range(addr, n, write)
