"""The lean interpreter's memory accesses: its fused global-memory and scalar-memory steps, and the LDS accesses of
its generated code.

A global load or store whose pcode moves whole dwords (`VDATA[32k+31:32k] = MEM[ADDR + 4k]`, or the store's
mirror image; read from the compiled IR, anything else declines) becomes one closure: the lanes' addresses as the
reference plan computes them, then, when every active lane's whole access lies in one mapping (writable for a
store) at dword-aligned addresses, one typed gather or scatter per dword. A scalar load of n dwords from one
mapping is one slice copy into the SGPR file. Any other case - a fault, a straddle, an unaligned lane, no active
lane - runs the reference step before anything has changed, so faults and partial effects stay the reference's.
The LDS accesses generated code calls (ML, MS, ML32, MS32: emu.pcode.npback's memory) gather and scatter dwords
directly when every lane's access is aligned and in range, else go through the LDS's own load and store.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd.exec.bind import memory_offset, smem_offsets
from emu.amd.exec.state import ACC
from emu.amd.regs import VCC, storage
from emu.pcode import runtime
from emu.pcode.ir import Assign, Const, Op, Store, Var
from emu.pcode.npvalues import Decline

U64, U32 = np.uint64, np.uint32
U64_0, U64_2, U64_3, U32_MASK = U64(0), U64(2), U64(3), U64(0xFFFFFFFF)
_TWOS = (np.full(32, 2, U32), np.full(64, 2, U32))  # shift amounts as arrays: array-array operations cost less
_THREES = (np.full(32, 3, U32), np.full(64, 3, U32))
_ZEROS = (bytes(4 * 32), bytes(4 * 64))
M64 = (1 << 64) - 1
_MIN, _MAX, _OR = np.minimum.reduce, np.maximum.reduce, np.bitwise_or.reduce


def _dword(addr) -> int | None:
    """k when `addr` is ADDR + 4k (k < 4) in the IR."""
    if isinstance(addr, Var) and addr.name == "ADDR":
        return 0
    if isinstance(addr, Op) and addr.op == "add" and isinstance(addr.args[0], Var) and addr.args[0].name == "ADDR":
        c = addr.args[1]
        if isinstance(c, Op) and c.op == "resize":
            c = c.args[0]
        if isinstance(c, Const) and c.value in (4, 8, 12):
            return c.value // 4
    return None


def dword_moves(ir) -> tuple[bool, int] | None:
    """(is a store, dwords) when the IR moves dwords 0..n-1 between MEM[ADDR + 4k] and VDATA's dword k."""
    if ir.files != {"MEM"} or ir.arrays:
        return None
    ks, store = [], None
    for s in ir.body:
        if isinstance(s, Store) and s.file == "MEM" and s.bits == 32 and store is not False:
            v = s.value
            k = _dword(s.addr[0])
            if not (isinstance(v, Op) and v.op == "extract" and v.attr == 32 and isinstance(v.args[0], Var)
                    and v.args[0].name == "VDATA" and isinstance(v.args[1], Const) and v.args[1].value == 32 * k):
                return None
            store = True
        elif isinstance(s, Assign) and s.var == "VDATA" and store is not True and s.index is None:
            v = s.value
            if not (isinstance(v, Op) and v.op == "load" and v.attr == "MEM" and v.ty.bits == 32):
                return None
            k = _dword(v.args[0])
            whole = s.lo is None and s.width is None and k == 0 and ir.outputs.get("VDATA") == 32
            if not (whole or (isinstance(s.lo, Const) and k is not None and s.lo.value == 32 * k and s.width == 32)):
                return None
            store = False
        else:
            return None
        ks.append(k)
    n = len(ks)
    if not n or sorted(ks) != list(range(n)) or (ir.inputs if store else ir.outputs).get("VDATA") != 32 * n:
        return None
    return store, n


