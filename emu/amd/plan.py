"""Execution plans: one closure per decoded instruction, built once, run many times by emu.amd.wave.

A plan binds the instruction's operand fetchers (registers, inline constants, literal, abs/neg/opsel, DPP,
SDWA), the compiled pcode semantics (emu.pcode.compile_op) and its result writers (destination width, EXEC,
omod/clamp). The semantics of every ALU and memory instruction come from the compiled pcode; the engine only
moves values in and out. Engine-level control (s_endpgm, s_barrier, waits, s_trap) and plain SMEM loads
(data movement of n dwords) are handled here directly.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd import isa
from emu.amd.lanes import dpp8, dpp16, dpp_write_mask, sdwa_extract, sdwa_place
from emu.amd.memory import FaultRecord, GPUFault
from emu.amd.memspace import Buffer, HighBits
from emu.amd.operands import (
    OperandError,
    is_float,
    lanes_to_mask,
    m0_null,
    modifier,
    scalar_reader,
    scalar_writer,
    vector_reader,
    vgpr_reader,
    vgpr_writer,
)
from emu.amd.wave import ACC, BARRIER, END

U64 = np.uint64
_ENGINE_NOPS = {"S_NOP", "S_WAITCNT", "S_WAITCNT_DEPCTR", "S_WAIT_IDLE", "S_CLAUSE", "S_DELAY_ALU", "S_SLEEP",
                "S_SET_INST_PREFETCH_DISTANCE", "S_SETPRIO", "S_ICACHE_INV", "S_WAIT_ALU", "S_WAIT_LOADCNT",
                "S_WAIT_STORECNT", "S_WAIT_SAMPLECNT", "S_WAIT_BVHCNT", "S_WAIT_EXPCNT", "S_WAIT_DSCNT",
                "S_WAIT_KMCNT", "S_WAIT_LOADCNT_DSCNT", "S_WAIT_STORECNT_DSCNT", "S_SENDMSG", "S_TTRACEDATA",
                "S_TTRACEDATA_IMM", "S_INCPERFLEVEL", "S_DECPERFLEVEL", "S_WAKEUP", "S_DENORM_MODE",
                "S_ROUND_MODE", "S_WAITCNT_VSCNT", "S_WAITCNT_VMCNT", "S_WAITCNT_EXPCNT", "S_WAITCNT_LGKMCNT",
                "S_BARRIER_SIGNAL", "S_BARRIER_SIGNAL_ISFIRST", "S_DCACHE_INV", "S_GL1_INV", "S_DCACHE_WB",
                "S_SET_VALU_COEXEC_MODE", "BUFFER_GL0_INV", "BUFFER_GL1_INV", "BUFFER_WBL2", "BUFFER_INV",
                "BUFFER_WBINVL1", "BUFFER_WBINVL1_VOL", "GLOBAL_INV", "GLOBAL_WB", "GLOBAL_WBINV"}
_BARRIERS = {"S_BARRIER", "S_BARRIER_WAIT"}
_ENDS = {"S_ENDPGM", "S_ENDPGM_SAVED"}
_MEM_BASES = {"GLOBAL", "FLAT", "SCRATCH", "VGLOBAL", "VFLAT", "VSCRATCH"}
_MASK_FMT = "NUM_M64"
_MODIFIER_FIELDS = {"OPSEL": "opsel", "OPSEL_HI": "opsel_hi", "NEG": "neg", "NEG_HI": "neg_hi"}


def end_step(w) -> int:
    return END


def _fault_step(kind: str, detail: str) -> Callable:
    def step(w):
        raise GPUFault(FaultRecord(kind, detail=detail))
    return step


def _sext(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


class Planner:
    """Builds the step closure of an instruction for one family and wave size."""

    def __init__(self, family: str, lanes: int):
        self.fam, self.lanes = family, lanes
        self.isa = isa.load(family)
        self.cdna = family == "cdna"
        self.m0, self.null = m0_null(family)
        self.saddr_off = 0x7F if self.cdna else 124
        self.mask_bits = 64 if lanes == 64 else 32
        self._sems: dict[tuple[str, str], object] = {}

    # -- semantics ---------------------------------------------------------------------------------------------
    def sem(self, op: isa.Op):
        key = (op.enc, op.name)
        s = self._sems.get(key)
        if s is None:
            try:
                from emu.pcode import compile_op
                s = compile_op(self.fam, op.enc, op.name)
            except Exception as e:  # Unsupported, or a pcode gap: the instruction faults when executed
                s = _Unsupported(f"{op.enc} {op.name}: no compiled semantics ({type(e).__name__}: {e})")
            self._sems[key] = s
        if isinstance(s, _Unsupported):
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
            if name in ("S_CODE_END", "S_SETHALT"):
                return _fault_step("illegal-instruction", f"{name.lower()} executed")
            if base in ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP"):
                return self._salu(inst)
            if base == "SMEM":
                return self._smem(inst)
            if base in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P"):
                return self._valu(inst)
            if base == "VOPD":
                return self._vopd(inst)
            if base == "DS":
                return self._ds(inst)
            if base in _MEM_BASES:
                return self._flat(inst)
            if base in ("MUBUF", "MTBUF", "VBUFFER"):
                return self._buffer(inst)
            return _fault_step("illegal-instruction", f"{base} instructions are not supported by the emulator")
        except _Unsupported as e:
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
        o = op.operands.get(fld) if fld else None
        return max(b, o.bits if o is not None else 0) or default

    @staticmethod
    def _fmt(op: isa.Op, fld: str | None) -> str:
        o = op.operands.get(fld) if fld else None
        return o.fmt if o is not None else ""

    def _mask_reader(self, code: int) -> Callable:
        return scalar_reader(code, self.mask_bits, "", None, self.fam)

    def _mask_writer(self, code: int) -> Callable:
        wr = scalar_writer(code, self.mask_bits, self.fam)
        return lambda w, v: wr(w, _mask(v) & w.exec)

    def _common_reads(self, n: str, inst) -> Callable | None:
        """Readers of state names every encoding may use."""
        f = {"SCC": lambda w: w.scc, "EXEC": lambda w: w.exec, "VCC": lambda w: w.vcc, "M0": lambda w: w.m0,
             "EXECZ": lambda w: int(w.exec == 0), "VCCZ": lambda w: int(w.vcc == 0), "MODE": lambda w: w.mode,
             "TRAPSTS": lambda w: w.trapsts}.get(n)
        if f is not None:
            return f
        if n == "PC":
            return lambda w, pc=inst.pc: pc
        if n in ("SIMM32", "LITERAL"):
            lit = inst.literal or 0
            return lambda w: lit
        if n == "VGPR":
            return lambda w: w.vgpr.T  # the pcode indexes VGPR[lane][register]
        if n == "SGPR":
            return lambda w: w.sgpr
        if n in _MODIFIER_FIELDS:
            v = inst.fields.get(_MODIFIER_FIELDS[n], 0)
            return lambda w: v
        if "." in n:  # status bits the emulator does not model (TRAPSTS.INVALID, WAVE_STATUS.PRIV, ...): clear
            return lambda w: 0
        return None

    def _state_writer(self, n: str) -> Callable | None:
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
        if "." in n:  # status bits the emulator does not model
            return lambda w, v: None
        return None

    # -- SALU and SOPP -----------------------------------------------------------------------------------------
    def _salu(self, inst) -> Callable:
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        fm = {"S0": "ssrc0", "S1": "ssrc1", "D0": "sdst"}
        if inst.base == "SOPK":  # the 16-bit immediate is SIMM16, or S1 beside S0 = sdst, or else S0 (CDNA pcode)
            fm = {"S0": "sdst", "S1": "simm16", "D0": "sdst"} if "S1" in sem.reads or "SIMM16" in sem.reads \
                else {"S0": "simm16", "D0": "sdst"}
        reads = []
        for n in sorted(sem.reads):
            fld = fm.get(n)
            if fld == "simm16" or (n == "SIMM16" and "simm16" in f):
                v = f.get("simm16", 0)
                reads.append((n, lambda w, v=v: v))
            elif fld is not None and fld in f:
                bits = self._width(sem, n, op, fld)
                code = f[fld] if fld != "sdst" else f["sdst"]
                reads.append((n, scalar_reader(code, bits, self._fmt(op, fld), inst.literal, self.fam)))
            else:
                r = self._common_reads(n, inst)
                if r is None:
                    raise _Unsupported(f"{op.name}: reads {n}, which the engine does not provide")
                reads.append((n, r))
        writes = []
        for n in sorted(sem.writes - {"PC"}):
            if n == "D0" and "sdst" in f:
                writes.append((n, scalar_writer(f["sdst"], self._width(sem, n, op, "sdst"), self.fam)))
            else:
                wr = self._state_writer(n)
                if wr is None:
                    raise _Unsupported(f"{op.name}: writes {n}, which the engine does not accept")
                writes.append((n, wr))
        nxt = inst.pc + inst.size
        lanes = self.lanes
        branch = "PC" in sem.writes
        # the program counter is 48 bits; pcode that types PC narrower keeps the instruction's upper bits
        pc_keep = ~((1 << sem.widths.get("PC", 64)) - 1) & inst.pc

        def step(w):
            out = sem({n: r(w) for n, r in reads}, lanes)
            for n, wr in writes:
                v = out.get(n)
                if v is not None:
                    wr(w, v)
            pc = out.get("PC") if branch else None
            w.pc = nxt if pc is None else (int(pc) | pc_keep) & 0xFFFFFFFFFFFF
            return 0
        return step

    # -- SMEM: plain dword loads move data; the rest through pcode ---------------------------------------------
    def _smem(self, inst) -> Callable:
        op, f = inst.op, inst.fields
        name = op.name
        if not (name.startswith("S_LOAD_") or name.startswith("S_BUFFER_LOAD_")) or "sdata" not in op.operands:
            raise _Unsupported(f"{name}: SMEM operation not supported")
        nbits = op.operands["sdata"].bits
        if nbits % 32:
            raise _Unsupported(f"{name}: sub-dword scalar loads not supported")
        ndw = nbits // 32
        sbase = f["sbase"] * 2
        base = scalar_reader(sbase, 64, "", None, self.fam)
        if name.startswith("S_BUFFER"):
            b = base
            base = lambda w: b(w) & 0xFFFFFFFFFFFF  # noqa: E731 - resource dword0-1: base address [47:0]
        if self.cdna:
            imm = f.get("imm", 1)
            off = _sext(f["offset"], 21) if imm else None
            soff_code = f["soffset"] if f.get("soffset_en") else (f["offset"] & 0x7F if not imm else None)
            off = off or 0
        else:
            key = "ioffset" if "ioffset" in f else "offset"
            off = _sext(f[key], 24 if key == "ioffset" else 21)
            soff_code = f.get("soffset")
            soff_code = None if soff_code in (None, self.null) else soff_code
        soff = scalar_reader(soff_code, 32, "", None, self.fam) if soff_code is not None else (lambda w: 0)
        dst = f["sdata"]
        if dst + ndw > 106 and not (108 <= dst and dst + ndw <= 124):
            raise OperandError(f"s_load destination s{dst}+{ndw} out of range")
        nxt = inst.pc + inst.size

        def step(w):
            addr = (base(w) + off + soff(w)) & 0xFFFFFFFFFFFC
            w.sgpr[dst:dst + ndw] = np.frombuffer(w.vm.read(addr, 4 * ndw), np.uint32)
            w.pc = nxt
            return 0
        return step

    # -- VALU --------------------------------------------------------------------------------------------------
    def _valu(self, inst) -> Callable:
        base, op = inst.base, inst.op
        sem = self.sem(op)
        if base in ("VOP2", "VOPC"):
            fm = {"S0": "src0", "S1": "vsrc1", "D0": "vdst"}
        else:
            fm = {"S0": "src0", "S1": "src1", "S2": "src2", "D0": "vdst"}
        reads, writes, wmask, post = self._vparts(inst, op, sem, fm)
        return _valu_step(sem, reads, writes, wmask, post, inst.pc + inst.size, self.lanes)

    def _vopd(self, inst) -> Callable:
        f = inst.fields
        parts = []
        for which, opv, s0, s1, dst in (("X", f["opx"], "srcx0", "vsrcx1", f["vdstx"]),
                                        ("Y", f["opy"], "srcy0", "vsrcy1", (f["vdsty"] << 1) | ((f["vdstx"] & 1) ^ 1))):
            dual = self.isa.op("VOPD", opv)
            if dual is None:
                raise OperandError(f"VOPD op{which} {opv} is not an opcode")
            plain = dual.name.replace("V_DUAL_", "V_")
            op = next((self.isa.by_name.get((sp, plain)) for sp in ("VOP2", "VOP1", "VOP3")
                       if (sp, plain) in self.isa.by_name), None)
            if op is None:
                raise _Unsupported(f"{dual.name}: no VOP1/VOP2/VOP3 equivalent")
            sem = self.sem(op)
            fields = {"src0": f[s0], "vsrc1": f[s1], "vdst": dst}
            parts.append((sem, *self._vparts(inst, op, sem, {"S0": "src0", "S1": "vsrc1", "D0": "vdst"},
                                             fields=fields, base="VOP2")))
        (sx, rx, wx, _, px), (sy, ry, wy, _, py) = parts
        nxt, lanes = inst.pc + inst.size, self.lanes

        def step(w):
            ox = sx({n: r(w) for n, r in rx}, lanes)
            oy = sy({n: r(w) for n, r in ry}, lanes)
            act = w.active
            for o, ws, p in ((ox, wx, px), (oy, wy, py)):
                for n, wr in ws:
                    v = o.get(n)
                    if v is not None:
                        wr(w, p(v) if p and n == "D0" else v, act)
            w.lane_ops += int(act.sum()) * 2
            w.pc = nxt
            return 0
        return step

    def _vparts(self, inst, op, sem, fm: dict[str, str], fields: dict | None = None, base: str | None = None):
        """(reads, writes, write-mask fn, D0 post-processing) of a VALU instruction."""
        f = fields if fields is not None else inst.fields
        base = base or inst.base
        enc = inst.enc
        fam, cdna = self.fam, self.cdna
        vop3 = base in ("VOP3", "VOP3SD", "VOP3P")
        dpp16_ = enc.endswith("DPP16")
        dpp8_ = enc.endswith("DPP8")
        sdwa = enc.endswith("SDWA") or enc.endswith("SDWA_SDST")
        opsel = f.get("opsel", 0)
        negs, abss = f.get("neg", 0), f.get("abs", 0)
        if not vop3 and (dpp16_ or sdwa):
            negs = f.get("src0_neg", 0) | f.get("src1_neg", 0) << 1
            abss = f.get("src0_abs", 0) | f.get("src1_abs", 0) << 1
        reads, wmask = [], None
        d0_fld = "vdst"
        dst_fmt = self._fmt(op, d0_fld)
        dst_bits = self._width(sem, "D0", op, d0_fld)
        dec = inst.operands.get("vdst") if fields is None else None  # the decoder's view of the destination
        scalar_dst = (op.operands.get("vdst") is not None and op.operands["vdst"].kind in ("SREG", "SDST")) \
            or enc.endswith("_SDST") or base == "VOPC" or dst_fmt == _MASK_FMT \
            or (dec is not None and dec.kind in ("sgpr", "special", "ttmp"))
        for i, n in enumerate(("S0", "S1", "S2")):
            if n not in sem.reads:
                continue
            fld = fm.get(n)
            if fld is None or fld not in f:
                raise _Unsupported(f"{op.name}: reads {n} but the encoding has no such source")
            bits = self._width(sem, n, op, fld)
            fmt = self._fmt(op, fld)
            code = f[fld] + (256 if fld.startswith("vsrc") else 0) + self._acc(inst, fld, fields)
            if i == 0 and (dpp16_ or dpp8_ or sdwa):
                code = f["vsrc0"] + 256
                if sdwa and f.get("s0"):
                    code -= 256
            if i == 1 and sdwa and f.get("s1"):
                code -= 256
            hi = False
            if bits <= 16 and not cdna:
                if vop3:
                    hi = bool(opsel >> i & 1)
                elif code >= 256 + 128:
                    code, hi = code - 128, True
            if base == "VOP3P" and ("PK" in fmt or op.name.startswith("V_PK_")):
                r = self._packed(code, bits, fmt, inst.literal, i, f)
            else:
                r = vector_reader(code, bits, fmt, inst.literal, hi, fam)
                if is_float(fmt):
                    m = modifier(bits if bits > 16 else 16, bool(abss >> i & 1), bool(negs >> i & 1))
                    if m is not None:
                        r = _then(r, m)
            if sdwa and i < 2:
                sel, sext = f.get(f"src{i}_sel", 6), bool(f.get(f"src{i}_sext", 0))
                if sel != 6 or sext:
                    r = _then(r, lambda v, sel=sel, sext=sext: sdwa_extract(v, sel, sext))
            if i == 0 and dpp16_:
                r, wmask = self._dpp16(r, f)
            elif i == 0 and dpp8_:
                idx = dpp8([f[f"lane_sel_{k}"] for k in range(8)], self.lanes)
                r = _dpp8_fetch(r, idx, inst.fields.get("src0", 0) == 234)
            reads.append((n, r))
        mask_code = 106 if base == "VOPC" and not (sdwa and f.get("sd")) else f.get("sdst" if sdwa else "vdst")
        for n in sorted(sem.reads - {"S0", "S1", "S2"}):
            if n == "D0" and scalar_dst:
                reads.append((n, self._mask_reader(mask_code)))
            elif n == "D0":
                hi = bool(opsel >> 3 & 1) if vop3 and not cdna else False
                reg = f["vdst"] + self._acc(inst, "vdst", fields)
                if dst_bits <= 16 and not vop3 and not cdna and reg >= 128:
                    reg, hi = reg - 128, True
                reads.append((n, vgpr_reader(reg, dst_bits, hi)))
            elif n == "VCC" and vop3 and "S2" not in sem.reads and "src2" in f:
                reads.append((n, self._mask_reader(f["src2"])))
            elif n in ("SRC0", "SRC1", "SRC2", "VDST"):  # register numbers, for pcode indexing VGPR[lane][reg]
                fld = n.lower()
                idx = f[fld] - (256 if fld != "vdst" else 0) + self._acc(inst, fld, fields)
                reads.append((n, lambda w, idx=idx: idx))
            else:
                r = self._common_reads(n, inst)
                if r is None:
                    raise _Unsupported(f"{op.name}: reads {n}, which the engine does not provide")
                reads.append((n, r))
        writes = []
        post = None
        for n in sorted(sem.writes):
            if n == "D0":
                if scalar_dst:
                    code = mask_code
                    if dst_fmt == _MASK_FMT or base == "VOPC" or "CMP" in op.name:
                        mw = self._mask_writer(code)
                        writes.append((n, lambda w, v, act, mw=mw: mw(w, v)))
                    else:
                        sw = scalar_writer(code, dst_bits, self.fam)
                        writes.append((n, lambda w, v, act, sw=sw: sw(w, _as_int(v))))
                    continue
                reg = f["vdst"] + self._acc(inst, "vdst", fields)
                hi = bool(opsel >> 3 & 1) if vop3 and not cdna else False
                if dst_bits <= 16 and not vop3 and not cdna and reg >= 128:
                    reg, hi = reg - 128, True
                vw = vgpr_writer(reg, dst_bits, hi, zero_hi16=cdna)
                if sdwa and f.get("dst_sel", 6) != 6:
                    sel, unused = f["dst_sel"], f.get("dst_unused", 0)
                    vw = _sdwa_writer(vw, vgpr_reader(reg, 32), sel, unused)
                writes.append((n, vw))
                post = _omod_clamp(dst_bits, dst_fmt, f.get("omod", 0), f.get("clmp", 0))
            elif n in ("VCC", "D1") and base == "VOP3SD":
                mw = self._mask_writer(f["sdst"])
                writes.append((n, lambda w, v, act, mw=mw: mw(w, v)))
            elif n == "VCC":
                writes.append((n, lambda w, v, act: setattr(w, "vcc", _mask(v) & w.exec)))
            elif n == "EXEC":
                writes.append((n, lambda w, v, act: w.set_exec(_mask(v) & w.exec)))
            else:
                sw = self._state_writer(n)
                if sw is None:
                    raise _Unsupported(f"{op.name}: writes {n}, which the engine does not accept")
                writes.append((n, lambda w, v, act, sw=sw: sw(w, v)))
        return reads, writes, wmask, post

    @staticmethod
    def _acc(inst, fld: str, fields) -> int:
        """Row offset of an ACC VGPR operand (CDNA), as the decoder classifies the operand."""
        o = inst.operands.get(fld) if fields is None else None
        return ACC if o is not None and o.kind == "agpr" else 0

    def _packed(self, code, bits, fmt, literal, i, f) -> Callable:
        """A VOP3P packed operand: each half picked by opsel/opsel_hi, negated by neg/neg_hi."""
        e = bits // 2
        emask = U64((1 << e) - 1)
        whole = vector_reader(code, bits, fmt, literal, False, self.fam)
        if 240 <= code <= 248 and e == 16:  # float inline constants fill both halves
            c = whole
            whole = (lambda c: lambda w: c(w) | (c(w) << U64(16)))(c)
        sel_lo = f.get("opsel", 0) >> i & 1
        opsel_hi = f.get("opsel_hi", 3) | f.get("opsel_hi2", 1) << 2
        sel_hi = opsel_hi >> i & 1
        neg_lo = (f.get("neg", 0) >> i & 1) if is_float(fmt) else 0
        neg_hi = (f.get("neg_hi", 0) >> i & 1) if is_float(fmt) else 0
        s_lo, s_hi = U64(e * sel_lo), U64(e * sel_hi)
        sign = U64(1 << (e - 1))
        n_lo, n_hi = sign if neg_lo else U64(0), sign if neg_hi else U64(0)
        eu = U64(e)

        def r(w):
            v = whole(w)
            return (((v >> s_lo) & emask) ^ n_lo) | ((((v >> s_hi) & emask) ^ n_hi) << eu)
        return r

    def _dpp16(self, r: Callable, f: dict):
        lanes = self.lanes
        sel = dpp16(f["dpp"], lanes, self.cdna)
        if sel is None:
            raise OperandError(f"reserved DPP control {f['dpp']:#x}")
        idx, ok = sel
        bc, fi = bool(f.get("bc", 0)), bool(f.get("fi", 0))
        enable = dpp_write_mask(lanes, f.get("row_mask", 15), f.get("bank_mask", 15))

        def valid(w):
            return ok & (w.active[idx] | fi)

        def fetch(w):
            return np.where(valid(w), r(w)[idx], U64(0))

        def wmask(w):
            return enable & (valid(w) | bc)
        return fetch, wmask

    # -- LDS ---------------------------------------------------------------------------------------------------
    def _ds(self, inst) -> Callable:
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
                r = self._common_reads(n, inst)
                if r is None:
                    raise _Unsupported(f"{op.name}: reads {n}, which the engine does not provide")
                reads.append((n, r))
        writes = self._vmem_writes(sem, op, f["vdst"] + acc, ("RETURN_DATA", "VDATA"))
        return _mem_step(sem, reads, writes, inst.pc + inst.size, self.lanes)

    def _vmem_writes(self, sem, op, vdst: int, names) -> list:
        """Writers of a memory op's results; ops without a destination operand (DS_ADD_U32, stores) write none."""
        writes = []
        has_dst = "vdst" in op.operands or ("vdata" in op.operands and "STORE" not in op.name)
        for n in sorted(sem.writes - {"MEM", "LDS"}):
            if n in names:
                if has_dst:
                    writes.append((n, _wide_writer(vdst, self._width(sem, n, op, "vdst"))))
            else:
                sw = self._state_writer(n)
                if sw is None:
                    raise _Unsupported(f"{op.name}: writes {n}, which the engine does not accept")
                writes.append((n, lambda w, v, act, sw=sw: sw(w, v)))
        return writes

    # -- global / flat / scratch -------------------------------------------------------------------------------
    def _flat(self, inst) -> Callable:
        op, f = inst.op, inst.fields
        sem = self.sem(op)
        base = inst.base.removeprefix("V") if inst.base.startswith("V") else inst.base
        rdna4 = "ioffset" in f
        vaddr = f["vaddr"] if rdna4 else f["addr"]
        acc = ACC if f.get("acc") else 0  # CDNA: data and destination are ACC VGPRs
        data = (f["vsrc"] if rdna4 else f["data"]) + acc
        vdst = f["vdst"] + acc
        off = _sext(f["ioffset"], 24) if rdna4 else (
            f["offset"] if self.cdna and base == "FLAT" else _sext(f["offset"], 13))
        saddr = f.get("saddr", self.saddr_off)
        saddr = None if saddr in (self.saddr_off, 0x7C, 0x7D) and not (self.cdna and saddr < 0x7F) else saddr
        returns = self._returns(op, f)
        if base == "SCRATCH":
            sve = f.get("sve", 0)
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
        narrow = base != "SCRATCH" and sem.widths.get("ADDR", 64) < 64
        reads = []
        for n in sorted(sem.reads - {"MEM", "ADDR"}):
            if n in ("DATA", "VDATA") and "vdst" in op.operands and n == "VDATA":
                reads.append((n, _wide_reader(vdst, self._width(sem, n, op, "vdst"))))
            elif n in ("DATA", "VDATA", "DATA0"):
                reads.append((n, _wide_reader(data, self._width(sem, n, op, "data"))))
            elif n == "OFFSET":
                reads.append((n, lambda w: off))
            else:
                r = self._common_reads(n, inst)
                if r is None:
                    raise _Unsupported(f"{op.name}: reads {n}, which the engine does not provide")
                reads.append((n, r))
        names = ("VDATA",) + (("RETURN_DATA",) if returns else ())
        writes = [x for x in self._vmem_writes(sem, op, vdst, names + ("RETURN_DATA",))
                  if x[0] != "RETURN_DATA" or returns]
        step = _mem_step(sem, reads, writes, inst.pc + inst.size, self.lanes)
        if narrow:  # pcode typing ADDR narrower than 64 bits: supply the upper address bits through the space
            return lambda w: step(w, {"ADDR": (a := addr(w)), "MEM": HighBits(space(w), a)})
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
        nbytes = max(4, self._width(sem, "VDATA", op, "vdata") // 8)

        def addr_range(w):
            d = [r(w) for r in rr]
            base = d[0] | (d[1] & 0xFFFF) << 32
            stride = (d[1] >> 16) & 0x3FFF
            num = d[2]
            index = vr(w) if idxen else np.zeros(self.lanes, U64)
            offset = (vr2(w) if idxen else vr(w)) if offen else np.zeros(self.lanes, U64)
            offset = offset + U64(ioff)
            if stride:
                ok = index < U64(num)
            else:
                ok = offset + U64(nbytes) <= U64(num)
            return U64(base + soff(w)) + index * U64(stride) + offset, ok

        reads = [("ADDR_RANGE", addr_range)]
        vdata = f["vdata"]
        for n in sorted(sem.reads - {"MEM", "ADDR"}):
            if n in ("DATA", "VDATA"):
                reads.append((n, _wide_reader(vdata, self._width(sem, n, op, "vdata"))))
            else:
                r = self._common_reads(n, inst)
                if r is None:
                    raise _Unsupported(f"{op.name}: reads {n}, which the engine does not provide")
                reads.append((n, r))
        returns = self._returns(op, f) or "STORE" not in op.name and "ATOMIC" not in op.name
        writes = [x for x in self._vmem_writes(sem, op, vdata, ("VDATA", "RETURN_DATA")) if returns]
        inner = _mem_step(sem, reads[1:], writes, inst.pc + inst.size, self.lanes)

        def step(w):
            a, ok = addr_range(w)
            return inner(w, {"ADDR": a, "MEM": Buffer(w.vm, ok)})
        return step


class _Unsupported(Exception):
    pass


def _then(r: Callable, g: Callable) -> Callable:
    return lambda w: g(r(w))


def _dpp8_fetch(r: Callable, idx: np.ndarray, fi: bool) -> Callable:
    return lambda w: np.where(fi | w.active[idx], r(w)[idx], U64(0))


def _sdwa_writer(vw: Callable, rd: Callable, sel: int, unused: int) -> Callable:
    return lambda w, v, act: vw(w, sdwa_place(v, rd(w), sel, unused), act)


def _mask(v) -> int:
    """A wave mask from a mask int or from per-lane values (lane i's bit set where nonzero)."""
    return lanes_to_mask(v != 0) if isinstance(v, np.ndarray) else int(v)


def _as_int(v) -> int:
    return int(v[0]) if isinstance(v, np.ndarray) else int(v)


def _omod_clamp(bits: int, fmt: str, omod: int, clamp: int) -> Callable | None:
    if not (omod or clamp) or not is_float(fmt) or bits not in (16, 32, 64):
        return None
    ft, ut = {16: (np.float16, np.uint16), 32: (np.float32, np.uint32), 64: (np.float64, np.uint64)}[bits]
    scale = {0: None, 1: 2.0, 2: 4.0, 3: 0.5}[omod]

    def post(v):
        x = v.astype(ut).view(ft)
        if scale is not None:
            x = x * ft(scale)
        if clamp:
            x = np.where(np.isnan(x), ft(0), np.clip(x, ft(0), ft(1)))
        return x.astype(ft).view(ut).astype(U64)
    return post


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


def _valu_step(sem, reads, writes, wmask, post, nxt: int, lanes: int) -> Callable:
    def step(w):
        st = {n: r(w) for n, r in reads}
        st["ACTIVE"] = w.active
        out = sem(st, lanes)
        act = w.active if wmask is None else w.active & wmask(w)
        for n, wr in writes:
            v = out.get(n)
            if v is not None:
                wr(w, post(v) if post is not None and n == "D0" else v, act)
        w.lane_ops += int(np.count_nonzero(act))
        w.pc = nxt
        return 0
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
