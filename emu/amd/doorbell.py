"""The idle engine's wait for a doorbell store, holding no GIL.

Doorbells are plain memory stores, as on hardware, so the engine notices one by looking. A look from Python needs
the GIL, which the client's thread (compiling, or busy-polling a signal) must hand over for every look: looking every
few microseconds slows the client, looking seldom delays the device. `Doorbells.wait` looks from native code
instead: a small LLVM function, called through ctypes (which releases the GIL), reads the watched doorbells (soon
after work, then less and less often: each look costs a wakeup) and returns as soon as one differs from the value
the engine last served, the engine is kicked (`Doorbells.kick`, e.g. a client starts waiting on an event), or the
timeout passes. Between looks it waits on the kick word as a futex (on x86-64 and arm64), so a kick wakes it at once
and samplers see a blocked thread. Where no native code can run (the process is exiting) it sleeps on an Event
instead.

A client whose every doorbell store is followed by a kick (`announced`: the tinygrad adapter makes tinygrad's so, as
a doorbell's MMIO write wakes the hardware's command processor) needs no looks: the engine then sleeps on the kick
word until the timeout, and the work starts as soon as it is rung. Each look is a wakeup, and on a loaded machine a
woken thread waits for a core, which samplers count as busy.
"""
from __future__ import annotations

import ctypes
import platform
import threading

import numpy as np
from llvmlite import ir

from emu.pcode.llvmjit import GATE, Closed, engine

# microseconds between the native wait's looks: at first, at most. A client that waits for the device kicks the
# engine (the driver's WAIT_EVENTS, tinygrad's signal poll), so the long naps of an idle engine delay only work that
# nobody waits for yet, and the idle engine costs some 50 wakeups a second. (Each wakeup is a runnable thread on a
# loaded machine, which samplers count as busy: with 2 ms naps, 9% of a tinygrad test run's samples.)
FIRST_US, LAST_US = 20, 20000
_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())  # SYS_futex (else the naps are usleep's)
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
# The kick's futex wake keeps the GIL (PyDLL): a wake returns in microseconds, and a call that let the GIL go would
# hand it to the woken engine thread, leaving the kicking client to wait a switch interval to get it back.
_wake = ctypes.PyDLL(None).syscall
_wake.restype = ctypes.c_long
I32, I64 = ir.IntType(32), ir.IntType(64)
_SIG = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                        ctypes.c_int64, ctypes.c_int64)
_fn: list = []  # the compiled wait, once built (None: it could not be)
_lock = threading.Lock()


def _build():
    """`i64 wait(u64 *addrs, u64 *seen, i64 n, i64 *kick, i64 timeout_us, i64 first_us)`: the index of the first
    doorbell (*addrs[i]) that is not seen[i], -2 when *kick is set, -1 after `timeout_us` microseconds. It looks
    again after `first_us`, then after twice as long each time, up to max(LAST_US, first_us)."""
    m = engine().module("doorbell")
    usleep = ir.Function(m, ir.FunctionType(I32, [I32]), "usleep")
    syscall = ir.Function(m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
    fn = ir.Function(m, ir.FunctionType(I64, [ir.PointerType(), ir.PointerType(), I64, ir.PointerType(), I64, I64]),
                     "doorbell_wait")
    addrs, seen, n, kick, timeout, first = fn.args
    entry, look, scan, check, moved, idle, kicked, nap, stop = (fn.append_basic_block(x) for x in (
        "entry", "look", "scan", "check", "moved", "idle", "kicked", "nap", "timeout"))
    b = ir.IRBuilder(entry)
    b.branch(look)
    b.position_at_end(look)
    waited, us = b.phi(I64), b.phi(I64)
    waited.add_incoming(I64(0), entry)
    us.add_incoming(first, entry)
    b.branch(scan)
    b.position_at_end(scan)
    i = b.phi(I64)
    i.add_incoming(I64(0), look)
    b.cbranch(b.icmp_signed("<", i, n), check, idle)
    b.position_at_end(check)
    bell = b.inttoptr(b.load(b.gep(addrs, [i], source_etype=I64), typ=I64), ir.PointerType())
    now = b.load_atomic(bell, "monotonic", 8, typ=I64)
    i.add_incoming(b.add(i, I64(1)), check)
    b.cbranch(b.icmp_unsigned("!=", now, b.load(b.gep(seen, [i], source_etype=I64), typ=I64)), moved, scan)
    b.position_at_end(moved)
    b.ret(i)
    b.position_at_end(idle)
    b.cbranch(b.icmp_unsigned("!=", b.load_atomic(kick, "monotonic", 8, typ=I64), I64(0)), kicked, nap)
    b.position_at_end(kicked)
    b.ret(I64(-2))
    b.position_at_end(nap)
    if _FUTEX is None:
        b.call(usleep, [b.trunc(us, I32)])
    else:  # a futex wait on the kick word: a kick wakes it at once, and profilers see a blocked thread
        ts = b.alloca(ir.ArrayType(I64, 2))
        b.store(b.udiv(us, I64(1_000_000)), b.gep(ts, [I32(0), I32(0)]))
        b.store(b.mul(b.urem(us, I64(1_000_000)), I64(1000)), b.gep(ts, [I32(0), I32(1)]))
        b.call(syscall, [I64(_FUTEX), kick, I64(FUTEX_WAIT_PRIVATE), I64(0), ts, I64(0), I64(0)])
    later = b.add(waited, us)
    waited.add_incoming(later, nap)
    twice = b.shl(us, I64(1))
    most = b.select(b.icmp_signed("<", first, I64(LAST_US)), I64(LAST_US), first)
    us.add_incoming(b.select(b.icmp_signed("<", twice, most), twice, most), nap)
    b.cbranch(b.icmp_signed("<", later, timeout), look, stop)
    ir.IRBuilder(stop).ret(I64(-1))
    return _SIG(engine().compile(m, "doorbell_wait", f"doorbell_wait first_us {LAST_US} {_FUTEX}"))


def _wait_fn():
    with _lock:
        if not _fn:
            try:
                _fn.append(_build())
            except Closed:
                return None
        return _fn[0]


class Doorbells:
    """What the idle engine watches: each queue's doorbell against the value its last turn served."""

    def __init__(self) -> None:
        self.kicked = np.zeros(1, np.int64)
        self.kicks = 0  # kicks so far: a client acted since a count was read (GPUDevice.revalidate)
        self._futex_args = (ctypes.c_long(_FUTEX or 0), ctypes.c_void_p(self.kicked.ctypes.data),
                            ctypes.c_long(FUTEX_WAKE_PRIVATE), ctypes.c_long(1))
        self.wake = threading.Event()
        self.announced = False  # every doorbell store is followed by a kick: no looks needed (module docstring)

    def kick(self) -> None:
        self.kicks += 1
        self.kicked[0] = 1
        if _FUTEX is not None:
            _wake(*self._futex_args)
        self.wake.set()

    def wait(self, queues: list, timeout: float) -> None:
        """Until a doorbell of `queues` moves past the value served, a kick, or `timeout` seconds."""
        fn = _wait_fn()
        if fn is None or not GATE.enter():
            self.wake.wait(timeout)
        else:
            try:
                addrs = np.array([q.gpu.doorbells.ctypes.data + 8 * q.doorbell for q in queues], np.uint64)
                seen = np.array([q.rang for q in queues], np.uint64)
                us = int(timeout * 1e6)
                fn(addrs.ctypes.data, seen.ctypes.data, len(queues), self.kicked.ctypes.data, us,
                   us if self.announced else FIRST_US)
            finally:
                GATE.leave()
        self.kicked[0] = 0
        self.wake.clear()
