"""AMD ISA pseudocode compiler: every instruction's semantics compiled from the vendor pcode text.

    from emu.pcode import compile_op, Unsupported
    sem = compile_op('rdna3', 'VOP3', 'V_ADD_F32')   # family, instruction set or gfx name, space, vendor name
    out = sem(st, lanes)                              # dict: written name -> value

Pipeline: syntax (lexer, parser) -> lower, lower_expr, typed, library (typed IR, emu.pcode.ir) -> pyback
(Python/numpy source over lanes, compiled once; helpers in runtime and floats). Corrections to the vendor text:
one table, emu.pcode.fixups (matrix ops: generated pcode, emu.pcode.matrix); instructions a chip has that the
vendor tables do not list, with their pcode: one table, emu.pcode.added.
`python -m emu.pcode.coverage --arch rdna3` reports what compiles.
An instruction without usable pcode raises `Unsupported(reason)` from compile_op, never a silent no-op.

Calling contract of `sem(st, lanes)` (`lanes`: the wave size, 32 or 64, also for scalar ops):
- `sem.reads`: names the pcode reads (S0 S1 S2 D0 SCC VCC EXEC M0 SIMM16 SIMM32 PC MODE ADDR DATA DATA2 OFFSET
  OFFSET0 OFFSET1 RETURN_DATA SRC0 VDST OPSEL NEG ..., dotted names such as 'WAVE_STATUS.PRIV' as spelled) plus
  the memories / register files / callouts it uses ('MEM', 'LDS', 'VGPR', 'SGPR', 'HW_REGISTERS', 'FORMAT').
  `sem.writes`: names it assigns (D0 D1 SCC VCC EXEC PC RETURN_DATA VDATA SDATA M0 ...) plus files it stores to.
  A name in both (D0 of V_FMAC_F32, RETURN_DATA of a D16 load that keeps half the register, D0 assigned on
  some paths only) must be given with its current value. `sem.masks`: those of them that are wave-wide lane
  masks (see below). `sem.widths[name]`: bits of each read or written operand as the pcode types it (D0: 64
  for .u64/.b64; a source only sliced, like S1[4 : 0], counts 5; an output the widest part assigned, not read:
  `D0.i32 = tmp; SCC = D0.u64 != 0` writes 32 bits). `sem.source`: the generated Python.
- Vector ops (every space but SOP1 SOP2 SOPC SOPK SOPP SMEM): operands are numpy arrays of shape (lanes,) of
  raw bits zero-extended in uint64 (a Python int is accepted for a uniform operand). Operands wider than 64
  bits (128-bit DATA / RETURN_DATA / VDATA, D0.b128) are (ndwords, lanes) uint64 arrays, one 32-bit dword per
  row, row 0 least significant; results that wide come back the same way. Per-lane results are (lanes,) uint64.
  Wave-wide masks (EXEC, VCC, and any name the pcode indexes by laneId, e.g. D0 of V_CMP_*) are Python ints,
  bit i = lane i, in and out. D1 of VOP3SD carry-outs written as `D1.u1` is per lane (0/1 array).
- Scalar ops: operands and results are Python ints (raw bits, any width).
- All lanes are computed; the caller applies EXEC to per-lane results and to mask results (a V_CMP writes a
  bit for every lane). Encoding fields the pcode names (OPSEL, NEG, OFFSET0, SRC0 / VDST register numbers, ...)
  are ints in st. Integer sums written to D0 of a vector op (and the carry-out adds and subtracts) also read CLAMP
  (the encoding's clamp bit): set, the sum saturates to D0's type instead of wrapping; float clamping and the
  other source/result modifiers stay the caller's.
- Memory: `st['MEM']` (and `st['LDS']` where the pcode says LDS) has `load(addr, bits, active) -> uint64 array`
  and `store(addr, bits, value, active)`, arrays over lanes, `active` the bool array of lanes to touch (bits
  8/16/32/64; wider accesses are split into dwords). Memory is touched only for `st['ACTIVE']` (bool array over
  lanes; default all) and only for lanes the pcode's own conditions select. Addresses the encoding computes
  (CalcGlobalAddr, CalcDsAddr, CalcBufferAddr, CalcImageAddr, ...) are read as `st['ADDR']` (per-lane uint64
  byte address): they depend on encoding fields only the executor knows. Some texts add the instruction
  offset themselves (RDNA3 DS_LOAD_B32: `MEM[ADDR + OFFSET.u32]`) and some do not (DS_ADD_U32: `MEM[ADDR]`):
  when OFFSET / OFFSET0 / OFFSET1 is in `sem.reads`, pass ADDR without it, else with it. Ops that both load
  and store memory (atomics) run lane by lane in lane order, so same-address atomics of different lanes
  serialize.
- Formatted buffer ops: `st['FORMAT']` has `offset(channel) -> bytes`, `bits(channel) -> memory bits` and
  `decode(raw, channel)` / `encode(value, channel)` (uint64 arrays; channel 0..3 = X..W).
- Register files: `st['VGPR']` is a 2-D array indexed [lane, reg] (uint32; a (regs, lanes) array's `.T` view
  works), `st['SGPR']` / `st['HW_REGISTERS']` 1-D arrays. They are read and written in place (per-lane writes
  only for ACTIVE lanes); an index out of range raises runtime.RegisterIndexError. Cross-lane ops (readlane,
  permlane, ds_swizzle, matrix ops) work this way; matrix ops ignore EXEC: pass ACTIVE all true.
- Callouts: what depends on machine configuration is a function in st: `st['HwRegWriteMask'](reg, priv)`, the
  writable bits of hardware register `reg` (S_SETREG).
- MODE (int) is read where the pcode refers to it (WAVE_MODE.IEEE = bit 9, ROUND_MODE = bits 1:0), by every
  op with a basic float operation (add sub mul div fma sqrt), which rounds as MODE.FP_ROUND says (bits 1:0 for
  f32, 3:2 for f16 and f64; 0 nearest even), and by conversions that can be inexact, which round by the field
  of their result's type unless the text sets ROUND_MODE. Other float results round to nearest even. Vector
  ops keep denormals (the executor flushes their inputs and results per MODE.FP_DENORM, emu.amd.exec.valu);
  scalar ops flush their f16 / f32 sources (S0 S1 S2 D0) and float D0 results per MODE.FP_DENORM themselves.
  Not given, MODE is ir.DEFAULT_MODE (nearest even, denormals kept).
  WAVE64 is `lanes == 64`.
- A case the semantics do not model (e.g. ds_swizzle FFT mode) raises Unsupported when a lane reaches it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from emu.pcode import pyback
from emu.pcode.fixups import fixup, fnuz
from emu.pcode.ir import Func
from emu.pcode.lower import Lowerer
from emu.pcode.pyback import ROUNDED
from emu.pcode.source import vendor
from emu.pcode.syntax import PcodeSyntaxError, parse
from emu.pcode.typed import Unsupported

__all__ = ["compile_op", "Unsupported", "Semantics", "PcodeSyntaxError", "SCALAR_SPACES", "lower_op", "pcode_of"]

SCALAR_SPACES = frozenset({"SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM"})
_SHORT_FORMS = ("VOP1", "VOP2", "VOPC")
_CALLEE_SPACES = ("VOP3", "VOP2", "VOP1", "VOPC", "VOP3P", "SOP2", "SOP1")


@dataclass(eq=False)
class Semantics:
    """One instruction's compiled semantics; call it as sem(st, lanes)."""
    name: str
    reads: frozenset[str]
    writes: frozenset[str]
    widths: dict[str, int]
    files: frozenset[str]
    ir: Func
    source: str
    fn: object = field(repr=False)
    serial: bool = False  # memory read-modify-write: run lane by lane

    @property
    def access_bits(self) -> int:
        """Bits of the widest single memory access (MEM / LDS) the semantics make; 0 for none."""
        return max((b for _, fl, b in _accesses(self.ir) if fl in ("MEM", "LDS")), default=0)

    @property
    def masks(self) -> frozenset[str]:
        """Names read or written as wave-wide lane masks (Python ints, bit i = lane i)."""
        return self.ir.masks & (self.reads | self.writes)

    def __call__(self, st: dict, lanes: int) -> dict:
        with np.errstate(all="ignore"):
            if not self.serial:
                return self.fn(st, lanes)
            return self._serial(st, lanes)

    def _serial(self, st: dict, lanes: int) -> dict:
        active = np.broadcast_to(np.asarray(st.get("ACTIVE", True), bool), (lanes,))
        out: dict = {}
        one = dict(st)
        for lane in np.flatnonzero(active):
            only = np.zeros(lanes, bool)
            only[lane] = True
            one["ACTIVE"] = only
            res = self.fn(one, lanes)
            for k, v in res.items():
                if k in self.ir.masks:
                    prev = out.get(k, st.get(k, 0) if k in self.reads else v)
                    out[k] = (prev & ~(1 << int(lane))) | (v & (1 << int(lane)))
                elif k not in out:
                    out[k] = np.array(v, copy=True)
                else:
                    out[k][..., lane] = v[..., lane]
        if not out:
            out = {k: v for k, v in self.fn({**st, "ACTIVE": np.zeros(lanes, bool)}, lanes).items()}
        return out


