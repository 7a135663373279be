"""Wave traces: HWEMU_TRACE selects waves, each instruction they run prints one line.

    HWEMU_TRACE=1                                     every wave of every dispatch
    HWEMU_TRACE="kernel=matmul,wg=3,0,0,wave=1"       terms, all of which a wave must match:
      kernel=NAME        the kernel's name (known where the launcher has the code object: the runner API, the CLI)
      dispatch=N[-M]     the dispatch number (or a range, inclusive)
      wg=X[,Y[,Z]]       the workgroup id (missing dimensions are 0); wg=* any
      wave=N[-M]         the wave within its workgroup
      pc=LO-HI           instructions whose PC (or offset in the code object, as llvm-objdump prints it) is in
                         [LO, HI) (hex with 0x, or decimal)
      count=N            stop after N lines in all
    HWEMU_TRACE_FILE=PATH  write the lines there instead of stderr

A line: `d0 wg(3,0,0) w1 0x26a0: global_store_b32 v[0:1], v2, off | v2=0x3f800000 ...`, then what the instruction
changed: SGPRs, VGPRs (only the lanes whose value changed; one value for lanes that all got it), EXEC, VCC and SCC.
Selected waves run one instruction per step on the lean interpreter (or the reference engine under
HWEMU_TIER=ref); the others keep their tier. With HWEMU_TRACE unset nothing here runs.
"""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

from emu.amd.exec.state import EXEC, SCC, VCC
from emu.amd.memory import _ranges

SHOWN = 6  # lanes listed per VGPR before "+N more"
_KEYS = ("kernel", "dispatch", "wg", "wave", "pc", "count")


class TraceFilterError(ValueError):
    pass


@dataclass
class Filter:
    kernel: str | None = None
    dispatch: tuple[int, int] | None = None
    wg: tuple[int, int, int] | None = None
    wave: tuple[int, int] | None = None
    pc: tuple[int, int] | None = None
    count: int | None = None

    def dispatch_wanted(self, kernel: str | None, dispatch: int | None) -> bool:
        if self.kernel is not None and kernel != self.kernel:
            return False
        return self.dispatch is None or (dispatch is not None and self.dispatch[0] <= dispatch <= self.dispatch[1])

    def wave_wanted(self, wg: tuple[int, int, int], wave: int) -> bool:
        return (self.wg is None or tuple(wg) == self.wg) and (self.wave is None or
                                                              self.wave[0] <= wave <= self.wave[1])


def parse(text: str, var: str = "HWEMU_TRACE", thread_trace: bool = False) -> Filter:
    """The filter environment variable `var`'s text gives; TraceFilterError (one line naming the bad term)
    otherwise. `thread_trace`: a filter of the thread trace's waves (emu.amd.timeline), which has no pc or count
    (it draws every instruction of the waves it selects)."""
    f = Filter()
    keys = _KEYS[:4] if thread_trace else _KEYS
    if text.strip() == "1":
        return f
    terms: list[list[str]] = []
    for part in text.split(","):
        part = part.strip()
        if "=" in part:
            key, _, value = part.partition("=")
            terms.append([key.strip(), value.strip()])
        elif terms and terms[-1][0] == "wg" and part:  # wg=3,0,0: the dimensions after the first
            terms[-1][1] += "," + part
        else:
            raise TraceFilterError(f"{var}={text!r}: bad term {part!r}: expected KEY=VALUE with KEY one of "
                                   f"{', '.join(keys)} (or {var}=1 for every wave)")
    seen = set()
    for key, value in terms:
        where = f"{var}={text!r}: bad term {key + '=' + value!r}"
        if key not in keys:
            raise TraceFilterError(f"{where}: unknown key {key!r} (keys: {', '.join(keys)})")
        if key in seen:
            raise TraceFilterError(f"{where}: {key} given twice")
        seen.add(key)
        try:
            if key == "kernel":
                if not value:
                    raise ValueError("empty kernel name")
                f.kernel = value
            elif key in ("dispatch", "wave"):
                setattr(f, key, _range(value, inclusive=True))
            elif key == "pc":
                f.pc = _range(value, inclusive=False)
            elif key == "wg":
                if value != "*":
                    dims = [_int(x) for x in value.split(",")]
                    if not 1 <= len(dims) <= 3:
                        raise ValueError("give 1 to 3 dimensions")
                    f.wg = tuple(dims + [0] * (3 - len(dims)))
            else:
                f.count = _int(value)
        except ValueError as e:
            raise TraceFilterError(f"{where}: {e}") from None
    return f


