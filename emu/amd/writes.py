"""What one instruction may write, and a check that it writes nothing else (issue 23, item 4).

    allowed(inst, arch, text=None) -> set[(file, index)]    the destinations `text` (LLVM syntax) names, widths
                                                             included, plus what the definition writes implicitly
    check(code, arch, seed, text=None) -> Outcome             run one instruction on a fresh wave (tier: HWEMU_TIER)
                                                             and compare what changed with allowed()

Registers are ('s', slot) for the scalar file (operand codes: s0.., VCC 106, TTMPs, M0, EXEC) and ('v', row) for
VGPR rows (CDNA's ACC VGPRs at rows ACC..). The destinations are the leading operands of the disassembly, one per
destination field of the encoding (VOPD: of each half); a memory instruction's first operand when it writes
registers: loads (its definition writes VDATA / SDATA / VGPR) and atomics that return (glc / sc0 / TH_ATOMIC_RETURN).
The wave starts from random registers, M0 = 0 (relative moves then write the register they name), and for memory
instructions 8 MiB of random words mapped at 64 KiB that every aligned SGPR pair, VGPR row pair and buffer resource
points 2 MiB into (scratch and LDS addresses small, into a private segment and random LDS), so that offsets land.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from emu.amd import isa, target
from emu.amd.asm.memory import returns
from emu.amd.decode import Inst, decode
from emu.amd.exec.state import ACC, EXEC, VCC
from emu.amd.exec.wave import Wave
from emu.amd.memory import GPUFault
from emu.amd.memspace import Flat, Scratch
from emu.pcode import compile_op
from emu.pcode.typed import Unsupported

MEMORY = ("SMEM", "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF", "MTBUF", "MIMG", "VBUFFER", "VFLAT", "VGLOBAL",
          "VSCRATCH", "VIMAGE", "VSAMPLE")
DST_FIELDS = ("vdst", "sdst")
NAMED = {"vcc_lo": (VCC,), "vcc_hi": (VCC + 1,), "vcc": (VCC, VCC + 1), "exec_lo": (EXEC,), "exec_hi": (EXEC + 1,),
         "exec": (EXEC, EXEC + 1), "flat_scratch_lo": (102,), "flat_scratch_hi": (103,), "flat_scratch": (102, 103),
         "xnack_mask_lo": (104,), "xnack_mask_hi": (105,), "xnack_mask": (104, 105)}
IMPLICIT = {"VCC": (VCC, VCC + 1), "EXEC": (EXEC, EXEC + 1)}  # wave64's; a wave32 writes the low halves alone
_REG = re.compile(r"^(s|v|a|ttmp)(?:(\d+)|\[(\d+):(\d+)\])(?:\.[lh])?$")  # v1.l: a 16-bit half of v1
_SWAPS = re.compile(r"V_SWAP|V_PERMLANE(16|32)_SWAP")  # and v_swaprel; gfx950's lane swaps write both operands
_LOADED = frozenset({"VDATA", "SDATA", "VGPR"})  # a memory definition's register results
MAPPED, WORDS = 1 << 16, 2 << 20  # the random words of a memory instruction's wave: where, how many
POINTER = MAPPED + (2 << 20)  # where every aligned register pair points
SCRATCH_LANE = 1 << 16  # private bytes per lane
SCRATCH_BASE = MAPPED + 4 * WORDS  # the private segment, past the random words

Reg = tuple[str, int]


def endpgm(arch: str) -> bytes:
    """s_endpgm in the instruction set of `arch`: its SOPP encoding's fixed bits and opcode."""
    t = isa.load(arch)
    enc = t.encodings["SOPP"]
    word = sum(f.value << f.lo for f in enc.fixed) | t.by_name["SOPP", "S_ENDPGM"].value << enc.field("op").lo
    return word.to_bytes(4, "little")


def registers(token: str, m0: int) -> set[Reg]:
    """The registers an operand token names (none for constants, modifiers and the like)."""
    token = token.strip()
    if token == "m0":
        return {("s", m0)}
    if token in NAMED:
        return {("s", i) for i in NAMED[token]}
    m = _REG.match(token)
    if m is None:
        return set()
    kind, one, lo, hi = m.groups()
    lo, hi = (int(one), int(one)) if one is not None else (int(lo), int(hi))
    base, file = {"s": (0, "s"), "ttmp": (108, "s"), "v": (0, "v"), "a": (ACC, "v")}[kind]
    return {(file, base + i) for i in range(lo, hi + 1)}


def definition(arch: str, inst: Inst) -> frozenset[str] | None:
    """The state names the instruction's definition writes (VOPD: none besides the named VGPRs); None when it has
    none the engine compiles (e.g. gfx12's s_barrier_signal, run as a no-op; CDNA's s_memtime, a clock it reads)."""
    if inst.base == "VOPD":
        return frozenset()
    try:
        return compile_op(arch, inst.base, inst.op.name).writes
    except Unsupported:
        return None


def implicit(arch: str, inst: Inst) -> frozenset[str]:
    return definition(arch, inst) or frozenset()


def is_memory(inst: Inst) -> bool:
    return inst.base in MEMORY


