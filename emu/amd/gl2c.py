"""The GPU's L2 cache (GL2C) as hwemu models it for the performance counters GL2C_HIT and GL2C_MISS.

The hardware's figures: 128-byte lines, 16-way set associative, split into channels (one GL2C instance each) that
the GPU's memory addresses are interleaved over (RDNA whitepaper; the amdgpu-userland notes on RDNA caches), of the
chip's L2 size (`Target.l2_kb`: 6 MiB on Navi 31, 8 MiB on Navi 48, as AMD's product pages give it). ROCm's
counter definitions: GL2C_HIT counts the requests the L2 served from a line it held, GL2C_MISS those it had to fetch
(through the efficiency arbiter, from memory).

hwemu's model, deterministic and documented: a channel holds L2_CHANNEL_KB (so Navi 31 has 24 channels, Navi 48
32); line n (address >> 7) lives in channel n % channels, in set (n // channels) % sets of it, each set kept in
least-recently-used order; a request, read or write, hits when its line is in its set, and otherwise misses and
brings the line in, evicting the set's least recently used line when the set's ways are full. The L0 and L1
caches in front of the L2 are not modelled: every request an instruction makes reaches the L2.

The state is one array of tags (line + 1; 0: an empty way) and one of the request that last used each way, per set;
`requests` runs many requests in native code (a counted dispatch's, emu.amd.accesses), `request` one in Python.
"""
from __future__ import annotations

import ctypes
import hashlib

import numpy as np

from emu.pcode.llvmjit import Closed, engine

LINE = 128  # bytes per line
WAYS = 16
L2_CHANNEL_KB = 256

_REQUESTS = f"""
define void @requests(ptr %tags, ptr %used, ptr %clock, i64 %channels, i64 %sets, ptr %lines, i64 %n, ptr %hits,
                      ptr %misses) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %next]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %request, label %done
request:
  %lp = getelementptr i64, ptr %lines, i64 %i
  %ln = load i64, ptr %lp
  %ch = urem i64 %ln, %channels
  %q = udiv i64 %ln, %channels
  %set = urem i64 %q, %sets
  %s0 = mul i64 %ch, %sets
  %s1 = add i64 %s0, %set
  %row = mul i64 %s1, {WAYS}
  %tag = add i64 %ln, 1
  %c0 = load i64, ptr %clock
  %c = add i64 %c0, 1
  store i64 %c, ptr %clock
  br label %way
way:
  %w = phi i64 [0, %request], [%w1, %other]
  %lru = phi i64 [0, %request], [%lru1, %other]
  %oldest = phi i64 [-1, %request], [%oldest1, %other]
  %k = add i64 %row, %w
  %tp = getelementptr i64, ptr %tags, i64 %k
  %t = load i64, ptr %tp
  %found = icmp eq i64 %t, %tag
  br i1 %found, label %hit, label %other
other:
  %up = getelementptr i64, ptr %used, i64 %k
  %u = load i64, ptr %up
  %older = icmp ult i64 %u, %oldest
  %lru1 = select i1 %older, i64 %w, i64 %lru
  %oldest1 = select i1 %older, i64 %u, i64 %oldest
  %w1 = add i64 %w, 1
  %again = icmp ult i64 %w1, {WAYS}
  br i1 %again, label %way, label %miss
hit:
  br label %use
miss:
  %vk = add i64 %row, %lru1
  %vtp = getelementptr i64, ptr %tags, i64 %vk
  store i64 %tag, ptr %vtp
  br label %use
use:
  %at = phi i64 [%k, %hit], [%vk, %miss]
  %count = phi ptr [%hits, %hit], [%misses, %miss]
  %atp = getelementptr i64, ptr %used, i64 %at
  store i64 %c, ptr %atp
  %cp = getelementptr i64, ptr %count, i64 %ch
  %n0 = load i64, ptr %cp
  %n1 = add i64 %n0, 1
  store i64 %n1, ptr %cp
  br label %next
next:
  %i1 = add i64 %i, 1
  br label %loop
done:
  ret void
}}
"""
_native: list = []  # the compiled `requests` (ctypes), once made


def channels(l2_kb: int) -> int:
    """The channels (GL2C instances) of an L2 of `l2_kb` KiB."""
    return max(l2_kb // L2_CHANNEL_KB, 1)


def _requests():
    """The native `requests` (compiled once per machine; None while the process exits)."""
    if not _native:
        try:
            e = engine("gl2c")
            text = f'target triple = "{e.triple}"\ntarget datalayout = "{e.data_layout}"\n{_REQUESTS}'
            addr = e.compile(text, "requests", f"gl2c {hashlib.sha256(text.encode()).hexdigest()[:16]}")
        except Closed:
            return None
        _native.append(ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(addr))
    return _native[0]


class L2:
    """The L2 of one chip: `request(line)` says hit or miss and counts it per channel; `requests(lines)` runs many."""

    def __init__(self, l2_kb: int):
        self.channels = channels(l2_kb)
        self.sets = max(l2_kb * 1024 // self.channels // (LINE * WAYS), 1)
        self.tags = np.zeros((self.channels * self.sets, WAYS), np.int64)
        self.used = np.zeros_like(self.tags)  # the request that last used each way (0: never)
        self.clock = np.zeros(1, np.int64)
        self.hits = np.zeros(self.channels, np.int64)
        self.misses = np.zeros(self.channels, np.int64)

    def request(self, line: int) -> bool:
        """A request for line `line` (an address >> 7): True when it hits."""
        channel = line % self.channels
        row = channel * self.sets + line // self.channels % self.sets
        self.clock[0] += 1
        tags, used = self.tags[row], self.used[row]
        found = np.flatnonzero(tags == line + 1)
        way = int(found[0]) if found.size else int(np.argmin(used))
        (self.hits if found.size else self.misses)[channel] += 1
        tags[way], used[way] = line + 1, self.clock[0]
        return bool(found.size)

    def requests(self, lines: np.ndarray) -> None:
        """Requests for `lines` (uint64 line numbers), in order, in native code (in Python while the process exits)."""
        fn = _requests()
        if fn is None:
            for n in lines.tolist():
                self.request(n)
            return
        lines = np.ascontiguousarray(lines, np.uint64)
        fn(self.tags.ctypes.data, self.used.ctypes.data, self.clock.ctypes.data, self.channels, self.sets,
           lines.ctypes.data, len(lines), self.hits.ctypes.data, self.misses.ctypes.data)

    def take(self) -> tuple[list[int], list[int]]:
        """The hits and misses per channel since the last take."""
        out = self.hits.tolist(), self.misses.tolist()
        self.hits[:] = 0
        self.misses[:] = 0
        return out
