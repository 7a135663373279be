"""ALU instructions as the LLVM tier's code (emu.amd.exec.translate): SALU, and VALU (VOP1/2/3/C/3SD, VOPD) on
16-bit (either half of a register), 24, 32 and 64-bit sources without SDWA or output modifiers, their abs / neg and
denormal flushing folded in for the region's MODE; lane reads, v_writelane and WMMA with their register-file
accesses lane by lane (emu.amd.exec.access).
Large semantics are outlined into one function per module and kind."""
from __future__ import annotations

from llvmlite import ir

from emu.amd.exec import access, hwreg, takes
from emu.amd.exec.bind import Binding, Kind, dpp16_selects, float_bits, vopd_y
from emu.amd.exec.lanes import dpp16, dpp_write_mask
from emu.amd.exec.operands import sign_bit
from emu.amd.exec.state import EXEC, SCC, VCC
from emu.amd.exec.translate_state import I32, I64, PTR, Exit, Hooks, fit
from emu.amd.exec.valu import IGNORE_EXEC
from emu.pcode.llvmemit import emit
from emu.pcode.llvmvalues import entry_alloca
from emu.pcode.typed import Unsupported as PcodeUnsupported

OUTLINE_FROM = 80  # LLVM instructions of a VALU's semantics from which its uses call one outlined copy
OUT_SLOT = 32 * 16  # bytes per output of outlined semantics: 32 lanes of up to 128 bits (64 of 64)
_SMALL: dict[tuple, bool] = {}  # (outlined semantics' key, lanes) -> whether they are inlined (under OUTLINE_FROM)
_LANE_READS = {"V_READFIRSTLANE_B32", "V_READLANE_B32"}


class _RegisterFileHooks(Hooks):
    """VGPR[lane][reg] reads and writes of pcode that indexes the register file (v_readfirstlane / v_readlane, the
    matrix instructions), each lane's (lane, reg) through the gather and scatter functions (emu.amd.exec.access)."""

    def __init__(self, region: AluCode):
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


