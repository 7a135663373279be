"""The lean interpreter tier (HWEMU_TIER=interp): one fused Python function per decoded instruction, and per
straight-line block.

For each instruction the tier takes (emu.amd.exec.takes.lean) its binding and compiled pcode become the source of one
function (emu.amd.exec.interp_source), compiled through a disk cache (emu.amd.exec.interp_code); plain dword global
loads and stores and scalar loads are fused memory steps (emu.amd.exec.interp_mem). What the tier declines (memory,
DPP, engine control, ...) runs the reference plan step, and so does a fused step whenever MODE rounds or flushes
denormals where the fused code assumes it does not. A block's instructions run as a chain of their steps at first and
as one generated function once the block is warm, carry chains through VCC passed in arrays there.

Generated code is compiled once per (instruction bytes, processor, wave size) and shared by every program;
the PC is a parameter of the compiled factory. The run loop (emu.amd.exec.wave.run) sets np.errstate once.
"""
from __future__ import annotations

from collections.abc import Callable

from emu.amd.exec import takes
from emu.amd.exec.bind import OperandError, Unsupported
from emu.amd.exec.control import BARRIERS, CLOCKS, ENDS, ENGINE_NOPS, HALTS
from emu.amd.exec.interp_code import LOADS, act_lines, factory, row_loads
from emu.amd.exec.interp_mem import global_step, smem_step
from emu.amd.exec.interp_source import Source, generate
from emu.amd.exec.plan import Planner
from emu.amd.memory import GPUFault
from emu.pcode.npvalues import Decline

# what declines an instruction past emu.amd.exec.takes.lean: no generated form for its pcode (Decline), or a binding
# its reference step faults on (a bad operand, no semantics)
_DECLINES = (Decline, OperandError, Unsupported)
_cache: dict[tuple, tuple] = {}  # (bytes, target, lanes[, carry]) -> (fused code, None) or (None, why not)


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
            except GPUFault:  # not fetchable now: the block ends before it
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
        if inst.base not in takes.SALU or inst.op.name in ENGINE_NOPS:
            return False
        try:
            return "PC" in self.planner.sem(inst.op).writes
        except Unsupported:  # no semantics: its step faults
            return True

    def single(self, inst) -> Callable:
        """The step of one instruction."""
        return _step(self.planner, inst, self.part(inst))

    def part(self, inst):
        """The fused code of one instruction as (its interp_source.Fragment, the arguments it binds), or its step (a
        callable): a fused memory step, or the reference plan's step where the tier declines the instruction (counted
        under HWEMU_STATS)."""
        p = self.planner
        why = takes.lean(inst, p)
        if why is None:
            made, why = self._made(inst)
            if made is not None:
                return made
        takes.declined("interp", inst, why)
        return p.plan(inst)

    def _made(self, inst) -> tuple:
        """(the fused code or memory step of an instruction the tier takes, None), or (None, why it has none)."""
        p = self.planner
        if inst.op.name in ENGINE_NOPS:  # the PC moves on, nothing else
            return Source(p, inst).fragment(), None
        if inst.base in ("GLOBAL", "VGLOBAL", "SMEM"):
            try:
                return (smem_step if inst.base == "SMEM" else global_step)(p, inst, _Ref(p, inst)), None
            except _DECLINES as e:
                return None, _why(e)
        key = (inst.raw, p.arch, p.lanes)
        if key not in _cache:
            try:
                _cache[key] = generate(p, inst), None
            except _DECLINES as e:
                _cache[key] = None, _why(e)
        return _cache[key]


def _why(e: Exception) -> str:
    """A decline's reason, as counted (emu.amd.exec.takes.declined)."""
    return str(e) if isinstance(e, Decline) else "bad operand" if isinstance(e, OperandError) else "unsupported"


BLOCK = 64  # instructions per block at most
_BLOCK_ENDS = ENDS | BARRIERS | CLOCKS | HALTS


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
        make = _chains[n] = factory("\n".join([
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
            body += act_lines(p.lanes)
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
    loads = [ln for v, ln in LOADS if v in needs] + row_loads(set().union(*(f.rows for f in frags)))
    text = "\n".join([f"def make({', '.join(params)}):", "    def block(w):", f"        if w.left < {n}:",
                      "            return __first(w)", *("        " + ln for ln in loads), "        try:",
                      *("            " + ln for ln in body), "        except BaseException:",
                      "            w.left -= __index.get(w.pc, 0)", "            raise", f"        w.left -= {n - 1}",
                      "        return __r", "    return block"]) + "\n"
    make = _blocks.get(text)
    if make is None:
        make = _blocks[text] = factory(text, f"<interp fused block of {n}>")
    return make(*binds)


_blocks: dict[str, Callable] = {}  # block source -> its factory (programs running the same code share it)


def _carried(p: Planner, inst, carry: tuple[bool, bool]) -> tuple | None:
    """The fragment of a VALU instruction taking and / or giving a carry chain's VCC lanes, or None."""
    key = (inst.raw, p.arch, p.lanes, carry)
    if key not in _cache:
        try:
            _cache[key] = (generate(p, inst, carry) if inst.base in takes.VALU else None), None
        except Decline as e:  # no such chain in its code
            _cache[key] = None, str(e)
    return _cache[key][0]


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
