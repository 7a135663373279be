"""The LLVM tier: a region of decoded instructions translated into one native function over the wave's flat state.

A region starts at a hot PC and takes every instruction reachable from there, by fallthrough and by branches, that the
tier runs natively: SALU, SOPP branches, waits, s_barrier and s_endpgm, VALU (VOP1/2/3/C/3SD, VOPD) on 32/64-bit
operands without DPP, SDWA or output modifiers, WMMA on VGPR sources, LDS loads and stores (DS), global/flat loads and
stores and scalar loads (not atomics). Any other instruction is an exit: the function returns its PC and the interpreter
goes on there. Each instruction is one LLVM block, branches are native branches (loops run natively), and the semantics
are the vendor pcode through the LLVM backend (emu.pcode.llvmemit), inlined. A region is specialized to the wave's MODE
(float rounding and denormal modes fold into the code).

Memory: every lane's access range is placed through the VM's mapping table (emu.amd.memory.VM.index.table, a binary
search) before the instruction has any effect, by the per-lane functions that all native code shares
(emu.amd.exec.access: a module that calls them is compiled or loaded after `access.ensure(lanes)`); when a lane falls
outside one mapping (unmapped, read-only, straddling, or an aperture of the flat space) the region leaves at that
instruction and the interpreter performs it, faults included. LDS accesses are bounds-checked as emu.amd.memspace.LDS
does.

Native signature: `i64 region(i32* sgpr, i32* vgpr, i64* ctr, i8* lds)`: `sgpr` and `vgpr` are WaveState's arrays
(slots as emu.amd.exec.state lays them out), `ctr` the call's words (BUDGET, EXECUTED, ... below), `lds` the
workgroup's LDS bytes. The function starts at the region's instruction at ctr[START] (any of them: a wave resumes
where it left), runs until an exit, s_barrier or s_endpgm, or until it has executed `budget` instructions (checked
before each), adds what it ran to ctr[EXECUTED] and ctr[LANE_OPS] (and, in a program that keeps statistics, to
the words ctr[TALLY + c] of its categories, emu.amd.exec.category), sets ctr[STATUS] (BARRIER, END, or 0), and
returns the next PC; each taken branch stores its PC in the ring ctr[BRANCH_RING..] (a store per taken branch, not
per instruction: from the start PC, the ring and the exit PC the instructions run can be listed again); it returns
-1 without running anything when the wave's MODE is not the region's or the start is not one of its instructions.
"""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from emu.amd.exec import access, hwreg, takes
from emu.amd.exec.bind import (
    Binding,
    Kind,
    Operand,
    OperandError,
    Unsupported,
    float_bits,
    memory_offset,
    smem_offsets,
    vopd_y,
)
from emu.amd.exec.category import category
from emu.amd.exec.control import BARRIERS, ENDS, ENGINE_NOPS, SOPP_BRANCHES
from emu.amd.exec.operands import constant, sign_bit
from emu.amd.exec.state import BARRIER, CATEGORIES, CONSTANTS, END, EXEC, MODE, SCC, VCC
from emu.amd.memory import GPUFault
from emu.amd.regs import EXECZ, PRIVATE_BASE, PRIVATE_LIMIT, SHARED_BASE, TTMP0, TTMP_END, VCCZ, storage
from emu.pcode.llvmemit import emit
from emu.pcode.llvmfloats import entry_alloca
from emu.pcode.typed import Unsupported as PcodeUnsupported

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
_SALU = takes.SALU[:4]  # SOPP: the branches, waits and ends (control)
# The words of a call's `ctr` array: in (budget, LDS size, VM table address, start PC), out (counts, status).
BUDGET, EXECUTED, LANE_OPS, LDS_SIZE, VM_TABLE, START, STATUS = range(7)
SINK = 7  # ctr[7..9]: where inactive lanes' loads and stores go
BRANCHES = 10  # ctr[10]: taken branches counted up (never reset by the region); the PC of the n-th is in
BRANCH_RING = 11  # ctr[BRANCH_RING + n % RING]: the wave's history for fault reports (emu.amd.trace)
RING = 64
PC_MASK = (1 << 48) - 1  # the PC is 48 bits
TALLY = BRANCH_RING + RING  # ctr[TALLY + c]: instructions of category c run (HWEMU_STATS; never reset by the region)
THREADED = TALLY + len(CATEGORIES)  # ctr[THREADED..+4]: the threaded tier's tables (emu.amd.exec.threaded)
BASE = THREADED + 4  # ctr[BASE]: the PC of the region's entry (its code holds PCs as offsets from it)
CTR_WORDS = BASE + 1
MAX_INSTS = 4000  # instructions per region
OUTLINE_FROM = 80  # LLVM instructions of a VALU's semantics from which its uses call one outlined copy
OUT_SLOT = 32 * 16  # bytes per output of outlined semantics: 32 lanes of up to 128 bits (64 of 64)
_SMALL: dict[tuple, bool] = {}  # (outlined semantics' key, lanes) -> whether they are inlined (under OUTLINE_FROM)


