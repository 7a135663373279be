"""Python backend: typed IR -> one Python function per instruction.

The function is `f(S, *inputs) -> outputs tuple | None`: inputs and outputs are the operands of
lower.Semantics in order (integers as Python ints in their C type's range, HVX values as numpy uint8 arrays),
None means the slot was cancelled (a false predicate: nothing the instruction wrote commits). Everything
else an instruction reaches (memory, implicit registers, predicates, the branch) goes through S, the core
model; see `Core` for the calls it must answer.
"""
from __future__ import annotations

import atexit
import hashlib
import math
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from emu.dsp import ieee, ir, runtime, tables
from emu.dsp.isa import ISA, SCHEMA
from emu.dsp.lower import CompileError, Semantics, lower
from emu.dsp.vendor import QEMU_VERSION, cache_root

_VEC_BYTES = {"vec": 128, "pair": 256, "qreg": 16}
_DTYPES = {(8, True): "_i8", (8, False): "_u8", (16, True): "_i16", (16, False): "_u16", (32, True): "_i32",
           (32, False): "_u32", (64, True): "_i64", (64, False): "_u64"}
_IEEE = frozenset(k for k in dir(ieee) if not k.startswith("_") and callable(getattr(ieee, k)))
# float primitives that take the core (for its exception flags) as their first argument
_FLAGGED = frozenset({*(k for k in _IEEE if k.startswith("conv_")), "fmax", "fmaxf", "fmin", "fminf",
                      "internal_fmafx", "internal_mpyf", "fSF_RECIP_COMMON", "fSF_INVSQRT_COMMON",
                      "fDF_MPY_HH"})
_ROUNDED = _FLAGGED - {"fmax", "fmaxf", "fmin", "fminf"}  # ... and round in the instruction's rounding mode
_NAMESPACE = {**{k: getattr(runtime, k) for k in dir(runtime) if not k.startswith("_")},
              **{k: getattr(ieee, k) for k in _IEEE},
              "_table": tables.lookup, "fSF_RECIP_LOOKUP": tables.fSF_RECIP_LOOKUP,
              "fSF_INVSQRT_LOOKUP": tables.fSF_INVSQRT_LOOKUP,
              "_np": np, "_inf": math.inf, "_nan": math.nan, "_i8": np.int8, "_u8": np.uint8, "_i16": np.int16,
              "_u16": np.uint16, "_i32": np.int32, "_u32": np.uint32, "_i64": np.int64, "_u64": np.uint64}


# The gather/scatter logging macros of the vendor's mmvec/macros.def (their bodies reach the simulator's VTCM log):
# per macro, element size and the positions of (EA, OFFSET, byte index base IDX, region length LEN, source
# vector IN or None, Q register or None, ALIGNMENT or None) among its arguments. The element's byte i0 moves
# between EA+i0 and vector byte size*IDX+i0 when OFFSET+i0 <= LEN (inside the region [Rt, Rt+Mu]) and its Q
# bit (size*IDX+i0) is set; a gather reads every byte into vtmp, as the vendor's GATHER_FUNCTION does.
VTCM: dict[str, tuple] = {
    "fVLOG_VTCM_GATHER_WORD": (4, 0, 1, 2, 3, None, None, None),
    "fVLOG_VTCM_GATHER_HALFWORD": (2, 0, 1, 2, 3, None, None, None),
    "fVLOG_VTCM_GATHER_HALFWORD_DV": (2, 0, 1, 2, 5, None, None, None),
    "fVLOG_VTCM_GATHER_WORDQ": (4, 0, 1, 2, 4, None, 3, None),
    "fVLOG_VTCM_GATHER_HALFWORDQ": (2, 0, 1, 2, 4, None, 3, None),
    "fVLOG_VTCM_GATHER_HALFWORDQ_DV": (2, 0, 1, 2, 6, None, 5, None),
    "fVLOG_VTCM_WORD": (4, 0, 1, 3, 4, 2, None, None),
    "fVLOG_VTCM_HALFWORD": (2, 0, 1, 3, 4, 2, None, None),
    "fVLOG_VTCM_HALFWORD_DV": (2, 0, 1, 3, 6, 2, None, None),
    "fVLOG_VTCM_WORDQ": (4, 0, 1, 3, 5, 2, 4, None),
    "fVLOG_VTCM_HALFWORDQ": (2, 0, 1, 3, 5, 2, 4, None),
    "fVLOG_VTCM_HALFWORDQ_DV": (2, 0, 1, 3, 7, 2, 4, None),
    "fVLOG_VTCM_WORD_INCREMENT": (4, 0, 1, 3, 5, 2, None, 4),
    "fVLOG_VTCM_HALFWORD_INCREMENT": (2, 0, 1, 3, 5, 2, None, 4),
    "fVLOG_VTCM_HALFWORD_INCREMENT_DV": (2, 0, 1, 3, 7, 2, None, 6),
}


