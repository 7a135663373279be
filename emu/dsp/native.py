"""The native tier of the Hexagon core: hot translation blocks compiled to host code with LLVM.

A block is a run of packets from one address up to a packet that may branch (jumps, calls, end of hardware
loops), at most MAX_PACKETS long; each packet's instructions are the same typed IR the interpreter runs
(emu.dsp.llvmback emits it), with emu.dsp.core's packet semantics: reads see the state before the packet,
register/predicate/memory writes are logged per packet and commit at its end, `.new` operands read the log,
predicate writes AND, `.cur`/`.tmp` loads forward, the first taken branch wins, endloops run last.

The native code works on one state buffer (STATE: registers, PC, counters) and reaches guest memory only
through two page tables (host address of each 4 KiB page, 0 where reading / writing is not permitted). Before
a packet commits, anything it cannot do natively (a fault, an access crossing a page, the packet limit) makes
the block return with the state as before that packet, so the interpreter runs it (and raises the same fault).
Packets the backend cannot compile (traps, gather/scatter, counters, ...) end the block before them.

`Tier(thread).run(n)` runs n packets: compiled blocks through a native dispatcher (a table of pc -> block),
the rest on the interpreter, loading a block from the disk cache once its start has been interpreted HOT times and
compiling it after HOT_COMPILE. A block can be
entered at any of its packets, so a run that stopped in its middle (at the packet limit of a slice) resumes there
instead of making that packet the start of another block. Objects are cached on disk (emu.pcode.llvmjit), keyed by
the block's address, words and the compiler's sources.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import warnings
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir as ll

from emu.dsp import llvmback as lb
from emu.dsp.core import (
    C_P30,
    C_PC,
    C_QEMU_INSN,
    C_QEMU_PKT,
    C_USR,
    REGS,
    USR_FIELDS,
    USR_FP_SHIFT,
    IllegalPacket,
    Thread,
)
from emu.dsp.isa import ISA
from emu.dsp.llvmback import I1, I8, I32, I64, PTR, Emitter, Unsupported, resize
from emu.dsp.lower import CompileError, lower
from emu.dsp.memory import PAGE, MemoryFault
from emu.dsp.pyback import _cache_file as _semantics_file

BLOCK_OPT = 0  # LLVM optimization level of blocks (register moves and calls of helpers: compile time matters more)
# what pays back: interpreting a packet costs about 60 us, compiling it about 4 ms (tinygrad's kernels, cold), so a
# block is compiled once its first packet has been entered HOT_COMPILE times (about the break-even count, if it runs
# as often again as it has); a block in the disk cache costs next to nothing, so it is loaded after HOT entries
HOT = 8
HOT_COMPILE = 64
MAX_PACKETS = 48  # packets of one block at most
ELSEWHERE = 3  # a block's status: it holds no packet at the PC it was called for
TABLE_BITS = 14  # the dispatcher's pc -> block table (direct-mapped; a miss returns to Python)
# the state buffer: byte offsets
R, C, P, PC, PACKETS, INSNS, VTMP, Q, V, STATE_BYTES = 0, 128, 256, 264, 272, 280, 320, 448, 512, 512 + 4096
_NATIVE_C = frozenset(range(32)) - {C_P30, C_PC, 14, 15, 18, 19, C_QEMU_PKT, C_QEMU_INSN, 30, 31}  # c reads/writes
_EFFECTS = frozenset({"fTRAP", "fTMPVDATA", "READ_EXT_VREG", "WRITE_EXT_VREG", "mem_load_locked",
                      "mem_store_conditional", "fcirc_add", "_item", "fGATHER_INIT", "fSCATTER_INIT", "fGATHER_FINISH",
                      "fSCATTER_FINISH", "fLOG_SCATTER_OP"})
_CORE = frozenset({"READ_RREG", "WRITE_RREG", "READ_PREG", "WRITE_PREG", "fLSBNEW0", "fLSBNEW1", "GET_USR_FIELD",
                   "SET_USR_FIELD", "fREAD_GP", "fREAD_NPC", "fBRANCH", "fCALL", "fCALLR", "fLOADMMV", "fLOADMMVU",
                   "fSTOREMMV", "fSTOREMMVU", "fSTOREMMVQ", "fSTOREMMVNQ", *(f"MEM_LOAD{n}" for n in (1, 2, 4, 8)),
                   *(f"MEM_STORE{n}" for n in (1, 2, 4, 8))})  # what _Packet.prim emits
_M32 = 0xFFFFFFFF


def enabled() -> bool:
    """HWEMU_DSP_TIER=interp|native (default native when llvmlite's LLVM loads)."""
    return os.environ.get("HWEMU_DSP_TIER", "native") != "interp"


def _digest() -> str:
    h = hashlib.sha256(_semantics_file().name.encode())
    for m in ("llvmback", "llvmfloat", "native", "core", "decode"):
        h.update((Path(__file__).parent / f"{m}.py").read_bytes())
    return h.hexdigest()[:16]


_LOWERED: dict[str, object] = {}


def _semantics(isa: ISA, tag: str):
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


def _const(v: int, bits: int = 32) -> ll.Constant:
    return ll.Constant(ll.IntType(bits), v & ((1 << bits) - 1))


class _Packet:
    """Emits one packet into a block function (the Core of llvmback.Emitter for its instructions)."""

    def __init__(self, blk: _Block, pkt, steps, tail, counted: int):
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
        return self.b.gep(self.blk.state, [_const(offset, 64)], source_etype=I8)

    def reg(self, n: int) -> ll.Value:
        return self.field(R + 4 * n, I32)

    def control(self, n: int) -> ll.Value:
        if n == C_PC:
            return _const(self.pkt.addr)
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
        off = b.and_(ea, _const(PAGE - 1))
        page = b.zext(b.lshr(ea, _const(12)), I64)
        entry = b.load(b.gep(self.blk.wtab if write else self.blk.rtab, [page], source_etype=I64), typ=I64)
        bad = b.or_(b.icmp_unsigned(">", b.add(off, _const(size)), _const(PAGE)),
                    b.icmp_unsigned("==", entry, _const(0, 64)))
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
            at = b.add(ea, _const(i))
            for _, data, n, mask, flag, sea in self.stores:
                if mask is not None or n == 128:
                    raise Unsupported("a load after a vector store in one packet")
                k = b.sub(at, b.load(sea, typ=I32))
                hit = b.and_(b.load(flag, typ=I1), b.icmp_unsigned("<", k, _const(n)))
                word = b.load(data, typ=ll.IntType(8 * n))
                stored = b.trunc(b.lshr(word, b.zext(b.mul(k, _const(8)), word.type) if n > 4 else
                                        resize(b, b.mul(k, _const(8)), False, 8 * n)), I8)
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
        if n in _EFFECTS or n.startswith("fVLOG_VTCM") or n in _CORE and (x.t.kind == "float" or any(
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
                return b.and_(b.lshr(usr, _const(lo)), _const((1 << width) - 1))
            value = b.and_(b.shl(resize(b, args[1], x.args[1].t.signed, 32), _const(lo)), _const(mask))
            b.store(b.or_(b.and_(usr, _const(~mask)), value), self.blk.usr)
            return None
        if n == "fREAD_GP":
            return _const(0) if self.current.extended else self.control(11)
        if n == "fREAD_NPC":
            return _const(self.pkt.addr + self.pkt.size)
        if n == "fLSBNEW":
            return b.and_(resize(b, args[0], x.args[0].t.signed, 32), _const(1))
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
                ea = b.and_(ea, _const(~127))
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
                ea = b.and_(ea, _const(~127))
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
            b.store(b.select(taken, b.load(old_lr, typ=I32), _const(self.pkt.addr + self.pkt.size)), old_lr)
            b.store(b.or_(b.load(old_flag, typ=I1), b.not_(taken)), old_flag)
            return self.branch(args[0])
        return NotImplemented

    # ---- operands ----
    def reader(self, o, value: int, t, inst) -> ll.Value | None:
        """Operand o's value (None: a new-value operand whose producer did not write: the step is skipped)."""
        b = self.b
        if o.cls == "#":
            return _const(value, t.bits)
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
                return b.or_(b.shl(b.zext(get(value + 1), I64), _const(32, 64)), b.zext(get(value), I64))
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
                b.store(src, b.gep(pair, [_const(128 * k, 64)], source_etype=I8))
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
                put(n + 1, b.trunc(b.lshr(v, _const(32, 64)), I32))
            else:
                put(n, resize(b, b.load(x, typ=lb.int_type(t)), t.signed, 32))
        elif o.cls == "P":
            self.write_pred(value, b.load(x, typ=lb.int_type(t)))
        elif o.cls == "V":
            if o.pair:
                if value + 1 > 31:
                    raise Unsupported("pair past v31")
                self.log_vec(("v", value), x)
                self.log_vec(("v", value + 1), b.gep(x, [_const(128, 64)], source_etype=I8))
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
            sem = _semantics(isa, s.sem.tag)
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
                    v = _const(inst.ops[-1 - k], t.bits)
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
        ftype = _helper_type(sem)
        fn = b.module.globals.get(symbol) or ll.Function(b.module, ftype, symbol)
        outs = {n: blk.alloca(ll.VectorType(I8, lb.VEC_BYTES[t.kind]) if t.kind in lb.VEC_BYTES else lb.int_type(t))
                for n, t in sem.outputs}
        args = [inputs[n] if t.kind in lb.VEC_BYTES else resize(b, inputs[n], t.signed, t.bits) for n, t in sem.inputs]
        status = b.call(fn, args + [outs[n] for n, _ in sem.outputs])
        done = b.append_basic_block("done")
        b.cbranch(b.icmp_unsigned("==", status, _const(0)), done, after)
        return done, outs

    def float_env(self) -> ll.Value:
        """An instruction computes with floats: it runs only in USR's round-to-nearest mode (others bail to the
        interpreter); its exception flags (emu.dsp.ieee's bits), zero now, in the slot returned."""
        b = self.b
        rnd_lo, rnd_width = USR_FIELDS["USR_FPRND"]
        rnd = b.and_(b.load(self.blk.usr, typ=I32), _const(((1 << rnd_width) - 1) << rnd_lo))
        ok = b.append_basic_block("nearest")
        b.cbranch(b.icmp_unsigned("!=", rnd, _const(0)), self.blk.bail, ok)
        b.position_at_start(ok)
        flags = self.blk.alloca(I32)
        b.store(_const(0), flags)
        return flags

    def raise_flags(self, flags: ll.Value) -> None:
        """OR an instruction's exception flags into USR's sticky bits (as Thread.step)."""
        b = self.b
        usr = b.load(self.blk.usr, typ=I32)
        b.store(b.or_(usr, b.shl(b.load(flags, typ=I32), _const(USR_FP_SHIFT))), self.blk.usr)

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
            b.store(b.add(self.field(off, I64), _const(k, 64)), self.state_ptr(off))
        fall = _const(self.pkt.addr + self.pkt.size)
        if ("pc", 0) in self.log:
            slot, flag = self.log[("pc", 0)]
            fall = b.select(b.load(flag, typ=I1), b.load(slot, typ=I32), fall)
        b.store(fall, self.state_ptr(PC))
        self.after_commit = b.block


class _Pure:
    """The core of a helper: an instruction reaching no state but its operands (HVX arithmetic)."""

    def prim(self, g: Emitter, x, args: list):
        if x.name in _CORE or x.name in _EFFECTS or x.name.startswith("fVLOG_VTCM"):
            raise Unsupported(f"{x.name} reaches the core")
        return NotImplemented


def _helper_type(sem) -> ll.FunctionType:
    ins = [PTR if t.kind in lb.VEC_BYTES else lb.int_type(t) for _, t in sem.inputs]
    return ll.FunctionType(I32, ins + [PTR] * len(sem.outputs))


def helper(sem, name: str) -> ll.Module:
    """`i32 name(inputs..., output pointers...)`: an operand-only instruction as a function of its own (compiled
    once per instruction, not per block): 0 with the outputs stored, 1 when the slot is cancelled."""
    if lb.uses_float(sem):
        raise Unsupported("floats: USR's rounding mode and flags are the core's")
    m = ll.Module(name)
    fn = ll.Function(m, _helper_type(sem), name)
    entry = fn.append_basic_block("entry")
    ab = ll.IRBuilder(entry)
    b = ll.IRBuilder(fn.append_basic_block("start"))
    ab.branch(b.block)

    def alloca(ty: ll.Type) -> ll.Value:
        ab.position_at_start(entry)
        return lb.alloca(ab, ty)
    g = Emitter(b, alloca, _Pure(), sem)
    outs = g.run({n: a for (n, _), a in zip(sem.inputs, fn.args, strict=False)})
    b.position_at_end(g.done)
    for (n, t), ptr in zip(sem.outputs, fn.args[len(sem.inputs):], strict=True):
        if t.kind in lb.VEC_BYTES:
            g.copy(ptr, outs[n], t.kind)
        else:
            b.store(b.load(outs[n], typ=lb.int_type(t)), ptr)
    b.ret(_const(0))
    b.position_at_end(g.cancel)
    b.ret(_const(1))
    return m


class _Block:
    """One block function `i32 f(state, rtab, wtab, limit)`: it starts at the packet at the state's PC (any of its
    packets: a run that stopped at the packet limit resumes in the middle) and returns with the state's PC at the
    next packet to run: 0 when it ran its packets or reached the packet limit, 1 when that packet must run on the
    interpreter, ELSEWHERE when it holds no packet at the PC it was called for."""

    def __init__(self, module: ll.Module, name: str, helpers: dict[str, str]):
        self.helpers = helpers  # instruction tag -> the symbol of its helper function
        fn = self.fn = ll.Function(module, ll.FunctionType(I32, [PTR, PTR, PTR, I64]), name)
        self.state, self.rtab, self.wtab, self.limit = fn.args
        self.entry = fn.append_basic_block("entry")
        self.ab = ll.IRBuilder(self.entry)
        self.b = ll.IRBuilder(fn.append_basic_block("start"))  # into the first packet; unreachable after finish()
        self.heads: dict[int, ll.Block] = {}  # packet address -> its first LLVM block
        self.usr = self.alloca(I32)
        self.head: ll.IRBuilder | None = None
        self.bail: ll.Block | None = None

    def alloca(self, ty: ll.Type) -> ll.Value:
        self.ab.position_at_start(self.entry)
        return lb.alloca(self.ab, ty)

    def init(self, slot: ll.Value, value: ll.Value) -> None:
        """Store `value` in `slot` as the current packet starts."""
        self.head.store(value, slot)

    def exit(self, pc: int, status: int) -> ll.Block:
        bb = self.fn.append_basic_block(f"exit_{pc:x}_{status}")
        b = ll.IRBuilder(bb)
        b.store(_const(pc), b.gep(self.state, [_const(PC, 64)], source_etype=I8))
        b.ret(_const(status))
        return bb

    def finish(self) -> None:
        """Enter at the packet at the state's PC."""
        self.ab.position_at_end(self.entry)
        pc = self.ab.load(self.ab.gep(self.state, [_const(PC, 64)], source_etype=I8), typ=I32)
        elsewhere = self.fn.append_basic_block("elsewhere")
        ll.IRBuilder(elsewhere).ret(_const(ELSEWHERE))
        sw = self.ab.switch(pc, elsewhere)
        for addr, head in self.heads.items():
            sw.add_case(_const(addr), head)

    def packet(self, isa: ISA, plan) -> bool:
        """Emit one packet after the ones before; False (and nothing emitted) when it cannot run natively. True:
        it ran, and whether it may branch is in `self.branched`."""
        pkt, steps, tail, counted = plan
        cont = self.b.block
        head_bb = self.fn.append_basic_block(f"pkt_{pkt.addr:x}")
        body = self.fn.append_basic_block("body")
        self.head = ll.IRBuilder(head_bb)
        self.bail = self.exit(pkt.addr, 1)
        b = self.b
        b.position_at_start(body)
        go = self.fn.append_basic_block("go")
        b.cbranch(b.icmp_unsigned(">=", b.load(b.gep(self.state, [_const(PACKETS, 64)], source_etype=I8), typ=I64),
                                  self.limit), self.exit(pkt.addr, 0), go)
        b.position_at_start(go)
        p = _Packet(self, pkt, steps, tail, counted)
        try:
            p.emit(isa)
        except Unsupported:
            for bb in self.fn.blocks:
                if not bb.is_terminated and bb not in (cont, self.entry):  # entry: finish() ends it
                    ll.IRBuilder(bb).unreachable()
            b.position_at_end(cont)
            return False
        self.head.branch(body)
        self.heads[pkt.addr] = head_bb
        b.position_at_end(cont)
        b.branch(head_bb)
        b.position_at_end(p.after_commit)
        self.branched = p.branches
        return True


def _extent(t: Thread, pc: int) -> list:
    """The plans of the packets a block at pc may hold: up to one with an end of loop or a J-class instruction."""
    plans = []
    while len(plans) < MAX_PACKETS:
        try:
            plan = t.plan(pc)
        except (IllegalPacket, MemoryFault):
            break
        plans.append(plan)
        pkt = plan[0]
        if pkt.endloop0 or pkt.endloop1 or any(i.tag.startswith(("J", "SL2_jump", "SL2_return", "L4_return"))
                                                for i in pkt.insts):
            break
        pc = (pc + pkt.size) & _M32
    return plans


def build(isa: ISA, plans: list, name: str, helpers: dict[str, str]) -> tuple[ll.Module, int]:
    """The module of a block function `name` over `plans`, and how many packets it runs natively (0: none); the
    instructions in `helpers` are calls of those functions."""
    m = ll.Module(name)
    blk = _Block(m, name, helpers)
    n = 0
    for plan in plans:
        if not blk.packet(isa, plan):
            blk.b.ret(_const(0))  # the state's PC is this packet's: the previous one committed it
            break
        n += 1
        if blk.branched:
            blk.b.ret(_const(0))
            break
    else:
        blk.b.ret(_const(0))
    blk.finish()
    return m, n


def dispatcher(name: str) -> ll.Module:
    """`i32 run(state, rtab, wtab, table, limit)`: runs the blocks the table has for the PC until the packet
    limit (0), a block returning 1 (its packet must be interpreted) or ELSEWHERE, or a PC without a block (2)."""
    m = ll.Module(name)
    fn = ll.Function(m, ll.FunctionType(I32, [PTR, PTR, PTR, PTR, I64]), name)
    state, rtab, wtab, table, limit = fn.args
    entry, loop, look, call, out = (fn.append_basic_block(n) for n in ("entry", "loop", "look", "call", "out"))
    b = ll.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    packets = b.load(b.gep(state, [_const(PACKETS, 64)], source_etype=I8), typ=I64)
    b.cbranch(b.icmp_unsigned(">=", packets, limit), out, look)
    b.position_at_end(look)
    pc = b.zext(b.load(b.gep(state, [_const(PC, 64)], source_etype=I8), typ=I32), I64)
    idx = b.and_(b.lshr(pc, _const(2, 64)), _const((1 << TABLE_BITS) - 1, 64))
    entry_ptr = b.gep(table, [b.mul(idx, _const(2, 64))], source_etype=I64)
    miss = fn.append_basic_block("miss")
    b.cbranch(b.icmp_unsigned("==", b.load(entry_ptr, typ=I64), pc), call, miss)
    b.position_at_end(call)
    block_type = ll.FunctionType(I32, [PTR, PTR, PTR, I64])
    target = b.load(b.gep(entry_ptr, [_const(1, 64)], source_etype=I64), typ=block_type.as_pointer())
    status = b.call(target, [state, rtab, wtab, limit])
    stop = fn.append_basic_block("stop")
    b.cbranch(b.icmp_unsigned("==", status, _const(0)), loop, stop)
    b.position_at_end(stop)
    b.ret(status)
    b.position_at_end(miss)
    b.ret(_const(2))
    b.position_at_end(out)
    b.ret(_const(0))
    return m


_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int64)


class Tier:
    """Runs a thread's packets: compiled blocks natively, the rest on its interpreter (Thread.step)."""

    def __init__(self, thread: Thread):
        from emu.pcode.llvmjit import GATE, engine
        self.t, self.gate = thread, GATE
        self.engine, self.blocks_engine = engine("dsp"), engine("dsp-blocks", opt=BLOCK_OPT)
        self.digest = _digest()
        self.state = np.zeros(STATE_BYTES, np.uint8)
        self.r32, self.c32 = self.state[R:R + 128].view(np.uint32), self.state[C:C + 128].view(np.uint32)
        self.p8, self.counts = self.state[P:P + 4], self.state[PACKETS:PACKETS + 16].view(np.uint64)
        self.pc32 = self.state[PC:PC + 4].view(np.uint32)
        self.v, self.q, self.vtmp = (self.state[V:V + 4096].reshape(32, 128), self.state[Q:Q + 64].reshape(4, 16),
                                     self.state[VTMP:VTMP + 128])
        self.rtab, self.wtab = np.zeros(1 << 20, np.uint64), np.zeros(1 << 20, np.uint64)
        self.pinned: dict[int, tuple] = {}  # page number -> (its bytearray, a ctypes view of it: its address)
        self.generation = -1
        self.table = np.zeros((1 << TABLE_BITS, 2), np.uint64)
        self.table[:, 0] = ~np.uint64(0)
        self.blocks: dict[int, int] = {}  # pc -> block function address (0: none at that pc)
        self.helpers: dict[str, str | None] = {}  # tag -> its helper's symbol (None: emitted inline)
        self.hits: dict[int, int] = {}
        self.dispatch = _FN(self.engine.compile(dispatcher("run"), "run", key=f"dsp-dispatch/{self.digest}"))
        self.ptrs = [a.ctypes.data for a in (self.state, self.rtab, self.wtab, self.table)]
        self.stats = {"compiled": 0, "failed": 0, "native_calls": 0, "native_packets": 0}

    # ---- page tables ----
    def _pages(self) -> None:
        mem = self.t.mem
        if self.generation == mem.generation:
            return
        if self.pinned:  # the entries of the pages mapped before (not all 2 x 8 MiB of the tables)
            gone = np.fromiter(self.pinned, np.int64, len(self.pinned))
            self.rtab[gone] = 0
            self.wtab[gone] = 0
        pinned = {}
        for n, page in mem.pages.items():
            old = self.pinned.get(n)
            pinned[n] = old if old is not None and old[0] is page.data else (
                page.data, (ctypes.c_char * PAGE).from_buffer(page.data))
            addr = ctypes.addressof(pinned[n][1])
            if "r" in page.perms:
                self.rtab[n] = addr
            if "w" in page.perms:
                self.wtab[n] = addr
        self.pinned, self.generation = pinned, mem.generation

    # ---- blocks ----
    def _helper(self, tag: str) -> str | None:
        """The symbol of an instruction's helper function, loaded (None: it reaches the core, so it is inline)."""
        if tag in self.helpers:
            return self.helpers[tag]
        key = f"dsp-helper/{self.digest}/{tag}"
        addr = self.engine.load(key)
        if addr is None:
            try:
                module = self._module(helper(_semantics(self.t.isa, tag), "helper"))
                addr = self.engine.compile(module, "helper", key=key)
                self.stats["compiled"] += 1
            except Unsupported:
                addr = None
        symbol = None
        if addr is not None:
            symbol = f"hwemu_dsp_{tag}_{self.digest}"
            llvm.add_symbol(symbol, addr)
        self.helpers[tag] = symbol
        return symbol

    def _module(self, m: ll.Module) -> ll.Module:
        m.triple, m.data_layout = self.engine.triple, self.engine.data_layout
        return m

    def _compile(self, pc: int, cached: bool = False) -> int | None:
        """The block at pc (0: none), its packets entered in the tables: a run that resumes at one of them (after
        the packet limit, or a branch into the block) enters the block there instead of compiling another. With
        `cached`, only a block in the disk cache (None: it is not, nothing is decided)."""
        plans = _extent(self.t, pc)
        if cached and not (plans and self.blocks_engine.path(self._key(pc, plans)).is_file()):
            for plan in plans[1:]:  # its packets are not looked up again: they wait for HOT_COMPILE too
                self.hits[plan[0].addr] = max(self.hits.get(plan[0].addr, 0), HOT)
            return None
        addr = self._build(pc, plans) if plans else 0
        self.blocks[pc] = addr
        if addr:  # packets it turns out not to hold (from one it cannot compile on) answer ELSEWHERE: _forget
            for plan in plans:
                self._enter(plan[0].addr, addr)
        return addr

    def _key(self, pc: int, plans: list) -> str:
        words = ",".join(" ".join(f"{w:08x}" for w in p[0].words) for p in plans)
        return f"dsp-block/{self.digest}/{pc:x}/{words}"

    def _build(self, pc: int, plans: list) -> int:
        from emu.pcode.llvmjit import Closed
        key = self._key(pc, plans)
        try:
            helpers = {i.tag: self._helper(i.tag) for p in plans for i in p[0].insts}
            addr = self.blocks_engine.load(key)
            if addr is None:
                m, n = build(self.t.isa, plans, "block", {k: v for k, v in helpers.items() if v})
                if not n:
                    return 0
                addr = self.blocks_engine.compile(self._module(m), "block", key=key)
                self.stats["compiled"] += 1
        except Closed:
            return 0
        except (RuntimeError, TypeError, ValueError, KeyError, AttributeError) as e:  # a bug of this tier
            self.stats["failed"] += 1
            warnings.warn(f"hwemu: the Hexagon native tier failed to compile the block at {pc:#x} ({type(e).__name__}: "
                          f"{e}); it runs on the interpreter", RuntimeWarning, stacklevel=2)
            return 0
        return addr

    @staticmethod
    def _slot(pc: int) -> int:
        """pc's entry in the dispatcher's table."""
        return (pc >> 2) & ((1 << TABLE_BITS) - 1)

    def _enter(self, pc: int, fn: int) -> None:
        """Block `fn` (not 0) runs from pc unless pc has been decided before."""
        if pc not in self.blocks:
            self.blocks[pc] = fn
            self.table[self._slot(pc)] = (pc, fn)

    def _forget(self, pc: int) -> None:
        """pc has no block (yet): it is interpreted, counted, and compiled once hot."""
        self.blocks.pop(pc, None)
        slot = self._slot(pc)
        if self.table[slot, 0] == pc:
            self.table[slot] = (~np.uint64(0), 0)

    def _native(self, pc: int, fn: int, end: int) -> int:
        t = self.t
        self.table[self._slot(pc)] = (pc, fn)
        if not self.gate.enter():
            return 1
        try:
            self._pages()
            self.r32[:] = t.r
            self.c32[:] = t.c
            self.p8[:] = t.p
            self.pc32[0] = t.pc
            self.counts[:] = (t.packets, t.insns)
            self.v[:] = t.v
            self.q[:] = t.q
            self.vtmp[:] = t.vtmp_reg
            status = self.dispatch(*self.ptrs, end)
            self.stats["native_calls"] += 1
        finally:
            self.gate.leave()
        t.r[:] = self.r32.tolist()
        t.c[:] = self.c32.tolist()
        t.p[:] = self.p8.tolist()
        t.pc = int(self.pc32[0])
        self.stats["native_packets"] += int(self.counts[0]) - t.packets
        t.packets, t.insns = (int(x) for x in self.counts)
        t.v[:] = self.v
        t.q[:] = self.q
        t.vtmp_reg = self.vtmp.copy()
        return status

    def run(self, n: int) -> None:
        """Run n packets (fewer if an exception ends the program: it propagates as from Thread.step)."""
        t = self.t
        end = t.packets + n
        blocks, hits = self.blocks, self.hits
        while t.packets < end:
            pc = t.pc
            fn = blocks.get(pc)
            if fn is None:
                h = hits[pc] = hits.get(pc, 0) + 1
                if h >= HOT_COMPILE or h == HOT:
                    fn = self._compile(pc, cached=h < HOT_COMPILE)
            if fn:
                status = self._native(pc, fn, end)
                if status == ELSEWHERE:
                    self._forget(t.pc)
                if status != 1:
                    continue
            if t.packets < end:
                t.step()


def make(thread: Thread) -> Tier | None:
    """The native tier for a thread, or None when LLVM cannot be used."""
    try:
        return Tier(thread)
    except (ImportError, OSError, RuntimeError):
        return None
