"""VALU execution plans (VOP1/2/3/3SD/3P/C, VOPD dual issue, DPP16/DPP8, SDWA, WMMA/MFMA through the pcode): a
binding's (emu.amd.exec.bind) sources as fetchers with their modifiers, the compiled semantics and its results as
writers with EXEC applied."""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from emu.amd import target
from emu.amd.exec import hwreg
from emu.amd.exec.bind import Binding, Kind, Operand, dpp16_selects, float_bits, fmt
from emu.amd.exec.lanes import dpp8, dpp16, dpp_write_mask, sdwa_extract, sdwa_place
from emu.amd.exec.operands import (
    OperandError,
    RegisterFileView,
    is_float,
    modifier,
    vector_reader,
    vgpr_reader,
    vgpr_writer,
)
from emu.amd.regs import DPP8FI, VGPR0

U64 = np.uint64
SUBSTITUTE_ROWS = 32  # registers of the widest matrix operand (1024 bits), appended per constant source
_MATRIX = ("V_MFMA_", "V_WMMA_", "V_SMFMAC_")
_ELEMENT = re.compile(r"(F64|F32|I32|BF16|F16)$")  # element type at the end of a matrix operand's format
# instructions that run whatever EXEC holds (the pcode does not say so): V_WRITELANE_B32 writes its lane with EXEC
# zero too (the ISA guides: "ignores exec mask"; LLVM's SIInstrInfo::hasUnwantedEffectsWhenEXECEmpty, which counts on
# it: an SGPR spill to a VGPR lane inside a branch no lane takes must still land)
IGNORE_EXEC = frozenset({"V_WRITELANE_B32"})


