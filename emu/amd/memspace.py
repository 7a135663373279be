"""The memory spaces a wave's instructions address, each with the lane-access interface the pcode uses:
`load(addr, bits, active) -> uint64[lanes]` and `store(addr, bits, value, active)`.

- `LDS`: the workgroup's local data share; accesses past its size read 0 and drop writes, as hardware does.
- `Scratch`: one wave's private memory, lane-interleaved dword by dword in the VM (the ISA's scratch swizzle:
  dword d of lane l lives at base + (d * lanes + l) * 4).
- `Flat`: the flat address space: the shared and private apertures route to LDS and scratch, the rest to the VM.
- `Buffer`: lanes outside a buffer resource's range read 0 and drop their writes.
- `Swizzled`: a swizzled buffer resource's elements, interleaved with those of other lanes (emu.amd.rsrc).
"""
from __future__ import annotations

import numpy as np

from emu.amd.memory import FaultRecord, GPUFault
from emu.amd.regs import FLAT_SCRATCH

# Apertures of the flat address space (their bases' high 32 bits are what the aperture registers report).
SHARED_APERTURE = 0x0001_0000_0000_0000
PRIVATE_APERTURE = 0x0002_0000_0000_0000
APERTURE_SIZE = 1 << 32

U64 = np.uint64


class LDS:
    def __init__(self, size: int):
        self.size = size
        self.mem = np.zeros(max(size, 4) + 8, np.uint8)  # slack so a straddling access never indexes past

    def _ok(self, addr: np.ndarray, nbytes: int, active: np.ndarray | None) -> np.ndarray:
        ok = addr.astype(np.int64) + nbytes <= self.size
        return ok if active is None else ok & active

    def load(self, addr, bits: int, active=None) -> np.ndarray:
        addr = np.asarray(addr, U64).reshape(-1) & U64(0xFFFFFFFF)
        n = bits // 8
        ok = self._ok(addr, n, active)
        a = np.where(ok, addr, 0).astype(np.intp)
        raw = self.mem[a[:, None] + np.arange(n)]
        out = raw.view(f"<u{n}")[:, 0].astype(U64)
        return np.where(ok, out, U64(0))

    def store(self, addr, bits: int, value, active=None) -> None:
        addr = np.asarray(addr, U64).reshape(-1) & U64(0xFFFFFFFF)
        n = bits // 8
        ok = self._ok(addr, n, active)
        v = np.broadcast_to(np.asarray(value, U64), addr.shape).astype("<u8")
        data = v.view(np.uint8).reshape(-1, 8)[ok, :n]
        # byte addresses in lane order: numpy assigns repeated indices in order, so the highest lane wins
        self.mem[(addr[ok].astype(np.intp)[:, None] + np.arange(n)).ravel()] = data.ravel()