class Exit(Exception):
    """An instruction the tier does not take: the region leaves the native code before it."""


class _Hooks:
    """Memory, register files and Fail are not taken natively yet: an instruction that needs them is an exit."""

    def _no(self, *a, **k):
        raise PcodeUnsupported("not in the LLVM tier: memory, register files and callouts")

    load = store = reg_read = reg_write = callout = fail = _no


class _LDSHooks(_Hooks):
    """MEM / LDS of a DS instruction: the workgroup's LDS; lanes whose access ends past its size read 0 and do not
    write (their store goes to the counters' sink). Each access is a call of a per-lane function
    (emu.amd.exec.access)."""

    def __init__(self, region: Region):
        self.r = region

    def load(self, b, file, addr, bits, mask):
        r = self.r
        fn = access.function(r.fn.module, "hwemu_lds_load", r.lanes, bits)
        return b.call(fn, [r.lds, r.lds_size, _fit(b, addr, 64), mask])

    def store(self, b, file, addr, value, bits, mask):
        r = self.r
        fn = access.function(r.fn.module, "hwemu_lds_store", r.lanes, bits)
        b.call(fn, [r.lds, r.lds_size, r._gep(b, r.ctr, SINK, I64), _fit(b, addr, 64), _fit(b, value, bits), mask])


class _RegisterFileHooks(_Hooks):
    """VGPR[lane][reg] reads and writes of pcode that indexes the register file (v_readfirstlane / v_readlane, the
    matrix instructions), each lane's (lane, reg) through the gather and scatter functions (emu.amd.exec.access)."""

    def __init__(self, region: Region):
        self.r = region

    def _index(self, b, file, index, bits):
        if file != "VGPR" or bits != 32 or len(index) != 2:
            raise PcodeUnsupported(f"{file} access of {bits} bits")
        return [self.r._shape(b, x, 64, True) for x in index]

    def reg_read(self, b, file, index, bits, mask):
        lane, reg = self._index(b, file, index, bits)
        fn = access.function(self.r.fn.module, "hwemu_vgpr_gather", self.r.lanes)
        return b.call(fn, [self.r.v_ptr, lane, reg])

    def reg_write(self, b, file, index, value, bits, mask):
        lane, reg = self._index(b, file, index, bits)
        fn = access.function(self.r.fn.module, "hwemu_vgpr_scatter", self.r.lanes)
        b.call(fn, [self.r.v_ptr, lane, reg, self.r._shape(b, value, 32, True), self.r._shape(b, mask, 1, True)])


_LANE_READS = {"V_READFIRSTLANE_B32", "V_READLANE_B32"}
_DS_IMMEDIATES = {"OFFSET": "offset:ds", "OFFSET0": "offset0", "OFFSET1": "offset1"}  # DS fields (threaded.DERIVED)


class _VMHooks(_Hooks):
    """MEM of a global access: lane i's byte address a is at host address hosts[i] + (a - addr[i]) (placed by
    Region._place; inactive lanes point at a sink); stores go lane by lane in lane order. Each access is a call of
    a per-lane function (emu.amd.exec.access)."""

    def __init__(self, region: Region, addr, hosts):
        self.r, self.addr, self.hosts = region, addr, hosts

    def load(self, b, file, addr, bits, mask):
        fn = access.function(self.r.fn.module, "hwemu_vm_load", self.r.lanes, bits)
        return b.call(fn, [_fit(b, addr, 64), self.addr, self.hosts, mask])

    def store(self, b, file, addr, value, bits, mask):
        fn = access.function(self.r.fn.module, "hwemu_vm_store", self.r.lanes, bits)
        b.call(fn, [_fit(b, addr, 64), self.addr, self.hosts, _fit(b, value, bits), mask])


