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

What the tier takes is emu.amd.exec.takes.native; the operands of each instruction are its binding (emu.amd.exec.bind)
rendered as LLVM values. The ALU and memory instructions' code is in translate_alu and translate_mem, the access to
the wave's flat state in translate_state.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from llvmlite import ir

from emu.amd.exec import access, takes
from emu.amd.exec.bind import Binding, Kind, Operand, OperandError, Unsupported
from emu.amd.exec.category import category
from emu.amd.exec.control import BARRIERS, ENDS, ENGINE_NOPS, SOPP_BRANCHES
from emu.amd.exec.state import BARRIER, CATEGORIES, END, EXEC, MODE, SCC, VCC
from emu.amd.exec.translate_alu import AluCode
from emu.amd.exec.translate_mem import MemoryCode
from emu.amd.exec.translate_state import I1, I32, I64, PTR, Exit, Hooks, StateCode
from emu.amd.memory import GPUFault
from emu.amd.regs import EXECZ, VCCZ
from emu.pcode.llvmemit import emit
from emu.pcode.typed import Unsupported as PcodeUnsupported

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
LOG = BASE + 1  # ctr[LOG]: where the logged threaded loop writes the PCs it runs (a traced wave's, emu.amd.sqtt)
# ctr[ACCESSES..+4]: where memory instructions log their accesses (a counted dispatch's, emu.amd.accesses; 0: none),
# the words used, the words it holds, the records that did not fit (access.py's hwemu_log_access)
ACCESSES = LOG + 1
CTR_WORDS = ACCESSES + 4
MAX_INSTS = 4000  # instructions per region


class Region(StateCode, AluCode, MemoryCode):
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
        out = emit(b, bd.sem.ir, self.lanes, ins, Hooks())
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
        """A bound input (emu.amd.exec.bind) as an LLVM value or a Python int: registers read at 32 or 64 bits, a
        16-bit operand in a high half (opsel, RDNA's v0.h) shifted down as the reference reads it (the caller keeps
        its low bits; v_fmac_f16's D0 input too)."""
        if o.mods.hi:
            v = self._operand(b, replace(o, bits=32, mods=replace(o.mods, hi=False)), inst)
            if isinstance(v, int):
                return v >> 16  # a field read at run time (kinds.Sym) cannot shift: that kind gets no handler
            return b.lshr(v, ir.Constant(v.type, [16] * self.lanes if isinstance(v.type, ir.VectorType) else 16))
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

    # -- memory accesses placed through the VM's mapping table ----------------------------------------------------
    def _place(self, b, inst, addr, nbytes: int, write: bool, active):
        """Host addresses of every active lane's access (addr: <lanes x i64>); leaves the region at the instruction
        (before it has any effect) when a lane falls outside one mapping. Returns (builder, host addresses)."""
        table = b.inttoptr(b.load(self._gep(b, self.ctr, VM_TABLE, I64), typ=I64), PTR)
        sink = b.ptrtoint(self.sink(b), I64)
        v64 = self.vec(I64)
        place = access.function(self.fn.module, "hwemu_place", self.lanes)
        hosts = b.call(place, [table, addr, I64(nbytes), I1(write), active, sink])
        missed = b.icmp_unsigned("==", hosts, ir.Constant(v64, [0] * self.lanes))
        bad = b.icmp_unsigned("!=", b.bitcast(missed, ir.IntType(self.lanes)), ir.IntType(self.lanes)(0))
        out = self.fn.append_basic_block(f"miss_{inst.pc:x}")
        go = self.fn.append_basic_block(f"placed_{inst.pc:x}")
        b.cbranch(bad, out, go)
        self._leave(ir.IRBuilder(out), inst.pc, uncount=inst)
        b = ir.IRBuilder(go)
        self._logged(b, inst, addr, nbytes, active)
        return b, hosts

    def _logged(self, b, inst, addr, nbytes: int, active, lds: bool = False) -> None:
        """Log one memory access of `inst` (addr: <lanes x i64>) where ctr[ACCESSES] holds a log: (the instruction's
        index in the call, nbytes | lds << 16, the active lanes, the addresses). A log nearly full ends the
        call after this instruction (the threaded loop reads ctr[BUDGET] before each)."""
        acc = self._gep(b, self.ctr, ACCESSES, I64)
        with b.if_then(b.icmp_unsigned("!=", b.load(acc, typ=I64), I64(0)), likely=False):
            seq = b.add(b.load(self._gep(b, self.ctr, EXECUTED, I64), typ=I64), b.load(self.n, typ=I64))
            fn = access.function(self.fn.module, "hwemu_log_access", self.lanes)
            full = b.call(fn, [acc, seq, I64(nbytes | lds << 16), addr, active])
            with b.if_then(full):
                b.store(I64(0), self._gep(b, self.ctr, BUDGET, I64))

    def sink(self, b):
        """Where inactive lanes' loads and stores go (ctr[SINK..])."""
        return self._gep(b, self.ctr, SINK, I64)