class Core(Protocol):
    """What generated semantics call on the core model (the executor provides it)."""
    def read_reg(self, name: str) -> int: ...
    def write_reg(self, name: str, value: int) -> None: ...
    def read_pred(self, n: int) -> int: ...
    def write_pred(self, n: int, value: int) -> None: ...
    def new_pred(self, n: int) -> int: ...
    def usr_get(self, field: str) -> int: ...
    def usr_set(self, field: str, value: int) -> None: ...
    def read_gp(self) -> int: ...
    def read_npc(self) -> int: ...
    def load(self, size: int, ea: int) -> int: ...
    def store(self, size: int, ea: int, value: int) -> None: ...
    def load_locked(self, size: int, ea: int) -> int: ...
    def store_conditional(self, size: int, ea: int, value: int) -> int: ...
    def load_vector(self, ea: int, unaligned: bool) -> np.ndarray: ...
    def store_vector(self, ea: int, value: np.ndarray, mask: np.ndarray | None, unaligned: bool) -> None: ...
    def branch(self, target: int) -> None: ...
    def call(self, target: int) -> None: ...
    def trap(self, kind: int, imm: int) -> None: ...
    def circ_add(self, reg: int, incr: int, m: int, mnum: int) -> int: ...
    fpflags: int  # the IEEE exception flags (emu.dsp.ieee) the instruction raised
    rounding: int  # the rounding mode float operations use (USR.FPRND: emu.dsp.ieee.NEAREST ...)
    def vtmp(self) -> np.ndarray: ...
    def read_vreg(self, n: int) -> np.ndarray: ...
    def write_vreg(self, n: int, value: np.ndarray) -> None: ...
    def vtcm_begin(self) -> None: ...  # a gather or scatter starts: an empty element log
    def vtcm_element(self, ea: int, offset: int, length: int, size: int, index: int, data: np.ndarray | None,
                     q: np.ndarray | None, align: int) -> None: ...  # data None: a gather
    def vtcm_add(self, size: int) -> None: ...  # the scatter adds its size-byte elements to memory
    def vtcm_finish(self) -> None: ...  # a gather: vtmp gets the bytes read; a scatter: its stores


def _wrap(t: ir.Type, code: str) -> str:
    return f"{'s' if t.signed else 'u'}{t.bits}({code})"


def _name(v: str) -> str:
    return "v_" + v


@dataclass(frozen=True)
class Compiled:
    tag: str
    fn: object
    inputs: tuple
    outputs: tuple
    source: str


