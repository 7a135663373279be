"""GPU virtual memory: a 48-bit virtual address space mapped page-granularly onto host buffers.

Every access the emulated GPU makes goes through a `VM`. A mapping covers whole 4 KiB pages of the VA space
and is backed by a host buffer (a numpy uint8 array the VM allocated, or any writable buffer a client maps);
translation finds the mapping of each byte an access touches, so emulated code can reach nothing but the
mapped ranges whatever address it computes. An access to an unmapped page, or a store to a read-only
mapping, is a fault: `GPUFault` carrying a `FaultRecord`. A faulting access changes nothing (all lanes are
checked before any byte is written) and the VM stays usable.

API (addresses are ints or uint64 arrays; lanes are the rows of the per-lane arrays):
  vm = VM()
  vm.map(va, buf, writable=True, name='')           map a host buffer at page-aligned va (whole pages)
  vm.alloc(size, align=PAGE, writable=True, name='') -> va   zeroed VM-owned backing, a guard page after it
  vm.unmap(va)                                       remove the mapping that starts at va
  vm.mapping(va) -> Mapping | None                   the mapping holding va
  vm.read(va, n) -> bytes; vm.write(va, data)        host side (ignores read-only: the host owns the memory)
  vm.load(addr, bits, active) -> uint64[lanes]       lane loads of 8/16/32/64 bits, little-endian, any alignment
  vm.store(addr, bits, value, active)                lane stores; inactive lanes neither fault nor write
  vm.gather(addr, nbytes, active) -> uint8[lanes, nbytes]; vm.scatter(addr, data, active)   any access size
  vm.atomic(addr, bits, active, fn) -> old values    read-modify-write applied lane by lane in lane order
"""
from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

PAGE = 4096
VA_BITS = 48
VA_LIMIT = 1 << VA_BITS
ALLOC_BASE = 0x1_0000_0000  # VM.alloc never hands out the low 4 GiB, so small integers are never valid pointers


@dataclass
class FaultRecord:
    """What went wrong, where. The VM fills kind..write; whoever catches the GPUFault on its way out (the wave
    executor, the dispatcher) assigns the fields it knows (dispatch, workgroup, wave, pc, instruction, active_lanes)
    before re-raising it."""
    kind: str  # 'unmapped', 'read-only' (memory); executors add their own ('illegal-instruction', 'trap', ...)
    addresses: tuple[int, ...] = ()  # the faulting address of each faulting lane
    lanes: tuple[int, ...] = ()  # the faulting lanes (indices into the access's lane arrays)
    bits: int = 0  # access size per lane in bits
    write: bool = False
    dispatch: int | None = None
    workgroup: tuple[int, int, int] | None = None
    wave: int | None = None
    pc: int | None = None
    instruction: str | None = None
    active_lanes: tuple[int, ...] | None = None  # lanes EXEC enabled for the instruction
    detail: str = ""
    report: object | None = field(default=None, repr=False, compare=False)  # emu.amd.debug.fault.FaultReport

    def __str__(self) -> str:
        return self.report.text() if self.report is not None else self.line()

    def line(self) -> str:
        """The record in one line."""
        parts = [f"GPU fault: {self.kind}"]
        if self.bits:
            shown = ", ".join(f"lane {ln}: {a:#x}" for ln, a in zip(self.lanes[:4], self.addresses[:4], strict=False))
            more = f" (+{len(self.lanes) - 4} more)" if len(self.lanes) > 4 else ""
            parts.append(f"{'write' if self.write else 'read'} of {self.bits} bits at {shown}{more}")
        if self.detail:
            parts.append(self.detail)
        where = [f"{k} {v}" for k, v in (("dispatch", self.dispatch), ("workgroup", self.workgroup),
                                          ("wave", self.wave)) if v is not None]
        if self.pc is not None:
            where.append(f"pc {self.pc:#x}")
        if self.instruction:
            where.append(repr(self.instruction))
        if self.active_lanes is not None:
            where.append(f"active lanes {_ranges(self.active_lanes)}")
        if where:
            parts.append("at " + ", ".join(where))
        return "; ".join(parts)


class GPUFault(Exception):
    """A fault of emulated GPU code; `.record` says what and where (re-exported as emu.amd.GPUFault)."""

    def __init__(self, record: FaultRecord):
        super().__init__(record)
        self.record = record

    def __str__(self) -> str:
        return str(self.record)

    @property
    def report(self):
        """The fault report (emu.amd.debug.fault.FaultReport; its .text() is str(self)), or None."""
        return self.record.report


