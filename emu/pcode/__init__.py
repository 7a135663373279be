"""AMD ISA pseudocode compiler: every instruction's semantics compiled from the vendor pcode text.

    from emu.pcode import compile_op, Unsupported
    sem = compile_op('rdna3', 'VOP3', 'V_ADD_F32')   # cached
    out = sem(st, lanes)                              # dict name -> value of what it writes

Pipeline: syntax (lexer, parser) -> lower (typed IR, emu.pcode.ir) -> pyback (Python/numpy source, compiled once).
Corrections to the vendor text live in one table, emu.pcode.fixups.

Calling contract of `sem(st, lanes)`:
- `sem.reads` / `sem.writes`: the top-level names the pcode reads / assigns (S0 S1 S2 D0 SCC VCC EXEC M0 SIMM16
  SIMM32 PC ADDR DATA DATA2 OFFSET OFFSET0 OFFSET1 MODE laneId-free ...; dotted names such as
  'WAVE_STATUS.PRIV' are passed as spelled). A name both read and written (e.g. D0 of V_FMAC_F32, or
  RETURN_DATA of a D16 load that keeps half the register) must be given with its current value.
  `sem.widths[name]`: bits of each such operand as the pcode types it.
  `sem.files`: memories and register files touched ('MEM', 'LDS', 'VGPR', 'SGPR', 'HW_REGISTERS').
- Vector ops (VALU/VMEM/DS spaces): operands are numpy arrays of shape (lanes,) holding raw bits zero-extended
  in uint64 (a Python int is accepted for a uniform operand). Operands wider than 64 bits (128-bit DATA,
  RETURN_DATA, VDATA, D0.b128) are (ndwords, lanes) uint64 arrays, one 32-bit dword per row, row 0 least
  significant; results of that width are returned the same way. Wave-wide masks (EXEC, VCC, and any name the
  pcode indexes by laneId, e.g. D0 of V_CMP_*) are Python ints, bit i = lane i, in and out; a mask result has
  every lane computed and inactive lanes' bits as computed (or, for SetLaneBit targets read back, unchanged):
  the caller applies EXEC.
- Scalar ops (SOP1 SOP2 SOPC SOPK SOPP SMEM): operands and results are Python ints (raw bits).
- All lanes are computed; the caller applies EXEC to per-lane results. `st['EXEC']` is given when read.
- Memory: `st['MEM']` (and `st['LDS']` where the pcode names LDS) has `load(addr, bits, active)` and
  `store(addr, bits, value, active)` with uint64 arrays over lanes and a bool array of the lanes to touch;
  accesses happen only for `st['ACTIVE']` (bool array over lanes) and the lanes the pcode's own conditions
  select. Addresses computed by the encoding (CalcGlobalAddr, CalcDsAddr, CalcBufferAddr, ...) are read as
  `st['ADDR']` (per-lane uint64 byte address), since they depend on encoding fields only the executor knows.
  Ops that both load and store memory (atomics) run lane by lane in lane order, so same-address atomics of
  different lanes serialize.
- Register files: `st['VGPR']` is a 2-D array indexed [lane, reg] (uint32; a (regs, lanes) array's `.T` view
  works), `st['SGPR']` / `st['HW_REGISTERS']` 1-D arrays; they are read and written in place (writes only
  for active lanes when the lane index is per lane).
- MODE (int) is read where the pcode refers to it (WAVE_MODE.IEEE, ROUND_MODE); without a ROUND_MODE reference
  float results round to nearest even. WAVE64 is `lanes == 64`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from emu.amd import isa as _isa
from emu.pcode import pyback
from emu.pcode.fixups import fixup
from emu.pcode.ir import Func
from emu.pcode.lower import Lowerer, Unsupported
from emu.pcode.syntax import PcodeSyntaxError, parse

__all__ = ["compile_op", "Unsupported", "Semantics", "PcodeSyntaxError", "SCALAR_SPACES", "lower_op", "pcode_of"]

SCALAR_SPACES = frozenset({"SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM"})
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
                    out[k] = v
                else:
                    out[k][..., lane] = v[..., lane]
        if not out:
            out = {k: v for k, v in self.fn({**st, "ACTIVE": np.zeros(lanes, bool)}, lanes).items()}
        return out


def pcode_of(arch: str, space: str, name: str) -> tuple[str | None, str | None]:
    """(pcode text after fixups, fixup reason or None) of an instruction."""
    fam = _isa.family(arch)
    op = _isa.load(fam).by_name.get((space, name))
    if op is None:
        raise Unsupported(f"{fam} has no instruction {space} {name}")
    fx = fixup(fam, name)
    if fx is not None:
        return fx.apply(op.pcode), fx.reason
    return op.pcode, None


def _callee(fam: str, name: str) -> str | None:
    by = _isa.load(fam).by_name
    for sp in _CALLEE_SPACES:
        if (sp, name) in by:
            text, _ = pcode_of(fam, sp, name)
            if text:
                return text
    return None


def lower_op(arch: str, space: str, name: str) -> Func:
    """The typed IR of an instruction (raises Unsupported or PcodeSyntaxError)."""
    fam = _isa.family(arch)
    text, reason = pcode_of(fam, space, name)
    if text is None:
        raise Unsupported(reason or f"{name} has no pcode")
    tree = parse(text)
    return Lowerer(name, space not in SCALAR_SPACES, lambda n: _callee(fam, n)).run(tree)


@functools.cache
def compile_op(arch: str, space: str, name: str) -> Semantics:
    """The compiled semantics of instruction `name` of opcode space `space` (cached)."""
    f = lower_op(arch, space, name)
    fn, src = pyback.build(f)
    writes = frozenset(f.outputs) | f.file_writes
    reads = frozenset(f.inputs) | (f.files - {"ACTIVE"})
    widths = {**f.inputs, **f.outputs}
    serial = f.vector and any(m in f.files and m in f.file_writes and _loads(f, m) for m in ("MEM", "LDS"))
    return Semantics(name, reads, writes, widths, f.files, f, src, fn, serial)


def _loads(f: Func, file: str) -> bool:
    from emu.pcode.ir import Op
    found = False

    def visit(x):
        nonlocal found
        if isinstance(x, Op):
            if x.op == "load" and x.attr == file:
                found = True
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
