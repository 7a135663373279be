"""The lean interpreter tier (HWEMU_TIER=interp): one fused Python function per decoded instruction.

For each SALU and VALU instruction the planner's decisions (operands, widths, modifiers, destinations;
emu.amd.exec.plan / valu) and the compiled pcode IR (emu.pcode) are turned into the source of one function that
fetches the operands, runs the semantics and writes the results, register numbers and constants inlined, with no
per-instruction dicts. Vector semantics whose body is straight-line code are emitted at natural widths (uint32
rows, viewed as float32 where the pcode bitcasts; emu.pcode.npback); the rest goes through the reference
backend's code generator (emu.pcode.pyback) bound to the operands. What no fused step takes (memory, DPP,
VOPD, engine control, ...) runs the reference plan step, and so does a fused step whenever MODE rounds or
flushes denormals where the fused code assumes it does not.

Generated code is compiled once per (instruction bytes, processor, wave size) and shared by every program;
the PC is a parameter of the compiled factory. The run loop (emu.amd.exec.wave.run) sets np.errstate once.
"""
from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import re
import tempfile
from collections.abc import Callable

import numpy as np

from emu.amd.exec import hwreg
from emu.amd.exec.bind import SOURCES, Binding, Kind, Operand, fmt, valu_fields
from emu.amd.exec.interp_mem import global_step, smem_step
from emu.amd.exec.operands import is_float
from emu.amd.exec.plan import _BARRIERS, _CLOCKS, _ENDS, _ENGINE_NOPS, Planner
from emu.amd.exec.state import ACC, MODE, SCC
from emu.amd.regs import EXEC, VCC, storage
from emu.pcode import floats, pyback, runtime
from emu.pcode.llvmjit import cache_dir
from emu.pcode.npback import Decline, Natural, lane_bits, pack_lanes
from emu.pcode.typed import Unsupported as PcodeUnsupported

GUARD = 0xF | hwreg.DENORM_ALL  # MODE bits a fused float step assumes: round to nearest even, denormals kept
_CONTROL = _ENDS | _BARRIERS | _ENGINE_NOPS | _CLOCKS | {"S_TRAP", "S_CODE_END", "S_SETHALT"}
_VALU = ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD")
_SALU = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP")
_SCALAR_ENGINE = {"HW_REGISTERS", "HwRegWriteMask"}  # state the fused SALU step does not move
_cache: dict[tuple, tuple | None] = {}
_compiled: dict[tuple, Callable] = {}  # (generated source, its constants) -> factory


class _Ref:
    """The reference plan step of an instruction, built on first use."""
    __slots__ = ("planner", "inst", "step")

    def __init__(self, planner: Planner, inst):
        self.planner, self.inst, self.step = planner, inst, None

    def __call__(self, w) -> int:
        if self.step is None:
            self.step = self.planner.plan(self.inst)
        return self.step(w)


class Interp:
    """Plans the fused steps of one Program (a Planner's target and wave size). With `decode` (pc -> the
    instruction there) a step runs the straight-line block that starts at its instruction (up to and including a
    branch, s_endpgm, s_barrier, a trap, ...): one call of the run loop for the block."""

    def __init__(self, planner: Planner, decode: Callable | None = None):
        self.planner, self.decode = planner, decode

    def plan(self, inst, until: Callable[[int], bool] | None = None) -> Callable:
        insts = self.members(inst, until)
        if len(insts) == 1:
            return self.single(inst)
        return _block(self.planner, insts, [self.part(i) for i in insts])

    def members(self, inst, until: Callable[[int], bool] | None = None) -> list:
        """The instructions of the step that starts at `inst`: its straight-line block (just `inst` without
        `decode`), ending before the first PC for which `until` holds."""
        out, pc = [inst], inst.pc + inst.size
        if self.decode is None or self._ends(inst):
            return out
        while len(out) < BLOCK and not (until is not None and until(pc)):
            try:
                nxt = self.decode(pc)
            except Exception:  # not fetchable now: the block ends before it
                break
            if not nxt.valid:
                break
            out.append(nxt)
            if self._ends(nxt):
                break
            pc += nxt.size
        return out

    def _ends(self, inst) -> bool:
        """Whether a block ends with this instruction (control, a PC write) or before it (invalid)."""
        if not inst.valid or inst.op.name in _BLOCK_ENDS:
            return True
        if inst.base not in _SALU or inst.op.name in _ENGINE_NOPS:
            return False
        try:
            return "PC" in self.planner.sem(inst.op).writes
        except Exception:  # no semantics: its step faults
            return True

    def single(self, inst) -> Callable:
        """The step of one instruction."""
        return _step(self.planner, inst, self.part(inst))

    def part(self, inst):
        """The fused code of one instruction as (its _Fragment, the arguments it binds), or its step (a
        callable) when no generated code takes it."""
        p = self.planner
        if inst.valid and inst.op.name in _ENGINE_NOPS:  # the PC moves on, nothing else
            return _Source(p, inst).fragment()
        if inst.valid and inst.base in ("GLOBAL", "VGLOBAL", "SMEM"):
            try:
                return (smem_step if inst.base == "SMEM" else global_step)(p, inst, _Ref(p, inst))
            except Exception:  # Decline, or no semantics: the reference step takes it (and faults)
                return p.plan(inst)
        if not inst.valid or inst.op.name in _CONTROL or not (inst.base in _SALU or inst.base == "DS"
                                                              or _fusable_valu(inst, p)):
            return p.plan(inst)
        key = (inst.raw, p.arch, p.lanes)
        if key in _cache:
            made = _cache[key]
        else:
            try:
                made = _cache[key] = _generate(p, inst)
            except Exception:  # Decline, or no semantics / a bad operand: the reference step takes it (and faults)
                made = _cache[key] = None
        return p.plan(inst) if made is None else made


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
    v = np.broadcast_to(L_arr(value), act.shape)
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
_OR, _MAX = np.bitwise_or.reduce, np.maximum.reduce


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


