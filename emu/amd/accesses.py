"""The memory accesses of a counted dispatch's instructions, for the performance counters that depend on addresses:
the LDS's bank conflicts (SQC_LDS_IDX_ACTIVE, SQC_LDS_BANK_CONFLICT) and the L2's hits and misses (emu.amd.gl2c).

Where they are seen: a dispatch whose selected counters need addresses runs every wave here (the thread trace and
HWEMU_TRACE build their steps on this view of the program), on the threaded tier's native code where it has the
handlers: its memory instructions log each access (the instruction's index in the call, the bytes, the
active lanes and their addresses: emu.amd.exec.translate.Region._logged) and the log is accounted after each call.
What native code does not run goes one instruction at a time: the memory instructions (VMEM, SMEM, DS) on the
reference plans, whose every access goes through a memory space's load, store or read (emu.amd.memspace,
emu.amd.memory; the waves' VM and LDS are recording views of the real ones, and each instruction's accesses are
accounted when it has run), the others on the interpreter. Both ways an instruction's accesses are the same.
Dispatches whose counters need no addresses keep their tiers.

The LDS (AMD's RDNA whitepaper: a WGP's 128 KiB LDS is 64 banks of 512 dwords, a half of 32 banks by each CU;
AMD's ROCm guide to LDS bank conflicts: banks 4 bytes wide, lanes that access different dwords of one bank in the
same cycle are serialised). hwemu's model: a DS instruction is served 32 lanes at a time (a wave64 in two halves)
by 32 banks, dword d (byte address >> 2) in bank d % 32; a half needs as many cycles as the most distinct dwords
one bank holds among those its active lanes access (lanes accessing one dword share it; an instruction's accesses
together: both addresses of the 2ADDR forms, the dwords of a 64- or 128-bit access), which is at least
ceil(distinct dwords / 32); the cycles over that least are bank conflicts. SQC_LDS_IDX_ACTIVE counts the cycles and
SQC_LDS_BANK_CONFLICT the conflict cycles (ROCm's definitions: cycles the LDS is used for indexed operations, cycles
it is stalled by bank conflicts) of DS instructions; LDS-direct loads and flat accesses to the LDS aperture count
in neither.

The L2: every VMEM and SMEM instruction makes one request per distinct 128-byte line its active lanes' accesses
touch (reads and writes alike), in the order of the lines' addresses.
"""
from __future__ import annotations

import numpy as np

from emu.amd.exec.access import RECORD
from emu.amd.exec.category import LDS as DS
from emu.amd.exec.category import SMEM, VMEM, category, tallied
from emu.amd.gl2c import L2
from emu.amd.memory import VA_BITS
from emu.amd.memspace import LDS

BANKS = 32  # the banks serving one half of a wave's lanes
LINE_SHIFT = 7  # 128-byte L2 lines
LINE_BITS = VA_BITS - LINE_SHIFT  # a line's bits: every access native code logs lies in a mapping of the VA space