@dataclass(eq=False)
class Mapping:
    va: int
    size: int
    buf: np.ndarray = field(repr=False)  # uint8 view of the backing memory, `size` bytes
    writable: bool = True
    name: str = ""
    user: bool = False  # the backing is pages a client owns (USERPTR): it may unmap them behind the VM's back
    host: int = field(init=False, repr=False)  # the backing's host address

    def __post_init__(self) -> None:
        self.host = self.buf.ctypes.data

    @property
    def end(self) -> int:
        return self.va + self.size

    def row(self) -> tuple[int, int, int, int]:
        """The mapping's entry in the native table: va, end, host address - va (mod 2^64), writable."""
        return self.va, self.end, (self.host - self.va) % 2**64, int(self.writable)


class _Index(NamedTuple):
    """The mappings sorted by va, with search arrays: replaced whole on every change, so a reader that took it
    once sees one consistent address space while other threads map and unmap. A change builds the next index from
    this one in C-level copies (no per-mapping Python work), so mapping stays cheap with thousands of buffers."""
    maps: tuple[Mapping, ...]
    vas: list[int]
    starts: np.ndarray
    ends: np.ndarray
    writable: np.ndarray
    table: np.ndarray  # for native code: [count, then per mapping: va, end, host address - va, writable]

    def insert(self, i: int, m: Mapping) -> _Index:
        """This index with `m` as mapping i."""
        vas = self.vas.copy()
        vas.insert(i, m.va)
        t = self.table
        table = np.concatenate(((t[:1] + 1), t[1:1 + 4 * i], np.array(m.row(), np.uint64), t[1 + 4 * i:]))
        return _Index(self.maps[:i] + (m,) + self.maps[i:], vas, np.insert(self.starts, i, np.uint64(m.va)),
                      np.insert(self.ends, i, np.uint64(m.end)), np.insert(self.writable, i, m.writable), table)

    def remove(self, i: int) -> _Index:
        """This index without mapping i."""
        t = self.table
        table = np.concatenate(((t[:1] - 1), t[1:1 + 4 * i], t[5 + 4 * i:]))
        return _Index(self.maps[:i] + self.maps[i + 1:], self.vas[:i] + self.vas[i + 1:], np.delete(self.starts, i),
                      np.delete(self.ends, i), np.delete(self.writable, i), table)


_EMPTY = _Index((), [], np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, bool), np.zeros(1, np.uint64))
_U64, _NO_NEXT = np.uint64, np.uint64(1 << 63)