def _int(s: str) -> int:
    s = s.strip()
    try:
        v = int(s, 16) if s.lower().startswith("0x") else int(s, 10)
    except ValueError:
        raise ValueError(f"{s!r} is not a number") from None
    if v < 0:
        raise ValueError(f"{s!r} is negative")
    return v


def _range(s: str, inclusive: bool) -> tuple[int, int]:
    lo, sep, hi = s.partition("-")
    a = _int(lo)
    b = _int(hi) if sep else (a if inclusive else a + 1)
    if b < a:
        raise ValueError(f"range {s!r} is empty")
    return a, b


class Tracer:
    """The trace of this process: the filter and where lines go."""

    def __init__(self, filt: Filter, out):
        self.filter, self.out = filt, out
        self.left = filt.count
        self.lock = threading.Lock()

    def selector(self, prog, kernel: str | None, dispatch: int | None, base: int | None) -> Selection | None:
        """What to trace in one dispatch of `prog` (emu.amd.exec.wave.Program; None: nothing)."""
        return Selection(self, prog, base) if self.filter.dispatch_wanted(kernel, dispatch) else None

    def write(self, line: str) -> None:
        with self.lock:
            if self.left is not None:
                if self.left <= 0:
                    return
                self.left -= 1
            self.out.write(line + "\n")
            self.out.flush()


class Selection:
    """The tracing of one dispatch: which waves, and the traced step of each instruction."""

    def __init__(self, tracer: Tracer, prog, base: int | None):
        self.tracer, self.prog, self.base = tracer, prog, base
        self.steps: dict = {}  # pc -> traced step (the run loop's table for the selected waves)

    def build(self, pc: int):
        s = self.steps[pc] = self.step(self.prog.single(pc), self.prog.inst(pc))
        return s

    def selects(self, wg: tuple[int, int, int], wave: int) -> bool:
        return self.tracer.filter.wave_wanted(wg, wave)

    def wave(self, wg: tuple[int, int, int], wave: int) -> Selection | None:
        return self if self.selects(wg, wave) else None

    def shows(self, pc: int) -> bool:
        r = self.tracer.filter.pc
        if r is None:
            return True
        return r[0] <= pc < r[1] or (self.base is not None and r[0] <= pc - self.base < r[1])

    def step(self, step, inst):
        """`step` (of `inst`) printing its line when it has run (or faulted)."""
        def traced(w):
            if not self.shows(inst.pc) or (self.tracer.left is not None and self.tracer.left <= 0):
                return step(w)
            sgpr, vgpr = w.sgpr.copy(), w.vgpr.copy()
            try:
                r = step(w)
            except BaseException:
                self.tracer.write(_head(w, inst) + " | faulted")
                raise
            self.tracer.write(_head(w, inst) + changes(sgpr, vgpr, w))
            return r
        return traced