U32_MASK, U64_3, U64_2, U64_0 = np.uint64(0xFFFFFFFF), np.uint64(3), np.uint64(2), np.uint64(0)
L_arr = runtime.arr


BLOCK = 64  # instructions per block at most
_BLOCK_ENDS = _ENDS | _BARRIERS | _CLOCKS | {"S_TRAP", "S_CODE_END", "S_SETHALT"}


def _block(p: Planner, insts: list, parts: list) -> Callable:
    """One step running the straight-line instructions `insts` (`parts`: Interp.part of each) in order: a call of
    each instruction's step at first (_chain), and from its WARM-th run on one function generated for the whole
    block (_fused), so that code that runs once never pays for generating and compiling that."""
    steps = [_step(p, inst, part) for inst, part in zip(insts, parts, strict=True)]
    chain = _chain(steps, [inst.pc for inst in insts])
    left, fused = [WARM], [None]

    def block(w):
        f = fused[0]
        if f is not None:
            return f(w)
        left[0] -= 1
        if left[0] <= 0:
            f = fused[0] = _fused(p, insts, parts, steps[0])
            return f(w)
        return chain(w)
    return block


def _step(p: Planner, inst, part) -> Callable:
    """The step of one instruction from its Interp.part."""
    if callable(part):
        return part
    frag, args = part
    return frag.factory()(inst.pc, _Ref(p, inst), *args)


WARM = 16  # runs of a block before its fused function is made: more than one workgroup of a cold kernel


def _chain(steps: list[Callable], pcs: list[int]) -> Callable:
    """One step calling `steps` (the instructions at `pcs`) in order. The run loop counts it as one instruction, so
    it takes the others from the wave's watchdog count; when fewer are left it runs the first instruction only. A
    fault leaves the count of the instructions before the faulting one taken (each step sets the PC only once it has
    finished, so the PC names the faulting one)."""
    n, index = len(steps), {pc: i for i, pc in enumerate(pcs)}
    make = _chains.get(n)
    if make is None:
        make = _chains[n] = _exec("\n".join([
            f"def make({', '.join(f's{i}' for i in range(n))}, index):", "    def block(w):",
            f"        if w.left < {n}:", "            return s0(w)", "        try:",
            *(f"            s{i}(w)" for i in range(n - 1)), f"            r = s{n - 1}(w)",
            "        except BaseException:", "            w.left -= index.get(w.pc, 0)", "            raise",
            f"        w.left -= {n - 1}", "        return r", "    return block"]) + "\n", f"<interp block of {n}>")
    return make(*steps, index)


_chains: dict[int, Callable] = {}  # factory of the chains of n steps