def _named(inst: Inst, writes: frozenset[str] | None) -> int:
    """How many leading operands of the text are destinations."""
    if is_memory(inst):
        if writes is None:  # the engine's own (s_memtime): the data operand, unless stored
            return int(bool(inst.op.operands.keys() & {"sdata", "vdst"}) and "STORE" not in inst.op.name)
        return int(bool(writes & _LOADED) or "RETURN_DATA" in writes and returns(inst))
    if inst.base == "VOPD":
        return 1
    if _SWAPS.match(inst.op.name):  # v_swap_b32 v1, v2: LLVM's definition has both as results
        return 2
    return sum(f in inst.fields for f in DST_FIELDS)


def allowed(inst: Inst, arch: str, text: str | None = None) -> set[Reg]:
    """The registers `inst` may write: the destinations its disassembly `text` (default: hwemu's, LLVM syntax) names,
    widths included, plus what its definition writes implicitly (SCC aside: it is no register of these files)."""
    m0 = target.generation(arch).m0
    n = _named(inst, definition(arch, inst))
    writes = implicit(arch, inst)
    halves = 1 if target.generation(arch).wave_size == 32 else 2  # VCC_HI is an SGPR in wave32 (prepare's Wave)
    out: set[Reg] = set()
    for half in (text or str(inst)).split("::"):
        parts = half.split(None, 1)
        ops = parts[1].split(",") if len(parts) > 1 else []
        for tok in ops[:n]:
            out |= registers(tok.split()[0] if tok.split() else tok, m0)
    for name in writes:
        out |= {("s", i) for i in IMPLICIT.get(name, ())[:halves]}
        if name == "M0":
            out.add(("s", m0))
    if inst.base == "VOPC" and "sdst" not in inst.fields:  # the e32 form writes VCC (LLVM prints it first)
        out |= {("s", VCC + i) for i in range(halves)}
    return out


@dataclass(frozen=True)
class Outcome:
    """What running one instruction showed: `status` 'ran', 'fault' (`detail`: its kind) or 'invalid' (it does not
    decode); `extra`: registers written beyond allowed(); `scc`: SCC changed though the definition writes none."""
    status: str
    inst: Inst | None = None
    detail: str = ""
    extra: frozenset[Reg] = frozenset()
    scc: bool = False

    @property
    def violation(self) -> bool:
        return bool(self.extra or self.scc or self.detail.startswith("emulator-error"))


def prepare(inst: Inst, arch: str, seed: int) -> Wave:
    """A fresh wave for `inst`: random registers (ALU), or the memory layout of the module's docstring."""
    w = Wave(arch)
    rng = np.random.default_rng(seed)
    w.vgpr[:] = rng.integers(0, 1 << 32, w.vgpr.shape, dtype=np.uint64).astype(np.uint32)
    w.sgpr[:VCC + 2] = rng.integers(0, 1 << 32, VCC + 2, dtype=np.uint64).astype(np.uint32)  # VCC too
    if is_memory(inst):
        w.vm.map(MAPPED, rng.integers(0, 1 << 32, WORDS, dtype=np.uint64).astype(np.uint32))
        w.vm.map(SCRATCH_BASE, np.zeros(SCRATCH_LANE * w.lanes // 4, np.uint32))
        w.scratch = Scratch(w.vm, SCRATCH_BASE, w.lanes, SCRATCH_LANE)
        w.flat = Flat(w.vm, w.lds, w.scratch)
        private = inst.base in ("SCRATCH", "VSCRATCH", "DS")  # 32-bit offsets into a small space
        w.sgpr[0:104:2], w.sgpr[1:104:2] = (256, 0) if private else (POINTER, 0)
        w.sgpr[2:104:4] = 0xFFFFFFFF  # word 2 of each 4-aligned quad: a buffer resource's NUM_RECORDS
        w.vgpr[0::2], w.vgpr[1::2] = 256 if private else POINTER, 0
        w.lds.mem[:] = rng.integers(0, 256, len(w.lds.mem), dtype=np.uint8)
    w.m0 = 0  # relative moves (s_movrels, v_movrel*) then write the register they name
    return w


def check(code: bytes, arch: str, seed: int, text: str | None = None) -> Outcome:
    """Run the one instruction `code` on the tier HWEMU_TIER names and compare what it wrote with allowed()."""
    inst = decode(code, arch)[0]
    if not inst.valid or inst.op is None:
        return Outcome("invalid")
    w = prepare(inst, arch, seed)
    before_s, before_v, before_scc = w.sgpr[:128].copy(), w.vgpr.copy(), w.scc
    try:
        w.run(code + endpgm(arch))
    except GPUFault as e:
        return Outcome("fault", inst, e.record.kind if e.record.kind != "emulator-error" else
                       f"emulator-error: {e.record.detail}")
    changed = {("s", int(i)) for i in np.flatnonzero(w.sgpr[:128] != before_s)}
    changed |= {("v", int(i)) for i in np.flatnonzero((w.vgpr != before_v).any(axis=1))}
    scc = w.scc != before_scc and "SCC" not in implicit(arch, inst)
    return Outcome("ran", inst, extra=frozenset(changed - allowed(inst, arch, text)), scc=scc)
