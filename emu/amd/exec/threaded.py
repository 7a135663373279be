"""The threaded tier: a native interpreter whose handlers are compiled once per kind of instruction, not per program.

A region (emu.amd.exec.translate) pays LLVM's time for every instruction of every kernel, so a kernel that runs a few
times never earns it back, and the lean interpreter runs such kernels at microseconds per wave-instruction. Here an
instruction's *kind* is compiled instead: its encoding, opcode and every field but its registers and its literal,
which the handler reads at run time from the instruction's entry. Kernels share kinds (a threefry is twenty of
them), so a test run compiles a few hundred handlers, each once per machine: handlers hold no address, so they
are cached on disk (emu.pcode.llvmjit) and every later process loads them.

A handler is the translator's code for one instruction (translate.Region), built on its kind's canonical instruction
(emu.amd.exec.kinds: each SGPR / VGPR field and the literal a `Sym`, read from the entry's words at run time). Its PC
is 0: it returns the next PC relative to the instruction (a branch's target comes from the entry's SIMM16); an
instruction that reads its PC as data (s_getpc_b64) reads the entry's.

The loop (`i64 threaded(sgpr, vgpr, ctr, lds)`, a region's signature) starts at ctr[START], looks each PC up in the
program's index (ctr[THREADED..]: index address, first PC, length, entries address), calls the entry's handler and
goes on at the PC it returns, until an instruction without a handler (one not compiled yet, or one the tier does
not take), a handler that runs nothing (a memory access the VM table cannot place: the interpreter performs it,
faults included), s_barrier, s_endpgm or the budget. Entries: [handler, PC, the Sym words...]; a VOPD pair of two
kinds (emu.amd.exec.kinds) is the pair handler's entry [pair, PC, Y's offset, X's entry, Y's entry], which runs
X's handler and then Y's as one instruction.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.metadata
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
from llvmlite import ir

from emu import cache
from emu.amd import target
from emu.amd.decode import decoder
from emu.amd.exec import access, category, jit, takes
from emu.amd.exec.control import ENDS, SOPP_BRANCHES
from emu.amd.exec.kinds import Kind, NotSymbolic, Sym, keyed, kind_of
from emu.amd.exec.operands import constant
from emu.amd.exec.translate import ACCESSES, BUDGET, EXECUTED, LOG, PC_MASK, START, STATUS, THREADED, Region
from emu.amd.exec.translate_state import I32, I64, PTR, Exit, Hooks, fit
from emu.pcode.llvmemit import emit
from emu.pcode.llvmjit import Closed, Engine, engine

ENGINE = "threaded"  # the LLVM engine of handlers (emu.pcode.llvmjit.engine): regions compile on another
LOOP_ENGINE = "threaded-loop"  # the loop that calls the handlers: optimized as regions are
HEAD = 2  # entry words before the Sym words: handler address, PC
MAX_SPAN = 1 << 22  # bytes of code one program's index covers
LOG_MAX = 4096  # instructions one call of the logged loop runs at most (the length of its log)
ACCESS_LOG = 1024  # records an access log holds (a call ends once it is nearly full: Region._logged)
SWEEP = 4096  # instructions a program's first request decodes ahead (its whole kernel, as a rule)
_SIG = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_void_p] * 4)


def handler_engine() -> Engine:
    """The engine of handlers. A cold test run compiles hundreds of them, each one instruction's code, where LLVM's
    optimizer gains little: only its light passes run (LLVM's time a handler about 0.74x of -O2's), then the full code
    generator (its fast one costs the handlers' code 1.3-1.7x in hot loops)."""
    return engine(ENGINE, opt=0, codegen=2)


def kernels_dir() -> Path:
    """Where kernels' instructions are kept as kinds and words: $HWEMU_CACHE/kernels."""
    return cache.root() / "kernels"


@functools.cache
def _decoder_sources() -> str:
    """The digest of what decodes instructions into kinds besides jit.sources(): the decoder, its operand rules and
    the vendor tables' conversion (a change to them decodes the kernels again)."""
    h = hashlib.sha256(importlib.metadata.version("tinygrad").encode())
    amd = Path(target.__file__).parent
    for f in sorted([amd / "decode.py", amd / "target.py", *amd.glob("asm/*.py"), *amd.glob("isa/*.py")]):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


class Handler(Region):
    """The translator's code for one canonical instruction: `i64 handler(sgpr, vgpr, ctr, lds, entry)`, which runs it
    and returns the next PC relative to its own (or, having run nothing, leaves ctr[EXECUTED] as it was)."""

    ARGS = 5

    def __init__(self, prog, k: Kind, mode: int):
        super().__init__(prog, 0, mode)
        self.kind = k
        self.reach: dict[int, set[int]] = {}  # slot -> canonical register offsets the code touches

    def build(self, name: str) -> ir.Module:
        m = self.module(name, {0: self.kind.inst})
        for slot, offs in self.reach.items():  # e.g. a 64-bit read of a 32-bit operand: its words say nothing of it
            fld = self.kind.sources[slot]
            o = self.kind.inst.operands.get(fld)
            if o is not None and not offs <= set(range(o.count)):
                raise Exit(f"{fld} reaches registers {sorted(offs)} of {o.count}")
        return m

    def _count(self, b, inst) -> None:
        if not (inst.base == "VOPD" and "opx" not in inst.fields):  # a VOPD pair counts once: in its opX half
            super()._count(b, inst)

    def _base(self, b):
        return I64(0)  # the canonical instruction is at 0: the handler's PCs are relative to its own

    def _start(self, b, wrong) -> None:
        b.branch(self.blocks[0])

    def _word(self, b, s: Sym):
        ent = self.fn.args[4]
        v = b.load(b.gep(ent, [I64(HEAD + s.slot)], source_etype=I64), typ=I64)
        return b.add(b.mul(v, I64(s.scale)), I64(s.off))

    def _register(self, s: Sym, base: int) -> None:
        self.reach.setdefault(s.slot, set()).add(int(s) - base)

    def _slot(self, b, i):
        if not isinstance(i, Sym):
            return super()._slot(b, i)
        self._register(i, 0)
        return b.gep(self.s_ptr, [self._word(b, i)], source_etype=I32)

    def _row(self, b, reg):
        if not isinstance(reg, Sym):
            return super()._row(b, reg)
        self._register(reg, 0)
        vt = ir.VectorType(I32, self.lanes)
        return b.gep(self.v_ptr, [self._word(b, reg * self.lanes)], source_etype=I32), vt

    def _shape(self, b, v, bits: int, vector: bool):
        if isinstance(v, Sym):
            v = fit(b, self._word(b, v), bits)
        return super()._shape(b, v, bits, vector)

    def _scalar(self, b, code: int, bits: int, fmt: str, literal):
        c = constant(code, bits, fmt, literal)
        if isinstance(c, Sym):  # the literal, or an integer constant
            return fit(b, self._word(b, c), bits)
        return super()._scalar(b, code, bits, fmt, literal)

    def _imm(self, source: str, value: int):
        return Sym(0, self.kind.sources.index(source)) if source in self.kind.sources else value

    def _here(self, b):
        """The instruction's PC, from its entry."""
        return b.load(b.gep(self.fn.args[4], [I64(1)], source_etype=I64), typ=I64)

    def _state(self, b, n: str, inst):
        if n == "PC" and inst.op.name not in SOPP_BRANCHES:  # e.g. s_getpc_b64: the instruction's own PC
            return self._here(b)
        return super()._state(b, n, inst)

    @staticmethod
    def _vopd_y(f: dict):
        return f.get("vdsty")  # (none in opX's half)

    def _branch(self, b, inst) -> None:
        """The pcode's PC, relative: the canonical instruction is at 0 and SIMM16 comes from the entry."""
        bd = self.binder.salu_operands(inst)
        out = emit(b, bd.sem.ir, self.lanes, self._inputs(b, bd, inst, lambda n: None, vector=False), Hooks())
        pc = b.and_(fit(b, out["PC"], 64), I64(PC_MASK))
        taken = self.fn.append_basic_block("taken")
        on = self.fn.append_basic_block("on")
        b.cbranch(b.icmp_unsigned("!=", pc, I64(inst.size)), taken, on)
        tb = ir.IRBuilder(taken)
        self._taken(tb, self._here(tb))
        tb.branch(on)
        self._leave(ir.IRBuilder(on), pc)


def _loop(logged: bool) -> int:
    """The address of the threaded loop (compiled once per machine); the `logged` one also writes each
    instruction's PC to the array at ctr[LOG], at the index of the instructions it ran before (a traced wave's)."""
    m = engine(LOOP_ENGINE).module("threaded")
    fn = ir.Function(m, ir.FunctionType(I64, [PTR] * 4), "threaded")
    s, v, ctr, lds = fn.args
    entry, look, call, out = (fn.append_basic_block(n) for n in ("entry", "look", "call", "out"))
    b = ir.IRBuilder(entry)

    def word(b, i):
        return b.load(b.gep(ctr, [I64(i)], source_etype=I64), typ=I64)
    index, base, length, ents = (word(b, i) for i in (THREADED, THREADED + 1, THREADED + 2, THREADED + 3))
    index, ents = b.inttoptr(index, PTR), b.inttoptr(ents, PTR)
    log = b.inttoptr(word(b, LOG), PTR) if logged else None
    start = word(b, START)
    b.branch(look)
    b = ir.IRBuilder(look)
    pc = b.phi(I64, "pc")
    pc.add_incoming(start, entry)
    ran, budget = word(b, EXECUTED), word(b, BUDGET)  # a nearly full access log ends the budget (Region._logged)
    off = b.sub(pc, base)
    inside = b.and_(b.icmp_unsigned("<", off, b.shl(length, I64(2))), b.icmp_unsigned("==", b.and_(off, I64(3)),
                                                                                      I64(0)))
    inside = b.and_(inside, b.icmp_signed("<", ran, budget))
    at = b.select(inside, b.lshr(off, I64(2)), I64(0))
    e = b.select(inside, b.load(b.gep(index, [at], source_etype=I64), typ=I64), I64(0))
    b.cbranch(b.icmp_unsigned("!=", e, I64(0)), call, out)
    b = ir.IRBuilder(call)
    ent = b.gep(ents, [b.sub(e, I64(1))], source_etype=I64)
    h = b.inttoptr(b.load(ent, typ=I64), ir.FunctionType(I64, [PTR] * 5).as_pointer())
    if logged:  # before the call: a handler that runs nothing leaves the slot to the next instruction
        b.store(pc, b.gep(log, [ran], source_etype=I64))
    rel = b.call(h, [s, v, ctr, lds, ent])
    nxt = b.and_(b.add(pc, rel), I64(PC_MASK))
    moved = b.icmp_unsigned("!=", word(b, EXECUTED), ran)
    done = b.icmp_unsigned("!=", word(b, STATUS), I64(0))
    pc.add_incoming(nxt, b.block)
    stay = fn.append_basic_block("stay")
    b.cbranch(b.and_(moved, b.not_(done)), look, stay)
    sb = ir.IRBuilder(stay)
    sb.ret(sb.select(moved, nxt, pc))
    ir.IRBuilder(out).ret(pc)
    return engine(LOOP_ENGINE).compile(m, "threaded", f"threaded loop {'logged ' if logged else ''}1")


# (target, lanes, MODE, stats, kind key) -> handler address, or a VOPD pair's (X's, Y's, X's word count); None: none
_handlers: dict[tuple, int | tuple[int, int, int] | None] = {}
_asked: set[tuple] = set()
_made: list[tuple] = []  # the keys of _handlers in the order they were made: tables install what is new to them
_loops: dict[bool, object] = {}  # logged -> the threaded loop (ctypes; None while it is being compiled)
_pairs: list[int] = []  # the pair handler's address, once compiled
_lock = threading.Lock()


def _need_pair() -> None:
    """Compile (once per machine) the handler of a VOPD pair's entry [pair, PC, Y's offset, X's entry..., Y's
    entry...]: it runs X's handler and then Y's (which counts no instruction: Handler._count)."""
    with _lock:
        if _pairs:
            return
    m = engine(LOOP_ENGINE).module("pair")
    fn = ir.Function(m, ir.FunctionType(I64, [PTR] * 5), "pair")
    s, v, ctr, lds, ent = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    executed = b.gep(ctr, [I64(EXECUTED)], source_etype=I64)
    hty = ir.FunctionType(I64, [PTR] * 5).as_pointer()

    def half(b, at):
        sub = b.gep(ent, [at], source_etype=I64)
        return b.call(b.inttoptr(b.load(sub, typ=I64), hty), [s, v, ctr, lds, sub])
    ran = b.load(executed, typ=I64)
    rel = half(b, I64(3))
    y, out = fn.append_basic_block("y"), fn.append_basic_block("out")
    b.cbranch(b.icmp_unsigned("==", b.load(executed, typ=I64), ran), out, y)  # X ran nothing: neither runs
    ir.IRBuilder(out).ret(rel)
    b = ir.IRBuilder(y)
    b.ret(half(b, b.load(b.gep(ent, [I64(2)], source_etype=I64), typ=I64)))
    addr = engine(LOOP_ENGINE).compile(m, "pair", "threaded pair 1")
    with _lock:
        _pairs[:] = [addr]


def _need_loop(logged: bool = False) -> None:
    with _lock:
        if logged in _loops:
            return
        _loops[logged] = None  # asked
    _loops[logged] = _SIG(_loop(logged))


def _make(prog, kinds: dict[tuple, Kind], mode: int) -> None:
    """Make the handlers of `kinds` (by their full keys): from the disk cache, else built and compiled together (one
    LLVM module: its fixed cost a module is most of a handler's). A kind gets None where it has none, and is never
    asked for again; where LLVM rejects the module, each handler is compiled on its own."""
    pairs = {full: k for full, k in kinds.items() if k.halves}
    kinds = {full: k for full, k in kinds.items() if not k.halves}
    for full, k in pairs.items():  # a pair's halves: kinds of their own, shared with other pairs
        kinds.update({f: h for h in k.halves if (f := (*full[:-1], h.key)) not in _handlers})
    made: dict[tuple, int | None] = dict.fromkeys(kinds)
    built: dict[tuple, ir.Module] = {}

    def build(full: tuple, k: Kind) -> None:
        try:
            built[full] = Handler(prog, k, mode).build("handler")
        except (Exit, NotSymbolic) as e:  # not a kind the tier takes, or code that needs a register's value
            takes.declined("threaded", k.inst, str(e.args[-1] if e.args else e))

    def compile_all(fulls: list[tuple]) -> None:
        addrs = handler_engine().compile_all({keys[f]: built[f] for f in fulls}, "handler")
        made.update((f, addrs[keys[f]]) for f in fulls)
    keys = {full: f"handler {jit.sources()} {full!r}" for full in kinds}
    try:
        _need_loop()
        if pairs:
            _need_pair()
        access.ensure(prog.lanes, jit.sources())
        for full, k in kinds.items():
            made[full] = handler_engine().load(keys[full])
            if made[full] is None:
                jit.guarded(lambda full=full, k=k: build(full, k))
        if built:
            try:
                compile_all(list(built))
            except jit.LLVM_FAILED:
                for f in built:
                    jit.guarded(lambda f=f: compile_all([f]))
    except Closed:
        pass
    finally:
        for full in kinds:
            _handlers[full] = made[full]
            _made.append(full)
        for full, k in pairs.items():
            x, y = (_handlers.get((*full[:-1], h.key)) for h in k.halves)
            _handlers[full] = None if x is None or y is None or not _pairs else (x, y, len(k.halves[0].sources))
            _made.append(full)


class Table:
    """A program's threaded code: the index from its PCs to entries, and the instructions waiting for handlers.
    Only the thread that runs the program's waves changes it (between native calls)."""

    def __init__(self, prog):
        self.prog = prog
        self.base = 0
        self.index = np.zeros(0, np.int64)
        self.ents = np.zeros(256, np.int64)
        self.used = 0
        self.want: dict[tuple, list[tuple[int, list[int]]]] = {}  # handler key -> (pc, entry words) waiting for it
        self.asked: set[int] = set()  # PCs whose handlers were asked for (once each)
        self.seen = len(_made)  # how many of _made this table has looked at (those before: in _handlers)
        self.log = np.zeros(LOG_MAX, np.int64)  # the PCs a call of the logged loop ran
        self.accesses: np.ndarray | None = None  # a counted dispatch's calls' access log (Table._accesses)

    def step(self, pc: int, step, native, ran: Callable[[object, list[int]], None] | None = None,
             accessed: Callable[[np.ndarray], None] | None = None):
        """The step at pc: the threaded loop from there once its handler is installed, else `step`. `native(fn,
        arm)` makes the call of a native function (emu.amd.exec.wave.Program._call). With `ran` (a traced wave's
        step, emu.amd.sqtt) the logged loop runs, at most LOG_MAX instructions a call, and `ran(w, pcs)` is given
        the PCs of the instructions it ran, in order (`step` records its own). With `accessed` (a counted
        dispatch's, emu.amd.accesses) the memory instructions log their accesses, and `accessed(records)` is given
        them after each call that ran instructions (Region._logged's records, access.RECORD + lanes words each)."""
        asked = [False]
        call = [None]
        logged = ran is not None

        def arm(ctr: np.ndarray) -> None:
            self.arm(ctr)
            if logged:
                ctr[BUDGET] = min(ctr[BUDGET], LOG_MAX)
                ctr[LOG] = self.log.ctypes.data
            if accessed is not None:
                ctr[ACCESSES:ACCESSES + 4] = (self._accesses().ctypes.data, 0, len(self.accesses), 0)

        def run(w):
            if not asked[0]:
                asked[0] = True
                self.request(pc, w.mode)
                if logged:
                    _need_loop(logged=True)
            if len(_made) != self.seen:
                self.install()
            if not self.has(pc) or _loops.get(logged) is None:
                return step(w)
            if call[0] is None:
                call[0] = native(_loops[logged], arm if logged or accessed is not None else self.arm)
            if not logged and accessed is None:
                return call[0](w)
            ctr = jit.counters(w).ctr
            ctr[EXECUTED] = 0  # stays 0 where the call runs nothing (then `step` runs, and records)
            try:
                r = call[0](w)
            finally:
                ctr[ACCESSES] = 0  # the wave's other native calls log nothing
            if ctr[EXECUTED] and logged:
                ran(w, self.log[:ctr[EXECUTED]].tolist())
            if ctr[EXECUTED] and accessed is not None:
                if ctr[ACCESSES + 3]:
                    raise RuntimeError(f"hwemu: {ctr[ACCESSES + 3]} memory access records did not fit the log (an "
                                       "emulator bug; please report it)")
                accessed(self.accesses[:ctr[ACCESSES + 1]])
            return r
        return run

    def _accesses(self) -> np.ndarray:
        """The log the memory instructions of a counted dispatch's calls write (made at its first use)."""
        if self.accesses is None:
            self.accesses = np.zeros(ACCESS_LOG * (access.RECORD + self.prog.lanes), np.int64)
        return self.accesses

    def loop_from(self, pc: int) -> int | None:
        """The threaded loop's address for a launcher that starts waves at `pc` (emu.amd.exec.launch), once pc's
        handler is installed; the launcher's counters are armed with `arm`."""
        if len(_made) != self.seen:
            self.install()
        if not self.has(pc) or _loops.get(False) is None:
            return None
        return ctypes.cast(_loops[False], ctypes.c_void_p).value

    def fallback(self, make):
        """The interpreter's step for where the loop cannot start: `make(until)` with `until(pc)` true where it can
        (the block stops there and the loop goes on), made at the first call and again when handlers installed
        since would end it sooner."""
        made: list = [None, -1, ()]  # step, len(_made) when it was made, the PCs of its block after the first

        def step(w):
            if made[0] is None or made[1] != len(_made) and any(self.has(p) for p in made[2]):
                made[1] = len(_made)
                made[0] = make(self.has)
                made[2] = tuple(i.pc for i in self.prog.interp.members(self.prog.inst(w.pc), self.has)[1:]) \
                    if self.prog.interp is not None else ()
            return made[0](w)
        return step

    def request(self, pc: int, mode: int) -> None:
        """Ask for the handlers of the instructions of the interpreter's step at pc, up to the first asked for
        before (a step that starts inside an earlier one's block asks for no instruction twice); the first request
        asks for the whole kernel (`_kernel`), so that the loop runs through it without coming back."""
        prog = self.prog
        head = (prog.planner.arch, prog.lanes, mode, prog.stats)
        if not self.asked:
            wanted = self._kernel(pc, head)
        else:
            first = prog.inst(pc)
            insts = prog.interp.members(first, self.asked.__contains__) if prog.interp is not None else [first]
            wanted = [(inst.pc, *keyed(kind_of(inst))) for inst in insts]
        new: dict[tuple, Kind] = {}  # the kinds first met in this process: made from their instructions
        rows = []
        for at, key, ws in wanted:
            if at in self.asked:
                continue
            self.asked.add(at)
            if key is None:
                continue
            full = (*head, key)
            if full not in _asked:
                made = kind_of(prog.inst(at))
                if made is None or made[0].key != key:  # a kernel kept by other sources: asked for as it runs
                    self.asked.discard(at)
                    continue
                _asked.add(full)
                new[full] = made[0]
            rows.append((at, full, ws))
        if new:
            with jit.compiling():
                jit.guarded(lambda: _make(prog, new, mode))
        for at, full, ws in rows:
            if full not in _handlers:  # made later: it is in _made after what this table has looked at
                self.want.setdefault(full, []).append((at, ws))
            elif _handlers[full] is not None:
                self._put(at, _handlers[full], ws)
        self.install()

    def _kernel(self, pc: int, head: tuple) -> list[tuple[int, tuple | None, list[int] | None]]:
        """(PC, kind key, words) of every instruction of the kernel that starts at pc (`_sweep`). Another process
        that met the same code (a test run's kernels recur in every run) left them on disk (keyed by the code, the
        decoder's and the tier's sources): then nothing is decoded (except under HWEMU_STATS, which counts what
        the tier declines as it decodes)."""
        code = self.prog.fetch(pc, 16 * SWEEP)

        def rows() -> list:
            return [(inst.pc - pc, *keyed(kind_of(inst))) for inst in self._sweep(pc, code)]
        if category.enabled():
            found = rows()
        else:
            digest = hashlib.sha256(f"{jit.sources()} {_decoder_sources()} {head!r}".encode() + code).hexdigest()
            found = cache.sealed(kernels_dir() / digest[:40], rows)
        return [(pc + off, key, ws) for off, key, ws in found]

    def _sweep(self, pc: int, code: bytes) -> list:
        """The instructions of `code` (the bytes from pc, where the program's first wave starts) in address order,
        up to the first s_endpgm past every branch target before it, an invalid instruction or SWEEP of them. Code
        that only other paths reach (an indirect jump's target) is asked for when it runs."""
        prog = self.prog
        d = decoder(prog.family)
        out, off, reach = [], 0, pc
        while off < len(code) and len(out) < SWEEP:
            at = pc + off
            inst = prog.insts.get(at) or d.decode_one(code, off, at)
            if not inst.valid:
                break
            prog.insts.setdefault(at, inst)
            out.append(inst)
            off += inst.size
            if inst.op.name in SOPP_BRANCHES:
                reach = max(reach, Region._target(inst))
            elif inst.op.name in ENDS and pc + off > reach:
                break
        return out

    def install(self) -> None:
        """Put in the handlers made since the last look that instructions of this program wait for."""
        n = len(_made)
        for full in _made[self.seen:n]:
            waiting = self.want.pop(full, ())
            if waiting and _handlers[full] is not None:
                for pc, ws in waiting:
                    self._put(pc, _handlers[full], ws)
        self.seen = n

    def has(self, pc: int) -> bool:
        i = (pc - self.base) >> 2
        return 0 <= i < len(self.index) and bool(self.index[i])

    def arm(self, ctr: np.ndarray) -> None:
        """Point a native call's counters at the tables."""
        ctr[THREADED:THREADED + 4] = (self.index.ctypes.data, self.base, len(self.index), self.ents.ctypes.data)

    def _put(self, pc: int, addr: int | tuple[int, int, int], ws: list[int]) -> None:
        if not len(self.index):
            self.base = pc & ~0xFFF
        lo, hi = min(self.base, pc & ~0xFFF), max(self.base + 4 * len(self.index), (pc | 0xFFF) + 1)
        if hi - lo > MAX_SPAN:
            return
        if (lo, hi) != (self.base, self.base + 4 * len(self.index)):
            index = np.zeros((hi - lo) // 4, np.int64)
            at = (self.base - lo) // 4
            index[at:at + len(self.index)] = self.index
            self.base, self.index = lo, index
        if isinstance(addr, tuple):  # a VOPD pair: its halves' entries after the pair handler's (_need_pair)
            x, y, nx = addr
            addr, ws = _pairs[0], [3 + HEAD + nx, x, pc, *ws[:nx], y, pc, *ws[nx:]]
        n = HEAD + len(ws)
        if self.used + n > len(self.ents):
            self.ents = np.concatenate([self.ents, np.zeros(max(n, len(self.ents)), np.int64)])
        self.ents[self.used:self.used + n] = [addr, pc, *ws]
        self.index[(pc - self.base) >> 2] = self.used + 1
        self.used += n


def warm(lanes: int) -> None:
    """Have the compile thread load, or compile, what the first dispatch of `lanes`-wide waves needs of the native
    tiers (the VM's access functions, the threaded loop) while the client is still busy with its own start: on an
    empty cache their second of LLVM is then off the first dispatch's path. A tier that compiles nothing, or
    HWEMU_TIER's error (said at the first dispatch), warms nothing."""
    try:
        t = jit.tier()
    except ValueError:
        return
    if t in ("ref", "interp"):
        return

    def job() -> None:
        try:
            access.ensure(lanes, jit.sources())
            if t != "jit" and enabled():
                _need_loop()
        except Closed:
            pass
    jit.background(job)


def enabled() -> bool:
    """HWEMU_THREADED=0 turns the threaded tier off under `auto`."""
    return os.environ.get("HWEMU_THREADED", "1") != "0"