def _fused(p: Planner, insts: list, parts: list, first: Callable) -> Callable:
    """The block's instructions' generated code inlined into one function, which loads the wave's arrays once and
    the EXEC-derived locals again only after an instruction that may change EXEC; an instruction without generated
    code is called. It counts and faults as _chain does (`first`: the first instruction alone). The function's own
    names start with two underscores, which generated code uses only for a carry chain's lanes (_carries)."""
    n, last = len(insts), len(insts) - 1
    parts = _carries(p, insts, parts)
    params, binds = ["__first", "__index"], [first, {inst.pc: k for k, inst in enumerate(insts)}]
    frags = [part[0] for part in parts if not callable(part)]
    needs = set().union(*(f.needs for f in frags))
    body, fresh = [], False  # fresh: act, full and n_act hold the current EXEC

    def bind(name: str, obj) -> str:
        params.append(name)
        binds.append(obj)
        return name

    for k, (inst, part) in enumerate(zip(insts, parts, strict=True)):
        if callable(part):
            body.append(f"{'__r = ' if k == last else ''}{bind(f'__c{k}', part)}(w)")
            fresh = False
            continue
        frag, args = part
        body += [f"A{j} = {bind(f'__a{k}_{j}', a)}" for j, a in enumerate(args)]
        if frag.consts:
            body.append(f"K = {bind(f'__k{k}', frag.consts)}")
        if frag.uses_pc:
            body.append(f"pc = {inst.pc}")
        if "act" in frag.needs and not fresh:
            body += _act_lines(p.lanes)
            fresh = True
        code = frag.body + ([] if frag.sets_pc else [f"w.pc = {inst.pc + inst.size}"])
        if frag.guards:
            ref = bind(f"__r{k}", _Ref(p, inst))
            body += [f"if {' or '.join(frag.guards)}:", f"    {'__r = ' if k == last else ''}{ref}(w)", "else:",
                     *("    " + ln for ln in code)]
        else:
            body += code
        if k == last:
            body.append("__r = 0" if not frag.guards else "    __r = 0")
        fresh = fresh and not frag.dirty
    loads = [ln for v, ln in _LOADS if v in needs]
    rows: set[str] = set()  # VGPRs the code reads: their row views are made once, not at each read (but for the
    body = [ln if "np.copyto(" in ln else  # masked stores, which run only while lanes are off)
            _ROW.sub(lambda m: rows.add(m.groups()) or f"__{m.group(1)}{m.group(2)}", ln) for ln in body]
    loads += [f"__{v}{r} = {v}[{r}]" for v, r in sorted(rows, key=lambda vr: (vr[0], int(vr[1])))]
    text = "\n".join([f"def make({', '.join(params)}):", "    def block(w):", f"        if w.left < {n}:",
                      "            return __first(w)", *("        " + ln for ln in loads), "        try:",
                      *("            " + ln for ln in body), "        except BaseException:",
                      "            w.left -= __index.get(w.pc, 0)", "            raise", f"        w.left -= {n - 1}",
                      "        return __r", "    return block"]) + "\n"
    make = _blocks.get(text)
    if make is None:
        make = _blocks[text] = _exec(text, f"<interp fused block of {n}>")
    return make(*binds)


_blocks: dict[str, Callable] = {}  # block source -> its factory (programs running the same code share it)


_LOADS = (("sg", "sg = w.sgpr"), ("vg", "vg = w.vgpr"), ("vf", "vf = w.vgpr_f32"), ("vi", "vi = w.vgpr_i32"),
          ("mem", "mem = w.lds"))  # a fragment's `needs`


def _act_lines(lanes: int) -> list[str]:
    return ["act = w.active", f"full = w.active_mask == {(1 << lanes) - 1}", "n_act = w.active_mask.bit_count()"]


_NAMESPACE = {"np": np, "L": runtime, "F": floats, "Unsupported": PcodeUnsupported, "U32": np.uint32,
              "U64": np.uint64, "ML": lds_load, "MS": lds_store, "ML32": lds_load32, "MS32": lds_store32,
              "LB": lane_bits, "PK": pack_lanes}


def _exec(text: str, name: str, **names) -> Callable:
    """The `make` function of generated source `text`."""
    ns = {**_NAMESPACE, **names}
    exec(_code(text, name), ns)
    return ns["make"]


def _code(text: str, name: str):
    """`text` compiled, through a disk cache ($HWEMU_CACHE/interp) of marshalled code (after its SHA-256):
    compiling the generated source is most of a kernel's first run, and a test suite's processes run much the same
    code."""
    key = hashlib.sha256(b"%s\0%s\0%s" % (importlib.util.MAGIC_NUMBER, name.encode(), text.encode())).hexdigest()
    path = cache_dir().parent / "interp" / key[:2] / key[2:]
    try:
        data = path.read_bytes()
        if hashlib.sha256(data[32:]).digest() == data[:32]:  # else truncated or damaged: compiled again
            return marshal.loads(data[32:])
    except (OSError, EOFError, ValueError, TypeError):  # not there yet, or a foreign file
        pass
    code = compile(text, name, "exec")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            blob = marshal.dumps(code)
            f.write(hashlib.sha256(blob).digest() + blob)
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache: the code is still run
        pass
    return code


