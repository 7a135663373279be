"""VALU execution plans (VOP1/2/3/3SD/3P/C, VOPD dual issue, DPP16/DPP8, SDWA, WMMA/MFMA through the pcode):
operand fetchers with their modifiers, the compiled semantics and destination writers with EXEC applied."""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from emu.amd import target
from emu.amd.exec import hwreg
from emu.amd.exec.lanes import dpp8, dpp16, dpp_write_mask, sdwa_extract, sdwa_place
from emu.amd.exec.operands import (
    OperandError,
    RegisterFileView,
    Unsupported,
    as_int,
    is_float,
    modifier,
    scalar_writer,
    to_mask,
    vector_reader,
    vgpr_reader,
    vgpr_writer,
)
from emu.amd.exec.state import ACC
from emu.amd.regs import VCC

U64 = np.uint64
DPP8_FI = 234  # src0 value of a DPP8 form with fetch-inactive set (233 without)
SUBSTITUTE_ROWS = 32  # registers of the widest matrix operand (1024 bits), appended per constant source
_MATRIX = ("V_MFMA_", "V_WMMA_", "V_SMFMAC_")
_ELEMENT = re.compile(r"(F64|F32|I32|BF16|F16)$")  # element type at the end of a matrix operand's format
MASK_FMT = "NUM_M64"  # operand format of wave masks (compare results, carry-outs)
# untyped (B32/B16) sources the hardware reads as floats under VOP3 abs/neg (LLVM accepts |x| / -x on them)
FLOAT_MODIFIED = frozenset({"V_CNDMASK_B32", "V_CNDMASK_B16"})
_MIX = ("V_FMA_MIX", "V_MAD_MIX")  # VOP3P mixed f16/f32: OPSEL_HI[i] picks f16, NEG_HI[i] is abs
# CDNA's 16-bit results clear the high half of their VGPR (`D0.f16 = ...`; V_MADAK_F16's text spells it out as
# {16'0, tmp}), except where the pcode writes the slice D0[15 : 0] alone, which keeps the other bits: V_MAD_MIXLO_F16
# (LLVM's GCNSubtarget::zeroesHigh16BitsOfDest, "derived from experimentation", has gfx9's mixlo preserve them too)
_LOW_SLICE = re.compile(r"\bD0\[15 : 0\][.\w]* =")
# instructions that run whatever EXEC holds (the pcode does not say so): V_WRITELANE_B32 writes its lane with EXEC
# zero too (the ISA guides: "ignores exec mask"; LLVM's SIInstrInfo::hasUnwantedEffectsWhenEXECEmpty, which counts on
# it: an SGPR spill to a VGPR lane inside a branch no lane takes must still land)
IGNORE_EXEC = frozenset({"V_WRITELANE_B32"})


