"""Memory instruction plans: LDS (DS), global / flat / scratch, buffer (MUBUF/MTBUF/VBUFFER) with resource
descriptor range checking. Addresses are computed from the encoding, the data registers are the binding's
(emu.amd.exec.bind); the pcode moves the data."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd.exec.bind import Binding, Unsupported, memory_offset, width
from emu.amd.exec.operands import scalar_reader, vgpr_reader
from emu.amd.memspace import Buffer, Swizzled
from emu.amd.rsrc import BufferResource

U64 = np.uint64


class MemoryPlans:
    """Memory part of emu.amd.exec.plan.Planner."""

    # -- LDS ---------------------------------------------------------------------------------------------------
    def _ds(self, inst) -> Callable:
        return _mem_step(*self.ds_parts(inst), inst.pc + inst.size, self.lanes)

    def ds_parts(self, inst) -> tuple:
        """(semantics, [(name, reader)], [(name, writer)]) of an LDS instruction."""
        bd = self.ds_operands(inst)
        reads = [("MEM", lambda w: w.lds), ("LDS", lambda w: w.lds)]
        return bd.sem, reads + self._reads(inst, bd), self._writes(bd)

    def _reads(self, inst, bd: Binding) -> list:
        return [(n, self.reader(inst, bd, o)) for n, o in bd.inputs.items()]

    def _writes(self, bd: Binding) -> list:
        return [(n, self.writer(bd, o)) for n, o in bd.outputs.items()]

    # -- global / flat / scratch -------------------------------------------------------------------------------
    def _flat(self, inst) -> Callable:
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        if "VGPR" in sem.reads:  # RDNA4 *_BLOCK: MEM[VGPR[laneId][ADDR]] <-> VGPR[laneId][VDATA + i] for M0's i
            raise Unsupported(f"{op.name}: block transfers (VGPRs selected by M0) are not modelled")
        base = inst.base.removeprefix("V") if inst.base.startswith("V") else inst.base
        vaddr = f["vaddr"] if "ioffset" in f else f["addr"]
        off = memory_offset(inst)
        saddr = f.get("saddr", self.saddr_off)
        saddr = None if self.gen.no_saddr(saddr) else saddr
        if base == "SCRATCH":
            sve = f["sve"] if "sve" in f else saddr is None  # gfx90a has no SVE bit: VADDR unless SADDR is on
            vr = vgpr_reader(vaddr, 32) if sve else (lambda w: U64(0))
            sr = scalar_reader(saddr, 32, "", None, self.fam) if saddr is not None else (lambda w: 0)
            addr = lambda w: (vr(w) + U64((sr(w) + off) & 0xFFFFFFFF)) & U64(0xFFFFFFFF)  # noqa: E731
            space = lambda w: w.scratch  # noqa: E731
        elif base == "GLOBAL" and saddr is not None:
            vr = vgpr_reader(vaddr, 32)
            sr = scalar_reader(saddr, 64, "", None, self.fam)
            addr = lambda w: vr(w) + U64((sr(w) + off) & 0xFFFFFFFFFFFFFFFF)  # noqa: E731
            space = lambda w: w.vm  # noqa: E731
        else:
            vr = vgpr_reader(vaddr, 64)
            addr = lambda w: vr(w) + U64(off & 0xFFFFFFFFFFFFFFFF)  # noqa: E731
            space = (lambda w: w.flat) if base == "FLAT" else (lambda w: w.vm)
        bd = self.flat_operands(inst)
        reads, writes = self._reads(inst, bd), self._writes(bd)
        step = _mem_step(sem, reads, writes, inst.pc + inst.size, self.lanes)
        return lambda w: step(w, {"ADDR": addr(w), "MEM": space(w)})

    # -- buffer ------------------------------------------------------------------------------------------------
    def _buffer(self, inst) -> Callable:
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        rsrc = (f["rsrc"] if "rsrc" in f else f["srsrc"] * 4)
        rr = [scalar_reader(rsrc + k, 32, "", None, self.fam) for k in range(4)]
        soff_code = f.get("soffset", self.null)
        soff = scalar_reader(soff_code, 32, "", None, self.fam) if soff_code != self.null else (lambda w: 0)
        ioff = f.get("ioffset", f.get("offset", 0))
        offen, idxen = f.get("offen", 0), f.get("idxen", 0)
        vr = vgpr_reader(f["vaddr"], 32)
        vr2 = vgpr_reader(f["vaddr"] + 1, 32)
        access = sem.access_bits  # a sub-dword access is range-checked with its own size
        nbytes = access // 8 if 0 < access < 32 else max(4, width(sem, "VDATA", op, "vdata") // 8)

        swizzle_fields, tid = self.gen.buffer_swizzle, np.arange(self.lanes, dtype=U64)

        def space(w):
            """(ADDR, MEM): each lane's address, and the VM as the resource shows it (range-checked, swizzled)."""
            r = BufferResource.read(tuple(int(f(w)) for f in rr), swizzle_fields)
            index = vr(w) if idxen else np.zeros(self.lanes, U64)
            if r.add_tid:
                index = index + tid
            offset = (vr2(w) if idxen else vr(w)) if offen else np.zeros(self.lanes, U64)
            offset = offset + U64(ioff)
            ok = index < U64(r.num_records) if r.stride else offset + U64(nbytes) <= U64(r.num_records)
            base = U64((r.base + soff(w)) & 0xFFFFFFFFFFFFFFFF)
            if not r.swizzle:
                return base + index * U64(r.stride) + offset, Buffer(w.vm, ok)
            n = U64(r.index_stride)
            lane = base + (index // n) * U64(r.stride) * n + index % n * U64(r.element_size)
            return offset, Swizzled(Buffer(w.vm, ok), lane, r.element_size, r.index_stride)

        bd = self.buffer_operands(inst)
        reads, writes = self._reads(inst, bd), self._writes(bd)
        inner = _mem_step(sem, reads, writes, inst.pc + inst.size, self.lanes)

        def step(w):
            a, mem = space(w)
            return inner(w, {"ADDR": a, "MEM": mem})
        return step


def _mem_step(sem, reads, writes, nxt: int, lanes: int) -> Callable:
    def step(w, more=None):
        st = {n: r(w) for n, r in reads}
        if more:
            st.update(more)
        act = w.active
        st["ACTIVE"] = act
        out = sem(st, lanes)
        for n, wr in writes:
            v = out.get(n)
            if v is not None:
                wr(w, v, act)
        w.lane_ops += int(np.count_nonzero(act))
        w.pc = nxt
        return 0
    return step
