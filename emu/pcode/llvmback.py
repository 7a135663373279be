"""LLVM backend of the pcode compiler: the typed IR (emu.pcode.ir) lowered to LLVM IR through llvmlite,
bit-identical to the reference backend (emu.pcode.pyback) for every input. Built to be inlined: `emit` writes one
instruction's semantics at an IRBuilder's position over values the caller provides, so that a translator can fuse
many instructions into one native function over the wave's flat state. `standalone` wraps one Func in a
JIT-compiled function with pyback's calling contract (what the tests compare). Modules: llvmemit (statements,
expressions), llvmfacts (what the emitter reads off the IR), llvmints (integer ops), llvmfloats (float ops, with
llvmfbits: float bits, llvmfconv: conversions), llvmvalues (types, constants, lanes), this one (API, harness,
coverage: `python -m emu.pcode.llvmback --coverage [--arch rdna3|rdna4|cdna]`).

    emit(b: ir.IRBuilder, f: Func, lanes: int, inputs: dict[str, ir.Value], hooks: Hooks) -> dict[str, ir.Value]

Values (inputs and outputs of `emit`), raw bits:
- vector Func (`f.vector`): every input and output of B bits (B as `f.inputs` / `f.outputs` give it, any width,
  i1 .. i1024) is `<lanes x iB>`, encoding fields included (OPSEL, NEG, CLAMP, SRC0, VDST, ...: the caller splats
  uniform values; constants fold). Exceptions, both wave-wide scalars: names in `f.masks` (EXEC, VCC, D0 of
  V_CMP*) are `i64`, bit i = lane i; `MODE` is `i32`.
- scalar Func: every input and output is a scalar `iB`.
- extra inputs: `MODE` (`i32`, MODE.FP_ROUND directs the rounding of f16 / f32 add sub mul div sqrt fma, and of
  conversions; FP_DENORM the flushing of scalar float ops; ir.DEFAULT_MODE, pyback's default, when absent) and
  for vector Funcs `ACTIVE` (`<lanes x i1>`: lanes whose memory / register-file side effects may happen; all when
  absent).
- a name the body assigns on some paths only must be given with its current value (as for pyback); all lanes are
  computed, the caller applies EXEC.
Hooks (`Hooks`, emu.pcode.llvmemit): in vector Funcs the addresses, register indices, values and masks handed to a
hook are `<lanes x ...>` vectors (masks `<lanes x i1>`, ACTIVE included); in scalar Funcs scalars (mask: i1 true).

Excluded (emit raises emu.pcode.typed.Unsupported, never the emitted code):
- lane-serial read-modify-write memory ops (`Semantics.serial`): pyback runs them lane by lane (the caller must not
  hand them to emit: their Func alone does not say so);
- formatted buffer ops (FORMAT: decode / encode callbacks);
- a wave-wide value (mask, MODE) assigned under a lane predicate or from a per-lane value: pyback then holds a
  per-lane array and reports lane 0;
- the float cases emu.pcode.llvmfloats lists: the small float formats fp8 / bf8 / fp6 / bf6 / fp4 (pyback converts
  them by table search: mf_decode, mf_encode), stochastic rounding (fconv_sr), f64 fma with a scale (V_DIV_FMAS_F64:
  pyback rounds the scaled exact value once, through Fractions), float to 64-bit integer (none in VALU / SALU).
Engine: emu.pcode.llvmjit (`engine().compile(module, name, key)`, `engine().load(key)`; objects cached on disk by
key). Compile time (`--bench`, MODE a constant as the wave engine has it): ~10 ms for one instruction; ~0.6 s of CPU
for a block of the 50 VALU ops clang kernels use most, at O2 on this 2-core machine, three quarters of it in x86
code generation (instruction selection over 32-lane vectors). With MODE a runtime value the directed roundings
are emitted too (several times more code for f16 / f32 arithmetic).
"""
from __future__ import annotations

