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

Modules: emu.dsp.native_core (the state buffer; what instructions reach beyond their operands), native_packet
(a packet's instructions over their operands, helper functions, the commit), native_block (block functions, the
dispatcher), this one (the tier: page tables, when to compile, running blocks and the interpreter in turn).
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

from emu import cache
from emu.dsp.core import Thread
from emu.dsp.llvmback import Unsupported
from emu.dsp.memory import PAGE
from emu.dsp.native_block import ELSEWHERE, TABLE_BITS, build, dispatcher, extent
from emu.dsp.native_core import PACKETS, PC, STATE_BYTES, VTMP, C, P, Q, R, V
from emu.dsp.native_packet import helper, semantics
from emu.dsp.pyback import _cache_file as _semantics_file

BLOCK_OPT = 0  # LLVM optimization level of blocks (register moves and calls of helpers: compile time matters more)
# what pays back: interpreting a packet costs about 60 us, compiling it about 4 ms (tinygrad's kernels, cold), so a
# block is compiled once its first packet has been entered HOT_COMPILE times (about the break-even count, if it runs
# as often again as it has); a block in the disk cache costs next to nothing, so it is loaded after HOT entries
HOT = 8
HOT_COMPILE = 64


def cover_dir() -> Path:
    """The folder of the blocks' cover entries (Tier._cover)."""
    return cache.root() / "dsp-cover"


def enabled() -> bool:
    """HWEMU_DSP_TIER=interp|native (default native when llvmlite's LLVM loads)."""
    return os.environ.get("HWEMU_DSP_TIER", "native") != "interp"


def _digest() -> str:
    h = hashlib.sha256(_semantics_file().name.encode())
    for m in ("llvmback", "llvmfloat", "native", "native_core", "native_packet", "native_block", "core", "decode"):
        h.update((Path(__file__).parent / f"{m}.py").read_bytes())
    return h.hexdigest()[:16]


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
                module = self._module(helper(semantics(self.t.isa, tag), "helper"))
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
        the packet limit, or a branch into the block) enters the block there instead of compiling another. A block
        an earlier run compiled from an address before pc that holds pc is entered at pc (`_holder`). With
        `cached`, only a block in the disk cache (None: it is not, nothing is decided)."""
        start, plans, on_disk = self._holder(pc, extent(self.t, pc))
        if cached and not on_disk:
            for plan in plans[1:]:  # its packets are not looked up again: they wait for HOT_COMPILE too
                self.hits[plan[0].addr] = max(self.hits.get(plan[0].addr, 0), HOT)
            return None
        addr = self._build(start, plans) if plans else 0
        self.blocks[pc] = addr
        if addr:  # packets it turns out not to hold (from one it cannot compile on) answer ELSEWHERE: _forget
            for plan in plans:
                self._enter(plan[0].addr, addr)
        return addr

    def _key(self, pc: int, plans: list) -> str:
        words = ",".join(" ".join(f"{w:08x}" for w in p[0].words) for p in plans)
        return f"dsp-block/{self.digest}/{pc:x}/{words}"

    def _on_disk(self, pc: int, plans: list) -> bool:
        return self.blocks_engine.path(self._key(pc, plans)).is_file()

    def _cover(self, plan) -> Path:
        """Where the start of the compiled block that holds `plan`'s packet is kept (by its address and words):
        which packets start blocks depends on what got hot first, so a later run that meets the same code in
        another order enters the blocks that are on disk instead of compiling others."""
        pkt = plan[0]
        words = " ".join(f"{w:08x}" for w in pkt.words)
        return cover_dir() / hashlib.sha256(f"{self.digest}/{pkt.addr:x}/{words}".encode()).hexdigest()[:40]

    def _holder(self, pc: int, plans: list) -> tuple[int, list, bool]:
        """(start, plans, True) of the block on disk that holds pc: its own if there is one, else one another run
        compiled from an earlier packet; (pc, plans, False) when neither is on disk."""
        if not plans:
            return pc, plans, False
        if self._on_disk(pc, plans):
            return pc, plans, True
        try:
            start = int(self._cover(plans[0]).read_text(), 16)
        except (OSError, ValueError):
            return pc, plans, False
        held = extent(self.t, start)
        if held and any(p[0].addr == pc for p in held) and self._on_disk(start, held):
            return start, held, True
        return pc, plans, False

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
                for plan in plans[1:n]:
                    cache.write(self._cover(plan), f"{pc:x}".encode())
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
                before = t.packets
                status = self._native(pc, fn, end)
                if status == ELSEWHERE:
                    self._forget(t.pc)
                # a block that answers ELSEWHERE at once (a cached block's cover that does not hold this packet)
                # would be compiled and entered again and again: the packet is interpreted instead
                if status != 1 and not (status == ELSEWHERE and t.pc == pc and t.packets == before):
                    continue
            if t.packets < end:
                t.step()


def make(thread: Thread) -> Tier | None:
    """The native tier for a thread, or None when LLVM cannot be used."""
    try:
        return Tier(thread)
    except (ImportError, OSError, RuntimeError):
        return None
