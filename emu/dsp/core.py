"""One Hexagon hardware thread: its registers, and packet execution with the vendor semantics.

Packet semantics: every instruction of a packet reads the state as it was before the packet; register,
predicate, control-register and memory writes are logged and commit together at the end. Within the packet,
new-value operands (Nt8.new, Os8.new) and `.new` predicates read what an earlier instruction of the packet
wrote; several writes of one predicate AND together. A `.cur` or `.tmp` vector load runs first and the
other instructions of its packet read the loaded vector; a `.tmp` load's register keeps its old value.
The first branch taken wins; the end-of-loop pseudo-instructions (J2_endloop0/1/01, vendor-defined) run
last. Decode and compile happen once: a packet becomes a plan of (semantics, operand readers, operand
writers), shared by every address holding the same words.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emu.dsp import disasm
from emu.dsp.decode import Decoder, Inst, Packet
from emu.dsp.isa import ISA
from emu.dsp.lower import CompileError
from emu.dsp.memory import Memory, MemoryFault
from emu.dsp.pyback import Compiled, semantics

# names the semantics use for registers outside an instruction's operands: (file, index)
REGS = {"REG_SP": ("r", 29), "REG_FP": ("r", 30), "REG_LR": ("r", 31), "REG_SA0": ("c", 0), "REG_LC0": ("c", 1),
        "REG_SA1": ("c", 2), "REG_LC1": ("c", 3), "REG_M0": ("c", 6), "REG_M1": ("c", 7), "REG_USR": ("c", 8),
        "REG_PC": ("c", 9), "REG_UGP": ("c", 10), "REG_GP": ("c", 11), "REG_CS0": ("c", 12),
        "REG_CS1": ("c", 13), "REG_FRAMELIMIT": ("c", 16), "REG_FRAMEKEY": ("c", 17)}
USR_FIELDS = {"USR_OVF": (0, 1), "USR_FPINVF": (1, 1), "USR_FPDBZF": (2, 1), "USR_FPOVFF": (3, 1),
              "USR_FPUNFF": (4, 1), "USR_FPINPF": (5, 1), "USR_LPCFG": (8, 2), "USR_FPRND": (22, 2)}
USR_FP_SHIFT = 1  # emu.dsp.ieee's flags (invalid, div-by-zero, overflow, underflow, inexact) are USR bits 1-5
C_P30, C_USR, C_PC, C_UPCYCLE, C_PKTCOUNT, C_QEMU_PKT, C_QEMU_INSN, C_UTIMER = 4, 8, 9, 14, 18, 20, 21, 30
# The counters run on virtual time: one packet takes one cycle of a nominal 1 GHz core, which has been up for
# BOOT_NS when the program starts. UPCYCLE (c15:14) counts those cycles (the user-mode view of PCYCLE, which
# is a system register), PKTCOUNT (c19:18) the packets this thread executed (a write sets it), UTIMER (c31:30)
# ticks at the 19.2 MHz of the Qtimer; c20/c21 are qemu-hexagon's packet and instruction counters.
# Deterministic: a program reads the same values on every run. UPCYCLE and UTIMER ignore writes.
CORE_HZ, UTIMER_HZ, BOOT_NS = 10**9, 19_200_000, 10**9
_READ_ONLY = frozenset({C_UPCYCLE, C_UPCYCLE + 1, C_UTIMER, C_UTIMER + 1})
_M32 = 0xFFFFFFFF
_ENDLOOP = {(True, False): "J2_endloop0", (False, True): "J2_endloop1", (True, True): "J2_endloop01"}


class IllegalPacket(Exception):
    """A packet the core cannot run (undecodable, or an instruction without compiled semantics)."""


@dataclass(frozen=True, slots=True)
class Step:
    inst: Inst
    sem: Compiled
    readers: tuple  # per semantic input: a function of the thread
    writers: tuple  # per semantic output: a function (thread, value)


def _s32(x: int) -> int:
    return ((x + 0x80000000) & _M32) - 0x80000000


def _s64(x: int) -> int:
    return ((x + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


class Thread:
    def __init__(self, isa: ISA, memory: Memory):
        self.isa, self.mem = isa, memory
        self.decoder = Decoder.of(isa)
        self.r = [0] * 32  # unsigned 32-bit
        self.c = [0] * 32  # control registers (c4 and c9 are derived: predicates, PC)
        self.p = [0] * 4
        self.v = np.zeros((32, 128), np.uint8)
        self.q = np.zeros((4, 16), np.uint8)
        self.vtmp_reg = np.zeros(128, np.uint8)
        self.vtmp_keep = np.ones(128, bool)  # the bytes of vtmp the packet's gather logged (vtcm_finish)
        self.pc = 0
        self.packets = self.insns = 0
        self.pktcount_base = 0  # PKTCOUNT = packets + pktcount_base (a write to c18/c19 moves the base)
        self.plans: dict[int, tuple[Packet, tuple[Step, ...], tuple[Step, ...], int]] = {}
        self.steps: dict[tuple[int, ...], tuple[tuple[Step, ...], tuple[Step, ...], int]] = {}  # by packet words
        self.on_trap = None  # callable(thread, kind, imm): the OS (emu.dsp.linux) handles trap0

    # ---- time and counters ----
    @property
    def ns(self) -> int:
        """Virtual time since boot in nanoseconds (what clock_gettime reports)."""
        return BOOT_NS + self.packets * 10**9 // CORE_HZ

    @property
    def cycles(self) -> int:
        return self.ns * CORE_HZ // 10**9

    def _counter(self, n: int) -> int | None:
        """The 64-bit counter control register n (its low word) or n - 1 (its high word) belongs to."""
        if n in (C_UPCYCLE, C_UPCYCLE + 1):
            return self.cycles
        if n in (C_PKTCOUNT, C_PKTCOUNT + 1):
            return (self.packets + self.pktcount_base) & ((1 << 64) - 1)
        if n in (C_UTIMER, C_UTIMER + 1):
            return self.ns * UTIMER_HZ // 10**9
        return None

    # ---- registers as the semantics see them ----
    def control(self, n: int) -> int:
        if n == C_P30:
            return self.p[0] | self.p[1] << 8 | self.p[2] << 16 | self.p[3] << 24
        if n == C_PC:
            return self.pc
        if n == C_QEMU_PKT:
            return self.packets & _M32
        if n == C_QEMU_INSN:
            return self.insns & _M32
        count = self._counter(n)
        if count is not None:
            return count >> (32 * (n & 1)) & _M32
        return self.c[n]

    # ---- the core model the generated semantics call (emu.dsp.pyback.Core) ----
    def read_reg(self, name: str) -> int:
        f, n = REGS[name]
        return self.r[n] if f == "r" else self.control(n)

    def write_reg(self, name: str, value: int) -> None:
        self.log[REGS[name]] = value & _M32

    def read_pred(self, n: int) -> int:
        return self.p[n]

    def write_pred(self, n: int, value: int) -> None:
        old = self.log.get(("p", n))
        self.log[("p", n)] = (value if old is None else old & value) & 0xFF

    def new_pred(self, n: int) -> int:
        return self.log.get(("p", n), self.p[n])

    def usr_get(self, field: str) -> int:
        lo, width = USR_FIELDS[field]
        return (self.usr >> lo) & ((1 << width) - 1)

    def usr_set(self, field: str, value: int) -> None:
        lo, width = USR_FIELDS[field]
        mask = ((1 << width) - 1) << lo
        self.usr = (self.usr & ~mask) | ((value << lo) & mask)

    @property
    def rounding(self) -> int:
        """USR.FPRND as the packet started (a write to USR commits at the end of the packet)."""
        return self.usr >> USR_FIELDS["USR_FPRND"][0] & 3

    def read_gp(self) -> int:
        return 0 if self.current.extended else self.c[11]

    def read_npc(self) -> int:
        return (self.pc + self.packet.size) & _M32

    def _read(self, ea: int, size: int) -> bytes:
        """Memory as a load of this packet sees it: a store earlier in the packet (slot 1, before a slot-0
        load) is visible to it, as the compiler relies on (`{ memd(r2+#0) = r1:0; r1:0 = memd(r2+#0) }`)."""
        data = self.mem.read(ea, size)
        if not self.stores:
            return data
        out = bytearray(data)
        for sea, sdata, keep in self.stores:
            lo, hi = max(ea, sea), min(ea + size, sea + len(sdata))
            for a in range(lo, hi):
                if keep is None or keep[a - sea]:
                    out[a - ea] = sdata[a - sea]
        return bytes(out)

    def load(self, size: int, ea: int) -> int:
        return int.from_bytes(self._read(ea & _M32, size), "little")

    def store(self, size: int, ea: int, value: int) -> None:
        self.mem.check(ea, size, "write")  # faults before the packet commits anything
        self.stores.append((ea & _M32, (value & ((1 << 8 * size) - 1)).to_bytes(size, "little"), None))

    def load_locked(self, size: int, ea: int) -> int:
        return self.load(size, ea)

    def store_conditional(self, size: int, ea: int, value: int) -> int:
        self.store(size, ea, value)
        return 1

    def load_vector(self, ea: int, unaligned: bool) -> np.ndarray:
        ea = ea & _M32 if unaligned else ea & ~127 & _M32
        return np.frombuffer(self._read(ea, 128), np.uint8).copy()

    def store_vector(self, ea: int, value: np.ndarray, mask: np.ndarray | None, unaligned: bool) -> None:
        ea = ea & _M32 if unaligned else ea & ~127 & _M32
        self.mem.check(ea, 128, "write")
        keep = None if mask is None else np.unpackbits(mask, bitorder="little").astype(bool)
        if self.current.new_cls == "T":  # vtmp.new: the bytes the packet's gather logged
            keep = self.vtmp_keep if keep is None else keep & self.vtmp_keep
        self.stores.append((ea, value.tobytes(), keep))

    def branch(self, target: int) -> None:
        if self.next_pc is None:
            self.next_pc = target & _M32

    def call(self, target: int) -> None:
        if self.next_pc is None:
            self.write_reg("REG_LR", self.read_npc())
            self.branch(target)

    def trap(self, kind: int, imm: int) -> None:
        self.traps.append((kind, imm))

    def circ_add(self, reg: int, incr: int, m: int, mnum: int) -> int:
        """Circular addressing: the buffer starts at CS0/CS1 (for M0/M1), its length is M bits 16:0."""
        start, length = self.c[12 + mnum], m & 0x1FFFF
        new = (reg + incr) & _M32
        if length:
            if new >= start + length:
                new -= length
            elif new < start:
                new += length
        return _s32(new)

    def vtmp(self) -> np.ndarray:
        return self.vtmp_reg

    def read_vreg(self, n: int) -> np.ndarray:
        """Vector register n as this packet has written it so far (vhist accumulates through it)."""
        return self.log.get(("v", n), self.v[n])

    def write_vreg(self, n: int, value: np.ndarray) -> None:
        self.log[("v", n)] = value.copy()

    # ---- gather / scatter: VTCM is memory the program mapped (the vendor's region checks apply) ----
    def vtcm_begin(self) -> None:
        self.vtcm_log, self.vtcm_op = [], 0
        self.vtcm_vec, self.vtcm_keep = np.zeros(128, np.uint8), np.zeros(128, bool)

    def vtcm_element(self, ea: int, offset: int, length: int, size: int, index: int, data: np.ndarray | None,
                     q: np.ndarray | None, align: int) -> None:
        """One element: its bytes that lie inside the region (offset + byte <= length) and whose Q bit is set
        are logged; a gather reads all of them into vtmp (as the vendor's GATHER_FUNCTION), and only the logged
        ones reach memory through the packet's vtmp.new store; a scatter stores the logged ones (vtcm_finish)."""
        ea &= _M32
        base, at = offset & ~(align - 1), size * index
        keep = [bool(base + i <= length and (q is None or q[(at + i) >> 3] >> ((at + i) & 7) & 1)) for i in range(size)]
        if data is None:
            self.vtcm_vec[at:at + size] = np.frombuffer(self._read(ea, size), np.uint8)
            self.vtcm_keep[at:at + size] = keep
            return
        self.vtcm_log.append((ea, data[at:at + size].tobytes(), keep))

    def vtcm_add(self, size: int) -> None:
        self.vtcm_op = size

    def vtcm_finish(self) -> None:
        """A gather: vtmp (which the packet's `vmem(..) = vtmp.new` stores) gets the bytes read. A scatter: its
        elements are stored in element order (the last of several to one address wins); a scatter-add adds
        each element whose first byte is inside the region to memory, read as this packet left it."""
        if not self.vtcm_log:
            self.log[("t", 0)] = self.vtcm_vec
            self.vtmp_keep = self.vtcm_keep
            return
        mask = (1 << 8 * self.vtcm_op) - 1
        for ea, data, keep in self.vtcm_log:
            if self.vtcm_op:
                if keep[0]:
                    self.store(self.vtcm_op, ea, self.load(self.vtcm_op, ea) + int.from_bytes(data, "little") & mask)
            elif any(keep):
                self.mem.check(ea, len(data), "write")
                self.stores.append((ea, data, np.array(keep, bool)))

    # ---- plans ----
    def _compiled(self, tag: str) -> Compiled:
        try:
            return semantics(self.isa, tag)
        except CompileError as e:
            raise IllegalPacket(f"{tag}: no compiled semantics ({e})") from None

    def _step(self, inst: Inst) -> Step:
        sem = self._compiled(inst.tag)
        ops = inst.form.operands
        index = {}
        for k, o in enumerate(ops):
            index.setdefault(o.name, k)
            if o.cls not in "#NO":
                index.setdefault(o.name[:-1] + "N", -1 - k)  # the register number of operand k
        readers = []
        for name, _ in sem.inputs:
            k = index[name]
            if k < 0:
                readers.append(lambda t, n=inst.ops[-1 - k]: n)
            else:
                readers.append(_reader(ops[k], inst.ops[k], inst.new_cls))
        writers = tuple(_writer(ops[index[name]], inst.ops[index[name]]) for name, _ in sem.outputs)
        return Step(inst, sem, tuple(readers), writers)

    def plan(self, pc: int) -> tuple[Packet, tuple[Step, ...], tuple[Step, ...], int]:
        plan = self.plans.get(pc)
        if plan is None:
            try:
                words = self.mem.words(pc, 4)
                if not self.mem.mapped(pc, 4):
                    raise MemoryFault(pc, 4, "execute")
                pkt = self.decoder.packet(words, pc)
            except ValueError as e:
                raise IllegalPacket(f"at {pc:#x}: {e}") from None
            shared = self.steps.get(pkt.words)
            if shared is None:
                steps = tuple(sorted((self._step(i) for i in pkt.insts), key=lambda s: not _forwards(s.inst)))
                end = _ENDLOOP.get((pkt.endloop0, pkt.endloop1))
                tail = (Step(pkt.insts[0], self._compiled(end), (), ()),) if end else ()
                counted = sum(i.tag != "A2_nop" for i in pkt.insts)  # c21 counts as qemu-hexagon: no nops
                shared = self.steps[pkt.words] = (steps, tail, counted)
            plan = self.plans[pc] = (pkt, *shared)
        return plan

    # ---- execution ----
    def step(self) -> None:
        """Run the packet at pc."""
        pkt, steps, tail, counted = self.plan(self.pc)
        self.packet, self.log, self.stores, self.traps, self.next_pc, self.fwd = pkt, {}, [], [], None, {}
        self.usr = self.c[8]
        try:
            for s in steps + tail:
                self.current, self.fpflags = s.inst, 0
                try:
                    args = [r(self) for r in s.readers]
                except KeyError:  # a new-value operand whose producer was cancelled: so is the consumer
                    continue
                out = s.sem.fn(self, *args)
                if self.fpflags:
                    self.usr |= self.fpflags << USR_FP_SHIFT
                if out is not None:
                    for w, value in zip(s.writers, out, strict=True):
                        w(self, value)
        except MemoryFault as f:
            raise MemoryFault(f.addr, f.size, f.access, self.pc, self.text(pkt)) from None
        self._commit(pkt, counted)

    def _commit(self, pkt: Packet, counted: int) -> None:
        for (f, n), value in self.log.items():
            if f == "r":
                self.r[n] = value
            elif f == "p":
                self.p[n] = value
            elif f == "v":
                self.v[n] = value
            elif f == "q":
                self.q[n] = value
            elif f == "t":  # the vtmp a gather wrote: the packet's vtmp.new store read it
                pass
            elif n == C_P30:
                self.p = [(value >> (8 * k)) & 0xFF for k in range(4)]
            elif n == C_USR:
                self.usr = value
            elif n in (C_PKTCOUNT, C_PKTCOUNT + 1):  # counts on from the value written, after this packet
                half = 32 * (n - C_PKTCOUNT)
                after = self.packets + 1
                now = (after + self.pktcount_base) & ~(_M32 << half) | value << half
                self.pktcount_base = now - after
            elif n != C_PC and n not in _READ_ONLY:
                self.c[n] = value
        self.c[8] = self.usr
        for ea, data, keep in self.stores:
            if keep is None:
                self.mem.write(ea, data)
            else:
                old = np.frombuffer(self.mem.read(ea, len(data)), np.uint8).copy()
                old[keep] = np.frombuffer(data, np.uint8)[keep]
                self.mem.write(ea, old.tobytes())
        self.packets += 1
        self.insns += counted
        self.pc = self.next_pc if self.next_pc is not None else (self.pc + pkt.size) & _M32
        for kind, imm in self.traps:
            if self.on_trap is None:
                raise IllegalPacket(f"trap{kind}(#{imm}) at {pkt.addr:#x} with no OS to take it")
            self.on_trap(self, kind, imm)

    def text(self, pkt: Packet) -> str:
        return "; ".join(disasm.inst(i, pkt.addr) for i in pkt.insts)


def _forwards(inst: Inst) -> bool:
    return any(o.suffix in (".cur", ".tmp") for o in inst.form.operands)


def _reader(o, value: int, new_cls: str):
    """A function of the thread giving operand o's value as the semantics take it."""
    if o.cls == "#":
        return lambda t: value
    if o.cls in "NO":  # new value: what the producer wrote in this packet (KeyError: it did not)
        if new_cls not in ("R" if o.cls == "N" else "VT"):  # e.g. Ns.new naming a vector-predicate write
            raise IllegalPacket(f"operand {o.text}: its new value comes from a {new_cls} register")
        key = ("v" if new_cls == "V" else new_cls.lower(), value)
        return lambda t: t.log[key]
    if o.cls == "R" or o.cls == "C":
        get = (lambda t, n: t.r[n]) if o.cls == "R" else (lambda t, n: t.control(n))
        if o.pair:
            return lambda t: _s64(get(t, value + 1) << 32 | get(t, value))
        return lambda t: _s32(get(t, value))
    if o.cls == "M":
        return lambda t: _s32(t.c[6 + value])
    if o.cls == "P":
        if o.suffix == ".new":
            return lambda t: t.new_pred(value)
        return lambda t: t.p[value]
    if o.cls == "V":  # a vector a .cur/.tmp load of the packet forwards, else the register
        if o.pair:
            return lambda t: np.concatenate([t.fwd.get(value, t.v[value]), t.fwd.get(value + 1, t.v[value + 1])])
        return lambda t: t.fwd.get(value, t.v[value])
    if o.cls == "Q":
        return lambda t: t.q[value]
    raise IllegalPacket(f"operand {o.text}: no reader")


def _writer(o, value: int):
    """A function (thread, result) logging operand o's new value."""
    if o.cls in "RC":
        f = o.cls.lower()
        if o.pair:
            def w(t, x, n=value):
                t.log[(f, n)] = x & _M32
                t.log[(f, n + 1)] = (x >> 32) & _M32
            return w
        return lambda t, x: t.log.__setitem__((f, value), x & _M32)
    if o.cls == "M":
        return lambda t, x: t.log.__setitem__(("c", 6 + value), x & _M32)
    if o.cls == "P":
        return lambda t, x: t.write_pred(value, x)
    if o.cls == "V":
        if o.pair:
            def wv(t, x, n=value):
                t.log[("v", n)] = x[:128].copy()
                t.log[("v", n + 1)] = x[128:].copy()
            return wv
        if o.suffix == ".tmp":
            def wt(t, x, n=value):
                t.fwd[n] = t.vtmp_reg = x.copy()  # vhist and vwhist read it as vtmp
            return wt
        if o.suffix == ".cur":
            def wc(t, x, n=value):
                t.fwd[n] = t.log[("v", n)] = x.copy()
            return wc
        return lambda t, x: t.log.__setitem__(("v", value), x.copy())
    if o.cls == "Q":
        return lambda t, x: t.log.__setitem__(("q", value), x.copy())
    raise IllegalPacket(f"operand {o.text}: no writer")