import argparse
import ctypes
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from emu.pcode import runtime
from emu.pcode.ir import DEFAULT_MODE, Func
from emu.pcode.llvmemit import Hooks, emit
from emu.pcode.llvmjit import OPT, Engine, engine
from emu.pcode.llvmvalues import I1, I32, I64, const, elem, entry_alloca, lanes, like, resize
from emu.pcode.typed import Unsupported

__all__ = ["Engine", "Hooks", "emit", "engine", "standalone", "Unsupported"]


# ---- the standalone harness: one Func as a JIT-compiled function with pyback's calling contract ----------------

def _words(bits: int) -> int:
    return (bits + 63) // 64


class _Call(threading.local):
    """The state of the harness call under way (hooks call back into Python)."""
    st: dict | None = None
    lanes: int = 0
    error: BaseException | None = None


_CALL = _Call()
_SITES: list[Callable] = []


def _dispatch(site: int, addr: int) -> None:
    if _CALL.error is not None:
        return
    try:
        _SITES[site](addr)
    except BaseException as e:  # re-raised by the harness once the native call returns
        _CALL.error = e


_jit = engine  # the name emu.amd.exec.jit imports (its owner moves to `engine`)
_HARNESS_CB = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(_dispatch)
_harness_ready = False


def _harness_engine() -> Engine:
    """The engine, with the harness's callback into Python known to it."""
    global _harness_ready
    if not _harness_ready:
        llvm.add_symbol("hwemu_harness_cb", ctypes.cast(_HARNESS_CB, ctypes.c_void_p).value)
        _harness_ready = True
    return engine()


def _buf(addr: int, size: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint64 * size).from_address(addr))


def _get(buf: np.ndarray, off: int, bits: int, n: int | None):
    """A value packed by _pack: (n,) uint64 / object array per lane, or a Python int."""
    w = _words(bits)
    if not n:
        return sum(int(buf[off + k]) << (64 * k) for k in range(w))
    if w == 1:
        return buf[off:off + n].copy()
    return np.array([sum(int(buf[off + k * n + j]) << (64 * k) for k in range(w)) for j in range(n)], dtype=object)


def _put(buf: np.ndarray, off: int, value, bits: int, n: int | None) -> None:
    w, m = _words(bits), (1 << bits) - 1
    if not n:
        v = int(np.asarray(value).flat[0]) & m if not isinstance(value, int) else value & m
        for k in range(w):
            buf[off + k] = (v >> (64 * k)) & ((1 << 64) - 1)
        return
    a = np.asarray(value)
    if a.ndim == 2:  # (dwords, lanes), row 0 least significant
        a = np.array([sum(int(a[k, j]) << (32 * k) for k in range(a.shape[0])) for j in range(a.shape[1])], object)
    a = np.broadcast_to(a, (n,))
    if w == 1 and a.dtype != object:
        buf[off:off + n] = a.astype(np.uint64) & np.uint64(m)
        return
    for j in range(n):
        v = int(a[j]) & m
        for k in range(w):
            buf[off + k * n + j] = (v >> (64 * k)) & ((1 << 64) - 1)


def _slot(b: ir.IRBuilder, base: ir.Value, off: int, t: ir.Type) -> ir.Value:
    """Pointer to word `off` of base, typed for a value of type t."""
    p = b.gep(base, [I64(off)], source_etype=I64) if base.type.is_opaque else b.gep(base, [I64(off)])
    return p if base.type.is_opaque else b.bitcast(p, t.as_pointer())


def _pack(b: ir.IRBuilder, base: ir.Value, off: int, v: ir.Value, bits: int) -> int:
    """Store integer v (iB or <n x iB>) at word `off` of base: word k of lane j at off + k * n + j."""
    n = lanes(v)
    if elem(v.type) == I1 and bits == 1:
        v = b.zext(v, like(ir.IntType(1), n))
    for k in range(_words(bits)):
        part = b.lshr(v, const(v.type, 64 * k, n)) if k else v
        part = resize(b, part, 64)
        b.store(part, _slot(b, base, off + k * (n or 1), part.type), align=8)
    return off + _words(bits) * (n or 1)