def pcode_of(arch: str, space: str, name: str) -> tuple[str | None, str | None]:
    """(pcode text after fixups, fixup reason or None) of an instruction of the instruction set of `arch` (a gfx
    name, a generation's instruction set or a family name: the family's whole tables)."""
    fam, iset = vendor().family(arch), vendor().name(arch)
    by = vendor().load(iset).by_name
    op = by.get((space, name))
    if op is None:
        raise Unsupported(f"{iset} has no instruction {space} {name}")
    text = op.pcode
    if text is None:  # the VOP3 form of a VOP1 / VOP2 / VOPC op: CDNA's table gives the text with the short form
        text = next((by[sp, name].pcode for sp in _SHORT_FORMS if (sp, name) in by and by[sp, name].pcode), None)
    fx = fixup(fam, name)
    reason = None
    if fx is not None:
        text, reason = fx.apply(text), fx.reason
    if text and vendor().fp8(arch) == "fnuz":
        text = fnuz(text)
    return text, reason


def _callee(iset: str, name: str) -> str | None:
    by = vendor().load(iset).by_name
    for sp in _CALLEE_SPACES:
        if (sp, name) in by:
            text, _ = pcode_of(iset, sp, name)
            if text:
                return text
    return None


def lower_op(arch: str, space: str, name: str) -> Func:
    """The typed IR of an instruction (raises Unsupported)."""
    iset = vendor().name(arch)
    text, reason = pcode_of(arch, space, name)
    if text is None:
        raise Unsupported(reason or f"{name} has no pcode")
    try:
        tree = parse(text)
    except PcodeSyntaxError as e:
        raise Unsupported(f"pcode is not parseable (prose?): {e}") from e
    return Lowerer(name, space not in SCALAR_SPACES, lambda n: _callee(iset, n)).run(tree)