class _LDS(LDS):
    """The workgroup's LDS, its accesses logged as (True, addresses, bytes, active lanes)."""

    def __init__(self, size: int, log: list):
        super().__init__(size)
        self.log = log

    def load(self, addr, bits: int, active=None) -> np.ndarray:
        self.log.append((True, addr, bits // 8, active))
        return super().load(addr, bits, active)

    def store(self, addr, bits: int, value, active=None) -> None:
        self.log.append((True, addr, bits // 8, active))
        super().store(addr, bits, value, active)


class _VM:
    """The GPU VM as the waves reach it, its accesses logged as (False, addresses, bytes, active lanes)."""

    def __init__(self, vm, log: list):
        self._vm, self._log = vm, log

    def __getattr__(self, name: str):
        return getattr(self._vm, name)

    def load(self, addr, bits: int, active=None) -> np.ndarray:
        self._log.append((False, addr, bits // 8, active))
        return self._vm.load(addr, bits, active)

    def store(self, addr, bits: int, value, active=None) -> None:
        self._log.append((False, addr, bits // 8, active))
        self._vm.store(addr, bits, value, active)

    def read(self, va: int, n: int) -> bytes:
        self._log.append((False, np.array([va], np.uint64), n, None))
        return self._vm.read(va, n)


def _lanes(addr, active) -> tuple[np.ndarray, np.ndarray]:
    """The active lanes' indices and their addresses (uint64)."""
    a = np.asarray(addr, np.uint64).reshape(-1)
    if active is None:
        return np.arange(a.size), a
    idx = np.flatnonzero(np.broadcast_to(np.asarray(active, bool), a.shape))
    return idx, a[idx]


def bank_cycles(accesses: list[tuple], lanes: int) -> tuple[int, int]:
    """(cycles, conflict cycles) of one DS instruction's LDS accesses (addresses, bytes, active lanes), by the
    module's rule."""
    groups: list[list[np.ndarray]] = [[] for _ in range(-(-lanes // BANKS))]
    for addr, nbytes, active in accesses:
        idx, a = _lanes(addr, active)
        a = a & np.uint64(0xFFFFFFFF)
        first, last = a >> np.uint64(2), (a + np.uint64(max(nbytes, 1) - 1)) >> np.uint64(2)
        for k in range(int((last - first).max()) + 1 if a.size else 0):
            d, keep = first + np.uint64(k), first + np.uint64(k) <= last
            for g, dwords in enumerate(groups):
                dwords.append(d[keep & (idx // BANKS == g)])
    cycles = conflicts = 0
    for dwords in groups:
        u = np.unique(np.concatenate(dwords)) if dwords else np.zeros(0, np.uint64)
        if u.size:
            most = int(np.bincount((u % np.uint64(BANKS)).astype(np.intp), minlength=BANKS).max())
            cycles += most
            conflicts += most - -(-u.size // BANKS)
    return cycles, conflicts


def lines(accesses: list[tuple]) -> list[int]:
    """The distinct 128-byte lines (address >> 7) accesses (addresses, bytes, active lanes) touch, in order."""
    parts = []
    for addr, nbytes, active in accesses:
        _, a = _lanes(addr, active)
        parts += [a >> np.uint64(LINE_SHIFT), (a + np.uint64(max(nbytes, 1) - 1)) >> np.uint64(LINE_SHIFT)]
    return [int(x) for x in np.unique(np.concatenate(parts))] if parts else []


def unaccounted(inst) -> bool:
    """Whether `inst` makes no access the counters account (not VMEM, SMEM or DS): native code may run it."""
    return category(inst) not in (VMEM, SMEM, DS)


class Accesses:
    """One counted dispatch's view of its program: steps that account their memory accesses (`l2`: the L2 model
    fed, if any; `banks`: DS instructions' bank cycles counted). It is also the waves' tracer where nothing else
    traces them (`beside`), so every wave runs its steps."""

    def __init__(self, prog, l2: L2 | None, banks: bool):
        self.prog, self.l2, self.banks = prog, l2, banks
        self.log: list[tuple] = []
        self.steps: dict = {}
        self.inner = None  # the dispatch's other tracer (thread trace, HWEMU_TRACE), built on this view
        self.lds_cycles = self.lds_conflicts = 0

    def vm(self, vm) -> _VM:
        """The view of `vm` the dispatch's waves are given."""
        return _VM(vm, self.log)

    def lds(self, size: int) -> LDS:
        """The LDS the dispatch's workgroups are given."""
        return _LDS(size, self.log)

    # -- the program's view ------------------------------------------------------------------------------------
    def inst(self, pc: int):
        return self.prog.inst(pc)

    def threaded_step(self, pc: int, step, ran=None):
        """The step at pc of a wave of the dispatch (emu.amd.exec.wave.Program.threaded_step): native code, whose
        memory instructions log their accesses, accounted after each call (`_logged`); where it runs nothing,
        `step` (accounted)."""
        return self.prog.threaded_step(pc, step, ran, self._logged)

    def _logged(self, records: np.ndarray) -> None:
        """Account the accesses native code logged (emu.amd.exec.translate.Region._logged's records: the
        instruction's index in the call, bytes | LDS << 16, the active lanes, the addresses) as `single`
        accounts an interpreted instruction's: each DS instruction's bank cycles, and each VMEM / SMEM instruction's
        distinct lines, in order, to the L2 (all of a call's at once)."""
        lanes = self.prog.lanes
        recs = records.view(np.uint64).reshape(-1, RECORD + lanes)
        seq, tag, addrs = recs[:, 0], recs[:, 1], recs[:, RECORD:]
        active = (recs[:, 2:3] & np.left_shift(np.uint64(1), np.arange(lanes, dtype=np.uint64))) != 0
        nbytes, lds = tag & np.uint64(0xFFFF), tag >> np.uint64(16) != 0
        if self.l2 is not None and not lds.all():
            vm, none = ~lds, np.uint64(1 << LINE_BITS)  # `none`: past every line
            a = addrs[vm]
            lines = np.concatenate([a, a + np.maximum(nbytes[vm], 1)[:, None] - np.uint64(1)], axis=1) >> np.uint64(
                LINE_SHIFT)  # each lane's first and last line
            lines[~np.tile(active[vm], 2)] = none
            lines.sort(axis=1)
            new = lines != none
            new[:, 1:] &= lines[:, 1:] != lines[:, :-1]  # each record's distinct lines, in order
            inst = seq[vm]
            if (inst[1:] == inst[:-1]).any():  # an instruction of several records: its lines merged
                rank = np.cumsum(np.r_[True, inst[1:] != inst[:-1]]).astype(np.uint64)
                key = np.unique((rank[:, None] << np.uint64(LINE_BITS) | lines)[new])  # by instruction, then line
                self.l2.requests(key & (none - np.uint64(1)))
            else:
                self.l2.requests(lines[new])
        if self.banks and lds.any():
            at = np.flatnonzero(lds)
            first = np.flatnonzero(np.r_[True, seq[at][1:] != seq[at][:-1]])
            for lo, hi in zip(first, [*first[1:], len(at)], strict=True):
                cycles, conflicts = bank_cycles([(addrs[i], int(nbytes[i]), active[i]) for i in at[lo:hi]], lanes)
                self.lds_cycles += cycles
                self.lds_conflicts += conflicts

    def single(self, pc: int):
        """The step of the instruction at pc: the program's, or for a memory instruction the reference plan's
        accounting its accesses."""
        inst = self.prog.inst(pc)
        if unaccounted(inst):
            return self.prog.single(pc)
        cat = category(inst)
        step = tallied(self.prog.planner.plan(inst), [cat]) if self.prog.stats else self.prog.planner.plan(inst)
        log, lanes, ds = self.log, self.prog.lanes, cat == DS and inst.base == "DS"

        def counted(w):
            log.clear()
            try:
                return step(w)
            finally:
                self._account(ds, lanes)
        return counted

    def _account(self, ds: bool, lanes: int) -> None:
        lds = [e[1:] for e in self.log if e[0]]
        mem = [e[1:] for e in self.log if not e[0]]
        self.log.clear()
        if ds and lds and self.banks:
            cycles, conflicts = bank_cycles(lds, lanes)
            self.lds_cycles += cycles
            self.lds_conflicts += conflicts
        if mem and self.l2 is not None:
            self.l2.requests(np.array(lines(mem), np.uint64))

    def take(self) -> tuple[int, int]:
        """The DS cycles and conflict cycles since the last take."""
        out = self.lds_cycles, self.lds_conflicts
        self.lds_cycles = self.lds_conflicts = 0
        return out

    # -- the tracer of the waves nothing else traces -----------------------------------------------------------
    def beside(self, inner) -> Accesses:
        self.inner = inner
        return self

    def selects(self, wg: tuple[int, int, int], wave: int) -> bool:
        return True

    def wave(self, wg: tuple[int, int, int], wave: int):
        r = self.inner.wave(wg, wave) if self.inner is not None else None
        return self if r is None else r

    def build(self, pc: int):
        s = self.steps[pc] = self.threaded_step(pc, self.single(pc))
        return s
