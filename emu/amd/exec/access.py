"""The per-lane accesses of native code: the functions regions and threaded handlers call for memory and VGPR reads,
one lane after another (unrolled).

    hwemu_translate(table, addr, nbytes, write) -> host address of [addr, addr+nbytes) by the VM's mapping table
    hwemu_place(table, addrs, nbytes, write, active, sink) -> each active lane's host address (0: not placed)
    hwemu_vm_load{B}(addrs, bases, hosts, on) / hwemu_vm_store{B}(addrs, bases, hosts, values, on): a global access
    hwemu_lds_load{B}(lds, size, addrs, on) / hwemu_lds_store{B}(lds, size, sink, addrs, values, on): an LDS access
    hwemu_log_access(log, seq, tag, addrs, active) -> nearly full: a memory access logged (emu.amd.accesses)
    hwemu_vgpr_gather(vgpr, lanes, regs) -> VGPR[lane][reg] of each lane
    hwemu_vgpr_scatter(vgpr, lanes, regs, values, on): VGPR[lane][reg] = value for each lane of `on`

They depend on nothing but the wave size, so they are compiled once per wave size into a module of their own (cached
on disk like the rest) and their addresses put in LLVM's symbol table by `ensure(lanes)`; a module that calls them
holds only declarations (`function`) and is loaded after `ensure`. Built into every module that used them, they were
three quarters of the LLVM time of a global-memory handler (35 of 47 ms). An access width outside BITS gets its
function built into the calling module.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import llvmlite.binding as llvm
from llvmlite import ir

from emu.pcode.llvmjit import engine
from emu.pcode.typed import Unsupported as PcodeUnsupported

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
BITS = (8, 16, 32, 64, 96, 128)  # access widths compiled once per wave size
RESERVE = 8  # records of room in an access log below which it is nearly full (an instruction logs fewer)
RECORD = 3  # an access record's words before its lanes' addresses: index in the call, bytes | LDS << 16, lanes
ENGINE = "access"
_ready: set[int] = set()  # wave sizes whose functions are in the symbol table
_lock = threading.Lock()


def symbol(name: str, lanes: int, bits: int | None = None) -> str:
    return f"{name}{bits or ''}.w{lanes}"


def access_type(bits: int, what: str = "") -> ir.IntType:
    if bits % 8 or bits > 128:
        raise PcodeUnsupported(f"{bits}-bit {what}access")
    return ir.IntType(bits)


class _Lanes:
    """A wave size's types, and where the functions a body calls come from."""

    def __init__(self, lanes: int, module: ir.Module, export: bool):
        self.n, self.module, self.export = lanes, module, export

    def vec(self, t: ir.Type) -> ir.VectorType:
        return ir.VectorType(t, self.n)

    def splat(self, b, v):
        vt = self.vec(v.type)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, I32(0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(self.vec(I32), [0] * self.n))

    def call(self, name: str, bits: int | None = None) -> ir.Function:
        return _function(self.module, name, self.n, bits, self.export)


def function(module: ir.Module, name: str, lanes: int, bits: int | None = None) -> ir.Function:
    """Function `name` (of `bits` per lane, for the memory accesses) in `module`: a declaration of the shared one, or
    for a width outside BITS its own internal copy."""
    return _function(module, name, lanes, bits, False)