class _Fragment:
    """The generated code of one fused step: the wave's arrays its body reads (`needs`: sg, vg, mem, and act for
    act, full and n_act), the conditions under which the reference step runs instead (`guards`), the constants
    it indexes as K, whether it may change EXEC (`dirty`) and whether it sets the PC itself (a branch)."""

    def __init__(self, src: _Source):
        self.needs, self.guards, self.body, self.consts = frozenset(src.needs), tuple(src.guards), src.lines, src.consts
        self.carry = src.carry
        self.size, self.lanes, self.name, self.sets_pc = src.inst.size, src.p.lanes, src.inst.op.name, src.sets_pc
        text = "\n".join(self.body)
        self.needs |= {v for v in ("vf", "vi") if re.search(rf"(?<![\w.]){v}\[", text)}  # npback's typed rows
        self.dirty = "set_exec" in text or _CALL.search(text) is not None  # the reference step writes EXEC only then
        self.nargs = len(src.args)
        self.uses_pc = any(_PC.search(ln) for ln in self.body)
        self.make = None

    def factory(self) -> Callable:
        """make(pc, ref, *args): the step of this code alone."""
        if self.make is None:
            names = "".join(f", A{i}" for i in range(self.nargs))
            lines = [ln for v, ln in _LOADS[:1] if v in self.needs]  # sg: the guards read it
            if self.guards:
                lines.append(f"if {' or '.join(self.guards)}: return ref(w)")
            lines += [ln for v, ln in _LOADS[1:] if v in self.needs]
            lines += (_act_lines(self.lanes) if "act" in self.needs else []) + self.body
            lines += ([] if self.sets_pc else ["w.pc = nxt"]) + ["return 0"]
            text = "\n".join([f"def make(pc, ref{names}):", f"    nxt = pc + {self.size}", "    def step(w):",
                              *("        " + ln for ln in lines), "    return step"]) + "\n"
            key = (text, repr(self.consts))
            make = _compiled.get(key)
            if make is None:  # instructions differing only in what the factory binds share the compiled code
                make = _compiled[key] = _exec(text, f"<interp {self.name}>", K=self.consts)
            self.make = make
        return self.make


_CALL = re.compile(r"(?<![\w.])A\d+\(w\b")  # a closure the code calls with the wave (may write EXEC)
_PC = re.compile(r"(?<![\w.])pc\b")
_ROW = re.compile(r"(?<![\w.])(v[gfi])\[(\d+)\](?!\s*=(?!=))")  # a VGPR row the code reads (not one it assigns)


def _fusable_valu(inst, p: Planner) -> bool:
    return (inst.base in _VALU or inst.base == "VOPD") and not inst.enc.endswith(("DPP16", "DPP8", "SDWA", "SDWA_SDST"))


def _generate(p: Planner, inst, carry: tuple[bool, bool] = (False, False)) -> tuple:
    """(_Fragment, the arguments its code binds as A0, A1, ...); `carry`: (takes, gives) a carry chain's VCC lanes
    (_carries)."""
    src = _Source(p, inst, carry)
    if inst.base in _SALU:
        src.salu()
    elif inst.base == "DS":
        src.ds()
    elif inst.base == "VOPD":  # both ops read their sources before either writes
        stores: list = []
        for k, (op, fields) in enumerate(p.vopd_halves(inst)):
            src.valu(p.valu_operands(inst, op, fields, base="VOP2"), "VOP2", stores, copy=k == 1)
        src.flush(stores)
        src.emit("w.lane_ops += 2 * n_act")
    else:
        src.flush(src.valu(p.valu_operands(inst), inst.base, []))
        src.emit("w.lane_ops += n_act")
    return src.fragment()


def _carried(p: Planner, inst, carry: tuple[bool, bool]) -> tuple | None:
    """The fragment of a VALU instruction taking and / or giving a carry chain's VCC lanes, or None."""
    key = (inst.raw, p.arch, p.lanes, carry)
    if key not in _cache:
        try:
            _cache[key] = _generate(p, inst, carry) if inst.valid and inst.base in _VALU and \
                _fusable_valu(inst, p) else None
        except Exception:  # Decline (no such chain in its code), or no semantics
            _cache[key] = None
    return _cache[key]


def _carries(p: Planner, insts: list, parts: list) -> list:
    """`parts` with the carry chains through VCC passed in a bool array: an instruction whose carry-out VCC is read
    by the next VALU instruction only as its carry-in (V_ADD_CO_U32 then V_ADD_CO_CI_U32, a 64-bit add) gives it its
    lanes, and does not write VCC when nothing in between can see VCC (only engine no-ops). Neither may have
    guards: their reference steps would read VCC from the SGPR file."""
    out = list(parts)
    for k in range(len(insts) - 1):
        j = k + 1
        while j < len(insts) and not callable(out[j]) and not out[j][0].body:  # engine no-ops
            j += 1
        if j == len(insts) or callable(out[k]) or callable(out[j]) or out[k][0].guards or out[j][0].guards:
            continue
        give = _carried(p, insts[k], (out[k][0].carry[0], True))  # it may take from the one before
        take = _carried(p, insts[j], (True, False))
        if give is not None and take is not None:  # their guards are the plain fragments' (none)
            out[k], out[j] = give, take
    return out


