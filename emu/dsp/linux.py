"""User-mode Linux for static Hexagon programs: the ELF loader, the initial stack, and the syscalls that
newlib-free programs and tinygrad's MOCKDSP programs use (trap0(#1): number in r6, arguments in r0-r5,
result in r0).
"""
from __future__ import annotations

import errno
import io
import time
from dataclasses import dataclass, field

from emu.dsp.core import IllegalPacket, Thread
from emu.dsp.isa import ISA, load
from emu.dsp.memory import PAGE, Memory, MemoryFault
from objfile.elf import PT_LOAD, Elf, ElfError

STACK_TOP, STACK_SIZE = 0x80000000, 8 << 20
MMAP_BASE = 0x40000000
EM_QDSP6 = 164  # e_machine of Hexagon
SYS_READ, SYS_WRITE, SYS_EXIT, SYS_EXIT_GROUP = 63, 64, 93, 94
SYS_CLOCK_GETTIME, SYS_BRK, SYS_MUNMAP, SYS_MMAP2 = 113, 214, 215, 222
_AT_PAGESZ, _AT_ENTRY, _AT_NULL = 6, 9, 0


class ProcessExit(Exception):
    def __init__(self, code: int):
        super().__init__(f"exit({code})")
        self.code = code


class Runaway(Exception):
    """The watchdog stopped a program that did not exit: past its packet limit or its wall-time limit."""
    def __init__(self, why: str, pc: int, packets: int):
        super().__init__(f"{why}: stopped at pc {pc:#x} after {packets} packets")
        self.pc, self.packets = pc, packets


_CHECK_EVERY = 4096  # packets between two looks at the clock