def global_step(p, inst, ref: Callable) -> Callable:
    """The fused step of a plain dword global load/store (Decline otherwise); `ref` runs the reference step."""
    op, f = inst.op, inst.fields
    if inst.base not in ("GLOBAL", "VGLOBAL"):
        raise Decline("not a global access")
    sem = p.sem(op)
    moves = dword_moves(sem.ir)
    if moves is None or sem.serial or sem.reads - {"MEM", "ADDR", "VDATA"} or sem.writes - {"MEM", "VDATA"}:
        raise Decline("not a plain dword move")
    store, n = moves
    rdna4 = "ioffset" in f
    vaddr = f["vaddr"] if rdna4 else f["addr"]
    acc = ACC if f.get("acc") else 0
    data = (f["vsrc"] if rdna4 else f["data"]) + acc
    vdst = f["vdst"] + acc
    if max(data, vdst) % ACC + n > ACC:
        raise Decline("registers past the file")
    off = memory_offset(inst)
    saddr = f.get("saddr", p.saddr_off)
    saddr = None if p.gen.no_saddr(saddr) else saddr
    if saddr is not None and not storage(saddr, 2):
        raise Decline("saddr")
    full_mask = (1 << p.lanes) - 1
    nxt = inst.pc + inst.size
    off_u = U64(off & M64)
    last: list[tuple] = [_NONE]  # where the previous access went (_place)
    pair = saddr is None and not off  # the address is the VGPR pair: _window may place it
    wide = int(p.lanes == 64)

    def step(w):
        vg = w.vgpr
        full = w.active_mask == full_mask
        act = w.active
        got = _window(w.vm, vg[vaddr], vg[vaddr + 1], 4 * n, store, last, wide) if pair and full else None
        if got is None:
            if saddr is None:  # the VGPR pair as one uint64 per lane
                a = vg[vaddr:vaddr + 2].T.copy().view(U64).ravel()
                if off:
                    a = a + off_u
            else:
                sg = w.sgpr
                a = vg[vaddr].astype(U64) + U64((int(sg[saddr]) | int(sg[saddr + 1]) << 32) + off & M64)
            if not full:
                a = a[act]
                if not a.size:
                    return ref(w)
            got = _within(w.vm, a, 4 * n, store, last)
            if got is None or int(_OR(a)) & 3:
                return ref(w)
            got = got[0], (got[1] >> U64_2).view(np.int64)
        mem, idx = got[0][1], got[1]
        for k in range(n):
            i = idx + k if k else idx
            if store:
                mem[i] = vg[data + k] if full else vg[data + k][act]
            elif full:
                vg[vdst + k] = mem[i]
            else:
                vg[vdst + k][act] = mem[i]
        w.lane_ops += idx.size
        w.pc = nxt
        return 0
    return step


def smem_step(p, inst, ref: Callable) -> Callable:
    """The fused step of a plain scalar load of dwords into SGPRs (S_LOAD_B*, not into VCC); Decline otherwise."""
    op, f = inst.op, inst.fields
    name = op.name
    if inst.base != "SMEM" or not name.startswith("S_LOAD_") or "sdata" not in op.operands or p.gen.smem_imm_bit:
        raise Decline("not a plain scalar load")
    nbits = op.operands["sdata"].bits
    if nbits % 32 or p.smem_access(op) < 4:
        raise Decline("sub-dword")
    n = nbits // 32
    base, dst = f["sbase"] * 2, f["sdata"]
    off, soff = smem_offsets(f, p.gen)
    if not (base + 2 <= VCC and dst + n <= VCC) or (soff is not None and soff >= VCC):
        raise Decline("registers outside the SGPRs")
    nxt = inst.pc + inst.size
    last: list[tuple] = [_NONE]

    pair = base >> 1  # the base's SGPR pair in the file's uint64 view (sbase is even)

    def step(w):
        sg = w.sgpr
        addr = int(w.sgpr64[pair]) + off + (int(sg[soff]) if soff is not None else 0) & 0xFFFFFFFFFFFC
        got = last[0]  # _place's first test, inline
        if not (got[0] is w.vm.index and got[3] <= addr and addr + 4 * n <= got[4]):
            got = _place(w.vm, addr, addr + 4 * n, False, last)
            if got is None:
                return ref(w)
        o = addr - got[3] >> 2  # in dwords: the address and the mapping are dword-aligned
        sg[dst:dst + n] = got[1][o:o + n]
        w.pc = nxt
        return 0
    return step


_NONE = (object(), None, None, 0, -1, False, None)  # no mapping: its index is no VM's


def _window(vm, lo: np.ndarray, hi: np.ndarray, nbytes: int, write: bool, last: list, wide: int) -> tuple | None:
    """(_place's answer, the dword indices in it) of the addresses hi:lo (their uint32 halves) in the previous
    answer's mapping (`last[0]`) when that mapping lies in one 4 GiB window whose high half every address has, and
    the `nbytes` at each (dword-aligned) address lie in it; else None, and the caller places the 64-bit addresses.
    Fewer operations than those: the high halves and the low bits are compared as bytes, the offsets are 32-bit
    (with array operands: the window's low half and the masks are arrays of the lanes), their largest found by
    argmax (a reduction costs several times more on a wave's lanes)."""
    got = last[0]
    win = got[6]
    if got[0] is not vm.index or win is None or (write and not got[5]) or hi.tobytes() != win[wide]:
        return None
    o = lo - win[2 + wide]  # below the mapping wraps to a huge offset
    if o[o.argmax()] > got[4] - got[3] - nbytes or (lo & _THREES[wide]).tobytes() != _ZEROS[wide]:
        return None
    return got, (o >> _TWOS[wide]).astype(np.intp)