class _Source:
    """The source of one fused step under construction."""

    def __init__(self, p: Planner, inst, carry: tuple[bool, bool] = (False, False)):
        self.p, self.inst, self.carry = p, inst, carry
        self.lines: list[str] = []  # the step's body (indented once inside `step`)
        self.args: list = []  # closures and constants the factory binds (A0, A1, ...)
        self.consts: list = []  # the generated semantics' constants (K)
        self.exact: set[str] = set()  # natural sources already masked to the semantics' width
        self.needs: set[str] = set()  # the wave arrays the code reads (_Fragment)
        self.guards: list[str] = []  # conditions under which the reference step runs instead
        self.sets_pc = False

    def arg(self, obj) -> str:
        self.args.append(obj)
        return f"A{len(self.args) - 1}"

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def fragment(self) -> tuple:
        return _Fragment(self), tuple(self.args)

    def guard(self, cond: str) -> None:
        self.needs.add("sg")
        if cond not in self.guards:  # VOPD: both halves ask
            self.guards.append(cond)

    # -- SALU --------------------------------------------------------------------------------------------------
    def salu(self) -> None:
        p, inst = self.p, self.inst
        bd = p.salu_operands(inst)
        sem, f = bd.sem, bd.sem.ir
        if (sem.reads | sem.writes) & _SCALAR_ENGINE or f.files:
            raise Decline("hardware or register-file access")
        self.needs.add("sg")
        if "MODE" in sem.reads and _rounds_floats(f):
            self.guard(f"sg[{MODE}] & {GUARD} != {hwreg.DENORM_ALL}")
        binds = {}
        for n, o in bd.inputs.items():
            bits = f.inputs.get(n)
            if bits is None:  # read by the engine only (MODE for rounding)
                continue
            code = self._scalar_read(bd, o, bits)
            binds[n] = f"({code}) & {(1 << bits) - 1}" if bits <= 64 else f"L.inp({code}, {bits})"
        gen = _Scalar(f, binds, f"int(sg[{MODE}])", p.lanes, self.consts)
        self.lines += gen.body_lines()
        for n, o in bd.outputs.items():
            self._scalar_write(bd, o, gen.output(n))
        if "PC" in sem.writes:
            self.emit(f"w.pc = int({gen.output('PC')}) & 0xFFFFFFFFFFFF")
            self.sets_pc = True

    def _scalar_read(self, bd: Binding, o: Operand, bits: int) -> str:
        """Code of a SALU source: SGPRs, constants and fields inline, the planner's reader otherwise."""
        n = o.name
        if n == "PC":
            return "pc"
        if n == "SCC":
            return f"int(sg[{SCC}])"
        if o.kind in (Kind.FIELD, Kind.INLINE, Kind.LITERAL):
            return str(o.value)
        mask = self._mask_read(VCC) if n in ("VCC", "VCCZ") else "w.active_mask" if n in ("EXEC", "EXECZ") else None
        if o.kind is Kind.STATE and mask is not None:  # the planner's readers: VCC & the wave's lanes, EXEC, and
            return f"int({mask} == 0)" if n.endswith("Z") else mask  # whether they are zero
        if o.scalar and bits <= 64 and _slots(o.code, o.bits):  # SGPRs, TTMPs, VCC and EXEC (their slots hold them)
            if o.bits == 64:
                return f"int(sg[{o.code}]) | int(sg[{o.code + 1}]) << 32"
            return f"int(sg[{o.code}])"
        return f"{self.arg(self.p.reader(self.inst, bd, o))}(w)"

    def _scalar_write(self, bd: Binding, o: Operand, v: str) -> None:
        code = o.code
        if o.name == "SCC":
            self.emit(f"sg[{SCC}] = {v} & 1")
        elif o.scalar and code in (EXEC, EXEC + 1) and _slots(code, o.bits):
            if o.bits == 64:
                self.emit(f"w.set_exec({v} & 0xFFFFFFFFFFFFFFFF)")
            elif code == EXEC:  # EXEC_LO; the other half kept
                self.emit(f"w.set_exec(int(sg[{EXEC + 1}]) << 32 | ({v} & 0xFFFFFFFF))")
            else:
                self.emit(f"w.set_exec(int(sg[{EXEC}]) | ({v} & 0xFFFFFFFF) << 32)")
        elif o.scalar and _slots(code, o.bits):
            if o.bits == 64:
                self.emit(f"d = {v}")
                self.emit(f"sg[{code}] = d & 0xFFFFFFFF")
                self.emit(f"sg[{code + 1}] = d >> 32 & 0xFFFFFFFF")
            else:
                self.emit(f"sg[{code}] = {v} & 0xFFFFFFFF")
        else:
            self.emit(f"{self.arg(self.p.writer(bd, o))}(w, {v})")

    # -- VALU --------------------------------------------------------------------------------------------------
    def valu(self, bd: Binding, base: str, stores: list, copy: bool = False) -> list:
        """Computes the results of a VALU op (into o* variables) and appends their writes to `stores`; `copy`: a
        result that may be a register row is copied (a write before this one's could change the row). `base`: its
        encoding (a VOPD half's is VOP2)."""
        p = self.p
        self.exact = set()
        sem, op = bd.sem, bd.op
        ir = sem.ir
        if ir.files:
            raise Decline("register files or memory")
        d0 = bd.outputs.get("D0")
        post = p.result_modifiers(d0) if d0 is not None else None
        floaty = any(is_float(fmt(op, fld)) for fld in valu_fields(base).values()) or _rounds_floats(ir) \
            or post is not None
        self.needs.update(("sg", "vg"))
        if floaty:
            self.guard(f"sg[{MODE}] & {GUARD} != {hwreg.DENORM_ALL}")
        if p.gen.gpr_indexing:
            self.guard("w.gpr_idx")
        nat, wide, consts = self._valu_inputs(bd)
        self.needs.add("act")
        unused = frozenset(n for n, o in bd.outputs.items() if n in ir.outputs and p.null is not None
                           and o.kind is Kind.MASK and o.code == p.null)  # masks for NULL
        gen, natural, unused = self._valu_code(bd, nat, wide, consts, unused)
        for n, o in bd.outputs.items():  # every result is computed before the first write (a result may be a row)
            if n not in ir.outputs or (natural and n in unused):  # a mask for NULL: nothing to write
                continue
            out = f"o{len(stores)}"
            if n == "D0" and natural and ir.outputs[n] in (32, 64) and n not in ir.masks \
                    and not (o.mods.omod or o.mods.clamp) and o.kind is Kind.VGPR:  # guarded: no flushing either
                self.emit(f"{out} = {gen.natural_out(n)}" + (".copy()" if copy else ""))
                stores.append((self._vgpr_store, out, ir.outputs[n], o.reg))
                continue
            self.emit(f"{out} = {gen.output(n)}")
            if o.kind is Kind.MASK:  # a wave mask (int), or per-lane bits (a carry-out)
                stores.append((self._mask_write, out if n in ir.masks else f"PK({out} != 0, {p.lanes})", o.code))
                continue
            v = out if n != "D0" or post is None else f"{self.arg(post)}(w, {out})"
            stores.append((self.emit, f"{self.arg(p.writer(bd, o))}(w, {v}, act)"))
        return stores

    def _valu_inputs(self, bd: Binding) -> tuple[dict, dict, dict]:
        """(natural-width code of per-lane sources, reference-backend code of the other inputs, encoding fields the
        semantics read)."""
        ir = bd.sem.ir
        nat: dict[str, str] = {}
        wide: dict[str, str] = {}
        consts: dict[str, int] = {}
        for n, o in bd.inputs.items():
            bits = ir.inputs.get(n)
            if bits is None:
                continue
            src = self._vector_source(o, bits) if n in SOURCES else None
            if src is not None:
                nat[n] = src
            elif o.kind is Kind.FIELD:
                consts[n] = o.value & ((1 << bits) - 1)
            else:
                code = self._mask_read(o.code) if o.kind is Kind.MASK else self._mask_read(VCC) if n == "VCC" \
                    else "w.active_mask" if n == "EXEC" else None
                wide[n] = code if code is not None else f"{self.arg(self.p.reader(self.inst, bd, o))}(w)"
        return nat, wide, consts

    def _valu_code(self, bd: Binding, nat: dict, wide: dict, consts: dict, unused: frozenset) -> tuple:
        """(the generator of the semantics' code, whether it is natural-width, the unused outputs): a carry chain's
        VCC lanes taken and given as the fragment's `carry` says."""
        ir, lanes = bd.sem.ir, self.p.lanes
        takes, gives = self.carry
        if takes and wide.get("VCC") != self._mask_read(VCC):
            raise Decline("carry-in not from VCC")
        if gives:
            o = bd.outputs.get("VCC")
            if "VCC" not in ir.outputs or o is None or o.kind is not Kind.MASK or o.code != VCC:
                raise Decline("carry-out not to VCC")
            unused |= {"VCC"}  # the next instruction takes the lanes, and writes VCC itself
        try:
            gen = Natural(ir, lanes, nat, wide, consts, self.consts, exact=frozenset(self.exact),
                          carry_in="VCC" if takes else None, carry_out="VCC" if gives else None)
            self.lines += gen.body_lines(unused)
            if (takes and (not gen.took or "VCC" in gen.old_reads)) or (gives and not gen.gave):
                raise Decline("no carry chain")
            return gen, True, unused
        except Decline:
            if takes or gives:
                raise
        binds = {**{n: f"L.inp({c}, {ir.inputs[n]})" for n, c in wide.items()},
                 **{n: str(v) for n, v in consts.items()},
                 **{n: f"L.inp({c}.astype(U64), {ir.inputs[n]})" for n, c in nat.items()}}
        gen = _Bound(ir, binds, f"int(sg[{MODE}])", lanes, self.consts)
        self.lines += gen.body_lines()
        return gen, False, unused

    def flush(self, stores: list) -> None:
        for fn, *a in stores:
            fn(*a)

    def _mask_read(self, code: int) -> str | None:
        """Code of a wave mask read from an SGPR, VCC or EXEC (the planner's mask reader), or None."""
        wide = self.p.mask_bits == 64
        if code == EXEC:
            return "w.active_mask"
        if storage(code) or code == VCC or (code == VCC + 1 and not wide):
            return f"(int(sg[{code}]) | int(sg[{code + 1}]) << 32)" if wide else f"int(sg[{code}])"
        return None

    def _mask_write(self, v: str, dest: int) -> None:
        """Writes mask result `v` ANDed with EXEC (int) to scalar code `dest`, as the planner's mask writers do (a
        VOP2 carry-out: VCC_LO alone in wave32, VCC_HI is an SGPR there)."""
        wide = self.p.mask_bits == 64
        self.emit(f"m = {v} & w.active_mask")
        if dest == EXEC:
            self.emit("w.set_exec(m)")
        elif dest == self.p.null:
            pass
        elif storage(dest) or dest == VCC or (dest == VCC + 1 and not wide):
            self.emit(f"sg[{dest}] = m & 0xFFFFFFFF; sg[{dest + 1}] = m >> 32" if wide else f"sg[{dest}] = m")
        else:
            raise Decline(f"mask destination {dest}")

    # -- LDS --------------------------------------------------------------------------------------------------
    def ds(self) -> None:
        p, inst = self.p, self.inst
        bd = p.ds_operands(inst)
        sem = bd.sem
        ir = sem.ir
        if sem.serial or not ir.files <= {"MEM", "LDS"}:
            raise Decline("atomics and register-file access")
        consts, wide, nat = {}, {}, {}
        for n, o in bd.inputs.items():
            bits = ir.inputs.get(n)
            if bits is None:
                continue
            if o.kind is Kind.FIELD:
                consts[n] = o.value & ((1 << bits) - 1)
            elif n == "ADDR" and bits == 64 and o.kind is Kind.VGPR and o.mods.offset is None:
                nat[n] = f"vg[{o.reg}].astype(U64)"  # the VGPR (the pcode adds the offset)
            elif n in ("DATA", "DATA0", "DATA1") and bits == 32 and o.kind is Kind.VGPR and o.bits == 32:
                nat[n] = f"vg[{o.reg}]"
            else:
                wide[n] = f"{self.arg(p.reader(inst, bd, o))}(w)"
        self.needs.update(("vg", "mem", "act"))
        gen = Natural(ir, p.lanes, nat, wide, consts, self.consts, memory=True)
        self.lines += gen.body_lines()
        for n, o in bd.outputs.items():
            if n in ("RETURN_DATA", "VDATA") and ir.outputs.get(n) == 32 and o.bits == 32:
                self._vgpr_store(gen.natural_out(n), 32, o.reg)
            else:
                self.emit(f"{self.arg(p.writer(bd, o))}(w, {gen.output(n)}, act)")
        self.emit("w.lane_ops += n_act")

    def _vector_source(self, o: Operand, bits: int) -> str | None:
        """Natural code (uint32 / uint64 array) of a 32/64-bit VALU source without abs / neg, or None for the
        planner's reader."""
        if o.bits not in (32, 64) or o.mods.abs or o.mods.neg:
            return None
        if o.kind is Kind.VGPR:
            r = o.reg
            if o.bits == 32:
                return f"vg[{r}]"
            return f"vg[{r}:{r + 2}].T.copy().view(U64).ravel()"  # [lane] of the dword pairs
        if o.kind in (Kind.INLINE, Kind.LITERAL):  # as the semantics read it (an inline shift amount: its low bits)
            arr = np.full(self.p.lanes, o.value & ((1 << bits) - 1), np.uint32 if o.bits == 32 else np.uint64)
            arr.flags.writeable = False
            self.exact.add(o.name)
            return self.arg(arr)
        if o.bits == 32 and o.kind is Kind.SGPR:  # an array, as the reference's reader gives (numpy picks NaN
            return f"sg.take({self.arg(np.full(self.p.lanes, o.code, np.intp))})"  # payloads unlike for scalars)
        return None

    def _vgpr_store(self, v: str, bits: int, reg: int) -> None:
        self.emit(f"d = {v}")
        if bits == 32:
            self.emit(f"if full: vg[{reg}] = d")
            self.emit(f"else: np.copyto(vg[{reg}], d, where=act, casting='unsafe')")
            return
        self.emit("if full:")
        if reg % ACC + 2 <= ACC:
            self.emit(f"    vg[{reg}:{reg + 2}] = d.reshape(-1).view(U32).reshape(-1, 2).T")  # each lane's dwords
        else:  # the last register of its file: the low half is written before the high one is missed
            self.emit(f"    vg[{reg}] = d")
            self.emit(f"    vg[{reg + 1}] = d >> U64(32)")
        self.emit("else:")
        self.emit(f"    np.copyto(vg[{reg}], d, where=act, casting='unsafe')")
        self.emit(f"    np.copyto(vg[{reg + 1}], d >> U64(32), where=act, casting='unsafe')")