@dataclass
class Process:
    """One program: its memory, its thread, its standard streams."""
    path: str
    stdin: bytes = b""
    argv: list[str] = field(default_factory=list)
    isa: ISA | None = None
    strace: io.TextIOBase | None = None
    native: bool | None = None  # run hot blocks natively (emu.dsp.native); None: as HWEMU_DSP_TIER says

    def __post_init__(self) -> None:
        self.mem = Memory()
        self.thread = Thread(self.isa or load(), self.mem)
        self.thread.on_trap = self._trap
        self.stdout, self.stderr = bytearray(), bytearray()
        self._stdin = memoryview(self.stdin)
        self.brk = self._load()
        self.mmap_next = MMAP_BASE
        self._stack()

    def _load(self) -> int:
        with open(self.path, "rb") as f:
            data = f.read()
        try:
            elf = Elf(data)
        except ElfError as e:
            raise ValueError(f"{self.path}: {e}") from None
        if elf.bits != 32 or elf.header.e_machine != EM_QDSP6:
            raise ValueError(f"{self.path}: not a 32-bit Hexagon ELF (machine {elf.header.e_machine})")
        end = 0
        for seg in elf.segments:
            if seg.type != PT_LOAD:
                continue
            if seg.offset + seg.filesz > len(data) or seg.filesz > seg.memsz:
                raise ValueError(f"{self.path}: PT_LOAD segment at {seg.vaddr:#x} lies outside the file or has "
                                 f"filesz > memsz")
            perms = "r" * bool(seg.flags & 4) + "w" * bool(seg.flags & 2) + "x" * bool(seg.flags & 1)
            self.mem.map(seg.vaddr, seg.memsz, perms + "w")  # writable while loading
            self.mem.write(seg.vaddr, data[seg.offset:seg.offset + seg.filesz])
            end = max(end, seg.vaddr + seg.memsz)
        self.entry = elf.header.e_entry
        return (end + PAGE - 1) // PAGE * PAGE

    def _stack(self) -> None:
        """argc, argv, envp and the aux vector at the stack pointer, as the kernel lays them out."""
        self.mem.map(STACK_TOP - STACK_SIZE, STACK_SIZE, "rw")
        args = [self.path, *self.argv]
        sp = STACK_TOP - 256
        ptrs = []
        for a in args:
            data = a.encode() + b"\0"
            sp -= len(data)
            self.mem.write(sp, data)
            ptrs.append(sp)
        words = [len(args), *ptrs, 0, 0, _AT_PAGESZ, PAGE, _AT_ENTRY, self.entry, _AT_NULL, 0]
        sp = (sp - 4 * len(words)) & ~7
        for k, w in enumerate(words):
            self.mem.store(4, sp + 4 * k, w)
        self.thread.r[29] = sp
        self.thread.pc = self.entry

    def run(self, max_packets: int | None = None, timeout: float | None = None) -> int:
        """Run to exit; the exit status. A memory fault or illegal packet propagates as its exception; a
        program still running after `max_packets` packets or `timeout` seconds of wall time raises Runaway
        (None or 0: no limit)."""
        t = self.thread
        limit = t.packets + max_packets if max_packets else None
        deadline = time.monotonic() + timeout if timeout else None
        tier = self._tier()
        try:
            while True:
                n = _CHECK_EVERY if limit is None else min(_CHECK_EVERY, limit - t.packets)
                if n <= 0:
                    raise Runaway(f"no exit within the packet limit ({max_packets})", t.pc, t.packets)
                tier(n)
                if deadline is not None and time.monotonic() > deadline:
                    raise Runaway(f"no exit within the time limit ({timeout:g} s)", t.pc, t.packets)
        except ProcessExit as e:
            return e.code

    def _tier(self):
        """A function running n packets: the native tier's, or the interpreter's."""
        if self.native is not False:
            from emu.dsp import native
            if self.native or native.enabled():
                tier = native.make(self.thread)
                if tier is not None:
                    return tier.run
        step = self.thread.step

        def interpret(n: int) -> None:
            for _ in range(n):
                step()
        return interpret

    # ---- syscalls ----
    def _trap(self, t: Thread, kind: int, imm: int) -> None:
        if kind != 0 or imm != 1:
            raise IllegalPacket(f"trap{kind}(#{imm}) before {t.pc:#x}: only trap0(#1) (Linux syscalls) is supported")
        n, a = t.r[6], t.r[:6]
        try:
            r = self._syscall(n, a)
        except MemoryFault:
            r = -errno.EFAULT
        if self.strace is not None:
            self.strace.write(f"{n}({', '.join(f'{x:#x}' for x in a[:3])}) = {r}\n")
        t.r[0] = r & 0xFFFFFFFF

    def _syscall(self, n: int, a: list[int]) -> int:
        if n == SYS_WRITE:
            data = self.mem.read(a[1], a[2])
            if a[0] not in (1, 2):
                return -errno.EBADF
            (self.stdout if a[0] == 1 else self.stderr).extend(data)
            return len(data)
        if n == SYS_READ:
            if a[0] != 0:
                return -errno.EBADF
            data = bytes(self._stdin[:a[2]])
            self.mem.write(a[1], data)
            self._stdin = self._stdin[len(data):]
            return len(data)
        if n in (SYS_EXIT, SYS_EXIT_GROUP):
            raise ProcessExit(a[0] & 0xFF)
        if n == SYS_BRK:
            if a[0] > self.brk:
                self.mem.map(self.brk, a[0] - self.brk, "rw")
                self.brk = a[0]
            return self.brk
        if n == SYS_MMAP2:
            size = (a[1] + PAGE - 1) // PAGE * PAGE
            if a[4] != 0xFFFFFFFF and not a[3] & 0x20:  # only anonymous mappings (MAP_ANONYMOUS)
                return -errno.ENODEV
            addr, self.mmap_next = self.mmap_next, self.mmap_next + size
            self.mem.map(addr, size, "rw")
            return addr
        if n == SYS_MUNMAP:
            self.mem.unmap(a[0], a[1])
            return 0
        if n == SYS_CLOCK_GETTIME:  # deterministic: the core's virtual time (emu.dsp.core: 1 ns a packet)
            ns = self.thread.ns
            self.mem.store(4, a[1], ns // 10**9)
            self.mem.store(4, a[1] + 4, ns % 10**9)
            return 0
        return -errno.ENOSYS