def free_va(ix: _Index, size: int, align: int) -> int:
    """Where VM.alloc puts `size` bytes (whole pages): the lowest `align`-aligned va from ALLOC_BASE with a free page
    between it and the mapping before it and between its end and the next mapping."""
    if size + PAGE >= VA_LIMIT:
        return ALLOC_BASE  # VM.map refuses it, naming the VA space
    guard_ends = ix.ends + _U64(PAGE)  # where an allocation after each mapping may start
    a = _U64(align)
    after = guard_ends[np.searchsorted(guard_ends, ALLOC_BASE, side="right"):]
    cand = np.concatenate((np.array([ALLOC_BASE], np.uint64), (after + (a - _U64(1))) // a * a))
    nxt = np.searchsorted(guard_ends, cand, side="right")  # the first mapping not wholly before each candidate
    limit = np.append(ix.starts, _NO_NEXT)[nxt]
    fits = (limit >= cand) & (limit - cand >= _U64(size + PAGE))
    return int(cand[int(np.argmax(fits))])  # the last candidate has no mapping after it: one always fits


class VM:
    """A GPU virtual address space; see the module docstring for the API. Safe to use from several threads:
    changes are serialized, accesses see the mappings as they were when the access began."""

    def __init__(self) -> None:
        self._ix = _EMPTY
        self._lock = threading.RLock()
        self.user: tuple[Mapping, ...] = ()  # the mappings of client-owned pages (Mapping.user), for revalidation
        self._invalid: dict[int, Mapping] = {}  # va -> a user mapping invalidated: accesses fault, unmap(va) works

    # -- mappings ----------------------------------------------------------------------------------------------
    def map(self, va: int, buf: np.ndarray | memoryview | bytearray, writable: bool = True, name: str = "",
            user: bool = False) -> Mapping:
        """Map `buf` (whole pages; the VM keeps a view, not a copy) at page-aligned `va`; `user`: pages a client
        owns, which the device revalidates (emu.amd.device.GPUDevice.revalidate) before it accesses memory."""
        if isinstance(buf, np.ndarray) and not buf.flags.c_contiguous:
            raise ValueError(f"map {name!r}: backing buffer must be contiguous")
        mem = buf.reshape(-1).view(np.uint8) if isinstance(buf, np.ndarray) else np.frombuffer(buf, np.uint8)
        size = mem.size
        if va % PAGE or size % PAGE or size == 0:
            raise ValueError(f"map {name!r}: va {va:#x} and size {size:#x} must be non-zero multiples of {PAGE:#x}")
        if va < 0 or va + size > VA_LIMIT:
            raise ValueError(f"map {name!r}: [{va:#x}, {va + size:#x}) is outside the {VA_BITS}-bit VA space")
        if not mem.flags.writeable:
            raise ValueError(f"map {name!r}: backing buffer is not writable host memory")
        with self._lock:
            maps = self._ix.maps
            i = bisect.bisect_right(self._ix.vas, va)
            if (i and maps[i - 1].end > va) or (i < len(maps) and maps[i].va < va + size):
                raise ValueError(f"map {name!r}: [{va:#x}, {va + size:#x}) overlaps an existing mapping")
            m = Mapping(va, size, mem, writable, name, user)
            self._ix = self._ix.insert(i, m)
            if user:
                self.user += (m,)
        return m

    def alloc(self, size: int, align: int = PAGE, writable: bool = True, name: str = "") -> int:
        """Map `size` bytes (rounded up to pages) of fresh zeroed memory at a free VA; returns the VA.

        A free guard page follows each allocation, so running off its end faults."""
        if size <= 0 or align <= 0 or align & (align - 1):
            raise ValueError(f"alloc {name!r}: bad size {size} or alignment {align} (power of two)")
        size = -(-size // PAGE) * PAGE
        align = max(align, PAGE)
        with self._lock:
            va = free_va(self._ix, size, align)
            self.map(va, np.zeros(size, np.uint8), writable, name)
        return va

    def unmap(self, va: int) -> Mapping:
        """Remove the mapping that starts at `va`; returns it."""
        with self._lock:
            if va in self._invalid:
                return self._invalid.pop(va)
            ix = self._ix
            i = bisect.bisect_left(ix.vas, va)
            if i < len(ix.vas) and ix.vas[i] == va:
                m = ix.maps[i]
                self._ix = ix.remove(i)
                self.user = tuple(u for u in self.user if u is not m)
                return m
        raise ValueError(f"unmap: no mapping starts at {va:#x}")

    def invalidate(self, m: Mapping) -> None:
        """Take mapping `m` out of the address space (accesses fault as unmapped) while unmap(m.va) still finds it:
        the driver's invalidation of user pages the client unmapped."""
        with self._lock:
            if self.mapping(m.va) is m:
                self.unmap(m.va)
                self._invalid[m.va] = m

    def mapping(self, va: int) -> Mapping | None:
        ix = self._ix
        i = bisect.bisect_right(ix.vas, va) - 1
        return ix.maps[i] if i >= 0 and va < ix.maps[i].end else None

    @property
    def mappings(self) -> tuple[Mapping, ...]:
        return self._ix.maps

    @property
    def index(self) -> _Index:
        """The mappings now, as one immutable snapshot: `.table` is what native code reads; while the snapshot is
        held, the host buffers its table points into stay alive (even if another thread unmaps them)."""
        return self._ix

    # -- translation --------------------------------------------------------------------------------------------
    def _translate(self, addr: np.ndarray, nbytes: int, active: np.ndarray | None, write: bool):
        """Check an access of `nbytes` per lane; returns (lanes, [(mapping, selector, offsets)]): `offsets` are
        host offsets [lanes, nbytes] into the mapping for the lanes `selector` picks. Raises GPUFault naming every
        bad lane."""
        ix = self._ix
        addr = np.asarray(addr, np.uint64).reshape(-1)
        lanes = _lanes(addr, active)
        a = addr[lanes]
        byte = a[:, None] + np.arange(nbytes, dtype=np.uint64)  # wraps at 2**64: the lane's first byte then faults
        if (m := _one_mapping(ix, a, nbytes, write)) is not None:
            return lanes, [(m, slice(None), byte - np.uint64(m.va))]
        flat = byte.reshape(-1)
        i = np.searchsorted(ix.starts, flat, side="right").astype(np.int64) - 1
        ok = i >= 0
        ok[ok] = flat[ok] < ix.ends[i[ok]]
        which = np.where(ok, i, -1).reshape(byte.shape)
        bad = (which < 0).any(axis=1)
        kind = "unmapped"
        if not bad.any() and write:
            bad = ~ix.writable[which].all(axis=1)
            kind = "read-only"
        if bad.any():
            raise GPUFault(FaultRecord(kind, tuple(int(x) for x in a[bad]), tuple(int(x) for x in lanes[bad]),
                                       nbytes * 8, write))
        off = byte - ix.starts[which]
        return lanes, [(ix.maps[int(k)], which == k, off) for k in np.unique(which)]

    def _aligned(self, addr, nbytes: int, active, write: bool):
        """(lanes, mapping, element indices) when all active lanes hit one mapping at multiples of nbytes, else None:
        then the access is one typed numpy gather/scatter."""
        addr = np.asarray(addr, np.uint64).reshape(-1)
        lanes = _lanes(addr, active)
        a = addr[lanes]
        m = _one_mapping(self._ix, a, nbytes, write)
        if m is None:
            return None
        off = a - np.uint64(m.va)
        if (off & np.uint64(nbytes - 1)).any():
            return None
        return lanes, m.buf.view(f"<u{nbytes}"), (off >> np.uint64(nbytes.bit_length() - 1)).astype(np.intp)

    # -- lane accesses ------------------------------------------------------------------------------------------
    def gather(self, addr: np.ndarray, nbytes: int, active: np.ndarray | None = None) -> np.ndarray:
        """Read `nbytes` at each active lane's address: uint8 [lanes, nbytes], zeros for inactive lanes."""
        lanes, parts = self._translate(addr, nbytes, active, write=False)
        out = np.zeros((np.asarray(addr).size, nbytes), np.uint8)
        got = np.empty((lanes.size, nbytes), np.uint8)
        for m, sel, off in parts:
            got[sel] = m.buf[off[sel].astype(np.intp)]
        out[lanes] = got
        return out

    def scatter(self, addr: np.ndarray, data: np.ndarray, active: np.ndarray | None = None) -> None:
        """Write data[lane, :] at each active lane's address (uint8 [lanes, nbytes]). Higher lanes win overlaps."""
        data = np.asarray(data, np.uint8)
        lanes, parts = self._translate(addr, data.shape[1], active, write=True)
        src = data[lanes]
        for m, sel, off in parts:
            m.buf[off[sel].astype(np.intp)] = src[sel]

    def load(self, addr: np.ndarray, bits: int, active: np.ndarray | None = None) -> np.ndarray:
        """Little-endian loads of `bits` (8/16/32/64) per lane, zero-extended to uint64 (0 for inactive lanes)."""
        n = _nbytes(bits)
        if (fast := self._aligned(addr, n, active, write=False)) is not None:
            lanes, mem, idx = fast
            out = np.zeros(np.asarray(addr).size, np.uint64)
            out[lanes] = mem[idx]
            return out
        raw = self.gather(addr, n, active)
        return raw.view(f"<u{n}")[:, 0].astype(np.uint64)

    def store(self, addr: np.ndarray, bits: int, value: np.ndarray, active: np.ndarray | None = None) -> None:
        """Little-endian stores of the low `bits` (8/16/32/64) of each lane's value."""
        n = _nbytes(bits)
        v = np.ascontiguousarray(np.broadcast_to(np.asarray(value).astype("<u8"), np.asarray(addr).shape).ravel())
        if (fast := self._aligned(addr, n, active, write=True)) is not None:
            lanes, mem, idx = fast
            mem[idx] = v[lanes].astype(f"<u{n}")
            return
        self.scatter(addr, v.view(np.uint8).reshape(-1, 8)[:, :n], active)

    def atomic(self, addr: np.ndarray, bits: int, active: np.ndarray | None,
               fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """Atomic read-modify-write: for the active lanes in lane order, mem = fn(old, lanes); returns old per lane.

        fn gets the old values (uint64) and the lane indices they belong to and returns the new values. Lanes
        hitting the same address are applied one after the other (each sees the previous lane's result)."""
        addr = np.asarray(addr, np.uint64).reshape(-1)
        with self._lock:  # read-modify-write: atomic with respect to the other threads using this VM
            return self._atomic(addr, bits, active, fn)

    def _atomic(self, addr, bits, active, fn) -> np.ndarray:
        self._translate(addr, _nbytes(bits), active, write=True)  # fault before anything changes
        old = np.zeros(addr.size, np.uint64)
        todo = _lanes(addr, active)
        while todo.size:
            _, first = np.unique(addr[todo], return_index=True)  # first lane of each address this round
            now = todo[np.sort(first)]
            mask = np.zeros(addr.size, bool)
            mask[now] = True
            old[now] = self.load(addr, bits, mask)[now]
            self.store(addr, bits, _put(addr.size, now, fn(old[now], now)), mask)
            todo = np.setdiff1d(todo, now, assume_unique=True)
        return old

    def check_range(self, va: int, n: int, write: bool) -> None:
        """Raise the GPUFault a device access of n bytes at va would raise (unmapped page, read-only for writes)."""
        pos = va
        while pos < va + n:
            m = self.mapping(pos) if 0 <= pos < VA_LIMIT else None
            if m is None or (write and not m.writable):
                raise GPUFault(FaultRecord("unmapped" if m is None else "read-only", (pos,), (0,), 8, write,
                                           detail=f"{'write' if write else 'read'} of {n} bytes at {va:#x}"))
            pos = m.end

    # -- host side ----------------------------------------------------------------------------------------------
    def read(self, va: int, n: int) -> bytes:
        """Host read of n bytes at va (must be mapped)."""
        if n <= 0:
            return b""
        return bytes(self._host(va, n, None))

    def write(self, va: int, data: bytes | bytearray | memoryview | np.ndarray) -> None:
        """Host write at va (must be mapped; read-only mappings too: the host owns the memory)."""
        src = np.frombuffer(memoryview(data).cast("B"), np.uint8) if not isinstance(data, np.ndarray) \
            else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if src.size:
            self._host(va, src.size, src)

    def _host(self, va: int, n: int, src: np.ndarray | None) -> np.ndarray:
        segs, pos = [], 0  # (mapping, offset in it, offset in the access, length); all checked before any copy
        while pos < n:
            m = self.mapping(va + pos) if 0 <= va + pos < VA_LIMIT else None
            if m is None:
                raise GPUFault(FaultRecord("unmapped", (va + pos,), (), 0, src is not None,
                                           detail=f"host {'write' if src is not None else 'read'} of {n} bytes "
                                                  f"at {va:#x}"))
            k = min(n - pos, m.end - (va + pos))
            segs.append((m, va + pos - m.va, pos, k))
            pos += k
        out = np.empty(n, np.uint8) if src is None else src
        for m, o, p, k in segs:
            if src is None:
                out[p:p + k] = m.buf[o:o + k]
            else:
                m.buf[o:o + k] = src[p:p + k]
        return out


def _one_mapping(ix: _Index, a: np.ndarray, nbytes: int, write: bool) -> Mapping | None:
    """The mapping holding every byte of every access when one does (the common case), else None."""
    if not a.size:
        return None
    lo, hi = int(a.min()), int(a.max()) + nbytes - 1
    i = bisect.bisect_right(ix.vas, lo) - 1
    if i >= 0 and hi < ix.maps[i].end and (ix.maps[i].writable or not write):
        return ix.maps[i]
    return None


def _lanes(addr: np.ndarray, active: np.ndarray | None) -> np.ndarray:
    """Indices of the active lanes (all lanes when active is None)."""
    if active is None:
        return np.arange(addr.size)
    active = np.asarray(active, bool).reshape(-1)
    if active.size != addr.size:
        raise ValueError(f"{active.size} active flags for {addr.size} lane addresses")
    return np.flatnonzero(active)


def _nbytes(bits: int) -> int:
    if bits not in (8, 16, 32, 64):
        raise ValueError(f"access size must be 8, 16, 32 or 64 bits, not {bits}")
    return bits // 8


def _put(n: int, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
    out = np.zeros(n, np.uint64)
    out[idx] = vals
    return out


def _ranges(lanes: tuple[int, ...]) -> str:
    """'0-31' style text for a set of lanes."""
    out, i = [], 0
    while i < len(lanes):
        j = i
        while j + 1 < len(lanes) and lanes[j + 1] == lanes[j] + 1:
            j += 1
        out.append(str(lanes[i]) if i == j else f"{lanes[i]}-{lanes[j]}")
        i = j + 1
    return ",".join(out) or "none"