def _slots(code: int, width: int) -> bool:
    """Whether a scalar operand of `width` bits is held in SGPR-file slots at its code as a plain register."""
    return storage(code) or code in (VCC, EXEC) or (width == 32 and code in (VCC + 1, EXEC + 1))


def _rounds_floats(f) -> bool:
    """emu.pcode._rounds, remembered per IR function (compiled semantics live as long as the process)."""
    r = _rounding.get(id(f))
    if r is None or r[0] is not f:
        from emu.pcode import _rounds
        r = _rounding[id(f)] = (f, _rounds(f))
    return r[1]


_rounding: dict[int, tuple] = {}


class _Bound(pyback.Gen):
    """The reference backend's code for one IR function, inputs bound to operand code, outputs read from its
    variables (emu.pcode.pyback.Gen; MODE read from the wave)."""

    def __init__(self, f, binds: dict[str, str], mode: str, lanes: int, consts: list):
        super().__init__(f)
        self.binds, self.mode, self.lanes = binds, mode, lanes
        self.consts = consts  # shared with the step's other generated code (K)

    def directed(self, e, a, native: str) -> str:
        if pyback._bf(e.ty):
            return self.round(e.ty, native, e.op)
        return f"F.rop({e.op!r}, {self.mode}, {', '.join(a)})"

    def body_lines(self) -> list[str]:
        f = self.f
        vec = f.vector
        self.emit(f"lane = L.lane_ids({self.lanes})" if vec else "lane = 0", 0)
        self.emit(f"lanes = {self.lanes}", 0)
        self.emit(f"wave64 = {self.lanes == 64}", 0)
        self.declare(0)
        entry = len(self.lines)
        self.block(f.body, "True", 0)
        self.lines[entry:entry] = [f"{v} = {code}" for code, v in self.hoisted.items()]
        return self.lines

    def load_input(self, var: str) -> str:
        if var not in self.binds:
            raise Decline(f"input {var} unbound")
        return self.binds[var]

    def output(self, name: str) -> str:
        f, v, bits = self.f, pyback.pyname(name), self.f.outputs[name]
        if name in f.masks or not f.vector:
            return f"L.out_scalar({v}, {bits})"
        return f"L.out_lanes({v}, {bits}, {self.lanes})"


