"""The performance counters (PMC) of RDNA3 and RDNA4: per-block counter registers the CP programs and reads.

What a driver programs: GRBM_GFX_INDEX (emu.amd.grbm, shared with the thread trace) selects the instance a
register access goes to; `<block>_PERFCOUNTERn_SELECT.perf_sel` chooses what counter n of that instance counts
(the select indices are the vendor's, emu.amd.hw's `pmc` table); CP_PERFMON_CNTL (gfx12: CP_PERFMON_CNTL_1)
.perfmon_state 0 stops the counters and resets them, 1 counts, 2 stops them. The SQ counts compute waves while
SQ_PERFCOUNTER_CTRL.cs_en is set: those of dispatches whose queue set COMPUTE_PERFCOUNT_ENABLE, or of all while
SQ_PERFCOUNTER_CTRL2.force_en is set. The driver reads `<block>_PERFCOUNTERn_LO` / `_HI` of each instance with
COPY_DATA (emu.amd.cp). Dispatches run to completion before the next packet, so a read sees what a sample
(perfmon_sample_enable) would.

Blocks and instances:
- SQ: one per WGP, selected by shader engine, shader array and instance_index = wgp << 2; counter k is selected by
  SQ_PERFCOUNTER{2k}_SELECT and read at SQ_PERFCOUNTER{k}_LO, 32 bits (the odd selects keep what is written);
- GRBM: one for the GPU, 64-bit counters;
- GL2C: one per L2 channel (emu.amd.gl2c), selected by instance_index.

What is counted (the rest of the vendor's selects read 0): a dispatch counted runs with the per-category statistics
of HWEMU_STATS on (emu.amd.exec.category), so the counters are the same numbers. Its workgroups go to the chip's
WGPs as emu.amd.spi deals them (round robin, engines first), each WGP's SQ counting the workgroups it was given:
SQ_WAVES, SQ_INSTS_{SALU, VALU, SMEM, LDS} (and _VMEM, _BRANCH where the table names them), SQ_WAVE32_INSTS /
SQ_WAVE64_INSTS, SQ_INSTS_WAVE32_VALU / _LDS, and SQ_BUSY_CYCLES: the cycles of the thread trace's model
(emu.amd.sqtt.cycles) for each category's instructions (VALU as plain VALU, memory and LDS 4, the rest 1) plus one
per wave, the waves of a WGP issuing one after another. GRBM_GUI_ACTIVE adds, per dispatch, the cycles
of its busiest WGP (WGPs run side by side); GRBM_COUNT the same plus the model's gap between dispatches.
SQC_LDS_IDX_ACTIVE and SQC_LDS_BANK_CONFLICT count the LDS cycles and bank-conflict cycles of the DS
instructions, and GL2C_HIT / GL2C_MISS each channel's hits and misses, by the models of emu.amd.accesses and
emu.amd.gl2c: a dispatch counted with any of them selected runs on the interpreter, its memory instructions'
addresses seen (the others keep their tiers); the L2 is empty at the start of each dispatch, as after a GL2
invalidate (hwemu sees only counted dispatches' accesses, so it keeps no lines from one to the next).
Nothing a driver writes here raises.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from emu.amd import gl2c, spi, sqtt, target
from emu.amd.accesses import Accesses
from emu.amd.dispatch import Stats
from emu.amd.exec.category import BRANCH, LDS, OTHER, SALU, SMEM, VALU, VMEM
from emu.amd.grbm import GfxIndex
from emu.amd.hw import pm4, tables
from emu.amd.hw.bits import Field

RESET, COUNT, STOP = 0, 1, 2  # CP_PERFMON_CNTL.perfmon_state: disable and reset, start counting, stop counting
SQ_WGP_SHIFT = 2  # GRBM_GFX_INDEX.instance_index of a WGP's SQ: wgp << 2
PMC: dict[str, dict[str, tuple[str, int]]] = tables()["pmc"]  # name -> {target -> (block, select index)}
_MODEL = {SALU: ("INST", sqtt.SALU_OP), VALU: ("VALUINST", 0), VMEM: ("INST", sqtt.GLOBAL_RD),
          SMEM: ("INST", sqtt.SMEM_OP), LDS: ("INST", sqtt.LDS_RD), BRANCH: ("INST", sqtt.JUMP),
          OTHER: ("IMMEDIATE", 0)}  # the thread-trace token a category's instructions are costed as


@dataclass
class Work:
    """What one workgroup did: its waves and their wave-instructions by category."""
    waves: int
    categories: list[int]
    lanes: int
    lds: tuple[int, int] = (0, 0)  # DS cycles and bank-conflict cycles (emu.amd.accesses)

    def cycles(self) -> int:
        return self.waves + sum(n * sqtt.cycles(*_MODEL[c], self.lanes) for c, n in enumerate(self.categories))

    def count(self, name: str) -> int:
        """The SQ counter `name`'s events in this work (0 for a counter hwemu does not model)."""
        c, w32 = self.categories, self.lanes == 32
        if name == "SQ_WAVES":
            return self.waves
        if name == "SQ_BUSY_CYCLES":
            return self.cycles()
        if name in ("SQ_WAVE32_INSTS", "SQ_WAVE64_INSTS"):
            return sum(c) if w32 == (name == "SQ_WAVE32_INSTS") else 0
        if name in ("SQ_INSTS_WAVE32_VALU", "SQ_INSTS_WAVE32_LDS"):
            return c[VALU if name.endswith("VALU") else LDS] if w32 else 0
        if name in _LDS:
            return self.lds[_LDS.index(name)]
        i = _INSTS.get(name)
        return 0 if i is None else c[i]


