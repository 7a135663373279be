"""Memory instructions as the LLVM tier's code (emu.amd.exec.translate): LDS loads and stores (DS), global / flat
loads and stores, scalar loads of dwords; atomics are exits. Global accesses are placed lane by lane through the VM's
mapping table before the instruction has any effect (Region._place); LDS accesses are bounds-checked as
emu.amd.memspace.LDS does. Each access is a call of a per-lane function (emu.amd.exec.access)."""
from __future__ import annotations

from llvmlite import ir

from emu.amd.exec import access
from emu.amd.exec.bind import Kind, memory_offset, smem_offsets
from emu.amd.exec.state import VCC
from emu.amd.exec.translate_state import I1, I32, I64, Exit, Hooks, fit
from emu.amd.regs import TTMP0, TTMP_END
from emu.pcode.llvmemit import emit

_DS_IMMEDIATES = {"OFFSET": "offset:ds", "OFFSET0": "offset0", "OFFSET1": "offset1"}  # DS fields (threaded.DERIVED)


class _LDSHooks(Hooks):
    """MEM / LDS of a DS instruction: the workgroup's LDS; lanes whose access ends past its size read 0 and do not
    write (their store goes to the counters' sink). Each access is a call of a per-lane function
    (emu.amd.exec.access)."""

    def __init__(self, region: MemoryCode, inst):
        self.r, self.inst = region, inst

    def load(self, b, file, addr, bits, mask):
        r = self.r
        r._logged(b, self.inst, fit(b, addr, 64), bits // 8, mask, lds=True)
        fn = access.function(r.fn.module, "hwemu_lds_load", r.lanes, bits)
        return b.call(fn, [r.lds, r.lds_size, fit(b, addr, 64), mask])

    def store(self, b, file, addr, value, bits, mask):
        r = self.r
        r._logged(b, self.inst, fit(b, addr, 64), bits // 8, mask, lds=True)
        fn = access.function(r.fn.module, "hwemu_lds_store", r.lanes, bits)
        b.call(fn, [r.lds, r.lds_size, r.sink(b), fit(b, addr, 64), fit(b, value, bits), mask])


class _VMHooks(Hooks):
    """MEM of a global access: lane i's byte address a is at host address hosts[i] + (a - addr[i]) (placed by
    Region._place; inactive lanes point at a sink); stores go lane by lane in lane order. Each access is a call of
    a per-lane function (emu.amd.exec.access)."""

    def __init__(self, region: MemoryCode, addr, hosts):
        self.r, self.addr, self.hosts = region, addr, hosts

    def load(self, b, file, addr, bits, mask):
        fn = access.function(self.r.fn.module, "hwemu_vm_load", self.r.lanes, bits)
        return b.call(fn, [fit(b, addr, 64), self.addr, self.hosts, mask])

    def store(self, b, file, addr, value, bits, mask):
        fn = access.function(self.r.fn.module, "hwemu_vm_store", self.r.lanes, bits)
        b.call(fn, [fit(b, addr, 64), self.addr, self.hosts, fit(b, value, bits), mask])


class MemoryCode:
    """Memory instructions of emu.amd.exec.translate.Region."""

    def _ds(self, b, inst) -> None:
        """A DS instruction (as plan's MemoryPlans._ds): LDS through the lds pointer, bounds as emu.amd.memspace.LDS."""
        op, f = inst.op, inst.fields
        bd = self.binder.ds_operands(inst)
        sem = bd.sem
        if sem.serial or "VGPR" in sem.reads or f.get("acc") or sem.writes - {"MEM", "LDS", "VDATA", "RETURN_DATA"}:
            raise Exit(f"{op.name}: atomic, cross-lane or writes {sorted(sem.writes)}")

        def operand(n: str):
            o = bd.inputs.get(n)
            if n == "ADDR":
                a = self._vgpr(b, o.reg, 32)
                if o.mods.offset is not None:  # the pcode addresses MEM[ADDR] alone: the offset is in ADDR
                    off = self._shape(b, self._imm("offset:ds", o.mods.offset), 64, True)
                    a = b.add(b.zext(a, ir.VectorType(I64, self.lanes)), off)
                return a
            if n in _DS_IMMEDIATES:
                return self._imm(_DS_IMMEDIATES[n], o.value)
            return None
        exe = self._exec(b)
        out = emit(b, sem.ir, self.lanes, self._inputs(b, bd, inst, operand, vector=True), _LDSHooks(self, inst))
        for n, v in out.items():
            o = bd.outputs.get(n)
            if o is not None and o.kind is Kind.VGPR:
                self._set_vgpr(b, o.reg, o.bits, v, self._lanes(b, exe))
        self._lane_ops(b, exe, 1)

    def _global(self, b, inst):
        """GLOBAL / FLAT loads and stores (as MemoryPlans._flat) through the VM table; atomics are exits."""
        op, f = inst.op, inst.fields
        bd = self.binder.flat_operands(inst)
        sem = bd.sem
        if sem.serial or f.get("acc") or sem.writes - {"MEM", "VDATA", "RETURN_DATA"} or "VGPR" in sem.reads:
            raise Exit(f"{op.name}: atomic or writes {sorted(sem.writes)}")
        vaddr = f["vaddr"] if "ioffset" in f else f["addr"]
        off = self._imm("offset:global", memory_offset(inst))
        saddr = f.get("saddr", self.binder.saddr_off)
        vec = ir.VectorType(I64, self.lanes)
        if inst.base.endswith("GLOBAL") and not self.gen.no_saddr(saddr):
            base = b.add(self._scalar(b, saddr, 64, "", None), self._shape(b, off, 64, False))
            addr = b.add(b.zext(self._vgpr(b, vaddr, 32), vec), self._shape(b, base, 64, True))
        else:
            addr = b.add(self._vgpr(b, vaddr, 64), self._shape(b, off, 64, True))
        store = "MEM" in sem.writes
        data = [o.bits for o in (*bd.inputs.values(), *bd.outputs.values()) if o.name in ("DATA", "VDATA", "DATA0")]
        nbytes = max([sem.access_bits, *data]) // 8
        exe = self._exec(b)
        active = self._lanes(b, exe)
        b, hosts = self._place(b, inst, addr, nbytes, store, active)

        def operand(n: str):
            return addr if n == "ADDR" else off if n == "OFFSET" else None
        out = emit(b, sem.ir, self.lanes, self._inputs(b, bd, inst, operand, vector=True),
                   _VMHooks(self, addr, hosts))
        for n, v in out.items():
            o = bd.outputs.get(n)
            if o is not None and o.kind is Kind.VGPR:
                self._set_vgpr(b, o.reg, o.bits, v, active)
        self._lane_ops(b, exe, 1)
        return b

    def _smem(self, b, inst):
        """s_load / s_buffer_load of whole dwords into SGPRs (as Planner._smem)."""
        op, f = inst.op, inst.fields
        nbits = op.operands["sdata"].bits if "sdata" in op.operands else 0
        if not nbits or nbits % 32 or self.binder.smem_access(op) < 4:
            raise Exit("sub-dword scalar load")
        ndw, dst = nbits // 32, f["sdata"]
        if not (dst + ndw <= VCC + 2 or TTMP0 <= dst and dst + ndw <= TTMP_END):
            raise Exit("scalar load destination out of range")
        base = self._scalar(b, f["sbase"] * 2, 64, "", None)
        if op.name.startswith("S_BUFFER"):
            base = b.and_(base, I64(0xFFFFFFFFFFFF))
        off, soff = smem_offsets(f, self.gen)
        addr = b.add(base, self._shape(b, self._imm("offset:smem", off), 64, False))
        if soff is not None:
            addr = b.add(addr, b.zext(self._scalar(b, soff, 32, "", None), I64))
        addr = b.and_(addr, I64(0xFFFFFFFFFFFC))
        one = ir.Constant(ir.VectorType(I1, self.lanes), [1] + [0] * (self.lanes - 1))
        vec = self._shape(b, addr, 64, True)
        b, hosts = self._place(b, inst, vec, 4 * ndw, False, one)
        host = b.inttoptr(b.extract_element(hosts, I32(0)), ir.PointerType())
        for k in range(ndw):
            v = b.load(b.gep(host, [I64(k)], source_etype=I32), typ=I32, align=4)
            b.store(v, self._slot(b, dst + k))
        return b
