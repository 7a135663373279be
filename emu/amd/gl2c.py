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
"""
from __future__ import annotations

from collections import OrderedDict

LINE = 128  # bytes per line
WAYS = 16
L2_CHANNEL_KB = 256


def channels(l2_kb: int) -> int:
    """The channels (GL2C instances) of an L2 of `l2_kb` KiB."""
    return max(l2_kb // L2_CHANNEL_KB, 1)


class L2:
    """The L2 of one chip: `request(line)` says hit or miss and counts it per channel."""

    def __init__(self, l2_kb: int):
        self.channels = channels(l2_kb)
        self.sets = max(l2_kb * 1024 // self.channels // (LINE * WAYS), 1)
        self._sets: dict[tuple[int, int], OrderedDict[int, None]] = {}
        self.hits = [0] * self.channels
        self.misses = [0] * self.channels

    def request(self, line: int) -> bool:
        """A request for line `line` (an address >> 7): True when it hits."""
        channel = line % self.channels
        key = (channel, line // self.channels % self.sets)
        s = self._sets.get(key)
        if s is None:
            s = self._sets[key] = OrderedDict()
        if line in s:
            s.move_to_end(line)
            self.hits[channel] += 1
            return True
        if len(s) >= WAYS:
            s.popitem(last=False)
        s[line] = None
        self.misses[channel] += 1
        return False

    def take(self) -> tuple[list[int], list[int]]:
        """The hits and misses per channel since the last take."""
        out = self.hits, self.misses
        self.hits, self.misses = [0] * self.channels, [0] * self.channels
        return out