def _function(module: ir.Module, name: str, lanes: int, bits: int | None, export: bool) -> ir.Function:
    sym = symbol(name, lanes, bits)
    fn = module.globals.get(sym)
    if fn is not None:
        return fn
    signature, body = _SPECS[name]
    here = _Lanes(lanes, module, export)
    t = access_type(bits, "LDS " if "lds" in name else "") if bits is not None else None
    ret, params = signature(here, t)
    fn = ir.Function(module, ir.FunctionType(ret, params), sym)
    if not export and (bits is None or bits in BITS):
        return fn  # the shared one
    if not export:
        fn.linkage = "internal"
    fn.attributes.add("noinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    out = body(here, b, t, *fn.args)
    b.ret_void() if out is None else b.ret(out)
    return fn


def ensure(lanes: int, sources: str) -> None:
    """Put the functions of `lanes`-wide waves in LLVM's symbol table (once per process), before any module that calls
    them is compiled or loaded: loaded from the disk cache (keyed by `sources`, the digest of the native tiers'
    sources, emu.amd.exec.jit.sources), else compiled (about a second, once per machine). Raises llvmjit.Closed at
    exit."""
    if lanes in _ready:
        return
    with _lock:
        if lanes in _ready:
            return
        e, key = engine(ENGINE), f"access {sources} {lanes}"
        first = e.load(key)
        names = [symbol(name, lanes, bits) for name in _SPECS for bits in (BITS if name in _WIDE else (None,))]
        if first is None:
            m = e.module(f"access{lanes}")
            here = _Lanes(lanes, m, True)
            for name in _SPECS:
                for bits in BITS if name in _WIDE else (None,):
                    here.call(name, bits)
            first = e.compile(m, names[0], key, exports=names[1:])  # the first is named by the key
        for sym in names:
            llvm.add_symbol(sym, first if sym == names[0] else e.address(sym))
        _ready.add(lanes)


def _each_lane(b, lanes: int, body, acc):
    """acc = body(b, i, acc) for the lanes i = 0 .. lanes-1 in order (i an i32 constant), from `acc`; returns the last
    acc (None: none is carried)."""
    for i in range(lanes):
        acc = body(b, I32(i), acc)
    return acc


def _translate(L: _Lanes, b, t, table, a, n, write):
    """The host address of [a, a+n) when one mapping of the VM table holds it (and allows the write), else 0."""
    fn = b.function
    entry = b.block
    head, body, done = (fn.append_basic_block(x) for x in ("head", "body", "done"))
    count = b.load(b.gep(table, [I64(0)], source_etype=I64), typ=I64)
    b.branch(head)
    b.position_at_end(head)  # binary search: lo = the number of mappings that start at or below addr
    lo, hi = b.phi(I64), b.phi(I64)
    lo.add_incoming(I64(0), entry)
    hi.add_incoming(count, entry)
    b.cbranch(b.icmp_unsigned("<", lo, hi), body, done)
    b.position_at_end(body)
    mid = b.lshr(b.add(lo, hi), I64(1))
    start = b.load(b.gep(table, [b.add(b.mul(mid, I64(4)), I64(1))], source_etype=I64), typ=I64)
    below = b.icmp_unsigned("<=", start, a)
    lo.add_incoming(b.select(below, b.add(mid, I64(1)), lo), body)
    hi.add_incoming(b.select(below, hi, mid), body)
    b.branch(head)
    b.position_at_end(done)
    i = b.sub(lo, I64(1))
    row = b.add(b.mul(b.select(b.icmp_unsigned("==", lo, I64(0)), I64(0), i), I64(4)), I64(1))
    field = [b.load(b.gep(table, [b.add(row, I64(k))], source_etype=I64), typ=I64) for k in range(4)]
    end = b.add(a, n)
    ok = b.and_(b.icmp_unsigned("!=", lo, I64(0)), b.icmp_unsigned("<=", end, field[1]))
    ok = b.and_(ok, b.icmp_unsigned(">=", end, a))  # no wrap past 2^64
    ok = b.and_(ok, b.or_(b.not_(write), b.icmp_unsigned("!=", field[3], I64(0))))
    return b.select(ok, b.add(a, field[2]), I64(0))


def _place(L: _Lanes, b, t, table, addr, nbytes, write, active, sink):
    """Each active lane's host address (0: not placed), the sink for the others."""
    tr = L.call("hwemu_translate")

    def lane(b, i, hosts):
        h = b.call(tr, [table, b.extract_element(addr, i), nbytes, write])
        return b.insert_element(hosts, b.select(b.extract_element(active, i), h, sink), i)
    return _each_lane(b, L.n, lane, ir.Constant(L.vec(I64), [0] * L.n))


def _vm_ptr(b, a, base, hosts, i):
    d = b.sub(b.extract_element(a, i), b.extract_element(base, i))
    return b.inttoptr(b.add(b.extract_element(hosts, i), d), PTR)


def _vm_load(L: _Lanes, b, t, a, base, hosts, on):
    def lane(b, i, out):
        v = b.load(_vm_ptr(b, a, base, hosts, i), typ=t, align=1)
        return b.insert_element(out, b.select(b.extract_element(on, i), v, t(0)), i)
    return _each_lane(b, L.n, lane, ir.Constant(L.vec(t), [0] * L.n))


def _vm_store(L: _Lanes, b, t, a, base, hosts, value, on):
    def lane(b, i, _):  # in lane order: the highest lane wins a shared address
        p = _vm_ptr(b, a, base, hosts, i)
        keep = b.load(p, typ=t, align=1)
        b.store(b.select(b.extract_element(on, i), b.extract_element(value, i), keep), p, align=1)
    _each_lane(b, L.n, lane, None)


def _lds_ok(L: _Lanes, b, size, a, t, on):
    """(offsets: the low 32 bits of the addresses, the lanes of `on` whose access ends within the LDS size)."""
    a = b.and_(a, ir.Constant(a.type, [0xFFFFFFFF] * L.n))
    end = b.add(a, ir.Constant(a.type, [t.width // 8] * L.n))
    return a, b.and_(on, b.icmp_unsigned("<=", end, L.splat(b, size)))


def _lds_load(L: _Lanes, b, t, lds, size, a, on):
    a, ok = _lds_ok(L, b, size, a, t, on)

    def lane(b, i, out):
        good = b.extract_element(ok, i)
        off = b.select(good, b.extract_element(a, i), I64(0))
        v = b.load(b.gep(lds, [off], source_etype=ir.IntType(8)), typ=t, align=1)
        return b.insert_element(out, b.select(good, v, t(0)), i)
    return _each_lane(b, L.n, lane, ir.Constant(L.vec(t), [0] * L.n))


def _lds_store(L: _Lanes, b, t, lds, size, sink, a, value, on):
    a, ok = _lds_ok(L, b, size, a, t, on)

    def lane(b, i, _):  # in lane order: the highest lane wins a shared address
        p = b.gep(lds, [b.extract_element(a, i)], source_etype=ir.IntType(8))
        b.store(b.extract_element(value, i), b.select(b.extract_element(ok, i), p, sink), align=1)
    _each_lane(b, L.n, lane, None)


def _vgpr_gather(L: _Lanes, b, t, v, lane, reg):
    n = L.n
    ok = b.and_(b.icmp_unsigned("<", reg, ir.Constant(lane.type, [256] * n)),
                b.icmp_unsigned("<", lane, ir.Constant(lane.type, [n] * n)))
    at = b.select(ok, b.add(b.mul(reg, ir.Constant(lane.type, [n] * n)), lane), ir.Constant(lane.type, [0] * n))

    def one(b, i, out):
        x = b.load(b.gep(v, [b.extract_element(at, i)], source_etype=I32), typ=I32, align=4)
        return b.insert_element(out, x, i)
    return _each_lane(b, n, one, ir.Constant(L.vec(I32), [0] * n))


def _vgpr_scatter(L: _Lanes, b, t, v, lane, reg, value, on):
    """VGPR[lane][reg] = value for each lane of `on` (in lane order) whose (lane, reg) is in the file."""
    n = L.n
    ok = b.and_(on, b.and_(b.icmp_unsigned("<", reg, ir.Constant(lane.type, [256] * n)),
                           b.icmp_unsigned("<", lane, ir.Constant(lane.type, [n] * n))))

    def one(b, i, _):
        with b.if_then(b.extract_element(ok, i)):
            at = b.add(b.mul(b.extract_element(reg, i), I64(n)), b.extract_element(lane, i))
            b.store(b.extract_element(value, i), b.gep(v, [at], source_etype=I32), align=4)
    _each_lane(b, n, one, None)


def _log_access(L: _Lanes, b, t, acc, seq, tag, addr, active):
    """Append (seq, tag, the active lanes' mask, each lane's address) to the log at acc[0] (acc[1] words used of
    acc[2]); a record that does not fit is counted in acc[3]. True once fewer than RESERVE records of room are left."""
    words = RECORD + L.n

    def word(i: int):
        return b.gep(acc, [I64(i)], source_etype=I64)
    used, held = b.load(word(1), typ=I64), b.load(word(2), typ=I64)
    with b.if_else(b.icmp_signed("<=", b.add(used, I64(words)), held)) as (fits, full):
        with fits:
            rec = b.gep(b.inttoptr(b.load(word(0), typ=I64), PTR), [used], source_etype=I64)
            mask = b.bitcast(active, ir.IntType(L.n))
            for k, v in enumerate((seq, tag, b.zext(mask, I64) if L.n < 64 else mask)):
                b.store(v, b.gep(rec, [I64(k)], source_etype=I64))
            b.store(addr, b.gep(rec, [I64(RECORD)], source_etype=I64), align=8)
            b.store(b.add(used, I64(words)), word(1))
        with full:
            b.store(b.add(b.load(word(3), typ=I64), I64(1)), word(3))
    return b.icmp_signed("<", b.sub(held, b.load(word(1), typ=I64)), I64(RESERVE * words))


# name -> (signature(lanes, access type) -> (return type, parameter types), body(lanes, builder, access type, *args))
_SPECS: dict[str, tuple[Callable, Callable]] = {
    "hwemu_translate": (lambda L, t: (I64, [PTR, I64, I64, I1]), _translate),
    "hwemu_place": (lambda L, t: (L.vec(I64), [PTR, L.vec(I64), I64, I1, L.vec(I1), I64]), _place),
    "hwemu_vm_load": (lambda L, t: (L.vec(t), [L.vec(I64)] * 3 + [L.vec(I1)]), _vm_load),
    "hwemu_vm_store": (lambda L, t: (ir.VoidType(), [L.vec(I64)] * 3 + [L.vec(t), L.vec(I1)]), _vm_store),
    "hwemu_lds_load": (lambda L, t: (L.vec(t), [PTR, I64, L.vec(I64), L.vec(I1)]), _lds_load),
    "hwemu_lds_store": (lambda L, t: (ir.VoidType(), [PTR, I64, PTR, L.vec(I64), L.vec(t), L.vec(I1)]), _lds_store),
    "hwemu_log_access": (lambda L, t: (I1, [PTR, I64, I64, L.vec(I64), L.vec(I1)]), _log_access),
    "hwemu_vgpr_gather": (lambda L, t: (L.vec(I32), [PTR, L.vec(I64), L.vec(I64)]), _vgpr_gather),
    "hwemu_vgpr_scatter": (lambda L, t: (ir.VoidType(), [PTR, L.vec(I64), L.vec(I64), L.vec(I32), L.vec(I1)]),
                           _vgpr_scatter),
}
_WIDE = {"hwemu_vm_load", "hwemu_vm_store", "hwemu_lds_load", "hwemu_lds_store"}  # one function per access width