def _unpack(b: ir.IRBuilder, base: ir.Value, off: int, bits: int, n: int | None) -> ir.Value:
    r = None
    for k in range(_words(bits)):
        w = b.load(_slot(b, base, off + k * (n or 1), like(I64, n)), typ=like(I64, n), align=8)
        w = resize(b, w, max(bits, 64))
        if k:
            w = b.shl(w, const(w.type, 64 * k, n))
        r = w if r is None else b.or_(r, w)
    return resize(b, r, bits)


class _HarnessHooks:
    """Hooks that call pyback's own runtime helpers (emu.pcode.runtime) through a ctypes callback."""

    def __init__(self, f: Func, n: int | None):
        self.n = n
        self.nl = n or 0
        self.cb = None

    def _site(self, b: ir.IRBuilder, handler: Callable, operands: list[tuple[ir.Value, int]],
              results: list[int]) -> list[ir.Value]:
        """Pack operands (value, bits), call handler(views of operands) -> result values, unpack results."""
        n = self.n
        sizes = [_words(bits) * (n or 1) for _, bits in operands] + [_words(bits) * (n or 1) for bits in results]
        buf = entry_alloca(b, ir.ArrayType(I64, max(sum(sizes), 1)))
        base = b.gep(buf, [I32(0), I32(0)])
        off = 0
        for v, bits in operands:
            off = _pack(b, base, off, v, bits)
        res_off = off
        site = len(_SITES)

        def run(addr: int) -> None:
            mem = _buf(addr, max(sum(sizes), 1))
            o, args = 0, []
            for (_, bits), size in zip(operands, sizes, strict=False):
                args.append(_get(mem, o, bits, n))
                o += size
            outs = handler(*args)
            for val, bits in zip(outs, results, strict=True):
                _put(mem, o, val, bits, n)
                o += _words(bits) * (n or 1)

        _SITES.append(run)
        cb = b.module.globals.get("hwemu_harness_cb") or ir.Function(
            b.module, ir.FunctionType(ir.VoidType(), [I64, ir.PointerType()]), "hwemu_harness_cb")
        b.call(cb, [I64(site), base])
        out, off = [], res_off
        for bits in results:
            out.append(_unpack(b, base, off, bits, n))
            off += _words(bits) * (n or 1)
        return out

    def _mask(self, m):
        return m.astype(bool) if self.n else True

    def load(self, b, file, addr, bits, mask):
        return self._site(b, lambda a, m: (runtime.load(_CALL.st, file, a, bits, self._mask(m), self.nl),),
                          [(addr, 64), (mask, 1)], [bits])[0]

    def store(self, b, file, addr, value, bits, mask):
        def run(a, v, m):
            runtime.store(_CALL.st, file, a, v, bits, self._mask(m), self.nl)
            return ()
        self._site(b, run, [(addr, 64), (value, bits), (mask, 1)], [])

    def reg_read(self, b, file, index, bits, mask):
        def run(*idx):
            return (runtime.rget(_CALL.st, file, tuple(idx[:-1]), bits),)
        return self._site(b, run, [(i, elem(i.type).width) for i in index] + [(mask, 1)], [bits])[0]

    def reg_write(self, b, file, index, value, bits, mask):
        def run(*args):
            *idx, v, m = args
            runtime.rset(_CALL.st, file, tuple(idx), v, self._mask(m), self.nl, bits)
            return ()
        self._site(b, run, [(i, elem(i.type).width) for i in index] + [(value, bits), (mask, 1)], [])

    def callout(self, b, name, args):
        return self._site(b, lambda *a: (runtime.arr(_CALL.st[name](*a)),),
                          [(a, elem(a.type).width) for a in args], [32])[0]

    def fail(self, b, mask, reason):
        def run(m):
            raise Unsupported(reason)
        self._site(b, run, [(mask, 1)], [])


def _in_specs(f: Func) -> list[tuple[str, int, bool]]:
    """(name, bits, per lane) of the harness's inputs, in buffer order."""
    specs = []
    for name, bits in f.inputs.items():
        if name == "MODE" and f.vector:
            continue
        specs.append((name, bits, f.vector and name not in f.masks))
    specs.append(("MODE", 32, False))
    if f.vector:
        specs.append(("ACTIVE", 1, True))
    return specs