def _within(vm, a: np.ndarray, nbytes: int, write: bool, last: list) -> tuple | None:
    """(_place's answer, the byte offsets of addresses `a` in that mapping) when the `nbytes` at every address lie
    in one mapping (writable for a write), else None. The mapping of the previous answer (`last[0]`) is tried
    first, with one reduction: an address below it has a huge offset."""
    got = last[0]
    if got[0] is vm.index and (got[5] or not write):
        o = a - got[2]
        if int(_MAX(o)) <= got[4] - got[3] - nbytes:
            return got, o
    got = _place(vm, int(_MIN(a)), int(_MAX(a)) + nbytes, write, last)
    return None if got is None else (got, a - got[2])


def _place(vm, lo: int, hi: int, write: bool, last: list) -> tuple | None:
    """(VM index, dwords, address as uint64, address, end, writable, window) of the mapping that holds [lo, hi)
    (writable for a write), else None. `last[0]` keeps the caller's previous answer: it holds while the VM's index
    (an immutable snapshot, replaced on every map and unmap) is the same object."""
    got = last[0]  # replaced whole: another thread may run the same step
    index = vm.index
    if got[0] is index and got[3] <= lo and hi <= got[4] and (got[5] or not write):
        return got
    m = vm.mapping(lo)
    if m is None or hi > m.end or (write and not m.writable):
        return None
    hi = m.va >> 32
    win = (np.full(32, hi, U32).tobytes(), np.full(64, hi, U32).tobytes(), np.full(32, m.va & 0xFFFFFFFF, U32),
           np.full(64, m.va & 0xFFFFFFFF, U32)) if (m.end - 1) >> 32 == hi else None  # its 4 GiB window (_window)
    got = last[0] = (index, m.buf.view(U32), U64(m.va), m.va, m.end, m.writable, win)
    return got


# -- LDS accesses of generated code ------------------------------------------------------------------------------
def lds_load(mem, act: np.ndarray, addr: np.ndarray, bits: int) -> np.ndarray:
    """LDS.load (uint64 per lane), with a direct dword gather when every lane's access is aligned and in range."""
    a = addr & U32_MASK
    if bits == 32 and not (a & U64_3).any() and int(a.max()) + 4 <= mem.size:
        r = mem.mem[:mem.size & ~3].view(np.uint32)[a >> U64_2].astype(np.uint64)
        return r if act.all() else np.where(act, r, U64_0)
    return mem.load(np.broadcast_to(addr, act.shape), bits, act)


def lds_store(mem, act: np.ndarray, addr: np.ndarray, value, bits: int) -> None:
    """LDS.store, with a direct dword scatter (lane order: the highest lane wins) when aligned and in range."""
    a = addr & U32_MASK
    v = np.broadcast_to(runtime.arr(value), act.shape)
    if bits == 32 and not (a & U64_3).any() and int(a.max()) + 4 <= mem.size:
        m32 = mem.mem[:mem.size & ~3].view(np.uint32)
        if act.all():
            m32[a >> U64_2] = v
        else:
            m32[(a >> U64_2)[act]] = v[act]
        return
    mem.store(np.broadcast_to(addr, act.shape), bits, v, act)


def _dwords(mem, addr: np.ndarray) -> np.ndarray | None:
    """LDS as dwords when every lane's dword access at `addr` is aligned and in range, else None."""
    bits = int(_OR(addr))  # at least the largest address, and its low bits say whether all are aligned
    if bits & 3 or (bits + 4 > mem.size and int(_MAX(addr)) + 4 > mem.size):
        return None
    got = _lds_words[0]  # (LDS, its dwords) of the last access, replaced whole (threads may run other LDSs)
    if got[0] is not mem:
        got = _lds_words[0] = (mem, mem.mem[:mem.size & ~3].view(np.uint32))
    return got[1]


_lds_words: list[tuple] = [(None, None)]


def lds_load32(mem, act: np.ndarray, addr: np.ndarray) -> np.ndarray:
    """A dword per lane (uint32; inactive lanes' values are not used): a direct gather when every lane's access is
    aligned and in range, else LDS.load."""
    m32 = _dwords(mem, addr)
    if m32 is not None:
        return m32.take((addr >> U64_2).view(np.int64))
    return mem.load(addr, 32, act).astype(np.uint32)


def lds_store32(mem, act: np.ndarray, addr: np.ndarray, value: np.ndarray) -> None:
    """Dword stores of the active lanes (the highest lane wins), directly when aligned and in range."""
    m32 = _dwords(mem, addr)
    if m32 is not None:
        i = (addr >> U64_2).view(np.int64)
        if act.all():
            m32[i] = value
        else:
            m32[i[act]] = np.broadcast_to(value, act.shape)[act]
        return
    mem.store(addr, 32, np.broadcast_to(value, act.shape).astype(np.uint64), act)