_INSTS = {"SQ_INSTS_SALU": SALU, "SQ_INSTS_VALU": VALU, "SQ_INSTS_VMEM": VMEM, "SQ_INSTS_SMEM": SMEM,
          "SQ_INSTS_LDS": LDS, "SQ_INSTS_BRANCH": BRANCH}
_LDS = ("SQC_LDS_IDX_ACTIVE", "SQC_LDS_BANK_CONFLICT")  # what needs the DS instructions' addresses
_L2 = ("GL2C_HIT", "GL2C_MISS")  # what needs the memory instructions' addresses


@dataclass
class Block:
    """One block's counters: (SELECT, LO, HI or None) addresses of each, and per (instance, counter) the select
    written and the count."""
    name: str
    slots: list[tuple[int, int, int | None]]
    sel: Field  # the SELECT register's perf_sel field
    selects: dict[tuple, int] = field(default_factory=dict)
    counts: dict[tuple, int] = field(default_factory=dict)


class PerfMonitor:
    """The performance-counter unit of one GPU."""

    def __init__(self, chip: target.Target, index: GfxIndex):
        gfx, regs = chip.gen.gfx, pm4.REGS[chip.gen.gfx]
        self.chip, self.index = chip, index
        self.names: dict[tuple[str, int], str] = {}  # (block, select index) -> counter name
        for name, per_target in PMC.items():
            where = per_target.get(f"gfx{gfx}") or per_target.get(chip.arch)  # tinygrad's and ROCm's keys for RDNA
            if where is not None:
                self.names.setdefault(tuple(where), name)
        self.blocks: dict[str, Block] = {}
        self.at: dict[int, tuple[Block, int, str]] = {}  # counter register -> (block, counter, "select"/"lo"/"hi")
        for b in ("SQ", "GRBM", "GL2C"):
            slots, n = [], 0
            while (lo := regs.get(f"{b}_PERFCOUNTER{n}_LO")) is not None:
                sel = regs.get(f"{b}_PERFCOUNTER{2 * n if b == 'SQ' else n}_SELECT")
                hi = regs.get(f"{b}_PERFCOUNTER{n}_HI")
                if sel is None:
                    break
                slots.append((sel[0], lo[0], hi and hi[0]))
                n += 1
            blk = self.blocks[b] = Block(b, slots, regs[f"{b}_PERFCOUNTER0_SELECT"][1]["perf_sel"])
            for k, (s, lo, hi) in enumerate(slots):
                self.at.update({s: (blk, k, "select"), lo: (blk, k, "lo")} | ({hi: (blk, k, "hi")} if hi else {}))
        self.cntl = next(regs[n] for n in ("CP_PERFMON_CNTL_1", "CP_PERFMON_CNTL") if n in regs)
        self.sq_ctrl, self.sq_ctrl2 = regs["SQ_PERFCOUNTER_CTRL"], regs["SQ_PERFCOUNTER_CTRL2"]
        self.owned = frozenset(a for n, (a, _) in regs.items() if n.startswith(("SQ_PERFCOUNTER", "GRBM_PERFCOUNTER",
                                                                                 "GL2C_PERFCOUNTER", "CP_PERFMON")))
        self.owned |= {index.addr}
        self.plain: dict[int, int] = {}  # the other owned registers: what was written
        self.wgps = spi.wgps(chip)  # workgroup n runs on wgps[n % len]
        self.shape = (chip.shader_engines, chip.arrays_per_engine, len(self.wgps) // chip.arrays)
        self.channels = gl2c.channels(chip.l2_kb)

    # -- registers ---------------------------------------------------------------------------------------------
    def owns(self, addr: int) -> bool:
        return addr in self.owned

    def _instances(self, blk: Block) -> list[tuple]:
        if blk.name == "GL2C":
            return [(c,) for c in self.index.instances(self.channels)]
        if blk.name != "SQ":
            return [()]
        ses, sas, wgps = self.shape
        return [(se, sa, w) for se in self.index.engines(ses) for sa in self.index.arrays(sas)
                for w in self.index.instances(wgps, SQ_WGP_SHIFT)]

    @property
    def state(self) -> int:
        a, f = self.cntl
        return f["perfmon_state"].get(self.plain.get(a, 0))

    def write(self, addr: int, value: int) -> None:
        value &= 0xFFFFFFFF
        if addr == self.index.addr:
            self.index.value = value
            return
        hit = self.at.get(addr)
        if hit is None:
            self.plain[addr] = value
            if addr == self.cntl[0] and self.state == RESET:
                for blk in self.blocks.values():
                    blk.counts.clear()
            return
        blk, k, kind = hit
        if kind == "select":  # counter registers themselves are read-only here
            for i in self._instances(blk):
                blk.selects[i, k] = value

    def read(self, addr: int) -> int:
        if addr == self.index.addr:
            return self.index.value
        hit = self.at.get(addr)
        if hit is None:
            return self.plain.get(addr, 0)
        blk, k, kind = hit
        inst = next(iter(self._instances(blk)), None)
        if inst is None:
            return 0
        if kind == "select":
            return blk.selects.get((inst, k), 0)
        n = blk.counts.get((inst, k), 0)
        return n & 0xFFFFFFFF if kind == "lo" else n >> 32 & 0xFFFFFFFF

    def _name(self, blk: Block, inst: tuple, k: int) -> str | None:
        return self.names.get((blk.name, blk.sel.get(blk.selects.get((inst, k), 0))))

    # -- counting ----------------------------------------------------------------------------------------------
    def counting(self, perfcount: bool, lanes: int) -> Counting | None:
        """What credits a dispatch about to start to the counters, if they count. The SQ counts it when
        SQ_PERFCOUNTER_CTRL.cs_en is set and either `perfcount` (its queue's COMPUTE_PERFCOUNT_ENABLE) or
        SQ_PERFCOUNTER_CTRL2.force_en is."""
        if self.state != COUNT:
            return None
        (a, f), (a2, f2) = self.sq_ctrl, self.sq_ctrl2
        forced = bool(f2["force_en"].get(self.plain.get(a2, 0)))
        sq = (perfcount or forced) and bool(f["cs_en"].get(self.plain.get(a, 0)))
        return Counting(self, lanes, sq, sq and self._selected("SQ", _LDS), self._selected("GL2C", _L2))

    def _selected(self, block: str, names: tuple[str, ...]) -> bool:
        """Whether a counter of `block`, on any instance, counts one of `names`."""
        blk = self.blocks[block]
        return any(self.names.get((block, blk.sel.get(v))) in names for v in blk.selects.values())

    def credit_sq(self, wgp: tuple[int, int, int], work: Work) -> None:
        blk = self.blocks["SQ"]
        for k in range(len(blk.slots)):
            name = self._name(blk, wgp, k)
            if name is not None:
                blk.counts[wgp, k] = blk.counts.get((wgp, k), 0) + work.count(name)

    def credit_grbm(self, busy: int) -> None:
        blk = self.blocks["GRBM"]
        for k in range(len(blk.slots)):
            name = self._name(blk, (), k)
            n = busy if name == "GRBM_GUI_ACTIVE" else busy + sqtt.DISPATCH_GAP if name == "GRBM_COUNT" else 0
            blk.counts[(), k] = blk.counts.get(((), k), 0) + n

    def credit_gl2c(self, hits: list[int], misses: list[int]) -> None:
        blk = self.blocks["GL2C"]
        for c in range(self.channels):
            for k in range(len(blk.slots)):
                name = self._name(blk, (c,), k)
                if name in _L2:
                    n = (hits if name == "GL2C_HIT" else misses)[c]
                    blk.counts[(c,), k] = blk.counts.get(((c,), k), 0) + n


class Counting:
    """One counted dispatch as it runs: told the dispatch's statistics after each workgroup (emu.amd.dispatch),
    it credits the workgroup's share to the WGP it ran on; `close` credits the dispatch's cycles to the GRBM and
    its L2 requests to the GL2C. `banks` / `l2`: the selected counters need the DS instructions' bank cycles /
    the L2 model (emu.amd.accesses sees the addresses, `view`)."""

    def __init__(self, unit: PerfMonitor, lanes: int, sq: bool, banks: bool = False, l2: bool = False):
        self.unit, self.lanes, self.sq = unit, lanes, sq
        self.workgroups, self.waves, self.categories = 0, 0, [0] * len(_MODEL)
        self.busy: dict[tuple[int, int, int], int] = {}
        self.banks, self.l2 = banks, gl2c.L2(unit.chip.l2_kb) if l2 else None
        self.accesses: Accesses | None = None

    def view(self, prog):
        """What the dispatch of `prog` runs its traced waves' steps from: `prog`, or when the counters need
        addresses the Accesses that sees them (every wave then runs on it)."""
        if self.banks or self.l2 is not None:
            self.accesses = Accesses(prog, self.l2, self.banks)
            return self.accesses
        return prog

    def workgroup(self, stats: Stats) -> None:
        """The work `stats` gained since the last call is a workgroup's (or the part of one a fault left)."""
        work = Work(stats.waves - self.waves, [a - b for a, b in zip(stats.categories, self.categories, strict=True)],
                    self.lanes, self.accesses.take() if self.accesses is not None else (0, 0))
        self.waves, self.categories = stats.waves, list(stats.categories)
        if not work.waves:
            return
        wgps = self.unit.wgps
        wgp = wgps[self.workgroups % len(wgps)]
        self.workgroups += 1
        self.busy[wgp] = self.busy.get(wgp, 0) + work.cycles()
        if self.sq:
            self.unit.credit_sq(wgp, work)

    def close(self) -> None:
        self.unit.credit_grbm(max(self.busy.values(), default=0))
        if self.l2 is not None:
            self.unit.credit_gl2c(*self.l2.take())