class Region:
    """Translation of the region at `pc` of a program (emu.amd.exec.wave.Program) for one MODE."""

    ARGS = 4  # the native function's pointer arguments

    def __init__(self, prog, pc: int, mode: int):
        self.prog, self.binder = prog, prog.planner  # the planner binds the operands (emu.amd.exec.bind.Binder)
        self.lanes, self.fam, self.mode = prog.lanes, prog.family, mode
        self.entry = pc
        self.mask_bits = 64 if self.lanes == 64 else 32
        self.full = (1 << self.lanes) - 1
        self.gen = self.binder.gen
        self.m0, self.null = self.gen.m0, self.gen.null

    # -- discovery and module --------------------------------------------------------------------------------------
    def module(self, name: str, insts: dict) -> ir.Module:
        """The LLVM module of the region (function `name`) holding `insts` (from `discover`)."""
        m = ir.Module(name)
        fn = ir.Function(m, ir.FunctionType(I64, [ir.PointerType()] * self.ARGS), name)
        for a in fn.args[:4]:
            a.add_attribute("noalias")
        self.s_ptr, self.v_ptr, self.ctr, self.lds = fn.args[:4]
        entry = fn.append_basic_block("entry")
        self.blocks = {pc: fn.append_basic_block(f"pc_{pc:x}") for pc in insts}
        self.outlined: dict[tuple, tuple] = {}
        self.fn = fn
        b = ir.IRBuilder(entry)
        self.n = b.alloca(I64, name="n")
        self.lane_ops = b.alloca(I64, name="lane_ops")
        self.tally = [b.alloca(I64, name=f"tally_{c}") for c in CATEGORIES] if self.prog.stats else []
        for slot in (self.n, self.lane_ops, *self.tally):
            b.store(I64(0), slot)
        self.base = self._base(b)
        self.leave = fn.append_basic_block("leave")  # every way out: add the counters, return the next PC
        lb = ir.IRBuilder(self.leave)
        self.leave_pc = lb.phi(I64, name="next_pc")  # relative to the entry
        for i, slot in ((EXECUTED, self.n), (LANE_OPS, self.lane_ops), *enumerate(self.tally, TALLY)):
            p = self._gep(lb, self.ctr, i, I64)
            lb.store(lb.add(lb.load(p, typ=I64), lb.load(slot, typ=I64)), p)
        lb.ret(lb.add(self.base, self.leave_pc))
        self.budget = b.load(self._gep(b, self.ctr, BUDGET, I64), typ=I64)
        self.lds_size = b.load(self._gep(b, self.ctr, LDS_SIZE, I64), typ=I64)
        same = b.icmp_unsigned("==", b.load(self._slot(b, MODE), typ=I32), I32(self.mode))
        wrong = fn.append_basic_block("not_here")
        start = fn.append_basic_block("start")
        b.cbranch(same, start, wrong)
        ir.IRBuilder(wrong).ret(I64(-1))
        self._start(ir.IRBuilder(start), wrong)
        for pc, inst in insts.items():
            b = ir.IRBuilder(self.blocks[pc])
            b = self._budget(b, pc)
            self._count(b, inst)
            try:
                self._inst(b, inst)
            except (Exit, PcodeUnsupported, Unsupported, OperandError) as e:  # the translator refuses it
                raise Exit(pc, f"{type(e).__name__}: {e.args[-1] if e.args else ''}") from e
        return m

    def _imm(self, source: str, value: int):
        """An immediate of the instruction (an offset) as the code uses it: the constant (threaded.Handler reads
        it at run time)."""
        return value

    def _base(self, b):
        """The entry's PC at run time: the code is the same wherever the program was loaded, so one compiled
        region serves every process and load address (the disk cache's key holds offsets only)."""
        return b.load(self._gep(b, self.ctr, BASE, I64), typ=I64)

    def _rel(self, pc: int) -> ir.Constant:
        """PC `pc` as the code holds it: its offset from the entry."""
        return I64(pc - self.entry)

    def _start(self, b, wrong) -> None:
        """Branch to the instruction at ctr[START] (`wrong`: none of the region's)."""
        start = b.load(self._gep(b, self.ctr, START, I64), typ=I64)
        sw = b.switch(b.sub(start, self.base), wrong)
        for pc, block in self.blocks.items():
            sw.add_case(self._rel(pc), block)

    def discover(self, exits: set[int], refused: Callable[[object], bool] = lambda inst: False) -> dict:
        """The region's instructions by PC: reachable from the entry, stopping at `exits`, at untaken instructions
        and at those `refused` (the translator failed on them in another region)."""
        insts: dict[int, object] = {}
        todo = [self.entry]
        while todo:
            pc = todo.pop()
            while pc not in insts and pc not in exits and len(insts) < MAX_INSTS:
                try:
                    inst = self.prog.inst(pc)
                except GPUFault:  # unfetchable code: the interpreter reports the fault
                    break
                why = takes.native(inst)
                if why is not None:
                    takes.declined("native", inst, why)
                if why is not None or refused(inst):
                    break
                insts[pc] = inst
                name = inst.op.name
                nxt = pc + inst.size
                if name in SOPP_BRANCHES:
                    todo.append(self._target(inst))
                    if name == "S_BRANCH":
                        break
                if name in ENDS:
                    break
                pc = nxt
        if self.entry not in insts:
            raise Exit(self.entry)
        return insts

    @staticmethod
    def _target(inst) -> int:
        simm = inst.fields.get("simm16", 0)
        return (inst.pc + 4 + (simm - (1 << 16) if simm >> 15 else simm) * 4) & PC_MASK

    # -- state access ----------------------------------------------------------------------------------------------
    def vec(self, t: ir.Type) -> ir.VectorType:
        return ir.VectorType(t, self.lanes)

    def _gep(self, b, ptr, i: int, t: ir.Type):
        return b.gep(ptr, [I64(i)], source_etype=t)

    def _slot(self, b, i: int):
        return self._gep(b, self.s_ptr, i, I32)

    def _pair(self, b, i: int):
        lo = b.zext(b.load(self._slot(b, i), typ=I32), I64)
        hi = b.zext(b.load(self._slot(b, i + 1), typ=I32), I64)
        return b.or_(lo, b.shl(hi, I64(32)))

    def _set_pair(self, b, i: int, v) -> None:
        b.store(b.trunc(v, I32), self._slot(b, i))
        b.store(b.trunc(b.lshr(v, I64(32)), I32), self._slot(b, i + 1))

    def _exec(self, b):
        return self._pair(b, EXEC)

    def _row(self, b, reg: int):
        vt = ir.VectorType(I32, self.lanes)
        return b.gep(self.v_ptr, [I64(reg * self.lanes)], source_etype=I32), vt

    def _vgpr(self, b, reg: int, bits: int):
        """VGPRs reg.. as <lanes x iB> (B <= 32: the low bits of one register; more: consecutive registers)."""
        n = max(1, -(-bits // 32))
        if reg < 0 or reg + n > 256 or bits > 128:
            raise Exit("VGPR operand out of range or wider than 128 bits")
        wide = ir.VectorType(ir.IntType(max(bits, 32 * n)), self.lanes)
        v = None
        for k in range(n):
            p, vt = self._row(b, reg + k)
            row = b.load(p, typ=vt, align=4)
            row = b.zext(row, wide) if n > 1 else row
            v = row if v is None else b.or_(v, b.shl(row, ir.Constant(wide, [32 * k] * self.lanes)))
        return _fit(b, v, bits)

    def _set_vgpr(self, b, reg: int, bits: int, v, active) -> None:
        if bits % 32 or not 32 <= bits <= 128 or reg < 0 or reg + bits // 32 > 256:
            raise Exit("VGPR destination not whole registers or out of range")
        vt = ir.VectorType(I32, self.lanes)
        parts = [_fit(b, v if k == 0 else b.lshr(v, ir.Constant(v.type, [32 * k] * self.lanes)), 32)
                 for k in range(bits // 32)]
        full = b.icmp_unsigned("==", b.bitcast(active, ir.IntType(self.lanes)), ir.IntType(self.lanes)(-1))
        with b.if_else(full) as (every_lane, some_lanes):  # plain stores when EXEC is full (later loads forward)
            with every_lane:
                for k, part in enumerate(parts):
                    b.store(part, self._row(b, reg + k)[0], align=4)
            with some_lanes:
                for k, part in enumerate(parts):
                    p, _ = self._row(b, reg + k)
                    b.store(b.select(active, part, b.load(p, typ=vt, align=4)), p, align=4)

    def _scalar(self, b, code: int, bits: int, fmt: str, literal):
        """A scalar source as an i32/i64 value (64-bit reads of register pairs)."""
        c = constant(code, bits, fmt, literal)
        if c is not None:
            return ir.IntType(bits)(c & ((1 << bits) - 1))
        wide = bits == 64
        if code == self.null:
            return ir.IntType(bits)(0)
        if code in (VCCZ, EXECZ):
            v = b.and_(self._pair(b, VCC if code == VCCZ else EXEC), I64(self.full))
            z = b.zext(b.icmp_unsigned("==", v, I64(0)), ir.IntType(bits))
            return z
        if code == SCC:
            v = b.load(self._slot(b, SCC), typ=I32)
            return b.zext(v, I64) if wide else v
        if code in (SHARED_BASE, PRIVATE_BASE) and wide:  # an aperture base as 64 bits: the base address
            return I64(int(CONSTANTS[code]) << 32)
        if storage(code):
            if not storage(code, 2 if wide else 1):
                raise Exit("scalar register tuple out of range")
            return self._pair(b, code) if wide else b.load(self._slot(b, code), typ=I32)
        if code in (VCC, EXEC) and wide:
            return self._pair(b, code)
        if code in (self.m0, VCC, VCC + 1, EXEC, EXEC + 1) or SHARED_BASE <= code <= PRIVATE_LIMIT:
            v = b.load(self._slot(b, code), typ=I32)
            return b.zext(v, I64) if wide else v
        raise Exit(f"scalar operand code {code}")

    def _set_scalar(self, b, code: int, bits: int, v) -> None:
        """Store a scalar result (EXEC keeps only the wave's lanes, NULL drops it)."""
        wide = bits == 64
        v = _fit(b, v, bits)
        if code == self.null:
            return
        if code in (EXEC, EXEC + 1):
            if wide:
                self._set_pair(b, EXEC, b.and_(v, I64(self.full)))
            elif code == EXEC or self.lanes == 64:  # wave32 has no EXEC_HI lanes
                b.store(v, self._slot(b, code))
            return
        if code == self.m0 and not wide:
            b.store(v, self._slot(b, code))
            return
        if storage(code) or code in (VCC, VCC + 1):
            n = 2 if wide else 1
            if not (storage(code, n) or VCC <= code and code + n <= VCC + 2):
                raise Exit("scalar destination tuple out of range")
            if wide:
                self._set_pair(b, code, v)
            else:
                b.store(v, self._slot(b, code))
            return
        raise Exit(f"scalar destination code {code}")

    # -- instructions ----------------------------------------------------------------------------------------------
    def _budget(self, b, pc: int):
        """Leave before the instruction at pc when the call's budget is spent (the watchdog counts exactly)."""
        go = self.fn.append_basic_block(f"run_{pc:x}")
        self.leave_pc.add_incoming(self._rel(pc), b.block)
        b.cbranch(b.icmp_signed(">=", b.load(self.n, typ=I64), self.budget), self.leave, go)
        return ir.IRBuilder(go)

    def _count(self, b, inst) -> None:
        for slot in [self.n] + ([self.tally[category(inst)]] if self.tally else []):
            b.store(b.add(b.load(slot, typ=I64), I64(1)), slot)

    def _leave(self, b, pc, uncount=None) -> None:
        """Return `pc` (a PC, or an i64 value relative to the entry) after adding the counters (less the instruction
        `uncount`, which did not run)."""
        if uncount is not None:
            for slot in [self.n] + ([self.tally[category(uncount)]] if self.tally else []):
                b.store(b.sub(b.load(slot, typ=I64), I64(1)), slot)
        self.leave_pc.add_incoming(self._rel(pc) if isinstance(pc, int) else pc, b.block)
        b.branch(self.leave)

    def _goto(self, b, pc: int) -> None:
        if pc in self.blocks:
            b.branch(self.blocks[pc])
        else:
            self._leave(b, pc)

    def _inst(self, b, inst) -> None:
        name, base = inst.op.name, inst.base
        nxt = inst.pc + inst.size
        if name in SOPP_BRANCHES:
            return self._branch(b, inst)
        if name in ENDS or name in BARRIERS:  # the wave stops here (END: at s_endpgm) or after the barrier
            b.store(I64(END if name in ENDS else BARRIER), self._gep(b, self.ctr, STATUS, I64))
            return self._leave(b, inst.pc if name in ENDS else nxt)
        if base == "SOPP" or name in ENGINE_NOPS:  # waits, hints and cache controls
            return self._goto(b, nxt)
        if base in _SALU:
            self._salu(b, inst)
        elif base == "VOPD":
            self._vopd(b, inst)
        elif base == "DS":
            self._ds(b, inst)
        elif base in takes.GLOBAL:
            b = self._global(b, inst)
        elif base == "SMEM":
            b = self._smem(b, inst)
        else:
            self._valu(b, inst)
        self._goto(b, nxt)

    def _branch(self, b, inst) -> None:
        bd = self.binder.salu_operands(inst)
        ins = self._inputs(b, bd, inst, lambda n: None, vector=False)
        out = emit(b, bd.sem.ir, self.lanes, ins, _Hooks())
        pc = out["PC"]
        pc = b.zext(pc, I64) if pc.type.width < 64 else pc
        pc = b.and_(pc, I64(PC_MASK))  # relative to the entry, as the pcode's PC input (_common)
        target, nxt = self._target(inst), inst.pc + inst.size
        if inst.op.name == "S_BRANCH":
            self._taken(b, inst.pc)
            return self._goto(b, target)
        taken = self.fn.append_basic_block(f"taken_{inst.pc:x}")
        fall = self.fn.append_basic_block(f"fall_{inst.pc:x}")
        b.cbranch(b.icmp_unsigned("==", pc, I64((target - self.entry) & PC_MASK)), taken, fall)
        tb = ir.IRBuilder(taken)
        self._taken(tb, inst.pc)
        self._goto(tb, target)
        self._goto(ir.IRBuilder(fall), nxt)

    def _taken(self, b, pc) -> None:
        """Record a taken branch at `pc` (a PC, or an i64 value) in the ring."""
        p = self._gep(b, self.ctr, BRANCHES, I64)
        n = b.load(p, typ=I64)
        slot = b.add(b.and_(n, I64(RING - 1)), I64(BRANCH_RING))
        at = b.add(self.base, self._rel(pc)) if isinstance(pc, int) else pc
        b.store(at, b.gep(self.ctr, [slot], source_etype=I64))
        b.store(b.add(n, I64(1)), p)

    def _state(self, b, n: str, inst):
        """Wave state the pcode names (as the reference's readers give it), as an LLVM value or a Python int."""
        if n == "SCC":
            return b.load(self._slot(b, SCC), typ=I32)
        if n in ("EXEC", "VCC"):
            return b.and_(self._pair(b, EXEC if n == "EXEC" else VCC), I64(self.full))
        if n in ("EXECZ", "VCCZ"):
            return self._scalar(b, EXECZ if n == "EXECZ" else VCCZ, 32, "", None)
        if n == "M0":
            return b.load(self._slot(b, self.m0), typ=I32)
        if n == "MODE":
            return self.mode
        if n == "PC":  # a branch's pcode computes its target relative to the entry (_branch)
            return inst.pc - self.entry if inst.op.name in SOPP_BRANCHES else b.add(self.base, self._rel(inst.pc))
        raise Exit(f"reads {n}")

    def _operand(self, b, o: Operand, inst):
        """A bound input (emu.amd.exec.bind) as an LLVM value or a Python int: registers read at 32 or 64 bits."""
        k = o.kind
        if k in (Kind.FIELD, Kind.INLINE, Kind.LITERAL) or (k is Kind.MASK and o.value is not None):
            return o.value
        if k is Kind.REGNUM:
            if o.value is None:
                raise Exit(f"{o.name} is no VGPR")
            return o.value
        if k is Kind.STATE:
            return self._state(b, o.name, inst)
        if k is Kind.VGPR:
            return self._vgpr(b, o.reg, o.bits)
        return self._scalar(b, o.code, self.mask_bits if k is Kind.MASK else 64 if o.bits > 32 else 32, o.fmt, None)

    def _inputs(self, b, bd: Binding, inst, operand, vector: bool) -> dict:
        """Every input of the semantics: `operand(name)` gives those the instruction's code renders itself (None:
        the bound operand, _operand)."""
        f = bd.sem.ir
        out = {}
        for n, bits in f.inputs.items():
            v = operand(n)
            if v is None:
                v = self._operand(b, bd.inputs[n], inst)
            out[n] = self._shape(b, v, bits, vector and n not in f.masks and n != "MODE")
        if "MODE" in bd.sem.reads and "MODE" not in out:
            out["MODE"] = I32(self.mode)
        if vector:
            out["ACTIVE"] = self._lanes(b, self._exec(b))
        return out

    def _shape(self, b, v, bits: int, vector: bool):
        """A Python int or LLVM integer as `iB` (or its lane splat)."""
        t = ir.IntType(bits)
        if isinstance(v, int):
            c = t(v & ((1 << bits) - 1))
            return ir.Constant(ir.VectorType(t, self.lanes), [c] * self.lanes) if vector else c
        if isinstance(v.type, ir.VectorType):
            return _fit(b, v, bits)
        v = _fit(b, v, bits)
        if not vector:
            return v
        vt = ir.VectorType(t, self.lanes)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, I32(0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, self.lanes),
                                                                                 [0] * self.lanes))

    def _lanes(self, b, mask):
        """An i64 lane mask as <lanes x i1>."""
        return b.bitcast(b.trunc(mask, ir.IntType(self.lanes)), ir.VectorType(I1, self.lanes))

    def _mask(self, b, v):
        """A mask result (i64, or per-lane values: set where nonzero) as i64."""
        if not isinstance(v.type, ir.VectorType):
            return b.zext(v, I64) if v.type.width < 64 else b.trunc(v, I64) if v.type.width > 64 else v
        nz = b.icmp_unsigned("!=", v, ir.Constant(v.type, [0] * self.lanes))
        return b.zext(b.bitcast(nz, ir.IntType(self.lanes)), I64)

    # -- SALU --------------------------------------------------------------------------------------------------------
    def _salu(self, b, inst) -> None:
        bd = self.binder.salu_operands(inst)
        sem = bd.sem
        if sem.writes - {"D0", "SCC", "EXEC", "VCC", "M0"} or sem.files:
            raise Exit(f"{inst.op.name} writes {sorted(sem.writes)}")
        out = emit(b, sem.ir, self.lanes, self._inputs(b, bd, inst, lambda n: None, vector=False), _Hooks())
        for n, v in out.items():
            o = bd.outputs[n]
            if o.scalar:
                self._set_scalar(b, o.code, 64 if o.bits > 32 else 32, v)
            elif n == "SCC":
                b.store(b.and_(_fit(b, v, 32), I32(1)), self._slot(b, SCC))
            elif n in ("EXEC", "VCC"):
                v = b.and_(self._mask(b, v), I64(self.full))
                self._set_pair(b, EXEC if n == "EXEC" else VCC, v)
            elif n == "M0":
                self._set_scalar(b, self.m0, 32, v)
            else:
                raise Exit(f"writes {n}")

    # -- LDS ---------------------------------------------------------------------------------------------------------
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
        out = emit(b, sem.ir, self.lanes, self._inputs(b, bd, inst, operand, vector=True), _LDSHooks(self))
        for n, v in out.items():
            o = bd.outputs.get(n)
            if o is not None and o.kind is Kind.VGPR:
                self._set_vgpr(b, o.reg, o.bits, v, self._lanes(b, exe))
        self._lane_ops(b, exe, 1)

    # -- global memory: each lane placed through the VM's mapping table; a lane it cannot place leaves before the access
    def _place(self, b, inst, addr, nbytes: int, write: bool, active):
        """Host addresses of every active lane's access (addr: <lanes x i64>); leaves the region at the instruction
        (before it has any effect) when a lane falls outside one mapping. Returns (builder, host addresses)."""
        table = b.inttoptr(b.load(self._gep(b, self.ctr, VM_TABLE, I64), typ=I64), PTR)
        sink = b.ptrtoint(self._gep(b, self.ctr, SINK, I64), I64)
        v64 = self.vec(I64)
        place = access.function(self.fn.module, "hwemu_place", self.lanes)
        hosts = b.call(place, [table, addr, I64(nbytes), I1(write), active, sink])
        missed = b.icmp_unsigned("==", hosts, ir.Constant(v64, [0] * self.lanes))
        bad = b.icmp_unsigned("!=", b.bitcast(missed, ir.IntType(self.lanes)), ir.IntType(self.lanes)(0))
        out = self.fn.append_basic_block(f"miss_{inst.pc:x}")
        go = self.fn.append_basic_block(f"placed_{inst.pc:x}")
        b.cbranch(bad, out, go)
        self._leave(ir.IRBuilder(out), inst.pc, uncount=inst)
        return ir.IRBuilder(go), hosts

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

    # -- VALU --------------------------------------------------------------------------------------------------------
    def _valu(self, b, inst) -> None:
        bd = self.binder.valu_operands(inst)
        exe = self._exec(b)
        out = self._valu_out(b, inst, bd)
        self._valu_write(b, bd, out, exe)
        self._lane_ops(b, exe, 1)

    def _vopd(self, b, inst) -> None:
        exe = self._exec(b)
        parts = []
        for op, fields in self.binder.vopd_halves(inst, self._vopd_y(inst.fields)):
            bd = self.binder.valu_operands(inst, op, fields, base="VOP2")
            parts.append((bd, self._valu_out(b, inst, bd)))
        for bd, out in parts:
            self._valu_write(b, bd, out, exe)
        self._lane_ops(b, exe, 2)

    @staticmethod
    def _vopd_y(f: dict) -> int:
        """The VGPR opY writes (emu.amd.exec.bind.vopd_y)."""
        return vopd_y(f)

    def _lane_ops(self, b, exe, k: int) -> None:
        cnt = b.call(self.fn.module.declare_intrinsic("llvm.ctpop", [I64]), [exe])
        b.store(b.add(b.load(self.lane_ops, typ=I64), b.mul(cnt, I64(k))), self.lane_ops)

    def _valu_out(self, b, inst, bd: Binding) -> dict:
        """The outputs of a VALU binding's semantics on 32 / 64-bit sources with their abs / neg and denormal flushing
        (no DPP, SDWA or packing), or a lane read's or matrix op's, whose register-file accesses go lane by lane."""
        op, sem = bd.op, bd.sem
        if any(o.kind == "agpr" for o in inst.operands.values()):
            raise Exit("ACC VGPR operand")

        def operand(n: str):
            o = bd.inputs[n]
            if n not in ("S0", "S1", "S2"):
                return None
            if o.bits not in (32, 64) or inst.base == "VOP3P":
                raise Exit(f"{o.bits}-bit source")
            v = self._shape(b, self._operand(b, o, inst), o.bits, True)
            v = self._modify(b, v, o.bits, o.mods.abs, o.mods.neg)
            if o.mods.flush:
                v = self._flushed(b, v, float_bits(o.fmt, o.bits), o.bits, hwreg.F32_KEEP_IN, hwreg.F16_KEEP_IN)
            return v
        if sem.files:  # a lane read or a matrix op: inlined, its register-file accesses lane by lane
            srcs = ("src0", "src1", "src2") if op.name.startswith(takes.MATRIX) \
                else ("src0",) if op.name in _LANE_READS else ()
            if not srcs or any(getattr(inst.operands.get(s), "kind", None) != "vgpr" for s in srcs):
                raise Exit(f"{op.name} reads {sorted(sem.files)} with other than VGPR sources")
            return emit(b, sem.ir, self.lanes, self._inputs(b, bd, inst, operand, vector=True),
                        _RegisterFileHooks(self))
        return self._outlined(b, op.name, sem, self._inputs(b, bd, inst, operand, vector=True))

    def _outlined(self, b, name: str, sem, inputs: dict) -> dict:
        """The outputs of semantics that touch no memory. Large ones (over OUTLINE_FROM LLVM instructions) are a call
        of the module's function for `name` with these inputs' types and constant values (one per kind: a region
        that runs an instruction many times carries its code once, which keeps LLVM's time per instruction small;
        the function writes its outputs to a buffer the caller passes, one OUT_SLOT each). Small ones are inlined:
        a call would cost more than their code."""
        consts = tuple((n, str(v)) for n, v in inputs.items() if isinstance(v, ir.Constant))
        params = [(n, v) for n, v in inputs.items() if not isinstance(v, ir.Constant)]
        key = (name, tuple((n, str(v.type)) for n, v in params), consts)
        if _SMALL.get((key, self.lanes)):  # known small (from another module): no function to build
            return emit(b, sem.ir, self.lanes, inputs, _Hooks())
        got = self.outlined.get(key)
        if got is None:
            fn = ir.Function(self.fn.module, ir.FunctionType(ir.VoidType(), [v.type for _, v in params] + [PTR]),
                             f"sem{len(self.outlined)}")
            fn.linkage = "internal"
            fn.attributes.add("noinline")
            hb = ir.IRBuilder(fn.append_basic_block("entry"))
            args = {n: v for n, v in inputs.items() if isinstance(v, ir.Constant)}
            args.update({n: a for (n, _), a in zip(params, fn.args, strict=False)})
            out = emit(hb, sem.ir, self.lanes, args, _Hooks())
            layout = [(n, v.type, k * OUT_SLOT) for k, (n, v) in enumerate(out.items())]
            for k, v in enumerate(out.values()):
                hb.store(v, hb.gep(fn.args[-1], [I64(k * OUT_SLOT)], source_etype=ir.IntType(8)), align=1)
            hb.ret_void()
            small = _SMALL[key, self.lanes] = sum(len(blk.instructions) for blk in fn.blocks) < OUTLINE_FROM
            got = self.outlined[key] = (fn, layout, small)
        fn, layout, small = got
        if small:  # its function stays unused (LLVM drops it)
            return emit(b, sem.ir, self.lanes, inputs, _Hooks())
        buf = entry_alloca(b, ir.ArrayType(ir.IntType(8), max(1, len(layout)) * OUT_SLOT))
        b.call(fn, [v for _, v in params] + [b.bitcast(buf, PTR)])
        return {n: b.load(b.gep(buf, [I64(0), I64(at)], source_etype=buf.allocated_type), typ=t, align=1)
                for n, t, at in layout}

    def _flushed(self, b, v, fbits: int, bits: int, keep32: int, keep16: int):
        """`v` (float bits per lane) with denormals read as zero of their sign where MODE.FP_DENORM flushes them
        (the mode is compiled in); f16 data is left to the interpreter."""
        if self.mode & (keep32 if fbits == 32 else keep16):
            return v
        if fbits != bits or bits not in (32, 64) or getattr(v.type.element, "width", 0) != bits:
            raise Exit("f16 denormals flushed")
        mant = 23 if bits == 32 else 52
        exp = ir.Constant(v.type, [(sign_bit(bits) - 1) & ~((1 << mant) - 1)] * self.lanes)
        sign = ir.Constant(v.type, [sign_bit(bits)] * self.lanes)
        tiny = b.icmp_unsigned("==", b.and_(v, exp), ir.Constant(v.type, [0] * self.lanes))
        return b.select(tiny, b.and_(v, sign), v)

    def _modify(self, b, v, bits: int, abs_: bool, neg: bool):
        if not (abs_ or neg):
            return v
        s = ir.Constant(v.type, [sign_bit(bits if bits > 16 else 16)] * self.lanes)
        if abs_:
            v = b.and_(v, b.not_(s))
        return b.xor(v, s) if neg and not abs_ else b.or_(v, s) if neg else v

    def _valu_write(self, b, bd: Binding, out: dict, exe) -> None:
        """A VALU binding's results: VGPRs (no output modifiers) and wave masks; a lane read's value to its SGPR."""
        active = self._lanes(b, exe)
        for n, v in out.items():
            o = bd.outputs[n]
            if n == "D0" and o.kind is Kind.VGPR:
                if o.mods.omod or o.mods.clamp:
                    raise Exit("output modifiers")
                if o.mods.flush and o.bits in (32, 64):
                    v = self._flushed(b, v, float_bits(o.fmt, o.bits), o.bits, hwreg.F32_KEEP_OUT,
                                      hwreg.F16_KEEP_OUT)
                self._set_vgpr(b, o.reg, o.bits, v, active)
            elif n == "D0" and bd.op.name in _LANE_READS:  # one value for the wave (every lane holds it)
                self._set_scalar(b, o.code, 32, b.extract_element(_fit(b, v, 32), I32(0)))
            elif o.kind is Kind.MASK and (n != "D0" or n in bd.sem.masks):
                self._set_scalar(b, o.code, self.mask_bits, b.and_(self._mask(b, v), exe))
            else:
                raise Exit(f"writes {n}")


def _fit(b, v, bits: int):
    """An integer (or integer vector) value zero-extended or truncated to `bits`."""
    vt = v.type
    w = (vt.element if isinstance(vt, ir.VectorType) else vt).width
    if w == bits:
        return v
    t = ir.IntType(bits) if not isinstance(vt, ir.VectorType) else ir.VectorType(ir.IntType(bits), vt.count)
    return b.trunc(v, t) if w > bits else b.zext(v, t)