class Both:
    """A dispatch's thread trace (emu.amd.sqtt.Recording) and HWEMU_TRACE's selection together: a wave either
    selects runs the steps of that one, a wave both select runs steps that record and print."""

    def __init__(self, recording, selection: Selection):
        self.recording, self.selection, self.prog = recording, selection, selection.prog
        self.steps: dict = {}

    def selects(self, wg: tuple[int, int, int], wave: int) -> bool:
        return self.recording.selects(wg, wave) or self.selection.selects(wg, wave)

    def wave(self, wg: tuple[int, int, int], wave: int):
        r, s = self.recording.wave(wg, wave), self.selection.wave(wg, wave)
        return self if r is not None and s is not None else r if r is not None else s

    def build(self, pc: int):
        inst = self.prog.inst(pc)
        s = self.steps[pc] = self.selection.step(self.recording.step(self.prog.single(pc), inst), inst)
        return s


def both(recording, selection: Selection | None):
    """What traces a dispatch's waves: its thread trace, HWEMU_TRACE's selection, both, or neither (None)."""
    if recording is None or selection is None:
        return recording if recording is not None else selection
    return Both(recording, selection)


def _head(w, inst) -> str:
    wg = ",".join(str(x) for x in w.workgroup) if w.workgroup is not None else "?"
    return f"d{w.dispatch} wg({wg}) w{w.wave_id} {inst.pc:#x}: {inst}"


def changes(sgpr: np.ndarray, vgpr: np.ndarray, w) -> str:
    """What changed from (sgpr, vgpr) to the wave's registers now, compactly."""
    out = []
    ds = np.flatnonzero(sgpr != w.sgpr)
    for s in ds:
        s = int(s)
        if s in (EXEC, EXEC + 1, VCC, VCC + 1, SCC):
            continue
        out.append(f"s{s}={int(w.sgpr[s]):#x}" if s < VCC else f"[{s}]={int(w.sgpr[s]):#x}")
    for name, slot in (("vcc", VCC), ("exec", EXEC)):
        old = int(sgpr[slot]) | int(sgpr[slot + 1]) << 32
        new = int(w.sgpr[slot]) | int(w.sgpr[slot + 1]) << 32
        if old != new:
            out.append(f"{name}={old:#x}->{new:#x}")
    if sgpr[SCC] != w.sgpr[SCC]:
        out.append(f"scc={int(w.sgpr[SCC])}")
    rows = np.flatnonzero((vgpr != w.vgpr).any(axis=1))
    for r in rows:
        r = int(r)
        lanes = np.flatnonzero(vgpr[r] != w.vgpr[r])
        vals = w.vgpr[r, lanes]
        name = f"v{r}" if r < 256 else f"a{r - 256}"
        if (vals == vals[0]).all():
            out.append(f"{name}[{_lanes(lanes)}]={int(vals[0]):#x}")
        else:
            shown = " ".join(f"{int(ln)}:{int(v):#x}" for ln, v in zip(lanes[:SHOWN], vals[:SHOWN], strict=True))
            more = f" +{len(lanes) - SHOWN} more" if len(lanes) > SHOWN else ""
            out.append(f"{name}{{{shown}{more}}}")
    return " | " + " ".join(out) if out else ""


def _lanes(lanes: np.ndarray) -> str:
    return _ranges(tuple(int(x) for x in lanes))


_tracer: dict = {}  # (HWEMU_TRACE, HWEMU_TRACE_FILE) -> Tracer: one per setting in a process
_lock = threading.Lock()


def tracer() -> Tracer | None:
    """The process's tracer (from HWEMU_TRACE / HWEMU_TRACE_FILE, read at each dispatch), or None when off."""
    text = os.environ.get("HWEMU_TRACE", "")
    if not text or text == "0":
        return None
    key = (text, os.environ.get("HWEMU_TRACE_FILE"))
    with _lock:
        t = _tracer.get(key)
        if t is None:
            filt = parse(text)
            try:
                out = open(key[1], "a") if key[1] else sys.stderr  # noqa: SIM115 (open for the process's life)
            except OSError as e:
                raise ValueError(f"HWEMU_TRACE_FILE={key[1]!r}: {e.strerror or e}") from None
            t = _tracer[key] = Tracer(filt, out)
    return t