class ValuPlans:
    """VALU part of emu.amd.exec.plan.Planner."""

    # -- VALU --------------------------------------------------------------------------------------------------
    def _valu(self, inst, fields: dict | None = None) -> Callable:
        bd = self.valu_operands(inst, fields=fields)
        reads, writes, wmask, post = self._vparts(inst, bd)
        view = None
        if "VGPR" in bd.sem.reads | bd.sem.writes:
            view, dpp_mask = self._file_view(inst, bd)
            wmask = wmask or dpp_mask
        return _valu_step(bd.sem, reads, writes, wmask, post, inst.pc + inst.size, self.lanes, view,
                          bd.op.name in IGNORE_EXEC)

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
        parts = []
        for op, fields in self.vopd_halves(inst):
            bd = self.valu_operands(inst, op, fields, base="VOP2")
            parts.append((bd.sem, *self._vparts(inst, bd)))
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

    def _vparts(self, inst, bd: Binding) -> tuple:
        """(reads, writes, write-mask fn, D0 post-processing) of a VALU binding."""
        reads = [(n, self.reader(inst, bd, o)) for n, o in bd.inputs.items()]
        wmask = self._dpp16_select(bd.fields)[2] if dpp16_selects(inst, bd) else None
        writes = [(n, self.writer(bd, o)) for n, o in bd.outputs.items()]
        d0 = bd.outputs.get("D0")
        return reads, writes, wmask, self.result_modifiers(d0) if d0 is not None else None

    def source_reader(self, inst, bd: Binding, o: Operand) -> Callable:
        """Per-lane uint64 values of a vector instruction's source `o`, through its modifiers: SDWA select,
        abs / neg (VOP3P packing or mixing), denormal flushing, then DPP's lane selection."""
        m, lit, fam = o.mods, inst.literal, self.fam
        if m.packed is not None and not m.mix:
            r = self._packed(o.code, o.bits, o.fmt, lit, m.packed)
        elif m.mix:
            r = _then(vector_reader(o.code, o.bits, o.fmt, lit, m.hi, fam), _mix_modifier(m.packed))
        else:
            if m.sdwa is not None:  # a byte or word of the whole dword, then modified
                r = _then(vector_reader(o.code, 32, o.fmt, lit, False, fam),
                          lambda v, sel=m.sdwa[0], sext=bool(m.sdwa[1]): sdwa_extract(v, sel, sext))
            else:
                r = vector_reader(o.code, o.bits, o.fmt, lit, m.hi, fam)
            mod = modifier(o.bits if o.bits > 16 else 16, m.abs, m.neg)
            if mod is not None:
                r = _then(r, mod)
        if m.flush:
            r = _flush_input(r, o.fmt, o.bits)
        f = bd.fields
        if m.dpp and inst.enc.endswith("DPP16"):
            r, _ = self._dpp16(r, f)
        elif m.dpp:
            r = _dpp8_fetch(r, dpp8([f[f"lane_sel_{k}"] for k in range(8)], self.lanes),
                            inst.fields.get("src0", 0) == DPP8FI)
        if m.offset is not None:
            off = U64(m.offset)
            r = _then(r, lambda a: a + off)
        return r

    def vgpr_result_writer(self, o: Operand) -> Callable:
        """The writer of a VGPR result (state, uint64 values, bool active lanes): its half, or its SDWA select."""
        if o.mods.sdwa is not None:  # the result goes to a byte or word of the whole dword
            sel, unused = o.mods.sdwa
            return _sdwa_writer(vgpr_writer(o.reg, 32), vgpr_reader(o.reg, 32), sel, unused)
        return vgpr_writer(o.reg, o.bits, o.mods.hi, zero_hi16=o.mods.zero_hi16)

    def result_modifiers(self, o: Operand) -> Callable | None:
        """post(w, values) applying a VGPR result's output modifiers (None: it has none)."""
        m = o.mods
        if o.kind is not Kind.VGPR or not (m.omod or m.clamp or m.flush):
            return None
        return _result_modifiers(o.bits, o.fmt, m.omod, int(m.clamp), self.fam, m.flush)

    def _file_view(self, inst, bd: Binding) -> tuple[Callable, Callable | None]:
        """(view, DPP write mask) for semantics that index the VGPR file by register numbers (matrix ops, relative
        moves, lane reads and writes, RDNA4 fp8 conversions): registers out of range as RegisterFileView says; a
        source that is no VGPR (an inline constant, literal or SGPR) is read from rows appended to the file
        (SUBSTITUTE_ROWS per source); a DPP form reads every register from the lane its DPP control selects.
        view(w, st) sets st['VGPR'] (and narrows ACTIVE to the DPP write mask)."""
        subs = [(i, self._substitute(bd.op, f"src{i}", o.code, inst.literal)) for i in range(3)
                if (o := bd.inputs.get(f"SRC{i}")) is not None and o.code < VGPR0]
        enc, f, reads = inst.enc, bd.fields, bd.sem.reads
        gather = wmask = None
        if "SRC0" in reads and enc.endswith("DPP16"):
            idx, valid, wmask = self._dpp16_select(f)
            gather = (idx, valid)
        elif "SRC0" in reads and enc.endswith("DPP8"):
            idx, fi = dpp8([f[f"lane_sel_{k}"] for k in range(8)], self.lanes), f.get("src0", 0) == DPP8FI
            gather = (idx, lambda w: fi | w.active[idx])
        return _view(subs, gather, wmask), wmask

    def _substitute(self, op, fld: str, code: int, literal: int | None) -> Callable:
        """The SUBSTITUTE_ROWS registers a constant or SGPR source stands for, per lane. A matrix operand (C of
        MFMA / WMMA; LLVM 19 folds a splat C into an inline constant src2) has the value in every element, as an
        inline constant of the element type; any other source is its 32-bit value in each register."""
        fmt_ = fmt(op, fld)
        m = _ELEMENT.search(fmt_) if op.name.startswith(_MATRIX) else None
        elem = m.group(1) if m else "B32"
        bits = {"F64": 64, "F16": 16, "BF16": 16}.get(elem, 32)
        r = vector_reader(code, bits, elem if m else fmt_, literal, False, self.fam)

        def rows(w) -> np.ndarray:
            v = r(w)
            dwords = [v & U64(0xFFFFFFFF), v >> U64(32)] if bits == 64 else \
                [(v & U64(0xFFFF)) * U64(0x10001)] if bits == 16 else [v]
            return np.array(dwords * (SUBSTITUTE_ROWS // len(dwords)), np.uint32)
        return rows

    def _packed(self, code: int, bits: int, fmt: str, literal: int | None, packed: tuple) -> Callable:
        """A VOP3P packed operand: each half picked by opsel/opsel_hi, negated by neg/neg_hi."""
        e = bits // 2
        emask = U64((1 << e) - 1)
        whole = vector_reader(code, bits, fmt, literal, False, self.fam)
        sel_lo, sel_hi, neg_lo, neg_hi = packed
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


def _mix_modifier(packed: tuple) -> Callable:
    """abs (NEG_HI) / neg (NEG) of a mix source, on the sign of the half OPSEL picks when OPSEL_HI says f16."""
    sel, sel_hi, neg, neg_hi = packed
    m = modifier(16 if sel_hi and not sel else 32, bool(neg_hi), bool(neg))
    return m or (lambda v: v)


def _then(r: Callable, g: Callable) -> Callable:
    return lambda w: g(r(w))


def _dpp8_fetch(r: Callable, idx: np.ndarray, fi: bool) -> Callable:
    return lambda w: np.where(fi | w.active[idx], r(w)[idx], U64(0))


def _sdwa_writer(vw: Callable, rd: Callable, sel: int, unused: int) -> Callable:
    return lambda w, v, act: vw(w, sdwa_place(v, rd(w), sel, unused), act)


def _flush_input(r: Callable, fmt: str, bits: int) -> Callable:
    """A float source read as zero of its sign when it is denormal and MODE.FP_DENORM flushes inputs of its type."""
    fb = float_bits(fmt, bits)
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
    fb = float_bits(fmt, bits)
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
