"""The core of the Hexagon native tier's packets: the state buffer its code works on (STATE: registers, PC,
counters), and what a packet's instructions reach beyond their operands, emitted into a block function
(emu.dsp.native_block): reads of the state as before the packet, the packet's log of register / predicate / memory
writes (committed by emu.dsp.native_packet.Packet at its end), guest memory through the page tables, branches."""
from __future__ import annotations

from llvmlite import ir as ll

from emu.dsp.core import C_P30, C_PC, C_QEMU_INSN, C_QEMU_PKT, REGS, USR_FIELDS
from emu.dsp.llvmback import I1, I8, I32, I64, PTR, Emitter, Unsupported, resize
from emu.dsp.memory import PAGE

# the state buffer: byte offsets
R, C, P, PC, PACKETS, INSNS, VTMP, Q, V, STATE_BYTES = 0, 128, 256, 264, 272, 280, 320, 448, 512, 512 + 4096
_NATIVE_C = frozenset(range(32)) - {C_P30, C_PC, 14, 15, 18, 19, C_QEMU_PKT, C_QEMU_INSN, 30, 31}  # c reads/writes
EFFECTS = frozenset({"fTRAP", "fTMPVDATA", "READ_EXT_VREG", "WRITE_EXT_VREG", "mem_load_locked",
                     "mem_store_conditional", "fcirc_add", "_item", "fGATHER_INIT", "fSCATTER_INIT", "fGATHER_FINISH",
                     "fSCATTER_FINISH", "fLOG_SCATTER_OP"})
CORE = frozenset({"READ_RREG", "WRITE_RREG", "READ_PREG", "WRITE_PREG", "fLSBNEW0", "fLSBNEW1", "GET_USR_FIELD",
                  "SET_USR_FIELD", "fREAD_GP", "fREAD_NPC", "fBRANCH", "fCALL", "fCALLR", "fLOADMMV", "fLOADMMVU",
                  "fSTOREMMV", "fSTOREMMVU", "fSTOREMMVQ", "fSTOREMMVNQ", *(f"MEM_LOAD{n}" for n in (1, 2, 4, 8)),
                  *(f"MEM_STORE{n}" for n in (1, 2, 4, 8))})  # what PacketCore.prim emits


def const(v: int, bits: int = 32) -> ll.Constant:
    return ll.Constant(ll.IntType(bits), v & ((1 << bits) - 1))