def _out_specs(f: Func) -> list[tuple[str, int, bool]]:
    return [(name, bits, f.vector and name not in f.masks) for name, bits in f.outputs.items()]


def _pyback_value(bits: int, v, n: int | None):
    """A harness output as pyback returns it."""
    if not n:
        return int(v)
    if bits > 64:
        return np.array([[(int(e) >> (32 * k)) & 0xFFFFFFFF for e in v] for k in range((bits + 31) // 32)],
                        np.uint64)
    return v


def standalone(f: Func, lanes: int, mode: int | None = None) -> Callable[[dict, int], dict]:
    """f compiled natively for `lanes` lanes behind pyback's calling contract: fn(st, lanes) -> outputs. Memory,
    register files, callouts and Fail call back into Python (pyback's own helpers). `mode`: MODE compiled in as a
    constant (as the wave engine's regions have it; st's MODE must then equal it), else read from st."""
    jit = _harness_engine()
    n = lanes if f.vector else None
    mod = jit.module()
    name = "sem"
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.PointerType(), ir.PointerType()]), name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    src, dst = fn.args
    ins, outs = _in_specs(f), _out_specs(f)
    values, off = {}, 0
    for name_, bits, per_lane in ins:
        values[name_] = _unpack(b, src, off, bits, n if per_lane else None)
        off += _words(bits) * (n if per_lane else 1)
    if mode is not None:
        values["MODE"] = I32(mode)
    in_size = off
    res = emit(b, f, lanes, values, _HarnessHooks(f, n))
    off = 0
    for name_, bits, _ in outs:
        off = _pack(b, dst, off, res[name_], bits)
    out_size = off
    b.ret_void()
    addr = jit.compile(mod, name)
    native = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(addr)

    def run(st: dict, lanes_: int) -> dict:
        if lanes_ != lanes:
            raise ValueError(f"compiled for {lanes} lanes, called with {lanes_}")
        if mode is not None and st.get("MODE", DEFAULT_MODE) != mode:
            raise ValueError(f"compiled for MODE {mode:#x}, called with {st.get('MODE', DEFAULT_MODE):#x}")
        src_buf, dst_buf = np.zeros(max(in_size, 1), np.uint64), np.zeros(max(out_size, 1), np.uint64)
        o = 0
        for name_, bits, per_lane in ins:
            default = {"MODE": DEFAULT_MODE, "ACTIVE": True}.get(name_)
            _put(src_buf, o, st.get(name_, default) if default is not None else st[name_], bits,
                 n if per_lane else None)
            o += _words(bits) * (n if per_lane else 1)
        prev = (_CALL.st, _CALL.lanes, _CALL.error)
        _CALL.st, _CALL.lanes, _CALL.error = st, lanes, None
        try:
            with np.errstate(all="ignore"):
                native(src_buf.ctypes.data, dst_buf.ctypes.data)
            err = _CALL.error
        finally:
            _CALL.st, _CALL.lanes, _CALL.error = prev
        if err is not None:
            raise err
        out, o = {}, 0
        for name_, bits, per_lane in outs:
            out[name_] = _pyback_value(bits, _get(dst_buf, o, bits, n if per_lane else None), n if per_lane else None)
            o += _words(bits) * (n if per_lane else 1)
        return out

    run.ir = str(mod)  # type: ignore[attr-defined]
    return run


# ---- coverage: what the backend takes ------------------------------------------------------------------------------

VALU_SALU = ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOP3P", "VOPC", "SOP1", "SOP2", "SOPC", "SOPK")
FAMILIES = ("rdna3", "rdna4", "cdna")