class _Gen:
    def __init__(self, sem: Semantics):
        self.sem = sem
        self.lines: list[str] = []
        self.depth = 1
        self.loops: list[tuple | None] = []  # per enclosing loop: the step statements a `continue` runs

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    # ---- statements ----
    def stmts(self, body: tuple) -> None:
        n = len(self.lines)
        for s in body:
            self.stmt(s)
        if len(self.lines) == n:
            self.emit("pass")

    def stmt(self, s) -> None:
        if isinstance(s, ir.Set):
            self.assign(s.target, self.expr(s.value))
        elif isinstance(s, ir.Do):
            code = self.expr(s.x)
            if code:
                self.emit(code)
        elif isinstance(s, ir.Local):
            t = s.var.t
            init = f"_np.zeros({_VEC_BYTES[t.kind]}, _np.uint8)" if t.kind in _VEC_BYTES else (
                "0.0" if t.kind == "float" else "0")
            self.emit(f"{_name(s.var.name)} = {init}")
        elif isinstance(s, ir.If):
            self.emit(f"if {self.expr(s.c)}:")
            self.block(s.then)
            if s.orelse:
                self.emit("else:")
                self.block(s.orelse)
        elif isinstance(s, ir.Loop):
            self.emit("while True:")
            self.depth += 1
            if s.test_first:
                self.stmts(s.pre)
                self.emit(f"if not {self.expr(s.c)}: break")
            self.loops.append(s.step if s.test_first else None)
            self.stmts(s.body)
            self.loops.pop()
            if s.test_first:
                self.stmts(s.step)
            else:
                self.stmts(s.pre)
                self.emit(f"if not {self.expr(s.c)}: break")
            self.depth -= 1
        elif isinstance(s, ir.Jump):
            if s.kind == "break":
                self.emit("break")
            elif s.kind == "continue":
                if not self.loops or self.loops[-1] is None:
                    raise CompileError("continue outside a for/while loop")
                self.stmts(self.loops[-1])
                self.emit("continue")
            elif s.kind == "cancel":
                self.emit("return None")
            else:
                self.emit(f"return {self.result()}")
        else:
            raise CompileError(f"backend: statement {type(s).__name__}")

    def block(self, body: tuple) -> None:
        self.depth += 1
        self.stmts(body)
        self.depth -= 1

    def assign(self, target, value: str) -> None:
        if isinstance(target, ir.Var):
            if target.t.kind in _VEC_BYTES:
                self.emit(f"{_name(target.name)}[:] = {value}")
            else:
                self.emit(f"{_name(target.name)} = {value}")
        elif isinstance(target, ir.Lane):
            self.emit(f"{self.vector(target.vec)}.view({_DTYPES[target.t.bits, target.t.signed]})"
                      f"[{self.expr(target.index)}] = {value}")
        elif isinstance(target, ir.Half):
            k = self.expr(target.index)
            self.emit(f"{self.vector(target.pair)}[({k}) * 128:({k}) * 128 + 128] = {value}")
        else:
            raise CompileError("backend: assignment target")

    def result(self) -> str:
        return "(" + "".join(f"{_name(n)}, " for n, _ in self.sem.outputs) + ")"

    # ---- expressions ----
    def vector(self, x) -> str:
        if isinstance(x, ir.Half):
            k = self.expr(x.index)
            return f"{self.vector(x.pair)}[({k}) * 128:({k}) * 128 + 128]"
        return self.expr(x)

    def expr(self, x) -> str:
        if isinstance(x, ir.Const):
            if isinstance(x.value, float):
                return "_nan" if x.value != x.value else ("_inf" if x.value == math.inf else repr(x.value))
            return repr(x.value)
        if isinstance(x, ir.Var):
            return _name(x.name)
        if isinstance(x, ir.Bin):
            return self.binary(x)
        if isinstance(x, ir.Un):
            a = self.expr(x.x)
            if x.op == "!":
                return f"int(not {a})"
            if x.t.kind == "float":
                return f"(-{a})"
            return _wrap(x.t, f"{x.op}{a}")
        if isinstance(x, ir.Conv):
            return self.convert(x.t, x.x)
        if isinstance(x, ir.Select):
            return f"({self.expr(x.a)} if {self.expr(x.c)} else {self.expr(x.b)})"
        if isinstance(x, ir.Lane):
            return f"int({self.vector(x.vec)}.view({_DTYPES[x.t.bits, x.t.signed]})[{self.expr(x.index)}])"
        if isinstance(x, ir.Half):
            return self.vector(x)
        if isinstance(x, ir.Prim):
            return self.prim(x)
        raise CompileError(f"backend: expression {type(x).__name__}")

    def binary(self, x: ir.Bin) -> str:
        a, b, op, t = self.expr(x.a), self.expr(x.b), x.op, x.t
        if op in ("==", "!=", "<", ">", "<=", ">="):
            if x.a.t.kind == "float":
                return f"fcmp(S, {op!r}, {a}, {b})"
            return f"int({a} {op} {b})"
        if op in ("&&", "||"):
            return f"int(bool({a}) {'and' if op == '&&' else 'or'} bool({b}))"
        if t.kind == "float":
            if op not in ("+", "-", "*", "/"):
                raise CompileError(f"backend: float {op}")
            return f"fop(S, {op!r}, {a}, {b}, {t.bits}, _rnd)"
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("<<", ">>"):
            n = x.b.value if isinstance(x.b, ir.Const) else -1
            if 0 <= n < t.bits:
                code = f"({a} {op} {n})"
            else:
                code = f"{'shl' if op == '<<' else 'shr'}({a}, {b}, {t.bits})"
            return code if op == ">>" else _wrap(t, code)
        if op == "/":
            return _wrap(t, f"cdiv({a}, {b})")
        if op == "%":
            return _wrap(t, f"cmod({a}, {b})")
        return _wrap(t, f"{a} {op} {b}")

    def convert(self, t: ir.Type, x) -> str:
        a, f = self.expr(x), x.t
        if t.kind == "int" and f.kind == "int":
            widening = t.bits >= f.bits and (t.signed == f.signed or (t.signed and t.bits > f.bits))
            return a if widening or (not f.signed and t.bits > f.bits) else _wrap(t, a)
        if t.kind == "int" and f.kind == "float":  # a C cast truncates whatever the rounding mode
            return f"f2i(S, {a}, {t.bits}, {t.signed})"
        if t.kind == "float" and f.kind == "int":
            return f"i2f(S, {a}, {t.bits}, _rnd)"
        if t.kind == "float" and f.kind == "float":
            return f"f2f(S, {a}, {t.bits}, _rnd)" if t.bits < f.bits else a
        raise CompileError(f"backend: convert {f} to {t}")

    def prim(self, x: ir.Prim) -> str:
        n = x.name
        args = [repr(a) if isinstance(a, str) else self.expr(a) for a in x.args]
        simple = {"READ_RREG": "S.read_reg", "WRITE_RREG": "S.write_reg", "READ_PREG": "S.read_pred",
                  "WRITE_PREG": "S.write_pred", "GET_USR_FIELD": "S.usr_get", "SET_USR_FIELD": "S.usr_set",
                  "fREAD_GP": "S.read_gp", "fREAD_NPC": "S.read_npc", "fCALL": "S.call", "fCALLR": "S.call",
                  "fTRAP": "S.trap", "fTMPVDATA": "S.vtmp", "WRITE_EXT_VREG": "S.write_vreg",
                  "mem_load_locked": "S.load_locked", "mem_store_conditional": "S.store_conditional"}
        if n in simple:
            if n == "mem_load_locked":
                args = args[::-1]
            elif n == "mem_store_conditional":
                args = [args[2], args[0], args[1]]
            elif n == "WRITE_EXT_VREG":
                args = args[:2]
            return f"{simple[n]}({', '.join(args)})"
        if n in VTCM:
            size, *pos = VTCM[n]
            ea, off, idx, length, data, q, align = (("None" if k is None else args[k]) for k in pos)
            return (f"S.vtcm_element({ea}, {off}, {length}, {size}, {idx}, {data}, {q}, "
                    f"{1 if align == 'None' else align})")
        if n in ("fGATHER_INIT", "fSCATTER_INIT"):
            return "S.vtcm_begin()"
        if n in ("fGATHER_FINISH", "fSCATTER_FINISH"):
            return "S.vtcm_finish()"
        if n == "fLOG_SCATTER_OP":
            return f"S.vtcm_add({args[0]})"
        if n == "_item":  # one item of a by-reference primitive's result tuple
            return f"{args[0]}[{args[1]}]"
        if n == "READ_EXT_VREG":
            return f"S.read_vreg({args[0]})"
        if n in ("fLSBNEW0", "fLSBNEW1"):
            return f"(S.new_pred({n[-1]}) & 1)"
        if n == "fLSBNEW":
            return f"({args[0]} & 1)"
        if n in ("fNEWREG", "fNEWREG_ST"):  # the producer's logged 32 bits, as the signed value they stand for
            return _wrap(x.t, args[0])
        if n == "fNEWVREG":
            return args[0]
        if n.startswith("MEM_LOAD"):
            return f"S.load({n[-1]}, {args[0]})"
        if n.startswith("MEM_STORE"):
            return f"S.store({n[-1]}, {args[0]}, {args[1]})"
        if n in ("fLOADMMV", "fLOADMMVU"):
            return f"S.load_vector({args[0]}, {n.endswith('U')})"
        if n in ("fSTOREMMV", "fSTOREMMVU"):
            return f"S.store_vector({args[0]}, {args[1]}, None, {n.endswith('U')})"
        if n in ("fSTOREMMVQ", "fSTOREMMVNQ"):
            mask = args[2] if n == "fSTOREMMVQ" else f"fNOTQ({args[2]})"
            return f"S.store_vector({args[0]}, {args[1]}, {mask}, False)"
        if n == "fBRANCH":
            return f"S.branch({args[0]})"
        if n == "fcirc_add":
            return f"S.circ_add({', '.join(args)})"
        if n == "fRAISEFLAGS":
            return f"S.fpflags |= {ieee.FLAGS[x.args[0]]}"
        if n == "fFPCANCELFLAGS":
            return "S.fpflags = 0"
        if n == "fpclassify":
            return f"fpclassify({args[0]}, {x.args[0].t.bits})"
        if n in _FLAGGED:
            return f"{n}(S, {', '.join(args + (['_rnd'] if n in _ROUNDED else []))})"
        if n == "fFPSETROUND_CHOP":
            return f"_rnd = {ieee.TOWARD_ZERO}"
        if n == "fFPSETROUND_NEAREST":
            return f"_rnd = {ieee.NEAREST}"
        if x.t == ir.VOID and n not in _NAMESPACE:
            return ""  # no effect on the state this model keeps
        if n not in _NAMESPACE:
            raise CompileError(f"backend: no implementation of {n}")
        return f"{n}({', '.join(args)})"

    def function(self) -> str:
        sem = self.sem
        params = ", ".join(["S", *(_name(n) for n, _ in sem.inputs)])
        head = [f"def {sem.tag}({params}):", "    v_EA = 0"]
        ins = {n for n, _ in sem.inputs}
        for n in sorted(_lanes_set(sem.body) & ins - {n for n, _ in sem.outputs}):  # fVALIGN(VvV.uw[i], 4)
            head.append(f"    {_name(n)} = {_name(n)}.copy()")  # writes a lane of an input: not the register
        for n, t in sem.outputs:
            if n in ins:
                if t.kind in _VEC_BYTES:
                    head.append(f"    {_name(n)} = {_name(n)}.copy()")
            elif t.kind in _VEC_BYTES:
                head.append(f"    {_name(n)} = _np.zeros({_VEC_BYTES[t.kind]}, _np.uint8)")
            else:
                head.append(f"    {_name(n)} = 0")
        self.stmts(sem.body)
        self.emit(f"return {self.result()}")
        if any("_rnd" in line for line in self.lines):  # a float operation: USR's rounding mode
            head.insert(1, "    _rnd = S.rounding")
        return "\n".join(head + self.lines) + "\n"