def compile_op(arch: str, space: str, name: str) -> Semantics:
    """The compiled semantics of instruction `name` of opcode space `space` (cached per instruction set: the
    generation's, whose opcodes, and fp8 / bf8 formats on CDNA3, differ from the family's tables)."""
    return _compile(vendor().name(arch), space, name)


@functools.cache
def _compile(fam: str, space: str, name: str) -> Semantics:
    f = lower_op(fam, space, name)
    fn, src = pyback.build(f)
    writes = frozenset(f.outputs) | f.file_writes
    reads = frozenset(f.inputs) | f.files | ({"MODE"} if rounds(f) else frozenset())
    widths = {**f.inputs, **f.outputs}
    serial = f.vector and any(m in f.files and m in f.file_writes and _loads(f, m) for m in ("MEM", "LDS"))
    return Semantics(name, reads, writes, widths, f.files, f, src, fn, serial)


def _nodes(f: Func):
    """Every Op and Store of the IR."""
    from emu.pcode.ir import Op, Store
    found = []

    def visit(x):
        if isinstance(x, (Op, Store)):
            found.append(x)
        if isinstance(x, Op):
            for a in x.args:
                visit(a)
        elif isinstance(x, tuple):
            for a in x:
                visit(a)
        elif hasattr(x, "__dataclass_fields__"):
            for k in x.__dataclass_fields__:
                visit(getattr(x, k))
    visit(f.body)
    return found


def _accesses(f: Func) -> list[tuple[str, str, int]]:
    """(load / store, file, bits) of every memory and register-file access in the IR."""
    from emu.pcode.ir import Op
    return [("load", n.attr, n.ty.bits) if isinstance(n, Op) else ("store", n.file, n.bits)
            for n in _nodes(f) if not isinstance(n, Op) or n.op == "load"]


def rounds(f: Func) -> bool:
    """Whether the IR has a basic float operation whose rounding MODE.FP_ROUND selects."""
    from emu.pcode.ir import Op
    return any(isinstance(n, Op) and n.op in ROUNDED and n.ty.kind == "f" for n in _nodes(f))


def _loads(f: Func, file: str) -> bool:
    return any(kind == "load" and fl == file for kind, fl, _ in _accesses(f))