class AluCode:
    """SALU and VALU instructions of emu.amd.exec.translate.Region."""

    def _salu(self, b, inst) -> None:
        bd = self.binder.salu_operands(inst)
        sem = bd.sem
        if sem.writes - {"D0", "SCC", "EXEC", "VCC", "M0"} or sem.files:
            raise Exit(f"{inst.op.name} writes {sorted(sem.writes)}")
        out = emit(b, sem.ir, self.lanes, self._inputs(b, bd, inst, lambda n: None, vector=False), Hooks())
        for n, v in out.items():
            o = bd.outputs[n]
            if o.scalar:
                self._set_scalar(b, o.code, 64 if o.bits > 32 else 32, v)
            elif n == "SCC":
                b.store(b.and_(fit(b, v, 32), I32(1)), self._slot(b, SCC))
            elif n in ("EXEC", "VCC"):
                v = b.and_(self._mask(b, v), I64(self.full))
                self._set_pair(b, EXEC if n == "EXEC" else VCC, v)
            elif n == "M0":
                self._set_scalar(b, self.m0, 32, v)
            else:
                raise Exit(f"writes {n}")

    def _valu(self, b, inst) -> None:
        bd = self.binder.valu_operands(inst)
        exe = I64(self.full) if inst.op.name in IGNORE_EXEC else self._exec(b)
        fetch, written = self._dpp16(b, bd, exe) if dpp16_selects(inst, bd) else (None, exe)
        out = self._valu_out(b, inst, bd, fetch)
        self._valu_write(b, bd, out, exe, written)
        self._lane_ops(b, written, 1)

    def _dpp16(self, b, bd: Binding, exe):
        """(src0's lane selection, the lanes written) of a DPP16 form: each lane reads its source lane where that
        lane exists and is active (or fetch-inactive is set), else 0; it is written where EXEC, the row and bank
        masks and (without bound_ctrl) a valid source allow, as the reference (emu.amd.exec.valu) does."""
        f = bd.fields
        sel = dpp16(f["dpp"], self.lanes, self.gen.dpp_broadcasts)
        if sel is None:
            raise Exit(f"reserved DPP control {f['dpp']:#x}")
        idx, ok = sel
        order = ir.Constant(ir.VectorType(I32, self.lanes), [int(i) for i in idx])
        ok, enable = (ir.Constant(self.vec(ir.IntType(1)), [int(x) for x in m])
                      for m in (ok, dpp_write_mask(self.lanes, f.get("row_mask", 15), f.get("bank_mask", 15))))
        active = self._lanes(b, exe)
        valid = ok if f.get("fi", 0) else b.and_(ok, b.shuffle_vector(active, active, order))
        lanes = b.and_(active, enable if f.get("bc", 0) else b.and_(enable, valid))

        def fetch(v):
            zero = ir.Constant(v.type, [0] * self.lanes)
            return b.select(valid, b.shuffle_vector(v, v, order), zero)
        return fetch, b.zext(b.bitcast(lanes, ir.IntType(self.lanes)), I64)

    def _vopd(self, b, inst) -> None:
        exe = self._exec(b)
        parts = []
        for op, fields in self.binder.vopd_halves(inst, self._vopd_y(inst.fields)):
            bd = self.binder.valu_operands(inst, op, fields, base="VOP2")
            parts.append((bd, self._valu_out(b, inst, bd)))
        for bd, out in parts:
            self._valu_write(b, bd, out, exe)
        self._lane_ops(b, exe, len(parts))

    @staticmethod
    def _vopd_y(f: dict) -> int:
        """The VGPR opY writes (emu.amd.exec.bind.vopd_y)."""
        return vopd_y(f)

    def _lane_ops(self, b, exe, k: int) -> None:
        cnt = b.call(self.fn.module.declare_intrinsic("llvm.ctpop", [I64]), [exe])
        b.store(b.add(b.load(self.lane_ops, typ=I64), b.mul(cnt, I64(k))), self.lane_ops)

    def _valu_out(self, b, inst, bd: Binding, fetch=None) -> dict:
        """The outputs of a VALU binding's semantics on its sources with their halves, abs / neg, denormal flushing,
        packing and DPP16 lane selection (no SDWA or mix), or a lane read's or matrix op's, whose register-file
        accesses go lane by lane."""
        op, sem = bd.op, bd.sem
        moves = op.name.startswith("V_ACCVGPR_")  # to, from and between the ACC VGPRs (rows ACC.. of the file)
        if not moves and any(o.kind == "agpr" for o in inst.operands.values()):
            raise Exit("ACC VGPR operand")

        def operand(n: str):
            o = bd.inputs[n]
            if n not in ("S0", "S1", "S2"):
                return None
            if o.mods.mix or inst.base == "VOP3P" and not (moves or op.name.startswith(takes.MATRIX)) \
                    and o.mods.packed is None:
                raise Exit("VOP3P source other than a packed pair")
            if o.bits not in (16, 24, 32, 64) or o.bits == 24 and (o.mods.abs or o.mods.neg):
                raise Exit(f"{o.bits}-bit source")
            v = self._shape(b, self._operand(b, o, inst), o.bits, True)  # 16, 24: a register's (half's) low bits
            if o.mods.packed is not None:
                v = self._halves(b, v, o.bits, o.mods.packed)
            v = self._modify(b, v, o.bits, o.mods.abs, o.mods.neg)
            if o.mods.flush:
                v = self._flushed(b, v, float_bits(o.fmt, o.bits), o.bits, hwreg.F32_KEEP_IN, hwreg.F16_KEEP_IN)
            if o.mods.dpp:
                if fetch is None:
                    raise Exit("DPP8 form")
                v = fetch(v)
            return v
        if sem.files:  # a lane read or write, or a matrix op: inlined, its register-file accesses lane by lane
            def vgpr(s: str) -> bool:
                return getattr(inst.operands.get(s), "kind", None) == "vgpr"
            if op.name in IGNORE_EXEC:  # v_writelane: scalar sources, one write whatever EXEC holds
                fits = not vgpr("src0") and not vgpr("src1")
            else:
                srcs = ("src0", "src1", "src2") if op.name.startswith(takes.MATRIX) \
                    else ("src0",) if op.name in _LANE_READS else ()
                fits = bool(srcs) and all(map(vgpr, srcs))
            if not fits:
                raise Exit(f"{op.name} reads {sorted(sem.files)} with other than VGPR sources")
            inputs = self._inputs(b, bd, inst, operand, vector=True)
            if op.name in IGNORE_EXEC:  # every lane computes the same write: lane 0 makes it
                inputs["ACTIVE"] = ir.Constant(self.vec(ir.IntType(1)), [1] + [0] * (self.lanes - 1))
            return emit(b, sem.ir, self.lanes, inputs, _RegisterFileHooks(self))
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
            return emit(b, sem.ir, self.lanes, inputs, Hooks())
        got = self.outlined.get(key)
        if got is None:
            fn = ir.Function(self.fn.module, ir.FunctionType(ir.VoidType(), [v.type for _, v in params] + [PTR]),
                             f"sem{len(self.outlined)}")
            fn.linkage = "internal"
            fn.attributes.add("noinline")
            hb = ir.IRBuilder(fn.append_basic_block("entry"))
            args = {n: v for n, v in inputs.items() if isinstance(v, ir.Constant)}
            args.update({n: a for (n, _), a in zip(params, fn.args, strict=False)})
            out = emit(hb, sem.ir, self.lanes, args, Hooks())
            layout = [(n, v.type, k * OUT_SLOT) for k, (n, v) in enumerate(out.items())]
            for k, v in enumerate(out.values()):
                hb.store(v, hb.gep(fn.args[-1], [I64(k * OUT_SLOT)], source_etype=ir.IntType(8)), align=1)
            hb.ret_void()
            small = _SMALL[key, self.lanes] = sum(len(blk.instructions) for blk in fn.blocks) < OUTLINE_FROM
            got = self.outlined[key] = (fn, layout, small)
        fn, layout, small = got
        if small:  # its function stays unused (LLVM drops it)
            return emit(b, sem.ir, self.lanes, inputs, Hooks())
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

    def _halves(self, b, v, bits: int, packed: tuple[int, int, int, int]):
        """A VOP3P packed pair (two halves of `bits`): each half picked by opsel / opsel_hi, its sign flipped by
        neg / neg_hi (emu.amd.exec.bind gives the bits)."""
        e = bits // 2
        sel_lo, sel_hi, neg_lo, neg_hi = packed

        def k(x: int):
            return ir.Constant(v.type, [x] * self.lanes)
        lo = b.xor(b.and_(b.lshr(v, k(e * sel_lo)), k((1 << e) - 1)), k(neg_lo << (e - 1)))
        hi = b.xor(b.and_(b.lshr(v, k(e * sel_hi)), k((1 << e) - 1)), k(neg_hi << (e - 1)))
        return b.or_(lo, b.shl(hi, k(e)))

    def _modify(self, b, v, bits: int, abs_: bool, neg: bool):
        if not (abs_ or neg):
            return v
        s = ir.Constant(v.type, [sign_bit(bits if bits > 16 else 16)] * self.lanes)
        if abs_:
            v = b.and_(v, b.not_(s))
        return b.xor(v, s) if neg and not abs_ else b.or_(v, s) if neg else v

    def _valu_write(self, b, bd: Binding, out: dict, exe, written=None) -> None:
        """A VALU binding's results: VGPRs (no output modifiers; v_swap writes its S0 too) and wave masks; a lane
        read's value to its SGPR. `written`: the lanes a VGPR result goes to when not EXEC's (DPP16's)."""
        active = self._lanes(b, exe if written is None else written)
        for n, v in out.items():
            o = bd.outputs[n]
            if n in ("D0", "S0") and o.kind is Kind.VGPR:
                if o.mods.omod or o.mods.clamp:
                    raise Exit("output modifiers")
                if o.mods.flush and o.bits in (16, 32, 64):
                    v = self._flushed(b, v, float_bits(o.fmt, o.bits), o.bits, hwreg.F32_KEEP_OUT,
                                      hwreg.F16_KEEP_OUT)
                if o.bits == 16:
                    self._set_half(b, o.reg, v, active, o.mods.hi, o.mods.zero_hi16)
                else:
                    self._set_vgpr(b, o.reg, o.bits, v, active)
            elif n == "D0" and bd.op.name in _LANE_READS:  # one value for the wave (every lane holds it)
                self._set_scalar(b, o.code, 32, b.extract_element(fit(b, v, 32), I32(0)))
            elif o.kind is Kind.MASK and (n != "D0" or n in bd.sem.masks):
                self._set_scalar(b, o.code, self.mask_bits, b.and_(self._mask(b, v), exe))
            else:
                raise Exit(f"writes {n}")