class ValuPlans:
    """VALU part of emu.amd.exec.plan.Planner."""

    # -- VALU --------------------------------------------------------------------------------------------------
    def _valu(self, inst, fields: dict | None = None) -> Callable:
        base, op = inst.base, inst.op
        sem = self.sem(op)
        if base in ("VOP2", "VOPC"):
            fm = {"S0": "src0", "S1": "vsrc1", "D0": "vdst"}
        else:
            fm = {"S0": "src0", "S1": "src1", "S2": "src2", "D0": "vdst"}
        reads, writes, wmask, post = self._vparts(inst, op, sem, fm, fields)
        view = None
        if "VGPR" in sem.reads | sem.writes:
            view, dpp_mask = self._file_view(inst, op, sem, fields)
            wmask = wmask or dpp_mask
        return _valu_step(sem, reads, writes, wmask, post, inst.pc + inst.size, self.lanes, view,
                          op.name in IGNORE_EXEC)

    def _indexable(self, inst, step: Callable) -> Callable:
        """A CDNA VALU step that honours VGPR indexing mode (s_set_gpr_idx_on): while it is on, the VGPR
        operands selected by M0[15:12] (src0, src1, src2, dst) are offset by M0[7:0]; such variants are planned
        once per (instruction, M0 index bits)."""
        variants: dict[int, Callable] = {}

        def indexed(w):
            if not w.gpr_idx:
                return step(w)
            key = w.m0 & 0xF0FF
            s = variants.get(key)
            if s is None:
                f = _gpr_indexed(inst, key)
                s = variants[key] = self._valu(inst, f) if f is not None else self._control(inst, 0)
            return s(w)
        return indexed

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
                raise Unsupported(f"{dual.name}: no VOP1/VOP2/VOP3 equivalent")
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
                        wr(w, p(w, v) if p and n == "D0" else v, act)
            w.lane_ops += int(act.sum()) * 2
            w.pc = nxt
            return 0
        return step

    def _vparts(self, inst, op, sem, fm: dict[str, str], fields: dict | None = None, base: str | None = None):
        """(reads, writes, write-mask fn, D0 post-processing) of a VALU instruction."""
        f = fields if fields is not None else inst.fields
        base = base or inst.base
        enc = inst.enc
        fam, halves = self.fam, self.gen.vgpr_halves
        vop3 = base in ("VOP3", "VOP3SD", "VOP3P", "VINTERP")
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
            or enc.endswith("_SDST") or base == "VOPC" or dst_fmt == MASK_FMT \
            or (dec is not None and dec.kind in ("sgpr", "special", "ttmp"))
        for i, n in enumerate(("S0", "S1", "S2")):
            if n not in sem.reads:
                continue
            fld = fm.get(n)
            if fld is None or fld not in f:
                raise Unsupported(f"{op.name}: reads {n} but the encoding has no such source")
            bits = self._width(sem, n, op, fld)
            fmt = self._fmt(op, fld)
            code = self._source_code(inst, i, fld, fields)
            sel, sext = (f.get(f"src{i}_sel", 6), bool(f.get(f"src{i}_sext", 0))) if sdwa and i < 2 else (6, False)
            if i == 0 and "SDWA_SRC0_SEL" in sem.reads:
                sel, sext = 6, False  # the pcode selects itself
            hi = False
            if bits <= 16 and halves:
                if vop3:
                    hi = bool(opsel >> i & 1)
                elif code >= 256 + 128:
                    code, hi = code - 128, True
            if base == "VOP3P" and ("PK" in fmt or op.name.startswith("V_PK_")):
                r = self._packed(code, bits, fmt, inst.literal, i, f)
            elif op.name.startswith(_MIX):
                r = _then(vector_reader(code, bits, fmt, inst.literal, hi, fam), _mix_modifier(f, i))
            else:
                if sel != 6 or sext:  # SDWA: the operand is a byte or word of the whole dword, then modified
                    r = _then(vector_reader(code, 32, fmt, inst.literal, False, fam),
                              lambda v, sel=sel, sext=sext: sdwa_extract(v, sel, sext))
                else:
                    r = vector_reader(code, bits, fmt, inst.literal, hi, fam)
                if is_float(fmt) or op.name in FLOAT_MODIFIED:
                    m = modifier(bits if bits > 16 else 16, bool(abss >> i & 1), bool(negs >> i & 1))
                    if m is not None:
                        r = _then(r, m)
            if is_float(fmt) and not _keeps_denormals(op.name):
                r = _flush_input(r, fmt, bits)
            if i == 0 and dpp16_:
                r, wmask = self._dpp16(r, f)
            elif i == 0 and dpp8_:
                idx = dpp8([f[f"lane_sel_{k}"] for k in range(8)], self.lanes)
                r = _dpp8_fetch(r, idx, inst.fields.get("src0", 0) == DPP8_FI)
            reads.append((n, r))
        mask_code = VCC if base == "VOPC" and not (sdwa and f.get("sd")) else f.get("sdst" if sdwa else "vdst")
        for n in sorted(sem.reads - {"S0", "S1", "S2"}):
            if n == "D0" and scalar_dst:
                reads.append((n, self._mask_reader(mask_code)))
            elif n == "D0":
                hi = bool(opsel >> 3 & 1) if vop3 and halves else False
                reg = f["vdst"] + self._acc(inst, "vdst", fields)
                if dst_bits <= 16 and not vop3 and halves and reg >= 128:
                    reg, hi = reg - 128, True
                reads.append((n, vgpr_reader(reg, dst_bits, hi)))
            elif n == "VCC" and vop3 and "S2" not in sem.reads and "src2" in f:
                reads.append((n, self._mask_reader(f["src2"])))
            elif n in ("VDST", "DST"):  # register numbers, for pcode indexing VGPR[lane][reg]
                idx = f["vdst"] + self._acc(inst, "vdst", fields)
                reads.append((n, lambda w, idx=idx: idx))
            elif n in ("SRC0", "SRC1", "SRC2"):  # a source that is no VGPR: the rows _file_view appends for it
                code = self._source_code(inst, int(n[3]), n.lower(), fields)
                sub = SUBSTITUTE_ROWS * int(n[3])
                reads.append((n, (lambda w, idx=code - 256: idx) if code >= 256 else
                              (lambda w, sub=sub: w.vgpr.shape[0] + sub)))
            else:
                reads.append((n, self._common_read(n, inst)))
        writes = []
        post = None
        for n in sorted(sem.writes):
            if n == "D0":
                if scalar_dst:
                    code = mask_code
                    if dst_fmt == MASK_FMT or base == "VOPC" or "CMP" in op.name:
                        mw = self._mask_writer(code)
                        writes.append((n, lambda w, v, act, mw=mw: mw(w, v)))
                    else:
                        sw = scalar_writer(code, dst_bits, self.fam)
                        writes.append((n, lambda w, v, act, sw=sw: sw(w, as_int(v))))
                    continue
                reg = f["vdst"] + self._acc(inst, "vdst", fields)
                hi = bool(opsel >> 3 & 1) if vop3 and halves else False
                if dst_bits <= 16 and not vop3 and halves and reg >= 128:
                    reg, hi = reg - 128, True
                zero_hi16 = self.gen.zeroes_hi16 and not _LOW_SLICE.search(op.pcode or "")
                vw = vgpr_writer(reg, dst_bits, hi, zero_hi16=zero_hi16)
                if sdwa and f.get("dst_sel", 6) != 6:  # the result goes to a byte or word of the whole dword
                    sel, unused = f["dst_sel"], f.get("dst_unused", 0)
                    vw = _sdwa_writer(vgpr_writer(reg, 32), vgpr_reader(reg, 32), sel, unused)
                writes.append((n, vw))
                post = _result_modifiers(dst_bits, dst_fmt, f.get("omod", 0), f.get("clmp", 0), fam,
                                         not _keeps_denormals(op.name))
            elif n in ("VCC", "D1") and base == "VOP3SD":
                mw = self._mask_writer(f["sdst"])
                writes.append((n, lambda w, v, act, mw=mw: mw(w, v)))
            elif n in ("S0", "S1") and fm.get(n) in f:  # v_swap: the source VGPR is written too
                code = f[fm[n]] + (256 if fm[n].startswith("vsrc") else 0)
                if code < 256:
                    raise OperandError(f"{op.name}: {n} must be a VGPR")
                writes.append((n, vgpr_writer(code - 256 + self._acc(inst, fm[n], fields), 32)))
            elif n == "VCC":  # a VOP2 carry-out: VCC_LO alone in wave32 (VCC_HI is an SGPR there)
                mw = self._mask_writer(VCC)
                writes.append((n, lambda w, v, act, mw=mw: mw(w, v)))
            elif n == "EXEC":
                writes.append((n, lambda w, v, act: w.set_exec(to_mask(v) & w.exec)))
            else:
                sw = self._state_writer(n, op.name)
                writes.append((n, lambda w, v, act, sw=sw: sw(w, v)))
        return reads, writes, wmask, post

    @staticmethod
    def _acc(inst, fld: str, fields) -> int:
        """Row offset of an ACC VGPR operand (CDNA), as the decoder classifies the operand."""
        o = inst.operands.get(fld) if fields is None else None
        return ACC if o is not None and o.kind == "agpr" else 0

    def _source_code(self, inst, i: int, fld: str, fields: dict | None) -> int:
        """The 9-bit operand code of source i (256 + n: VGPR n, ACC VGPRs past ACC): DPP and SDWA forms name
        src0 in their extra dword (vsrc0; SDWA's s0/s1 bits say an SGPR)."""
        f = fields if fields is not None else inst.fields
        enc = inst.enc
        sdwa = enc.endswith(("SDWA", "SDWA_SDST"))
        if i == 0 and (enc.endswith(("DPP16", "DPP8")) or sdwa):
            return f["vsrc0"] + (0 if sdwa and f.get("s0") else 256)
        code = f[fld] + (256 if fld.startswith("vsrc") else 0) + self._acc(inst, fld, fields)
        return code - 256 if i == 1 and sdwa and f.get("s1") else code

    def _file_view(self, inst, op, sem, fields: dict | None) -> tuple[Callable, Callable | None]:
        """(view, DPP write mask) for semantics that index the VGPR file by register numbers (matrix ops, relative
        moves, lane reads and writes, RDNA4 fp8 conversions): registers out of range as RegisterFileView says; a
        source that is no VGPR (an inline constant, literal or SGPR) is read from rows appended to the file
        (SUBSTITUTE_ROWS per source); a DPP form reads every register from the lane its DPP control selects.
        view(w, st) sets st['VGPR'] (and narrows ACTIVE to the DPP write mask)."""
        subs = []
        for i in range(3):
            n = f"SRC{i}"
            if n in sem.reads and (code := self._source_code(inst, i, n.lower(), fields)) < 256:
                subs.append((i, self._substitute(op, n.lower(), code, inst.literal)))
        enc, f = inst.enc, fields if fields is not None else inst.fields
        gather = wmask = None
        if "SRC0" in sem.reads and enc.endswith("DPP16"):
            idx, valid, wmask = self._dpp16_select(f)
            gather = (idx, valid)
        elif "SRC0" in sem.reads and enc.endswith("DPP8"):
            idx, fi = dpp8([f[f"lane_sel_{k}"] for k in range(8)], self.lanes), f.get("src0", 0) == DPP8_FI
            gather = (idx, lambda w: fi | w.active[idx])
        return _view(subs, gather, wmask), wmask

    def _substitute(self, op, fld: str, code: int, literal: int | None) -> Callable:
        """The SUBSTITUTE_ROWS registers a constant or SGPR source stands for, per lane. A matrix operand (C of
        MFMA / WMMA; LLVM 19 folds a splat C into an inline constant src2) has the value in every element, as an
        inline constant of the element type; any other source is its 32-bit value in each register."""
        o = op.operands.get(fld) or op.operands.get("v" + fld)
        fmt = o.fmt if o is not None else ""
        m = _ELEMENT.search(fmt) if op.name.startswith(_MATRIX) else None
        elem = m.group(1) if m else "B32"
        bits = {"F64": 64, "F16": 16, "BF16": 16}.get(elem, 32)
        r = vector_reader(code, bits, elem if m else fmt, literal, False, self.fam)

        def rows(w) -> np.ndarray:
            v = r(w)
            dwords = [v & U64(0xFFFFFFFF), v >> U64(32)] if bits == 64 else \
                [(v & U64(0xFFFF)) * U64(0x10001)] if bits == 16 else [v]
            return np.array(dwords * (SUBSTITUTE_ROWS // len(dwords)), np.uint32)
        return rows

    def _packed(self, code, bits, fmt, literal, i, f) -> Callable:
        """A VOP3P packed operand: each half picked by opsel/opsel_hi, negated by neg/neg_hi."""
        e = bits // 2
        emask = U64((1 << e) - 1)
        whole = vector_reader(code, bits, fmt, literal, False, self.fam)
        sel_lo = f.get("opsel", 0) >> i & 1
        sel_hi = opsel_hi(f) >> i & 1
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

    def _dpp16_select(self, f: dict) -> tuple[np.ndarray, Callable, Callable]:
        """(source lane of each lane, valid(w): lanes whose source exists and is readable, write mask(w))."""
        lanes = self.lanes
        sel = dpp16(f["dpp"], lanes, self.gen.dpp_broadcasts)
        if sel is None:
            raise OperandError(f"reserved DPP control {f['dpp']:#x}")
        idx, ok = sel
        bc, fi = bool(f.get("bc", 0)), bool(f.get("fi", 0))
        enable = dpp_write_mask(lanes, f.get("row_mask", 15), f.get("bank_mask", 15))

        def valid(w):
            return ok & (w.active[idx] | fi)

        def wmask(w):
            return enable & (valid(w) | bc)
        return idx, valid, wmask

    def _dpp16(self, r: Callable, f: dict):
        idx, valid, wmask = self._dpp16_select(f)

        def fetch(w):
            return np.where(valid(w), r(w)[idx], U64(0))
        return fetch, wmask


def _gpr_indexed(inst, m0: int) -> dict | None:
    """The instruction's fields with the VGPR operands M0[15:12] selects offset by M0[7:0] (SGPR and constant
    operands are not indexed). Past the last VGPR (CDNA3 ISA 3.6.1, out-of-range VGPRs) a source reads VGPR0 and a
    destination makes the instruction a no-op: None then."""
    f, off = dict(inst.fields), m0 & 0xFF
    vop2 = inst.base in ("VOP2", "VOPC")
    dst = inst.operands.get("vdst")
    for bit, fld in enumerate(("src0", "vsrc1" if vop2 else "src1", "src2", "vdst")):
        if not m0 >> (12 + bit) & 1 or fld not in f or fld.startswith("src") and f[fld] < 256 \
                or fld == "vdst" and dst is not None and dst.kind not in ("vgpr", "agpr"):
            continue
        if f[fld] % 256 + off < 256:
            f[fld] += off
        elif fld == "vdst":
            return None
        else:
            f[fld] -= f[fld] % 256  # VGPR0 (256 in a 9-bit source field, 0 in vsrc1)
    return f


def opsel_hi(f: dict) -> int:
    """VOP3P OPSEL_HI: bits 1:0 in one field, bit 2 (src2) in another."""
    return f.get("opsel_hi", 3) | f.get("opsel_hi2", 1) << 2


def _mix_modifier(f: dict, i: int) -> Callable:
    """abs (NEG_HI) / neg (NEG) of a mix source, on the sign of the half OPSEL picks when OPSEL_HI says f16."""
    f16 = opsel_hi(f) >> i & 1 and not f.get("opsel", 0) >> i & 1
    m = modifier(16 if f16 else 32, bool(f.get("neg_hi", 0) >> i & 1), bool(f.get("neg", 0) >> i & 1))
    return m or (lambda v: v)


def _then(r: Callable, g: Callable) -> Callable:
    return lambda w: g(r(w))


def _dpp8_fetch(r: Callable, idx: np.ndarray, fi: bool) -> Callable:
    return lambda w: np.where(fi | w.active[idx], r(w)[idx], U64(0))


def _sdwa_writer(vw: Callable, rd: Callable, sel: int, unused: int) -> Callable:
    return lambda w, v, act: vw(w, sdwa_place(v, rd(w), sel, unused), act)


def _keeps_denormals(name: str) -> bool:
    """Ops that move or classify float bits and never flush them (moves, selects, class tests)."""
    return "CLASS" in name or name.startswith(("V_MOV", "V_CNDMASK", "V_ACCVGPR"))


def _float_bits(fmt: str, bits: int) -> int:
    return 16 if "16" in fmt else 64 if "F64" in fmt else 32 if bits >= 32 else 16


def _flush_input(r: Callable, fmt: str, bits: int) -> Callable:
    """A float source read as zero of its sign when it is denormal and MODE.FP_DENORM flushes inputs of its type."""
    fb = _float_bits(fmt, bits)
    keep = hwreg.F32_KEEP_IN if fb == 32 else hwreg.F16_KEEP_IN
    packed = "PK" in fmt and fb == 16

    def fetch(w):
        v = r(w)
        return v if w.mode & keep else flush_denormals(v, fb, packed)
    return fetch


def flush_denormals(v: np.ndarray, bits: int, packed: bool = False) -> np.ndarray:
    """Raw float bits (uint64 per lane) with denormals replaced by zero of the same sign."""
    if packed:
        return flush_denormals(v & U64(0xFFFF), 16) | (flush_denormals(v >> U64(16) & U64(0xFFFF), 16) << U64(16))
    mant = {16: 10, 32: 23, 64: 52}[bits]
    sign = U64(1 << (bits - 1))
    denormal = ((v & (sign - U64(1))) >> U64(mant) == 0) & ((v & U64((1 << mant) - 1)) != 0)
    return np.where(denormal, v & sign, v)


def _result_modifiers(bits: int, fmt: str, omod: int, clamp: int, fam: str, flushes: bool) -> Callable | None:
    """D0's output modifiers, as the ISA manuals describe them: omod only where MODE.IEEE is clear (RDNA4 has no
    IEEE mode) and MODE.FP_DENORM flushes the result type's output denormals, and then it flushes them, -0 to +0
    too ("output modifiers are not IEEE compatible"; LLVM's SIFoldOperands: "If output denormals are enabled, omod
    is ignored"); clamp to [0, 1] (NaN to 0 under MODE.DX10_CLAMP); then denormal flushing per MODE.FP_DENORM."""
    if not is_float(fmt) or bits not in (16, 32, 64):
        return None
    fb = _float_bits(fmt, bits)
    keep = hwreg.F32_KEEP_OUT if fb == 32 else hwreg.F16_KEEP_OUT
    packed = "PK" in fmt and fb == 16
    ft = {16: np.float16, 32: np.float32, 64: np.float64}[fb]
    ut = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]  # a packed pair is two f16 in a dword
    scale = {0: None, 1: 2.0, 2: 4.0, 3: 0.5}[omod]
    ieee = target.generation(fam).ieee_mode
    ignore = keep | (1 << hwreg.IEEE if ieee else 0)  # MODE bits any of which turns omod off
    dx10 = 1 << hwreg.DX10_CLAMP if ieee else 0

    def post(w, v):
        scaled = scale is not None and not w.mode & ignore
        if scaled or clamp:
            x = v.astype(ut).view(ft)
            if scaled:
                x = x * ft(scale)
                x = np.where(np.abs(x) < np.finfo(ft).tiny, ft(0), x)  # denormals and -0 to +0
            if clamp:
                nan = x if dx10 and not w.mode & dx10 else ft(0)
                x = np.where(np.isnan(x), nan, np.clip(x, ft(0), ft(1)))
            v = x.astype(ft).view(ut).reshape(v.shape).astype(U64)
        return v if not flushes or w.mode & keep else flush_denormals(v, fb, packed)
    return post


def _view(subs: list, gather: tuple | None, wmask: Callable | None) -> Callable:
    """view(w, st) of Planner._file_view: the wave's VGPRs, lane-gathered for DPP, with the substitute rows after."""
    def view(w, st) -> None:
        seen = w.vgpr
        if gather is not None:
            idx, valid = gather
            seen = np.where(valid(w), seen[:, idx], np.uint32(0))
        if subs:
            extra = np.zeros((3 * SUBSTITUTE_ROWS, w.lanes), np.uint32)
            for i, rows in subs:
                extra[i * SUBSTITUTE_ROWS:(i + 1) * SUBSTITUTE_ROWS] = rows(w)
            seen = np.concatenate([seen, extra])
        st["VGPR"] = RegisterFileView(w.vgpr.T, seen.T)
        if wmask is not None:
            st["ACTIVE"] = st["ACTIVE"] & wmask(w)
    return view


def _valu_step(sem, reads, writes, wmask, post, nxt: int, lanes: int, view: Callable | None = None,
               every_lane: bool = False) -> Callable:
    """`every_lane`: the instruction runs as if EXEC held every lane (IGNORE_EXEC)."""
    everyone = np.ones(lanes, bool) if every_lane else None

    def step(w):
        active = w.active if everyone is None else everyone
        st = {n: r(w) for n, r in reads}
        st["ACTIVE"] = active
        if view is not None:
            view(w, st)
        out = sem(st, lanes)
        act = active if wmask is None else active & wmask(w)
        for n, wr in writes:
            v = out.get(n)
            if v is not None:
                wr(w, post(w, v) if post is not None and n == "D0" else v, act)
        w.lane_ops += int(np.count_nonzero(act))
        w.pc = nxt
        return 0
    return step
