"""The source of one fused step of the lean interpreter: an instruction's binding (emu.amd.exec.bind) and compiled
pcode rendered as Python that fetches the operands, runs the semantics and writes the results, register numbers and
constants inlined, with no per-instruction dicts. Vector semantics whose body is straight-line code are emitted at
natural widths (uint32 rows, viewed as float32 where the pcode bitcasts; emu.pcode.npback), the rest through the
reference backend's code generator (emu.pcode.pyback) bound to the operands; operands the code does not inline are
the reference plan's readers and writers (emu.amd.exec.plan), called.

As the code is emitted, the generator records what it needs (`Fragment`): the wave's arrays and the VGPR rows it
reads (each row loaded once into a local, emu.amd.exec.interp_code.row_local), whether it reads its PC, whether it
may change EXEC, and the conditions under which the reference step runs instead (`guards`: MODE rounding or flushing
where the fused code assumes it does not, VGPR indexing).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd.exec import hwreg, takes
from emu.amd.exec.bind import SOURCES, Binding, Kind, Operand, fmt, valu_fields
from emu.amd.exec.interp_backends import Bound, NaturalRows, Scalar, rounds_floats
from emu.amd.exec.interp_code import LOADS, act_lines, factory, row_loads, row_local
from emu.amd.exec.operands import is_float
from emu.amd.exec.plan import Planner
from emu.amd.exec.state import ACC, MODE, SCC
from emu.amd.regs import EXEC, VCC, storage
from emu.pcode.npvalues import Decline

GUARD = 0xF | hwreg.DENORM_ALL  # MODE bits a fused float step assumes: round to nearest even, denormals kept
_compiled: dict[tuple, Callable] = {}  # (generated source, its constants) -> factory


def generate(p: Planner, inst, carry: tuple[bool, bool] = (False, False)) -> tuple:
    """(Fragment, the arguments its code binds as A0, A1, ...) of a SALU, DS or VALU instruction the tier takes
    (emu.amd.exec.takes.lean; Decline: no generated form for its pcode); `carry`: (takes, gives) a carry chain's VCC
    lanes (emu.amd.exec.interp)."""
    src = Source(p, inst, carry)
    if inst.base in takes.SALU:
        src.salu()
    elif inst.base == "DS":
        src.ds()
    elif inst.base == "VOPD":  # both ops read their sources before either writes
        stores: list = []
        for k, (op, fields) in enumerate(p.vopd_halves(inst)):
            src.valu(p.valu_operands(inst, op, fields, base="VOP2"), "VOP2", stores, copy=k == 1)
        src.flush(stores)
        src.emit("w.lane_ops += 2 * n_act")
    else:
        src.flush(src.valu(p.valu_operands(inst), inst.base, []))
        src.emit("w.lane_ops += n_act")
    return src.fragment()


class Fragment:
    """The generated code of one fused step: the wave's arrays its body reads (`needs`: sg, vg, vf, vi, mem, and act
    for act, full and n_act) and the VGPR rows (`rows`), the conditions under which the reference step runs instead
    (`guards`), the constants it indexes as K, whether it may change EXEC (`dirty`), whether it reads its PC
    (`uses_pc`) and whether it sets the PC itself (a branch)."""

    def __init__(self, src: Source):
        self.needs, self.guards, self.body, self.consts = frozenset(src.needs), tuple(src.guards), src.lines, src.consts
        self.rows = frozenset(src.rows)
        self.carry = src.carry
        self.size, self.lanes, self.name, self.sets_pc = src.inst.size, src.p.lanes, src.inst.op.name, src.sets_pc
        self.dirty, self.uses_pc = src.dirty, src.uses_pc
        self.nargs = len(src.args)
        self.make = None

    def factory(self) -> Callable:
        """make(pc, ref, *args): the step of this code alone."""
        if self.make is None:
            names = "".join(f", A{i}" for i in range(self.nargs))
            lines = [ln for v, ln in LOADS[:1] if v in self.needs]  # sg: the guards read it
            if self.guards:
                lines.append(f"if {' or '.join(self.guards)}: return ref(w)")
            lines += [ln for v, ln in LOADS[1:] if v in self.needs] + row_loads(self.rows)
            lines += (act_lines(self.lanes) if "act" in self.needs else []) + self.body
            lines += ([] if self.sets_pc else ["w.pc = nxt"]) + ["return 0"]
            text = "\n".join([f"def make(pc, ref{names}):", f"    nxt = pc + {self.size}", "    def step(w):",
                              *("        " + ln for ln in lines), "    return step"]) + "\n"
            key = (text, repr(self.consts))
            make = _compiled.get(key)
            if make is None:  # instructions differing only in what the factory binds share the compiled code
                make = _compiled[key] = factory(text, f"<interp {self.name}>", K=self.consts)
            self.make = make
        return self.make


class Source:
    """The source of one fused step under construction, and what its code needs, recorded as it is emitted: the
    wave's arrays and VGPR rows it reads, whether it reads the PC, whether it may change EXEC."""

    def __init__(self, p: Planner, inst, carry: tuple[bool, bool] = (False, False)):
        self.p, self.inst, self.carry = p, inst, carry
        self.lines: list[str] = []  # the step's body (indented once inside `step`)
        self.args: list = []  # closures and constants the factory binds (A0, A1, ...)
        self.consts: list = []  # the generated semantics' constants (K)
        self.exact: set[str] = set()  # natural sources already masked to the semantics' width
        self.needs: set[str] = set()  # the wave arrays the code reads (Fragment)
        self.guards: list[str] = []  # conditions under which the reference step runs instead
        self.rows: set[tuple[str, int]] = set()  # (array, register) of the VGPR rows the code reads
        self.sets_pc = False  # the code sets the PC itself (a branch)
        self.uses_pc = False  # the code reads the instruction's PC (`pc`)
        self.dirty = False  # the code may change EXEC (set_exec, or a writer the reference gave)

    def arg(self, obj) -> str:
        self.args.append(obj)
        return f"A{len(self.args) - 1}"

    def call(self, fn, args: str, writes: bool = False) -> str:
        """Code calling closure `fn` (bound as an argument) with `args`; `writes`: a writer, which may change EXEC."""
        self.dirty = self.dirty or writes
        return f"{self.arg(fn)}({args})"

    def row(self, arr: str, reg: int) -> str:
        """The local holding VGPR row `reg` of array `arr` (vg, or its typed views vf, vi); the step loads it once."""
        self.rows.add((arr, reg))
        self.needs.add(arr)
        return row_local(arr, reg)

    def set_exec(self, v: str) -> None:
        self.emit(f"w.set_exec({v})")
        self.dirty = True

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def fragment(self) -> tuple:
        return Fragment(self), tuple(self.args)

    def guard(self, cond: str) -> None:
        self.needs.add("sg")
        if cond not in self.guards:  # VOPD: both halves ask
            self.guards.append(cond)

    # -- SALU --------------------------------------------------------------------------------------------------
    def salu(self) -> None:
        p, inst = self.p, self.inst
        bd = p.salu_operands(inst)
        sem, f = bd.sem, bd.sem.ir
        self.needs.add("sg")
        if "MODE" in sem.reads and rounds_floats(f):
            self.guard(f"sg[{MODE}] & {GUARD} != {hwreg.DENORM_ALL}")
        binds = {}
        for n, o in bd.inputs.items():
            bits = f.inputs.get(n)
            if bits is None:  # read by the engine only (MODE for rounding)
                continue
            code = self._scalar_read(bd, o, bits)
            binds[n] = f"({code}) & {(1 << bits) - 1}" if bits <= 64 else f"L.inp({code}, {bits})"
        gen = Scalar(f, binds, f"int(sg[{MODE}])", p.lanes, self.consts)
        self.lines += gen.body_lines()
        for n, o in bd.outputs.items():
            self._scalar_write(bd, o, gen.output(n))
        if "PC" in sem.writes:
            self.emit(f"w.pc = int({gen.output('PC')}) & 0xFFFFFFFFFFFF")
            self.sets_pc = True

    def _scalar_read(self, bd: Binding, o: Operand, bits: int) -> str:
        """Code of a SALU source: SGPRs, constants and fields inline, the planner's reader otherwise."""
        n = o.name
        if n == "PC":
            self.uses_pc = True
            return "pc"
        if n == "SCC":
            return f"int(sg[{SCC}])"
        if o.kind in (Kind.FIELD, Kind.INLINE, Kind.LITERAL):
            return str(o.value)
        mask = self._mask_read(VCC) if n in ("VCC", "VCCZ") else "w.active_mask" if n in ("EXEC", "EXECZ") else None
        if o.kind is Kind.STATE and mask is not None:  # the planner's readers: VCC & the wave's lanes, EXEC, and
            return f"int({mask} == 0)" if n.endswith("Z") else mask  # whether they are zero
        if o.scalar and bits <= 64 and _slots(o.code, o.bits):  # SGPRs, TTMPs, VCC and EXEC (their slots hold them)
            if o.bits == 64:
                return f"int(sg[{o.code}]) | int(sg[{o.code + 1}]) << 32"
            return f"int(sg[{o.code}])"
        return self.call(self.p.reader(self.inst, bd, o), "w")

    def _scalar_write(self, bd: Binding, o: Operand, v: str) -> None:
        code = o.code
        if o.name == "SCC":
            self.emit(f"sg[{SCC}] = {v} & 1")
        elif o.scalar and code in (EXEC, EXEC + 1) and _slots(code, o.bits):
            if o.bits == 64:
                self.set_exec(f"{v} & 0xFFFFFFFFFFFFFFFF")
            elif code == EXEC:  # EXEC_LO; the other half kept
                self.set_exec(f"int(sg[{EXEC + 1}]) << 32 | ({v} & 0xFFFFFFFF)")
            else:
                self.set_exec(f"int(sg[{EXEC}]) | ({v} & 0xFFFFFFFF) << 32")
        elif o.scalar and _slots(code, o.bits):
            if o.bits == 64:
                self.emit(f"d = {v}")
                self.emit(f"sg[{code}] = d & 0xFFFFFFFF")
                self.emit(f"sg[{code + 1}] = d >> 32 & 0xFFFFFFFF")
            else:
                self.emit(f"sg[{code}] = {v} & 0xFFFFFFFF")
        else:
            self.emit(self.call(self.p.writer(bd, o), f"w, {v}", writes=True))

    # -- VALU --------------------------------------------------------------------------------------------------
    def valu(self, bd: Binding, base: str, stores: list, copy: bool = False) -> list:
        """Computes the results of a VALU op (into o* variables) and appends their writes to `stores`; `copy`: a
        result that may be a register row is copied (a write before this one's could change the row). `base`: its
        encoding (a VOPD half's is VOP2)."""
        p = self.p
        self.exact = set()
        sem, op = bd.sem, bd.op
        ir = sem.ir
        if ir.files:  # a VOPD half's (emu.amd.exec.takes.lean declines the others)
            raise Decline("register files or memory")
        d0 = bd.outputs.get("D0")
        post = p.result_modifiers(d0) if d0 is not None else None
        floaty = any(is_float(fmt(op, fld)) for fld in valu_fields(base).values()) or rounds_floats(ir) \
            or post is not None
        self.needs.update(("sg", "vg"))
        if floaty:
            self.guard(f"sg[{MODE}] & {GUARD} != {hwreg.DENORM_ALL}")
        if p.gen.gpr_indexing:
            self.guard("w.gpr_idx")
        ins = self._valu_inputs(bd)
        self.needs.add("act")
        unused = frozenset(n for n, o in bd.outputs.items() if n in ir.outputs and p.null is not None
                           and o.kind is Kind.MASK and o.code == p.null)  # masks for NULL
        gen, natural, unused = self._valu_code(bd, *ins, unused)
        for n, o in bd.outputs.items():  # every result is computed before the first write (a result may be a row)
            if n not in ir.outputs or (natural and n in unused):  # a mask for NULL: nothing to write
                continue
            out = f"o{len(stores)}"
            if n == "D0" and natural and ir.outputs[n] in (32, 64) and n not in ir.masks \
                    and not (o.mods.omod or o.mods.clamp) and o.kind is Kind.VGPR:  # guarded: no flushing either
                self.emit(f"{out} = {gen.natural_out(n)}" + (".copy()" if copy else ""))
                stores.append((self._vgpr_store, out, ir.outputs[n], o.reg))
                continue
            self.emit(f"{out} = {gen.output(n)}")
            if o.kind is Kind.MASK:  # a wave mask (int), or per-lane bits (a carry-out)
                stores.append((self._mask_write, out if n in ir.masks else f"PK({out} != 0, {p.lanes})", o.code))
                continue
            v = out if n != "D0" or post is None else self.call(post, f"w, {out}")
            stores.append((self.emit, self.call(p.writer(bd, o), f"w, {v}, act", writes=True)))
        return stores

    def _valu_inputs(self, bd: Binding) -> tuple[dict, dict, dict, dict]:
        """(natural-width code of per-lane sources, those of them that are whole VGPR rows (their registers),
        reference-backend code of the other inputs, encoding fields the semantics read)."""
        ir = bd.sem.ir
        nat: dict[str, str] = {}
        rows: dict[str, int] = {}
        wide: dict[str, str] = {}
        consts: dict[str, int] = {}
        for n, o in bd.inputs.items():
            bits = ir.inputs.get(n)
            if bits is None:
                continue
            src = self._vector_source(o, bits) if n in SOURCES else None
            if src is not None:
                nat[n] = src
                if o.kind is Kind.VGPR and o.bits == 32:
                    rows[n] = o.reg
            elif o.kind is Kind.FIELD:
                consts[n] = o.value & ((1 << bits) - 1)
            else:
                code = self._mask_read(o.code) if o.kind is Kind.MASK else self._mask_read(VCC) if n == "VCC" \
                    else "w.active_mask" if n == "EXEC" else None
                wide[n] = code if code is not None else self.call(self.p.reader(self.inst, bd, o), "w")
        return nat, rows, wide, consts

    def _valu_code(self, bd: Binding, nat: dict, rows: dict, wide: dict, consts: dict, unused: frozenset) -> tuple:
        """(the generator of the semantics' code, whether it is natural-width, the unused outputs): a carry chain's
        VCC lanes taken and given as the fragment's `carry` says."""
        ir, lanes = bd.sem.ir, self.p.lanes
        takes, gives = self.carry
        if takes and wide.get("VCC") != self._mask_read(VCC):
            raise Decline("carry-in not from VCC")
        if gives:
            o = bd.outputs.get("VCC")
            if "VCC" not in ir.outputs or o is None or o.kind is not Kind.MASK or o.code != VCC:
                raise Decline("carry-out not to VCC")
            unused |= {"VCC"}  # the next instruction takes the lanes, and writes VCC itself
        try:
            gen = NaturalRows(ir, lanes, nat, wide, consts, self.consts, rows, exact=frozenset(self.exact),
                              carry_in="VCC" if takes else None, carry_out="VCC" if gives else None)
            self.lines += gen.body_lines(unused)
            if (takes and (not gen.took or "VCC" in gen.old_reads)) or (gives and not gen.gave):
                raise Decline("no carry chain")
            self.typed_rows(gen)
            return gen, True, unused
        except Decline:
            if takes or gives:
                raise
        binds = {**{n: f"L.inp({c}, {ir.inputs[n]})" for n, c in wide.items()},
                 **{n: str(v) for n, v in consts.items()},
                 **{n: f"L.inp({c}.astype(U64), {ir.inputs[n]})" for n, c in nat.items()}}
        gen = Bound(ir, binds, f"int(sg[{MODE}])", lanes, self.consts)
        self.lines += gen.body_lines()
        return gen, False, unused

    def typed_rows(self, gen: NaturalRows) -> None:
        """Record the typed rows (vf, vi) the code of `gen` reads."""
        for arr, reg in gen.typed_rows:
            self.row(arr, reg)

    def flush(self, stores: list) -> None:
        for fn, *a in stores:
            fn(*a)

    def _mask_read(self, code: int) -> str | None:
        """Code of a wave mask read from an SGPR, VCC or EXEC (the planner's mask reader), or None."""
        wide = self.p.mask_bits == 64
        if code == EXEC:
            return "w.active_mask"
        if storage(code) or code == VCC or (code == VCC + 1 and not wide):
            return f"(int(sg[{code}]) | int(sg[{code + 1}]) << 32)" if wide else f"int(sg[{code}])"
        return None

    def _mask_write(self, v: str, dest: int) -> None:
        """Writes mask result `v` ANDed with EXEC (int) to scalar code `dest`, as the planner's mask writers do (a
        VOP2 carry-out: VCC_LO alone in wave32, VCC_HI is an SGPR there)."""
        wide = self.p.mask_bits == 64
        self.emit(f"m = {v} & w.active_mask")
        if dest == EXEC:
            self.set_exec("m")
        elif dest == self.p.null:
            pass
        elif storage(dest) or dest == VCC or (dest == VCC + 1 and not wide):
            self.emit(f"sg[{dest}] = m & 0xFFFFFFFF; sg[{dest + 1}] = m >> 32" if wide else f"sg[{dest}] = m")
        else:
            raise Decline(f"mask destination {dest}")

    # -- LDS --------------------------------------------------------------------------------------------------
    def ds(self) -> None:
        p, inst = self.p, self.inst
        bd = p.ds_operands(inst)
        ir = bd.sem.ir
        consts, wide, nat, rows = {}, {}, {}, {}
        for n, o in bd.inputs.items():
            bits = ir.inputs.get(n)
            if bits is None:
                continue
            if o.kind is Kind.FIELD:
                consts[n] = o.value & ((1 << bits) - 1)
            elif n == "ADDR" and bits == 64 and o.kind is Kind.VGPR and o.mods.offset is None:
                nat[n] = f"{self.row('vg', o.reg)}.astype(U64)"  # the VGPR (the pcode adds the offset)
            elif n in ("DATA", "DATA0", "DATA1") and bits == 32 and o.kind is Kind.VGPR and o.bits == 32:
                nat[n], rows[n] = self.row("vg", o.reg), o.reg
            else:
                wide[n] = self.call(p.reader(inst, bd, o), "w")
        self.needs.update(("vg", "mem", "act"))
        gen = NaturalRows(ir, p.lanes, nat, wide, consts, self.consts, rows, memory=True)
        self.lines += gen.body_lines()
        self.typed_rows(gen)
        for n, o in bd.outputs.items():
            if n in ("RETURN_DATA", "VDATA") and ir.outputs.get(n) == 32 and o.bits == 32:
                self._vgpr_store(gen.natural_out(n), 32, o.reg)
            else:
                self.emit(self.call(p.writer(bd, o), f"w, {gen.output(n)}, act", writes=True))
        self.emit("w.lane_ops += n_act")

    def _vector_source(self, o: Operand, bits: int) -> str | None:
        """Natural code (uint32 / uint64 array) of a 32/64-bit VALU source without abs / neg, or None for the
        planner's reader."""
        if o.bits not in (32, 64) or o.mods.abs or o.mods.neg:
            return None
        if o.kind is Kind.VGPR:
            r = o.reg
            if o.bits == 32:
                return self.row("vg", r)
            return f"vg[{r}:{r + 2}].T.copy().view(U64).ravel()"  # [lane] of the dword pairs
        if o.kind in (Kind.INLINE, Kind.LITERAL):  # as the semantics read it (an inline shift amount: its low bits)
            arr = np.full(self.p.lanes, o.value & ((1 << bits) - 1), np.uint32 if o.bits == 32 else np.uint64)
            arr.flags.writeable = False
            self.exact.add(o.name)
            return self.arg(arr)
        if o.bits == 32 and o.kind is Kind.SGPR:  # an array, as the reference's reader gives (numpy picks NaN
            return f"sg.take({self.arg(np.full(self.p.lanes, o.code, np.intp))})"  # payloads unlike for scalars)
        return None

    def _vgpr_store(self, v: str, bits: int, reg: int) -> None:
        self.emit(f"d = {v}")
        if bits == 32:
            self.emit(f"if full: vg[{reg}] = d")
            self.emit(f"else: np.copyto(vg[{reg}], d, where=act, casting='unsafe')")
            return
        self.emit("if full:")
        if reg % ACC + 2 <= ACC:
            self.emit(f"    vg[{reg}:{reg + 2}] = d.reshape(-1).view(U32).reshape(-1, 2).T")  # each lane's dwords
        else:  # the last register of its file: the low half is written before the high one is missed
            self.emit(f"    vg[{reg}] = d")
            self.emit(f"    vg[{reg + 1}] = d >> U64(32)")
        self.emit("else:")
        self.emit(f"    np.copyto(vg[{reg}], d, where=act, casting='unsafe')")
        self.emit(f"    np.copyto(vg[{reg + 1}], d >> U64(32), where=act, casting='unsafe')")


def _slots(code: int, width: int) -> bool:
    """Whether a scalar operand of `width` bits is held in SGPR-file slots at its code as a plain register."""
    return storage(code) or code in (VCC, EXEC) or (width == 32 and code in (VCC + 1, EXEC + 1))
