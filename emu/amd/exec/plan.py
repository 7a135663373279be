"""Execution plans: one closure per decoded instruction, built once, run many times by emu.amd.exec.wave.

A plan binds the instruction's operand fetchers (registers, inline constants, literal, abs/neg/opsel, DPP,
SDWA), the compiled pcode semantics (emu.pcode.compile_op) and its result writers (destination width, EXEC,
omod/clamp). The semantics of every ALU and memory instruction come from the compiled pcode; the engine only
moves values in and out. Engine-level control (s_endpgm, s_barrier, waits, s_trap) and plain SMEM loads
(data movement of n dwords) are handled here directly.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd import isa, target
from emu.amd.exec import hwreg
from emu.amd.exec.operands import (
    OperandError,
    RegisterFileView,
    Unsupported,
    m0_null,
    scalar_reader,
    scalar_writer,
    sext,
    to_mask,
)
from emu.amd.exec.state import BARRIER, END
from emu.amd.exec.valu import ValuPlans, opsel_hi
from emu.amd.exec.vmem import MemoryPlans
from emu.amd.memory import FaultRecord, GPUFault
from emu.amd.regs import EXEC, TTMP0, TTMP_END, VCC

_ENGINE_NOPS = {"S_NOP", "S_WAITCNT", "S_WAITCNT_DEPCTR", "S_WAIT_IDLE", "S_CLAUSE", "S_DELAY_ALU", "S_SLEEP",
                "S_SET_INST_PREFETCH_DISTANCE", "S_SETPRIO", "S_ICACHE_INV", "S_WAIT_ALU", "S_WAIT_LOADCNT",
                "S_WAIT_STORECNT", "S_WAIT_SAMPLECNT", "S_WAIT_BVHCNT", "S_WAIT_EXPCNT", "S_WAIT_DSCNT",
                "S_WAIT_KMCNT", "S_WAIT_LOADCNT_DSCNT", "S_WAIT_STORECNT_DSCNT", "S_SENDMSG", "S_TTRACEDATA",
                "S_TTRACEDATA_IMM", "S_INCPERFLEVEL", "S_DECPERFLEVEL", "S_WAKEUP", "S_WAITCNT_VSCNT",
                "S_WAITCNT_VMCNT", "S_WAITCNT_EXPCNT", "S_WAITCNT_LGKMCNT",
                "S_BARRIER_SIGNAL", "S_BARRIER_SIGNAL_ISFIRST", "S_DCACHE_INV", "S_GL1_INV", "S_DCACHE_WB",
                "S_SET_VALU_COEXEC_MODE", "BUFFER_GL0_INV", "BUFFER_GL1_INV", "BUFFER_WBL2", "BUFFER_INV",
                "BUFFER_WBINVL1", "BUFFER_WBINVL1_VOL", "GLOBAL_INV", "GLOBAL_WB", "GLOBAL_WBINV"}
_BARRIERS = {"S_BARRIER", "S_BARRIER_WAIT"}
_ENDS = {"S_ENDPGM", "S_ENDPGM_SAVED"}
_MEM_BASES = {"GLOBAL", "FLAT", "SCRATCH", "VGLOBAL", "VFLAT", "VSCRATCH"}
_INST_FIELDS = {"INST.OMOD": "omod", "INST.ABS": "abs", "INST.NEG": "neg"}  # encoding fields named as such
_SDWA_SELECTS = {"BYTE0": 0, "BYTE1": 1, "BYTE2": 2, "BYTE3": 3, "WORD0": 4, "WORD1": 5, "DWORD": 6}
_CLOCKS = {"S_MEMTIME", "S_MEMREALTIME", "S_SENDMSG_RTN_B32", "S_SENDMSG_RTN_B64"}
MSG_RTN_GET_REALTIME = 0x83  # s_sendmsg_rtn message that returns the clock (LLVM's sendmsg(MSG_RTN_GET_REALTIME))
_MODIFIER_FIELDS = {"OPSEL": "opsel", "OPSEL_HI": "opsel_hi", "NEG": "neg", "NEG_HI": "neg_hi", "CLAMP": "clmp"}


def _operand(op: isa.Op, fld: str | None) -> isa.Operand | None:
    """The operand table's entry for an encoding field (some tables name a VOP3 src0 'vsrc0')."""
    if not fld:
        return None
    return op.operands.get(fld) or op.operands.get("v" + fld)