def _lanes_set(body) -> set[str]:
    """The vectors whose lanes the statements assign."""
    out: set[str] = set()
    for s in body:
        if isinstance(s, ir.Set) and isinstance(s.target, ir.Lane | ir.Half):
            v = s.target.vec if isinstance(s.target, ir.Lane) else s.target.pair
            while isinstance(v, ir.Half):
                v = v.pair
            if isinstance(v, ir.Var):
                out.add(v.name)
        for sub in ("then", "orelse", "body", "pre", "step"):
            if isinstance(getattr(s, sub, None), tuple):
                out |= _lanes_set(getattr(s, sub))
    return out


def compile_semantics(sem: Semantics) -> Compiled:
    return _from_source(sem.tag, (_Gen(sem).function(), sem.inputs, sem.outputs))


_COMPILED: dict[tuple[int, str], Compiled | CompileError] = {}
_SOURCES: dict[str, tuple | str] | None = None  # tag -> (source, inputs, outputs), or the CompileError text
_NEW: dict[str, tuple | str] = {}
_COMPILER = ("cpp", "syntax", "library", "fixups", "ir", "lower", "pyback", "runtime", "ieee", "tables", "operands",
             "isa")


def _cache_file() -> Path:
    """The generated sources, keyed by the compiler's own source and the vendor version."""
    h = hashlib.sha256(f"{QEMU_VERSION}/{SCHEMA}".encode())
    for m in _COMPILER:
        h.update((Path(__file__).parent / f"{m}.py").read_bytes())
    return cache_root() / f"semantics-{h.hexdigest()[:16]}.pickle"