class _NullHooks:
    """Hooks that emit nothing (a read gives 0): enough to see whether emit takes a Func."""

    def __init__(self, n: int | None):
        self.n = n

    def load(self, b, file, addr, bits, mask):
        return const(ir.IntType(bits), 0, self.n)

    reg_read = load

    def store(self, b, file, addr, value, bits, mask):
        pass

    reg_write = store

    def callout(self, b, name, args):
        return const(I32, 0, self.n)

    def fail(self, b, mask, reason):
        pass


def emit_module(funcs: list[Func], lanes_: int, mode: int | None = None) -> ir.Module:
    """One function `probe(ptr src, ptr dst)` emitting every Func of the list in turn, hooks that do nothing: what
    a block translator makes. Inputs are read from src and outputs written to dst at their natural width, one after
    the other (`<lanes x iB>` per lane, `iB` wave-wide, B rounded up to whole bytes); ACTIVE is all lanes; `mode`:
    MODE a constant (as the wave engine compiles it), else read from src."""
    mod = ir.Module("probe")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.PointerType(), ir.PointerType()]), "probe")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    offs = [0, 0]

    def slot(k: int, bits: int, n: int | None) -> tuple[ir.Value, ir.Type]:
        t = like(ir.IntType((bits + 7) // 8 * 8), n)
        p = b.gep(fn.args[k], [I64(offs[k])], source_etype=ir.IntType(8))
        offs[k] += (bits + 7) // 8 * (n or 1)
        return p, t

    for f in funcs:
        n = lanes_ if f.vector else None
        values = {}
        for name, bits, per_lane in _in_specs(f):
            if name == "ACTIVE" or (name == "MODE" and mode is not None):
                continue
            p, t = slot(0, bits, n if per_lane else None)
            values[name] = resize(b, b.load(p, typ=t, align=1), bits)
        if mode is not None:
            values["MODE"] = I32(mode)
        outs = emit(b, f, lanes_, values, _NullHooks(n))
        for name, bits, per_lane in _out_specs(f):
            p, t = slot(1, bits, n if per_lane else None)
            b.store(resize(b, outs[name], elem(t).width), p, align=1)
    b.ret_void()
    return mod


def coverage(arch: str, spaces: tuple[str, ...] | None = VALU_SALU) -> dict:
    """Per instruction pyback compiles (in `spaces`; None: all): taken, or the reason it is not."""
    from emu.amd import isa  # the instruction sets (emu.pcode itself takes them through compile_op)
    from emu.pcode import compile_op
    fam = isa.family(arch)
    taken, failing = [], {}
    for op in sorted(isa.load(arch).ops.values(), key=lambda o: (o.enc, o.value)):
        if spaces is not None and op.enc not in spaces:
            continue
        try:
            sem = compile_op(arch, op.enc, op.name)
        except Unsupported:
            continue
        key = f"{op.enc}.{op.name}"
        try:
            if sem.serial:
                raise Unsupported("lane-serial read-modify-write memory op")
            llvm.parse_assembly(str(emit_module([sem.ir], 32))).verify()
            taken.append(key)
        except Unsupported as e:
            failing[key] = str(e)
    return {"arch": fam, "compiled": len(taken) + len(failing), "taken": taken, "failing": failing}


# the 50 VALU ops clang-compiled kernels use most (tests/kernels/run, tools/kernels), gfx1100 spellings
COMMON_OPS = (
    "VOP1.V_MOV_B32", "VOP2.V_ADD_CO_CI_U32", "VOP3SD.V_ADD_CO_U32", "VOP3SD.V_MAD_U64_U32", "VOP2.V_CNDMASK_B32",
    "VOP2.V_ADD_NC_U32", "VOP3.V_MUL_LO_U32", "VOP3.V_LSHLREV_B64", "VOP2.V_AND_B32", "VOP3.V_MUL_HI_U32",
    "VOPC.V_CMP_EQ_U32", "VOP3.V_FMA_F64", "VOP2.V_SUBREV_NC_U32", "VOPC.V_CMP_LE_U32", "VOP2.V_SUB_NC_U32",
    "VOPC.V_CMP_NE_U32", "VOP3.V_BCNT_U32_B32", "VOP1.V_CLZ_I32_U32", "VOP3.V_BFI_B32", "VOP3.V_MAX_F64",
    "VOP2.V_MAX_F16", "VOPC.V_CMP_GE_U32", "VOP3SD.V_SUB_CO_U32", "VOP3.V_BFE_U32", "VOP2.V_MUL_F32",
    "VOP2.V_LSHLREV_B32", "VOP3.V_FMA_F32", "VOP1.V_CVT_U32_F32", "VOP3.V_LSHL_ADD_U32", "VOP1.V_TRUNC_F32",
    "VOP2.V_MIN_U32", "VOP3.V_ADD3_U32", "VOP1.V_CVT_F32_U32", "VOP2.V_FMAMK_F32", "VOP3.V_ADD_F64",
    "VOP2.V_MAX_F32", "VOP3.V_LDEXP_F32", "VOP3.V_MUL_F64", "VOP3.V_FMA_F16", "VOP2.V_ADD_F32",
    "VOP2.V_ASHRREV_I32", "VOP1.V_RCP_IFLAG_F32", "VOP1.V_RCP_F32", "VOP2.V_SUB_F16", "VOP2.V_ADD_F16",
    "VOP2.V_XOR_B32", "VOP1.V_FLOOR_F32", "VOPC.V_CMP_GE_F32", "VOP2.V_SUB_F32", "VOP2.V_MIN_F32")
BENCH_MODE = 0x3F0  # MODE as the wave engine compiles it in: nearest even, denormals kept


def _bench(arch: str) -> None:
    """ms to build and JIT one instruction, the first 50 VOP2 / VOP3 of the table and the 50 common ops, MODE a
    constant (wall time and this process's CPU time: the machine may be shared)."""
    from emu.amd import isa
    from emu.pcode import compile_op
    fam = isa.family(arch)
    first = []
    for op in isa.load(arch).ops.values():
        if op.enc in ("VOP2", "VOP3") and len(first) < 50:
            try:
                f = compile_op(arch, op.enc, op.name).ir
                llvm.parse_assembly(str(emit_module([f], 32)))
                first.append(f)
            except Unsupported:
                continue
    groups = [("1 instruction", first[:1]), ("50 first", first)]
    if fam == "rdna3":
        groups.append(("50 common", [compile_op(arch, *k.split(".")).ir for k in COMMON_OPS]))
    jit = engine()
    for label, group in groups:
        t0, c0 = time.perf_counter(), time.process_time()
        mod = emit_module(group, 32, BENCH_MODE)
        t1, c1 = time.perf_counter(), time.process_time()
        jit.compile(mod, "probe")
        t2, c2 = time.perf_counter(), time.process_time()
        print(f"{label:14}: emit {1e3 * (t1 - t0):6.1f} ms (cpu {1e3 * (c1 - c0):6.1f}), LLVM O{OPT} + codegen "
              f"{1e3 * (t2 - t1):7.1f} ms (cpu {1e3 * (c2 - c1):7.1f}) ({', '.join(f.name for f in group[:3])}"
              f"{', ...' if len(group) > 3 else ''})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emu.pcode.llvmback", description=__doc__.split("\n")[0])
    ap.add_argument("--coverage", action="store_true", help="per family: the VALU / SALU ops the backend takes")
    ap.add_argument("--all-spaces", action="store_true", help="with --coverage: every opcode space")
    ap.add_argument("--bench", action="store_true", help="compile time of 1 and 50 inlined instructions")
    ap.add_argument("--arch", action="append", help="rdna3, rdna4, cdna or a gfx name (default: the three)")
    a = ap.parse_args(argv)
    for arch in a.arch or FAMILIES:
        if a.bench:
            _bench(arch)
        if not a.coverage:
            continue
        r = coverage(arch, None if a.all_spaces else VALU_SALU)
        print(f"{r['arch']}: {len(r['taken'])} of {r['compiled']} compiled instructions taken")
        for reason, count in Counter(v.split(":")[0] for v in r["failing"].values()).most_common():
            print(f"  {count:4}  {reason}")
        for name, reason in r["failing"].items():
            print(f"    {name}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
