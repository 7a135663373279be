"""Memory instruction plans: LDS (DS), global / flat / scratch, buffer (MUBUF/MTBUF/VBUFFER) with resource
descriptor range checking. Addresses are computed from the encoding; the pcode moves the data."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd.exec.operands import Unsupported, scalar_reader, sext, vgpr_reader, vgpr_writer
from emu.amd.exec.state import ACC
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
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        consts = {"OFFSET": f["offset1"] << 8 | f["offset0"], "OFFSET0": f["offset0"], "OFFSET1": f["offset1"]}
        fm = {"DATA": ("data0", None), "DATA0": ("data0", None), "DATA2": ("data1", None), "DATA1": ("data1", None)}
        reads = [("MEM", lambda w: w.lds), ("LDS", lambda w: w.lds)]
        acc = ACC if f.get("acc") else 0
        addr = vgpr_reader(f["addr"], 32)
        if not consts.keys() & sem.reads:  # pcode that addresses MEM[ADDR] alone: the offset is part of ADDR
            off = U64(consts["OFFSET"])
            addr = (lambda a: lambda w: a(w) + off)(addr)
        regs = "VGPR" in sem.reads  # cross-lane ops (permute, swizzle) name registers: ADDR, DATA0 are numbers
        src = f["data0"] if "data0" in op.operands else f["addr"]  # ds_swizzle reads the register in addr
        numbers = {"ADDR": f["addr"], "DATA0": src, "DATA": src, "DATA1": f["data1"], "VDST": f["vdst"]}
        for n in sorted(sem.reads - {"MEM", "LDS"}):
            if regs and n in numbers:
                reads.append((n, lambda w, c=numbers[n] + acc: c))
            elif n == "ADDR":
                reads.append((n, addr))
            elif n == "ADDR_BASE":  # two-address ops add each offset themselves
                reads.append((n, vgpr_reader(f["addr"], 32)))
            elif n in consts:
                reads.append((n, lambda w, c=consts[n]: c))
            elif n in fm:
                fld, bits = fm[n]
                bits = bits or self._width(sem, n, op, fld)
                reads.append((n, _wide_reader(f[fld] + acc, bits)))
            elif n in ("VDST",):
                reads.append((n, lambda w, c=f["vdst"] + acc: c))
            elif n == "RETURN_DATA":
                reads.append((n, _wide_reader(f["vdst"] + acc, self._width(sem, n, op, "vdst"))))
            else:
                reads.append((n, self._common_read(n, inst)))
        return sem, reads, self._vmem_writes(sem, op, f["vdst"] + acc)

    def _vmem_writes(self, sem, op, vdst: int, returns: bool = True) -> list:
        """Writers of a memory op's register results: loaded data (VDATA), and an atomic's pre-op value
        (RETURN_DATA) when it `returns`. Ops without a destination operand (DS_ADD_U32, stores) write none."""
        writes = []
        has_dst = "vdst" in op.operands or ("vdata" in op.operands and "STORE" not in op.name)
        for n in sorted(sem.writes - {"MEM", "LDS"}):
            if n in ("VDATA", "RETURN_DATA"):
                if has_dst and (n == "VDATA" or returns):
                    writes.append((n, _wide_writer(vdst, self._width(sem, n, op, "vdst"))))
            else:
                sw = self._state_writer(n, op.name)
                writes.append((n, lambda w, v, act, sw=sw: sw(w, v)))
        return writes

    # -- global / flat / scratch -------------------------------------------------------------------------------
    def _flat(self, inst) -> Callable:
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        if "VGPR" in sem.reads:  # RDNA4 *_BLOCK: MEM[VGPR[laneId][ADDR]] <-> VGPR[laneId][VDATA + i] for M0's i
            raise Unsupported(f"{op.name}: block transfers (VGPRs selected by M0) are not modelled")
        base = inst.base.removeprefix("V") if inst.base.startswith("V") else inst.base
        rdna4 = "ioffset" in f
        vaddr = f["vaddr"] if rdna4 else f["addr"]
        acc = ACC if f.get("acc") else 0  # CDNA: data and destination are ACC VGPRs
        data = (f["vsrc"] if rdna4 else f["data"]) + acc
        vdst = f["vdst"] + acc
        off = sext(f["ioffset"], 24) if rdna4 else (
            f["offset"] if self.gen.flat_offset_unsigned and base == "FLAT" else sext(f["offset"], 13))
        saddr = f.get("saddr", self.saddr_off)
        saddr = None if self.gen.no_saddr(saddr) else saddr
        returns = self._returns(op, f)
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
        reads = []
        for n in sorted(sem.reads - {"MEM", "ADDR"}):
            if n == "VDATA" and "vdst" in op.operands:  # a d16 load keeps the other half of its destination
                reads.append((n, _wide_reader(vdst, self._width(sem, n, op, "vdst"))))
            elif n in ("DATA", "VDATA", "DATA0"):
                reads.append((n, _wide_reader(data, self._width(sem, n, op, "data"))))
            elif n == "OFFSET":
                reads.append((n, lambda w: off))
            else:
                reads.append((n, self._common_read(n, inst)))
        writes = self._vmem_writes(sem, op, vdst, returns)
        step = _mem_step(sem, reads, writes, inst.pc + inst.size, self.lanes)
        return lambda w: step(w, {"ADDR": addr(w), "MEM": space(w)})

    def _returns(self, op, f) -> bool:
        """Whether an atomic returns the pre-op value (glc / sc0 / th bit 0)."""
        if "th" in f:
            return bool(f["th"] & 1)
        return bool(f.get("glc", f.get("sc0", 0)))

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
        nbytes = access // 8 if 0 < access < 32 else max(4, self._width(sem, "VDATA", op, "vdata") // 8)

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

        reads = []
        vdata = f["vdata"] + (ACC if f.get("acc") else 0)  # CDNA: data and destination are ACC VGPRs
        for n in sorted(sem.reads - {"MEM", "ADDR"}):
            if n in ("DATA", "VDATA"):
                reads.append((n, _wide_reader(vdata, self._width(sem, n, op, "vdata"))))
            else:
                reads.append((n, self._common_read(n, inst)))
        writes = self._vmem_writes(sem, op, vdata, self._returns(op, f))
        inner = _mem_step(sem, reads, writes, inst.pc + inst.size, self.lanes)

        def step(w):
            a, mem = space(w)
            return inner(w, {"ADDR": a, "MEM": mem})
        return step


def _wide_reader(reg: int, bits: int) -> Callable:
    """Per-lane value of `bits` from consecutive VGPRs: uint64 [lanes] up to 64 bits, else uint64 [dwords, lanes]."""
    if bits <= 64:
        return vgpr_reader(reg, bits)
    n = bits // 32
    return lambda w: w.vgpr[reg:reg + n].astype(U64)


def _wide_writer(reg: int, bits: int) -> Callable:
    if bits <= 64:
        return vgpr_writer(reg, bits)
    n = bits // 32

    def wr(w, v, act):
        np.copyto(w.vgpr[reg:reg + n], v, where=act, casting="unsafe")
    return wr


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