def smem_offsets(f: dict, gen: target.Generation) -> tuple[int, int | None]:
    """A scalar memory instruction's immediate byte offset and its SGPR offset's operand code (None: none)."""
    if gen.smem_imm_bit:  # IMM: the offset field is a byte offset, else an SGPR; SOFFSET_EN adds soffset
        imm = f.get("imm", 1)
        soff = f["soffset"] if f.get("soffset_en") else None if imm else f["offset"] & 0x7F
        return (sext(f["offset"], 21) if imm else 0), soff
    key = "ioffset" if "ioffset" in f else "offset"
    soff = f.get("soffset")
    return sext(f[key], 24 if key == "ioffset" else 21), None if soff in (None, gen.null) else soff


def end_step(w) -> int:
    return END


def _fault_step(kind: str, detail: str) -> Callable:
    def step(w):
        raise GPUFault(FaultRecord(kind, detail=detail))
    return step


class Planner(ValuPlans, MemoryPlans):
    """Builds the step closure of an instruction for one family and wave size."""

    def __init__(self, arch: str, lanes: int):
        """`arch`: a processor (gfx942), a generation's instruction set (cdna2) or a family name (its instructions as
        the family's whole tables say)."""
        name = isa.name(arch)
        self.arch, self.fam, self.lanes = arch, name, lanes
        self.isa = isa.load(name)
        self.gen = target.generation(arch)
        self.m0, self.null = m0_null(name)
        self.saddr_off = self.gen.saddr_off
        self.mask_bits = 64 if lanes == 64 else 32
        self._sems: dict[tuple[str, str], object] = {}

    # -- semantics ---------------------------------------------------------------------------------------------
    def sem(self, op: isa.Op):
        key = (op.enc, op.name)
        s = self._sems.get(key)
        if s is None:
            try:
                from emu.pcode import compile_op
                s = compile_op(self.arch, op.enc, op.name)
            except Exception as e:  # Unsupported, or a pcode gap: the instruction faults when executed
                s = Unsupported(f"{op.enc} {op.name}: no compiled semantics ({type(e).__name__}: {e})")
            self._sems[key] = s
        if isinstance(s, Unsupported):
            raise s
        return s

    def plan(self, inst) -> Callable:
        if not inst.valid:
            return _fault_step("illegal-instruction", f"undecodable instruction {inst.raw.hex()}")
        base = inst.base
        try:
            name = inst.op.name
            if name in _ENDS:
                return end_step
            if name in _BARRIERS:
                return self._control(inst, BARRIER)
            if name in _ENGINE_NOPS:
                return self._control(inst, 0)
            if name == "S_TRAP":
                return _fault_step("trap", f"s_trap {inst.fields.get('simm16', 0) & 0xFF}")
            if name in _CLOCKS:
                return self._clock(inst)
            if name in ("S_CODE_END", "S_SETHALT"):
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

    # -- common pieces -----------------------------------------------------------------------------------------
    def _width(self, sem, name: str, op: isa.Op, fld: str | None, default: int = 32) -> int:
        """Bits of an operand as the pcode types it; the operand table's for slices narrower than 16 (S0[5:0])."""
        b = sem.widths.get(name, 0)
        if b >= 16:
            return b
        o = _operand(op, fld)
        return max(b, o.bits if o is not None else 0) or default

    @staticmethod
    def _fmt(op: isa.Op, fld: str | None) -> str:
        o = _operand(op, fld)
        return o.fmt if o is not None else ""

    def _mask_reader(self, code: int) -> Callable:
        return scalar_reader(code, self.mask_bits, "", None, self.fam)

    def _mask_writer(self, code: int) -> Callable:
        wr = scalar_writer(code, self.mask_bits, self.fam)
        return lambda w, v: wr(w, to_mask(v) & w.exec)

    def _common_read(self, n: str, inst) -> Callable:
        """The reader of a state name every encoding may use; Unsupported when the engine has none. VCC is the
        wave's lanes of it (VCC_LO in wave32)."""
        f = {"SCC": lambda w: w.scc, "EXEC": lambda w: w.exec, "VCC": lambda w: w.vcc & w.full, "M0": lambda w: w.m0,
             "EXECZ": lambda w: int(w.exec == 0), "VCCZ": lambda w: int((w.vcc & w.full) == 0),
             "MODE": lambda w: w.mode, "TRAPSTS": lambda w: w.trapsts}.get(n)
        if f is not None:
            return f
        if n == "PC":
            return lambda w, pc=inst.pc: pc
        if n in ("SIMM32", "LITERAL"):
            lit = inst.literal or 0
            return lambda w: lit
        if n == "VGPR":
            return lambda w: RegisterFileView(w.vgpr.T)  # the pcode indexes VGPR[lane][register]
        if n == "SGPR":
            return lambda w: RegisterFileView(w.sgpr[:EXEC + 2])  # the registers scalar operand codes name
        if n in _SDWA_SELECTS:
            return lambda w, v=_SDWA_SELECTS[n]: v
        if n == "SDWA_SRC0_SEL":  # the SDWA source select (fp8 conversions pick their byte); other forms: byte 0
            v = inst.fields.get("src0_sel", 0) if inst.enc.endswith("SDWA") else 0
            return lambda w: v
        if n == "OPSEL_HI":
            v = opsel_hi(inst.fields)
            return lambda w: v
        if n in _MODIFIER_FIELDS:
            v = inst.fields.get(_MODIFIER_FIELDS[n], 0)
            return lambda w: v
        if n in hwreg.STATUS_BITS and hwreg.STATUS_BITS[n][0] is not None:
            return hwreg.STATUS_BITS[n][0]
        if n in _INST_FIELDS:
            v = inst.fields.get(_INST_FIELDS[n], 0)
            return lambda w: v
        if n == "HW_REGISTERS":
            return hwreg.snapshot
        if n == "HwRegWriteMask":
            mask = hwreg.write_mask(self.fam)
            return lambda w: mask
        raise Unsupported(f"{inst.op.name}: reads {n}, which the engine does not provide")

    def _state_writer(self, n: str, op_name: str) -> Callable:
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
        if n in hwreg.STATUS_BITS and hwreg.STATUS_BITS[n][1] is not None:
            return hwreg.STATUS_BITS[n][1]
        raise Unsupported(f"{op_name}: writes {n}, which the engine does not accept")

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
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        fm = {"S0": "ssrc0", "S1": "ssrc1", "D0": "sdst"}
        if inst.base == "SOPK":  # the 16-bit immediate is SIMM16, or S1 beside S0 = sdst, or else S0 (CDNA pcode)
            fm = {"S0": "sdst", "S1": "simm16", "D0": "sdst"} if "S1" in sem.reads or "SIMM16" in sem.reads \
                else {"S0": "simm16", "D0": "sdst"}
        reads = []
        for n in sorted(sem.reads):
            fld = fm.get(n)
            if n in ("SRC0", "SRC1", "DST"):  # the raw field (s_set_gpr_idx_on's SIMM4 in ssrc1; s_movrel*'s registers)
                v = f.get("sdst" if n == "DST" else "s" + n.lower(), 0)
                reads.append((n, lambda w, v=v: v))
            elif fld == "simm16" or (n == "SIMM16" and "simm16" in f):
                v = f.get("simm16", 0)
                reads.append((n, lambda w, v=v: v))
            elif fld is not None and fld in f:
                bits = self._width(sem, n, op, fld)
                code = f[fld] if fld != "sdst" else f["sdst"]
                reads.append((n, scalar_reader(code, bits, self._fmt(op, fld), inst.literal, self.fam)))
            else:
                reads.append((n, self._common_read(n, inst)))
        writes = []
        for n in sorted(sem.writes - {"PC", "HW_REGISTERS"}):
            if n == "D0" and "sdst" in f:
                writes.append((n, scalar_writer(f["sdst"], self._width(sem, n, op, "sdst"), self.fam)))
            else:
                writes.append((n, self._state_writer(n, op.name)))
        return sem, reads, writes

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
    def smem_access(self, op: isa.Op) -> int:
        """Bytes one scalar load reads from memory (4 for loads of dwords), from its pcode."""
        return min(self.sem(op).access_bits // 8, 4)

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