class Scratch:
    """Private memory of one wave through the VM, lane-interleaved per dword. A wave given no scratch
    (TMPRING_SIZE.WAVESIZE 0, or a free-standing Wave) faults on every access, naming the private aperture.
    Where scratch is not architected (gfx90a) the base is what the kernel wrote to FLAT_SCRATCH, read from the wave's
    scalar registers `sgpr` at each access; else it is `base`, the wave's slot that the CP assigned."""

    def __init__(self, vm, base: int, lanes: int, size_per_lane: int, sgpr: np.ndarray | None = None):
        self.vm, self.base, self.lanes, self.size, self.sgpr = vm, base, lanes, size_per_lane, sgpr
        self.lane = np.arange(lanes, dtype=U64)

    def _phys(self, off: np.ndarray) -> np.ndarray:
        base = self.base if self.sgpr is None else int(self.sgpr[FLAT_SCRATCH]) | int(self.sgpr[FLAT_SCRATCH + 1]) << 32
        return U64(base) + ((off >> U64(2)) * U64(self.lanes) + self.lane[:off.size]) * U64(4) + (off & U64(3))

    def _none(self, off: np.ndarray, bits: int, active, write: bool) -> None:
        lanes = np.flatnonzero(np.ones(off.size, bool) if active is None else np.asarray(active, bool))
        if lanes.size:
            raise GPUFault(FaultRecord("unmapped", tuple(int(PRIVATE_APERTURE + o) for o in off[lanes]),
                                       tuple(int(x) for x in lanes), bits, write,
                                       detail="private aperture: the wave has no scratch (TMPRING_SIZE.WAVESIZE 0)"))

    def load(self, addr, bits: int, active=None) -> np.ndarray:
        off = np.asarray(addr, U64).reshape(-1) & U64(0xFFFFFFFF)
        if not self.size:
            self._none(off, bits, active, False)
            return np.zeros(off.size, U64)
        if bits <= 32:
            return self.vm.load(self._phys(off), bits, active)
        out = np.zeros(off.size, U64)
        for i in range(bits // 32):
            out |= self.vm.load(self._phys(off + U64(4 * i)), 32, active) << U64(32 * i)
        return out

    def store(self, addr, bits: int, value, active=None) -> None:
        off = np.asarray(addr, U64).reshape(-1) & U64(0xFFFFFFFF)
        if not self.size:
            self._none(off, bits, active, True)
            return
        value = np.broadcast_to(np.asarray(value, U64), off.shape)
        if bits <= 32:
            self.vm.store(self._phys(off), bits, value, active)
            return
        for i in range(bits // 32):
            self.vm.store(self._phys(off + U64(4 * i)), 32, value >> U64(32 * i), active)


class Flat:
    """Flat addresses: the shared aperture goes to LDS, the private aperture to scratch, the rest to the VM."""

    def __init__(self, vm, lds: LDS | None, scratch: Scratch | None):
        self.vm, self.lds, self.scratch = vm, lds, scratch

    def _split(self, addr, active):
        addr = np.asarray(addr, U64).reshape(-1)
        act = np.ones(addr.size, bool) if active is None else np.asarray(active, bool)
        shared = act & (addr >= U64(SHARED_APERTURE)) & (addr < U64(SHARED_APERTURE + APERTURE_SIZE))
        private = act & (addr >= U64(PRIVATE_APERTURE)) & (addr < U64(PRIVATE_APERTURE + APERTURE_SIZE))
        return addr, act & ~shared & ~private, shared, private

    def load(self, addr, bits: int, active=None) -> np.ndarray:
        addr, glob, shared, private = self._split(addr, active)
        out = self.vm.load(addr, bits, glob) if glob.any() else np.zeros(addr.size, U64)
        if shared.any():
            out = np.where(shared, self.lds.load(addr, bits, shared), out)
        if private.any():
            out = np.where(private, self.scratch.load(addr, bits, private), out)
        return out

    def store(self, addr, bits: int, value, active=None) -> None:
        addr, glob, shared, private = self._split(addr, active)
        if glob.any():
            self.vm.store(addr, bits, value, glob)
        if shared.any():
            self.lds.store(addr, bits, value, shared)
        if private.any():
            self.scratch.store(addr, bits, value, private)


class Buffer:
    """A space whose lanes outside [0, in_range) read 0 and drop writes (buffer resource range checking)."""

    def __init__(self, space, in_range: np.ndarray):
        self.space, self.in_range = space, in_range

    def load(self, addr, bits: int, active=None) -> np.ndarray:
        act = self.in_range if active is None else self.in_range & active
        return np.where(act, self.space.load(addr, bits, act), U64(0))

    def store(self, addr, bits: int, value, active=None) -> None:
        act = self.in_range if active is None else self.in_range & active
        self.space.store(addr, bits, value, act)



class Swizzled:
    """A swizzled buffer as each lane sees it: byte `o` of the lane's records is at `lane + o // element_size *
    element_size * index_stride + o % element_size` in `space` (`lane`: each lane's first byte). An access that spans
    elements is split at their boundaries."""

    def __init__(self, space, lane: np.ndarray, element_size: int, index_stride: int):
        self.space, self.lane, self.es, self.step = space, lane, element_size, element_size * index_stride

    def _at(self, off: np.ndarray) -> np.ndarray:
        es = U64(self.es)
        return self.lane + off // es * U64(self.step) + off % es

    def _pieces(self, addr, bits: int):
        off = np.asarray(addr, U64).reshape(-1)
        n = min(bits // 8, self.es)
        return off, n, range(0, bits // 8, n)

    def load(self, addr, bits: int, active=None) -> np.ndarray:
        off, n, starts = self._pieces(addr, bits)
        out = np.zeros(off.size, U64)
        for k in starts:
            out |= self.space.load(self._at(off + U64(k)), 8 * n, active) << U64(8 * k)
        return out

    def store(self, addr, bits: int, value, active=None) -> None:
        off, n, starts = self._pieces(addr, bits)
        value = np.broadcast_to(np.asarray(value, U64), off.shape)
        mask = U64((1 << 8 * n) - 1) if n < 8 else U64(0xFFFFFFFFFFFFFFFF)
        for k in starts:
            self.space.store(self._at(off + U64(k)), 8 * n, (value >> U64(8 * k)) & mask, active)