def _load_sources() -> dict:
    global _SOURCES
    if _SOURCES is None:
        try:
            with open(_cache_file(), "rb") as f:
                _SOURCES = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            _SOURCES = {}
    return _SOURCES


def _save_sources() -> None:
    """Merge this process's new compilations into the cache file (atomically; unwritable: no cache)."""
    path = _cache_file()
    try:
        merged = {**_load_sources(), **_NEW}
        try:
            with open(path, "rb") as f:
                merged = {**pickle.load(f), **merged}
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as f:
            pickle.dump(merged, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(f.name, path)
    except OSError:
        pass


def _from_source(tag: str, entry: tuple) -> Compiled:
    src, inputs, outputs = entry
    ns = dict(_NAMESPACE)
    exec(compile(src, f"<hexagon {tag}>", "exec"), ns)
    return Compiled(tag, ns[tag], inputs, outputs, src)


def semantics(isa: ISA, tag: str) -> Compiled:
    """The compiled semantics of one instruction (CompileError if it has none): compiled once, the generated
    source cached on disk next to the vendor data for later processes."""
    key = (id(isa), tag)
    c = _COMPILED.get(key)
    if c is None:
        entry = _load_sources().get(tag)
        if entry is None:
            try:
                c = compile_semantics(lower(isa, isa.insns[tag]))
                entry = (c.source, c.inputs, c.outputs)
            except CompileError as e:
                c, entry = e, str(e)
            if not (isinstance(c, CompileError) and tables.missed()):  # else perhaps for want of a table here
                if not _NEW:
                    atexit.register(_save_sources)
                _NEW[tag] = entry
        else:
            c = CompileError(entry) if isinstance(entry, str) else _from_source(tag, entry)
        _COMPILED[key] = c
    if isinstance(c, CompileError):
        raise c
    return c
