"""Execution plans: one closure per decoded instruction, built once, run many times by emu.amd.exec.wave.

A plan renders the instruction's binding (emu.amd.exec.bind: what each pcode name is in the instruction) as operand
fetchers (registers, inline constants, literal, abs/neg/opsel, DPP, SDWA) around the compiled pcode semantics
(emu.pcode.compile_op), and result writers (destination width, EXEC, omod/clamp). The semantics of every ALU and
memory instruction come from the compiled pcode; the engine only moves values in and out. Engine-level control
(s_endpgm, s_barrier, waits, s_trap) and plain SMEM loads (data movement of n dwords) are handled here directly.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd.exec import hwreg
from emu.amd.exec.bind import Binder, Binding, Kind, Operand, OperandError, Unsupported, smem_offsets
from emu.amd.exec.control import BARRIERS, CLOCKS, ENDS, ENGINE_NOPS, HALTS
from emu.amd.exec.operands import RegisterFileView, as_int, scalar_reader, scalar_writer, to_mask
from emu.amd.exec.state import BARRIER, END
from emu.amd.exec.valu import SUBSTITUTE_ROWS, ValuPlans
from emu.amd.exec.vmem import MemoryPlans
from emu.amd.memory import FaultRecord, GPUFault
from emu.amd.regs import EXEC, TTMP0, TTMP_END, VCC

_MEM_BASES = {"GLOBAL", "FLAT", "SCRATCH", "VGLOBAL", "VFLAT", "VSCRATCH"}
MSG_RTN_GET_REALTIME = 0x83  # s_sendmsg_rtn message that returns the clock (LLVM's sendmsg(MSG_RTN_GET_REALTIME))


def end_step(w) -> int:
    return END


def _fault_step(kind: str, detail: str) -> Callable:
    def step(w):
        raise GPUFault(FaultRecord(kind, detail=detail))
    return step


class Planner(ValuPlans, MemoryPlans, Binder):
    """Builds the step closure of an instruction for one family and wave size: its binding (emu.amd.exec.bind)
    rendered as operand readers and result writers around the compiled semantics."""

    def plan(self, inst) -> Callable:
        if not inst.valid:
            return _fault_step("illegal-instruction", f"undecodable instruction {inst.raw.hex()}")
        base = inst.base
        try:
            name = inst.op.name
            if name in ENDS:
                return end_step
            if name in BARRIERS:
                return self._control(inst, BARRIER)
            if name in ENGINE_NOPS:
                return self._control(inst, 0)
            if name == "S_TRAP":
                return _fault_step("trap", f"s_trap {inst.fields.get('simm16', 0) & 0xFF}")
            if name in CLOCKS:
                return self._clock(inst)
            if name in HALTS:  # s_code_end, s_sethalt
                return _fault_step("illegal-instruction", f"{name.lower()} executed")
            if base in ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP"):
                return self._salu(inst)
            if base == "SMEM":
                return self._smem(inst)
            if base in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VINTERP"):
                return self._indexable(inst, self._valu(inst)) if self.gen.gpr_indexing else self._valu(inst)
            if base == "VOPD":
                return self._vopd(inst)
            if base == "DS":
                return self._ds(inst)
            if base in _MEM_BASES:
                return self._flat(inst)
            if base in ("MUBUF", "MTBUF", "VBUFFER"):
                return self._buffer(inst)
            return _fault_step("illegal-instruction", f"{base} instructions are not supported by the emulator")
        except Unsupported as e:
            return _fault_step("unsupported-instruction", str(e))
        except OperandError as e:
            return _fault_step("illegal-instruction", f"{inst}: {e}")

    def _control(self, inst, result: int) -> Callable:
        nxt = inst.pc + inst.size

        def step(w):
            w.pc = nxt
            return result
        return step

    # -- operands as closures --------------------------------------------------------------------------------
    def reader(self, inst, bd: Binding, o: Operand) -> Callable:
        """The closure reading operand `o` of binding `bd`: an int for scalar semantics, per-lane uint64 values for
        a vector one's sources (emu.amd.exec.valu)."""
        k = o.kind
        if k is Kind.FIELD or k is Kind.REGNUM and o.value is not None:
            return lambda w, v=o.value: v
        if k is Kind.REGNUM:  # a source that is no VGPR: the rows _file_view appends for it
            return lambda w, sub=SUBSTITUTE_ROWS * int(o.name[3]): w.vgpr.shape[0] + sub
        if k is Kind.STATE:
            return self._state_reader(o.name, inst)
        if k is Kind.MASK:
            return self._mask_reader(o.code)
        if bd.vector:
            return self.source_reader(inst, bd, o)
        if o.value is not None:
            return lambda w, c=o.value: c
        return scalar_reader(o.code, o.bits, o.fmt, None, self.fam)

    def writer(self, bd: Binding, o: Operand) -> Callable:
        """The closure writing result `o` of binding `bd`: (w, int) for scalar semantics, (w, values, active
        lanes) for vector ones."""
        k = o.kind
        if k is Kind.VGPR:
            return self.vgpr_result_writer(o)
        if k is Kind.STATE:
            w1 = self._state_writer(o.name)
        elif k is Kind.MASK:
            w1 = self._mask_writer(o.code)
        else:
            sw = scalar_writer(o.code, o.bits, self.fam)
            w1 = (lambda w, v: sw(w, as_int(v))) if bd.vector else sw
        return (lambda w, v, act: w1(w, v)) if bd.vector else w1

    def _mask_reader(self, code: int) -> Callable:
        return scalar_reader(code, self.mask_bits, "", None, self.fam)

    def _mask_writer(self, code: int) -> Callable:
        wr = scalar_writer(code, self.mask_bits, self.fam)
        return lambda w, v: wr(w, to_mask(v) & w.exec)

    def _state_reader(self, n: str, inst) -> Callable:
        """The reader of wave state the pcode names. VCC is the wave's lanes of it (VCC_LO in wave32)."""
        f = {"SCC": lambda w: w.scc, "EXEC": lambda w: w.exec, "VCC": lambda w: w.vcc & w.full, "M0": lambda w: w.m0,
             "EXECZ": lambda w: int(w.exec == 0), "VCCZ": lambda w: int((w.vcc & w.full) == 0),
             "MODE": lambda w: w.mode, "TRAPSTS": lambda w: w.trapsts, "HW_REGISTERS": hwreg.snapshot}.get(n)
        if f is not None:
            return f
        if n == "PC":
            return lambda w, pc=inst.pc: pc
        if n == "VGPR":
            return lambda w: RegisterFileView(w.vgpr.T)  # the pcode indexes VGPR[lane][register]
        if n == "SGPR":
            return lambda w: RegisterFileView(w.sgpr[:EXEC + 2])  # the registers scalar operand codes name
        if n == "HwRegWriteMask":
            mask = hwreg.write_mask(self.fam)
            return lambda w: mask
        return hwreg.STATUS_BITS[n][0]

    @staticmethod
    def _state_writer(n: str) -> Callable:
        if n == "SCC":
            return lambda w, v: setattr(w, "scc", int(v) & 1)
        if n == "EXEC":
            return lambda w, v: w.set_exec(int(v))
        if n == "VCC":
            return lambda w, v: setattr(w, "vcc", int(v) & w.full)
        if n == "M0":
            return lambda w, v: setattr(w, "m0", int(v) & 0xFFFFFFFF)
        if n == "MODE":
            return lambda w, v: setattr(w, "mode", int(v) & 0xFFFFFFFF)
        if n == "TRAPSTS":
            return lambda w, v: setattr(w, "trapsts", int(v) & 0xFFFFFFFF)
        if n in ("VGPR", "SGPR"):
            return lambda w, v: None  # the semantics wrote the register file in place
        return hwreg.STATUS_BITS[n][1]

    # -- SALU and SOPP -----------------------------------------------------------------------------------------
    def _salu(self, inst) -> Callable:
        sem, reads, writes = self.salu_parts(inst)
        nxt = inst.pc + inst.size
        lanes = self.lanes
        branch = "PC" in sem.writes
        setreg = "HW_REGISTERS" in sem.writes

        def step(w):
            st = {n: r(w) for n, r in reads}
            out = sem(st, lanes)
            if setreg:
                hwreg.commit(w, st["HW_REGISTERS"])
            for n, wr in writes:
                v = out.get(n)
                if v is not None:
                    wr(w, v)
            pc = out.get("PC") if branch else None
            w.pc = nxt if pc is None else int(pc) & 0xFFFFFFFFFFFF  # the program counter is 48 bits
            return 0
        return step

    def salu_parts(self, inst) -> tuple:
        """(semantics, [(name, reader)], [(name, writer)]) of a SALU / SOPP instruction."""
        bd = self.salu_operands(inst)
        return (bd.sem, [(n, self.reader(inst, bd, o)) for n, o in bd.inputs.items()],
                [(n, self.writer(bd, o)) for n, o in bd.outputs.items()])

    def _clock(self, inst) -> Callable:
        """s_memtime / s_memrealtime / s_sendmsg_rtn(MSG_RTN_GET_REALTIME): the monotonic clock into SGPRs."""
        f = inst.fields
        if inst.op.name.startswith("S_SENDMSG_RTN") and f.get("ssrc0") != MSG_RTN_GET_REALTIME:
            raise Unsupported(f"{inst.op.name}: message {f.get('ssrc0')} is not modelled")
        code = f["sdata"] if "sdata" in f else f["sdst"]
        wr = scalar_writer(code, 32 if inst.op.name.endswith("B32") else 64, self.fam)
        nxt = inst.pc + inst.size

        def step(w):
            wr(w, hwreg.clock())
            w.pc = nxt
            return 0
        return step

    # -- SMEM: loads of dwords move data; sub-dword loads (RDNA4 S_LOAD_U8 ...) through their pcode --------------
    def _smem(self, inst) -> Callable:
        op, f = inst.op, inst.fields
        name = op.name
        if not (name.startswith("S_LOAD_") or name.startswith("S_BUFFER_LOAD_")) or "sdata" not in op.operands:
            raise Unsupported(f"{name}: SMEM operation not supported")
        nbits = op.operands["sdata"].bits
        if nbits % 32:
            raise Unsupported(f"{name}: sub-dword scalar loads not supported")
        ndw = nbits // 32
        size = self.smem_access(op)
        sbase = f["sbase"] * 2
        base = scalar_reader(sbase, 64, "", None, self.fam)
        if name.startswith("S_BUFFER"):
            b = base
            base = lambda w: b(w) & 0xFFFFFFFFFFFF  # noqa: E731 - resource dword0-1: base address [47:0]
        off, soff_code = smem_offsets(f, self.gen)
        soff = scalar_reader(soff_code, 32, "", None, self.fam) if soff_code is not None else (lambda w: 0)
        dst = f["sdata"]
        vcc = dst + ndw > VCC and dst <= VCC + 1  # a load into VCC (its halves are the codes after the SGPRs)
        if not (dst + ndw <= VCC + 2 or TTMP0 <= dst and dst + ndw <= TTMP_END):
            raise OperandError(f"s_load destination s{dst}+{ndw} out of range")
        nxt = inst.pc + inst.size

        sem = self.sem(op) if size < 4 else None
        align = 0xFFFFFFFFFFFF & -size  # the address's low bits below the access size are ignored

        def step(w):
            addr = (base(w) + off + soff(w)) & align
            try:
                w.vm.check_range(addr, size * ndw, False)  # a device access: faults like one
            except GPUFault as e:
                e.record.detail = f"scalar {e.record.detail} by the wave"
                raise
            if sem is not None:  # the byte or short, zero- or sign-extended as the pcode says
                data = np.array([sem({"ADDR": addr, "MEM": w.vm}, self.lanes)["SDATA"]], np.uint32)
            else:
                data = np.frombuffer(w.vm.read(addr, 4 * ndw), np.uint32)
            w.sgpr[dst:dst + ndw] = data
            if vcc:  # VCC lives beside the SGPR file: its halves take the dwords that land on its codes
                for k in range(max(dst, VCC), dst + ndw):
                    half = (k - VCC) * 32
                    w.vcc = (w.vcc & ~(0xFFFFFFFF << half)) | int(data[k - dst]) << half
            w.pc = nxt
            return 0
        return step