def _small_int(t) -> bool:
    return t.kind in ("u", "i") and t.bits <= 64


class _Scalar(_Bound):
    """_Bound for SALU semantics (uniform values: Python ints and bools): integer operations of up to 64 bits as
    plain Python expressions instead of the runtime's helpers."""

    def op_extract(self, e, a, m):
        if not _small_int(e.args[0].ty) or not _small_int(e.args[1].ty):
            return super().op_extract(e, a, m)
        return f"(({a[0]} >> {a[1]}) & {(1 << e.attr) - 1})"

    def op_resize(self, e, a, m):
        s, t = e.args[0].ty, e.ty
        if _small_int(s) and _small_int(t) and t.bits > s.bits and s.kind == "i":
            sign = 1 << (s.bits - 1)
            return f"((({a[0]} ^ {sign}) - {sign}) & {(1 << t.bits) - 1})"
        return super().op_resize(e, a, m)

    def _cmp(self, e, a, m):
        t = e.args[0].ty
        if t.kind == "i" and _small_int(t):  # signed order is the unsigned order of the values with the sign flipped
            sign = 1 << (t.bits - 1)
            return f"(({a[0]} ^ {sign}) {pyback._CMP[e.op]} ({a[1]} ^ {sign}))"
        return super()._cmp(e, a, m)

    op_eq = op_ne = op_lt = op_le = op_gt = op_ge = _cmp

    def op_select(self, e, a, m):
        return f"({a[1]} if {a[0]} else {a[2]})"

    def op_frombool(self, e, a, m):
        return f"(1 if {a[0]} else 0)"

    def op_lnot(self, e, a, m):
        return f"(not {a[0]})"

    def output(self, name: str) -> str:
        return f"({pyback.pyname(name)} & {(1 << self.f.outputs[name]) - 1})"