class PacketCore:
    """What one packet's instructions reach beyond their operands (the Core of llvmback.Emitter): the state buffer,
    the packet's log of writes, guest memory through the page tables, branches, the core's primitives. `blk`: the
    block function (emu.dsp.native_block.Block) the packet is emitted into."""

    def __init__(self, blk, pkt, steps, tail, counted: int):
        self.blk, self.b, self.pkt, self.counted = blk, blk.b, pkt, counted
        self.steps = steps + tail
        self.log: dict[tuple, tuple[ll.Value, ll.Value]] = {}  # key -> (value slot, written flag)
        self.stores: list[tuple] = []  # (host address slot, data slot, byte count, mask slot | None, flag)
        self.branches = False
        self.current = None

    # ---- state access ----
    def field(self, offset: int, ty: ll.Type) -> ll.Value:
        return self.b.load(self.state_ptr(offset), typ=ty)

    def state_ptr(self, offset: int) -> ll.Value:
        return self.b.gep(self.blk.state, [const(offset, 64)], source_etype=I8)

    def reg(self, n: int) -> ll.Value:
        return self.field(R + 4 * n, I32)

    def control(self, n: int) -> ll.Value:
        if n == C_PC:
            return const(self.pkt.addr)
        if n == C_P30:
            return self.field(P, I32)
        if n in (C_QEMU_PKT, C_QEMU_INSN):
            return self.b.trunc(self.field(PACKETS if n == C_QEMU_PKT else INSNS, I64), I32)
        if n not in _NATIVE_C:
            raise Unsupported(f"reads c{n}")
        return self.field(C + 4 * n, I32)

    def slot(self, key: tuple, ty: ll.Type) -> tuple[ll.Value, ll.Value]:
        s = self.log.get(key)
        if s is None:
            s = self.log[key] = (self.blk.alloca(ty), self.blk.alloca(I1))
            self.blk.init(s[1], ll.Constant(I1, 0))
        return s

    def log_set(self, key: tuple, value: ll.Value) -> None:
        slot, flag = self.slot(key, value.type)
        self.b.store(value, slot)
        self.b.store(ll.Constant(I1, 1), flag)

    def log_vec(self, key: tuple, src: ll.Value) -> None:
        slot, flag = self.slot(key, ll.VectorType(I8, 128))
        self.b.store(self.b.load(src, typ=ll.VectorType(I8, 128), align=1), slot)
        self.b.store(ll.Constant(I1, 1), flag)

    def write_c(self, n: int, value: ll.Value) -> None:
        if n not in _NATIVE_C:
            raise Unsupported(f"writes c{n}")
        self.log_set(("c", n), value)

    def write_pred(self, n: int, value: ll.Value) -> None:
        b = self.b
        value = resize(b, value, False, 8)
        slot, flag = self.slot(("p", n), I8)
        old = b.load(slot, typ=I8)
        b.store(b.select(b.load(flag, typ=I1), b.and_(old, value), value), slot)
        b.store(ll.Constant(I1, 1), flag)

    def new_pred(self, n: int) -> ll.Value:
        slot, flag = self.slot(("p", n), I8)
        return self.b.select(self.b.load(flag, typ=I1), self.b.load(slot, typ=I8), self.field(P + n, I8))

    def vreg(self, n: int) -> ll.Value:
        """Vector register n as this packet's instructions read it: a .cur/.tmp load of the packet forwards."""
        if n > 31:
            raise Unsupported("vector register past v31")
        reg = self.state_ptr(V + 128 * n)
        if ("fwd", n) not in self.log:
            return reg
        slot, flag = self.log[("fwd", n)]
        return self.b.select(self.b.load(flag, typ=I1), slot, reg)

    # ---- memory: host addresses through the page tables; anything else bails to the interpreter ----
    def host(self, ea: ll.Value, size: int, write: bool) -> ll.Value:
        b = self.b
        ea = resize(b, ea, False, 32)
        off = b.and_(ea, const(PAGE - 1))
        page = b.zext(b.lshr(ea, const(12)), I64)
        entry = b.load(b.gep(self.blk.wtab if write else self.blk.rtab, [page], source_etype=I64), typ=I64)
        bad = b.or_(b.icmp_unsigned(">", b.add(off, const(size)), const(PAGE)),
                    b.icmp_unsigned("==", entry, const(0, 64)))
        ok = b.append_basic_block("mem_ok")
        b.cbranch(bad, self.blk.bail, ok)
        b.position_at_start(ok)
        return b.inttoptr(b.add(entry, b.zext(off, I64)), PTR)

    def load(self, ea: ll.Value, size: int) -> ll.Value:
        """A scalar load; it sees the bytes the packet's earlier scalar stores wrote (as Thread._read)."""
        b = self.b
        ea = resize(b, ea, False, 32)
        value = b.load(self.host(ea, size, False), typ=ll.IntType(8 * size), align=1)
        if not self.stores:
            return value
        out = []
        for i in range(size):
            byte = b.trunc(b.lshr(value, ll.Constant(value.type, 8 * i)), I8)
            at = b.add(ea, const(i))
            for _, data, n, mask, flag, sea in self.stores:
                if mask is not None or n == 128:
                    raise Unsupported("a load after a vector store in one packet")
                k = b.sub(at, b.load(sea, typ=I32))
                hit = b.and_(b.load(flag, typ=I1), b.icmp_unsigned("<", k, const(n)))
                word = b.load(data, typ=ll.IntType(8 * n))
                stored = b.trunc(b.lshr(word, b.zext(b.mul(k, const(8)), word.type) if n > 4 else
                                        resize(b, b.mul(k, const(8)), False, 8 * n)), I8)
                byte = b.select(hit, stored, byte)
            out.append(b.shl(b.zext(byte, value.type), ll.Constant(value.type, 8 * i)))
        merged = out[0]
        for part in out[1:]:
            merged = b.or_(merged, part)
        return merged

    def store(self, g: Emitter, ea: ll.Value, size: int, data: ll.Value, mask: ll.Value | None) -> None:
        if g.loops:
            raise Unsupported("a store in a loop")
        b = self.b
        ea = resize(b, ea, False, 32)
        sea = self.blk.alloca(I32)
        b.store(ea, sea)
        addr = self.host(ea, size, True)
        slot = self.blk.alloca(PTR)
        b.store(addr, slot)
        dslot = self.blk.alloca(data.type if size < 128 else ll.VectorType(I8, 128))
        b.store(data if size < 128 else b.load(data, typ=ll.VectorType(I8, 128), align=1), dslot)
        mslot = None
        if mask is not None:
            mslot = self.blk.alloca(ll.IntType(128))
            b.store(b.load(mask, typ=ll.IntType(128), align=1), mslot)
        flag = self.blk.alloca(I1)
        self.blk.init(flag, ll.Constant(I1, 0))
        b.store(ll.Constant(I1, 1), flag)
        self.stores.append((slot, dslot, size, mslot, flag, sea))

    def branch(self, target: ll.Value) -> None:
        b = self.b
        slot, flag = self.slot(("pc", 0), I32)
        taken = b.load(flag, typ=I1)
        b.store(b.select(taken, b.load(slot, typ=I32), resize(b, target, False, 32)), slot)
        b.store(ll.Constant(I1, 1), flag)
        self.branches = True

    # ---- llvmback.Core ----
    def prim(self, g: Emitter, x, args: list):
        n, b = x.name, self.b
        if n in EFFECTS or n.startswith("fVLOG_VTCM") or n in CORE and (x.t.kind == "float" or any(
                not isinstance(a, str) and a.t.kind == "float" for a in x.args)):
            raise Unsupported(f"primitive {n}")
        if n in ("READ_RREG", "WRITE_RREG"):
            f, k = REGS[args[0]]
            if n == "READ_RREG":
                return self.reg(k) if f == "r" else self.control(k)
            value = resize(b, args[1], x.args[1].t.signed, 32)
            return self.log_set(("r", k), value) if f == "r" else self.write_c(k, value)
        if n in ("READ_PREG", "WRITE_PREG", "fLSBNEW0", "fLSBNEW1"):
            k = int(n[-1]) if n.startswith("fLSBNEW") else x.args[0]
            if not isinstance(k, int):
                k = getattr(k, "value", None)
                if not isinstance(k, int):
                    raise Unsupported(f"{n} of a computed predicate")
            if n == "READ_PREG":
                return self.field(P + (k & 3), I8)
            if n == "WRITE_PREG":
                return self.write_pred(k & 3, resize(b, args[1], x.args[1].t.signed, 8))
            return b.zext(b.and_(self.new_pred(k & 3), ll.Constant(I8, 1)), I32)
        if n in ("GET_USR_FIELD", "SET_USR_FIELD"):
            lo, width = USR_FIELDS[args[0]]
            mask = ((1 << width) - 1) << lo
            usr = b.load(self.blk.usr, typ=I32)
            if n == "GET_USR_FIELD":
                return b.and_(b.lshr(usr, const(lo)), const((1 << width) - 1))
            value = b.and_(b.shl(resize(b, args[1], x.args[1].t.signed, 32), const(lo)), const(mask))
            b.store(b.or_(b.and_(usr, const(~mask)), value), self.blk.usr)
            return None
        if n == "fREAD_GP":
            return const(0) if self.current.extended else self.control(11)
        if n == "fREAD_NPC":
            return const(self.pkt.addr + self.pkt.size)
        if n == "fLSBNEW":
            return b.and_(resize(b, args[0], x.args[0].t.signed, 32), const(1))
        if n in ("fNEWREG", "fNEWREG_ST", "fNEWVREG"):
            return args[0]
        if n.startswith("MEM_LOAD"):
            return self.load(args[0], int(n[-1]))
        if n.startswith("MEM_STORE"):
            size = int(n[-1])
            return self.store(g, args[0], size, resize(b, args[1], x.args[1].t.signed, 8 * size), None)
        if n in ("fLOADMMV", "fLOADMMVU"):
            ea = resize(b, args[0], x.args[0].t.signed, 32)
            if n == "fLOADMMV":
                ea = b.and_(ea, const(~127))
            if self.stores:
                raise Unsupported("a vector load after a store in one packet")
            out = g.vector("vec")
            b.store(b.load(self.host(ea, 128, False), typ=ll.VectorType(I8, 128), align=1), out)
            return out
        if n in ("fSTOREMMV", "fSTOREMMVU", "fSTOREMMVQ", "fSTOREMMVNQ"):
            if self.current.new_cls == "T":
                raise Unsupported("vtmp.new store")
            ea = resize(b, args[0], x.args[0].t.signed, 32)
            if n != "fSTOREMMVU":
                ea = b.and_(ea, const(~127))
            mask = None
            if n in ("fSTOREMMVQ", "fSTOREMMVNQ"):
                mask = args[2]
                if n == "fSTOREMMVNQ":
                    mask = g.vector("qreg")
                    b.store(b.not_(b.load(args[2], typ=ll.IntType(128), align=1)), mask)
            return self.store(g, ea, 128, args[1], mask)
        if n == "fBRANCH":
            return self.branch(args[0])
        if n in ("fCALL", "fCALLR"):
            lr_slot, lr_flag = self.slot(("pc", 0), I32)
            taken = b.load(lr_flag, typ=I1)
            old_lr, old_flag = self.slot(("r", 31), I32)
            b.store(b.select(taken, b.load(old_lr, typ=I32), const(self.pkt.addr + self.pkt.size)), old_lr)
            b.store(b.or_(b.load(old_flag, typ=I1), b.not_(taken)), old_flag)
            return self.branch(args[0])
        return NotImplemented


class Pure:
    """The core of a helper: an instruction reaching no state but its operands (HVX arithmetic)."""

    def prim(self, g: Emitter, x, args: list):
        if x.name in CORE or x.name in EFFECTS or x.name.startswith("fVLOG_VTCM"):
            raise Unsupported(f"{x.name} reaches the core")
        return NotImplemented
