"""One packet of the Hexagon native tier (emu.dsp.native says with which semantics): its instructions (the typed IR
emu.dsp.llvmback emits) bound to their operands, inline or as calls of helper functions (an operand-only instruction
compiled once on its own), and the commit of its logged writes at its end."""
from __future__ import annotations

from llvmlite import ir as ll

from emu.dsp import llvmback as lb
from emu.dsp.core import C_USR, USR_FIELDS, USR_FP_SHIFT
from emu.dsp.isa import ISA
from emu.dsp.llvmback import I1, I8, I32, I64, PTR, Emitter, Unsupported, resize
from emu.dsp.lower import CompileError, lower
from emu.dsp.native_core import INSNS, PACKETS, PC, VTMP, C, P, PacketCore, Pure, Q, R, V, const

_LOWERED: dict[str, object] = {}


def semantics(isa: ISA, tag: str):
    """The lowered semantics of instruction `tag` (cached; Unsupported when it has none)."""
    sem = _LOWERED.get(tag)
    if sem is None:
        try:
            sem = lower(isa, isa.insns[tag])
        except (CompileError, KeyError) as e:
            sem = Unsupported(str(e))
        _LOWERED[tag] = sem
    if isinstance(sem, Unsupported):
        raise sem
    return sem


class Packet(PacketCore):
    """Emits one packet into a block function: its instructions over their operands, then the commit."""

    # ---- operands ----
    def reader(self, o, value: int, t, inst) -> ll.Value | None:
        """Operand o's value (None: a new-value operand whose producer did not write: the step is skipped)."""
        b = self.b
        if o.cls == "#":
            return const(value, t.bits)
        if o.cls in "NO":
            if inst.new_cls not in ("R" if o.cls == "N" else "V"):
                raise Unsupported(f"new value from a {inst.new_cls} register")
            key = ("r" if o.cls == "N" else "v", value)
            if key not in self.log:
                return None
            return self.log[key]
        if o.cls in "RC":
            get = self.reg if o.cls == "R" else self.control
            if o.pair:
                if value + 1 > 31:
                    raise Unsupported("pair past r31")
                return b.or_(b.shl(b.zext(get(value + 1), I64), const(32, 64)), b.zext(get(value), I64))
            return get(value)
        if o.cls == "M":
            return self.control(6 + value)
        if o.cls == "P":
            return self.new_pred(value) if o.suffix == ".new" else self.field(P + value, I8)
        if o.cls == "V":
            if not o.pair:
                return self.vreg(value)
            pair = self.blk.alloca(ll.VectorType(I8, 256))
            for k in (0, 1):
                src = b.load(self.vreg(value + k), typ=ll.VectorType(I8, 128), align=1)
                b.store(src, b.gep(pair, [const(128 * k, 64)], source_etype=I8))
            return pair
        if o.cls == "Q":
            return self.state_ptr(Q + 16 * value)
        raise Unsupported(f"operand {o.text}")

    def writer(self, o, value: int, x: ll.Value, t) -> None:
        b = self.b
        if o.cls in "RCM":
            n = 6 + value if o.cls == "M" else value
            put = (lambda k, v: self.log_set(("r", k), v)) if o.cls == "R" else self.write_c
            if o.pair:
                if n + 1 > 31:
                    raise Unsupported("pair past r31")
                v = b.load(x, typ=I64)
                put(n, b.trunc(v, I32))
                put(n + 1, b.trunc(b.lshr(v, const(32, 64)), I32))
            else:
                put(n, resize(b, b.load(x, typ=lb.int_type(t)), t.signed, 32))
        elif o.cls == "P":
            self.write_pred(value, b.load(x, typ=lb.int_type(t)))
        elif o.cls == "V":
            if o.pair:
                if value + 1 > 31:
                    raise Unsupported("pair past v31")
                self.log_vec(("v", value), x)
                self.log_vec(("v", value + 1), b.gep(x, [const(128, 64)], source_etype=I8))
            elif o.suffix == ".tmp":
                self.log_vec(("fwd", value), x)
                self.log_vec(("vtmp", 0), x)
            elif o.suffix == ".cur":
                self.log_vec(("fwd", value), x)
                self.log_vec(("v", value), x)
            else:
                self.log_vec(("v", value), x)
        elif o.cls == "Q":
            slot, flag = self.slot(("q", value), ll.IntType(128))
            b.store(b.load(x, typ=ll.IntType(128)), slot)
            b.store(ll.Constant(I1, 1), flag)
        else:
            raise Unsupported(f"operand {o.text}")

    # ---- the packet ----
    def emit(self, isa: ISA) -> None:
        b, blk = self.b, self.blk
        b.store(self.field(C + 4 * C_USR, I32), blk.usr)
        for s in self.steps:
            inst = self.current = s.inst
            sem = semantics(isa, s.sem.tag)
            ops = inst.form.operands
            index: dict[str, int] = {}
            for k, o in enumerate(ops):
                index.setdefault(o.name, k)
                if o.cls not in "#NO":
                    index.setdefault(o.name[:-1] + "N", -1 - k)
            after = b.append_basic_block("step_end")
            inputs = {}
            for name, t in sem.inputs:
                k = index[name]
                if k < 0:
                    v = const(inst.ops[-1 - k], t.bits)
                else:
                    v = self.reader(ops[k], inst.ops[k], t, inst)
                    if v is None:  # its producer is not in this packet: Python's KeyError, the step skipped
                        b.branch(after)
                        break
                    if isinstance(v, tuple):  # a new value: taken only when the producer wrote it
                        slot, flag = v
                        go = b.append_basic_block("new_ok")
                        b.cbranch(b.load(flag, typ=I1), go, after)
                        b.position_at_start(go)
                        v = slot if t.kind in lb.VEC_BYTES else b.load(slot, typ=slot.allocated_type)
                inputs[name] = v
            else:
                done = self.run(sem, inputs, after)
                b.position_at_end(done[0])
                for name, t in sem.outputs:
                    self.writer(ops[index[name]], inst.ops[index[name]], done[1][name], t)
                b.branch(after)
            b.position_at_start(after)
        self.commit()

    def run(self, sem, inputs: dict, after: ll.Block) -> tuple[ll.Block, dict]:
        """Emit one instruction: inline, or a call of its helper. The block where it completed (a cancelled slot
        goes on at `after`), and its outputs' storage."""
        b, blk = self.b, self.blk
        symbol = blk.helpers.get(sem.tag)
        if symbol is None:
            flags = self.float_env() if lb.uses_float(sem) else None
            g = Emitter(b, blk.alloca, self, sem, flags)
            outs = g.run(inputs)
            b.position_at_end(g.cancel)
            if flags is not None:
                self.raise_flags(flags)
            b.branch(after)
            if flags is not None:
                b.position_at_end(g.done)
                self.raise_flags(flags)
            return g.done, outs
        ftype = helper_type(sem)
        fn = b.module.globals.get(symbol) or ll.Function(b.module, ftype, symbol)
        outs = {n: blk.alloca(ll.VectorType(I8, lb.VEC_BYTES[t.kind]) if t.kind in lb.VEC_BYTES else lb.int_type(t))
                for n, t in sem.outputs}
        args = [inputs[n] if t.kind in lb.VEC_BYTES else resize(b, inputs[n], t.signed, t.bits) for n, t in sem.inputs]
        status = b.call(fn, args + [outs[n] for n, _ in sem.outputs])
        done = b.append_basic_block("done")
        b.cbranch(b.icmp_unsigned("==", status, const(0)), done, after)
        return done, outs

    def float_env(self) -> ll.Value:
        """An instruction computes with floats: it runs only in USR's round-to-nearest mode (others bail to the
        interpreter); its exception flags (emu.dsp.ieee's bits), zero now, in the slot returned."""
        b = self.b
        rnd_lo, rnd_width = USR_FIELDS["USR_FPRND"]
        rnd = b.and_(b.load(self.blk.usr, typ=I32), const(((1 << rnd_width) - 1) << rnd_lo))
        ok = b.append_basic_block("nearest")
        b.cbranch(b.icmp_unsigned("!=", rnd, const(0)), self.blk.bail, ok)
        b.position_at_start(ok)
        flags = self.blk.alloca(I32)
        b.store(const(0), flags)
        return flags

    def raise_flags(self, flags: ll.Value) -> None:
        """OR an instruction's exception flags into USR's sticky bits (as Thread.step)."""
        b = self.b
        usr = b.load(self.blk.usr, typ=I32)
        b.store(b.or_(usr, b.shl(b.load(flags, typ=I32), const(USR_FP_SHIFT))), self.blk.usr)

    def commit(self) -> None:
        b = self.b
        usr = b.load(self.blk.usr, typ=I32)
        for (f, n), (slot, flag) in self.log.items():
            if f in ("fwd", "pc"):
                continue
            if (f, n) == ("c", C_USR):
                usr = b.select(b.load(flag, typ=I1), b.load(slot, typ=I32), usr)
                continue
            offset = {"r": R + 4 * n, "c": C + 4 * n, "p": P + n, "v": V + 128 * n, "q": Q + 16 * n,
                      "vtmp": VTMP}[f]
            dst = self.state_ptr(offset)
            ty = slot.allocated_type
            b.store(b.select(b.load(flag, typ=I1), b.load(slot, typ=ty), b.load(dst, typ=ty, align=1)), dst, align=1)
        b.store(usr, self.state_ptr(C + 4 * C_USR))
        for addr, data, _, mask, flag, _ in self.stores:
            yes, no = b.append_basic_block("store"), b.append_basic_block("stored")
            b.cbranch(b.load(flag, typ=I1), yes, no)
            b.position_at_start(yes)
            dst = b.load(addr, typ=PTR)
            ty = data.allocated_type
            value = b.load(data, typ=ty)
            if mask is not None:
                vt = ll.VectorType(I8, 128)
                keep = b.bitcast(b.load(mask, typ=ll.IntType(128)), ll.VectorType(I1, 128))
                value = b.select(keep, b.load(data, typ=vt), b.load(dst, typ=vt, align=1))
            b.store(value, dst, align=1)
            b.branch(no)
            b.position_at_start(no)
        for off, k in ((PACKETS, 1), (INSNS, self.counted)):
            b.store(b.add(self.field(off, I64), const(k, 64)), self.state_ptr(off))
        fall = const(self.pkt.addr + self.pkt.size)
        if ("pc", 0) in self.log:
            slot, flag = self.log[("pc", 0)]
            fall = b.select(b.load(flag, typ=I1), b.load(slot, typ=I32), fall)
        b.store(fall, self.state_ptr(PC))
        self.after_commit = b.block


def helper_type(sem) -> ll.FunctionType:
    ins = [PTR if t.kind in lb.VEC_BYTES else lb.int_type(t) for _, t in sem.inputs]
    return ll.FunctionType(I32, ins + [PTR] * len(sem.outputs))


def helper(sem, name: str) -> ll.Module:
    """`i32 name(inputs..., output pointers...)`: an operand-only instruction as a function of its own (compiled
    once per instruction, not per block): 0 with the outputs stored, 1 when the slot is cancelled."""
    if lb.uses_float(sem):
        raise Unsupported("floats: USR's rounding mode and flags are the core's")
    m = ll.Module(name)
    fn = ll.Function(m, helper_type(sem), name)
    entry = fn.append_basic_block("entry")
    ab = ll.IRBuilder(entry)
    b = ll.IRBuilder(fn.append_basic_block("start"))
    ab.branch(b.block)

    def alloca(ty: ll.Type) -> ll.Value:
        ab.position_at_start(entry)
        return lb.alloca(ab, ty)
    g = Emitter(b, alloca, Pure(), sem)
    outs = g.run({n: a for (n, _), a in zip(sem.inputs, fn.args, strict=False)})
    b.position_at_end(g.done)
    for (n, t), ptr in zip(sem.outputs, fn.args[len(sem.inputs):], strict=True):
        if t.kind in lb.VEC_BYTES:
            g.copy(ptr, outs[n], t.kind)
        else:
            b.store(b.load(outs[n], typ=lb.int_type(t)), ptr)
    b.ret(const(0))
    b.position_at_end(g.cancel)
    b.ret(const(1))
    return m
