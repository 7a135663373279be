"""Per-kernel statistics (HWEMU_STATS=1): the dispatches' Stats (emu.amd.dispatch) summed per kernel name, and the
table printed at exit, one row per kernel (and GPU), by wave-instructions, most first:

    kernel  dispatches  waves  wave-insts  SALU  VALU  VMEM  SMEM  LDS  branch  other  LDS B/wg  scratch B/wave  tier

The category columns count wave-instructions (emu.amd.exec.category) and sum to wave-insts; `LDS B/wg` is the LDS
a workgroup was given and `scratch B/wave` the private memory a wave was given (the largest over the kernel's
dispatches); `tier` is HWEMU_TIER of the kernel's program and, for jit and auto, the share of its wave-instructions
that ran natively.
"""
from __future__ import annotations

import atexit
import sys
from dataclasses import dataclass, field

from emu.amd.dispatch import Stats
from emu.amd.exec import category
from emu.amd.exec.state import CATEGORIES


@dataclass
class KernelStats:
    """One kernel's dispatches on one GPU, summed."""
    dispatches: int = 0
    waves: int = 0
    wave_instructions: int = 0
    categories: list[int] = field(default_factory=lambda: [0] * len(CATEGORIES))
    native: int = 0  # wave-instructions run natively
    lds_bytes: int = 0
    scratch_bytes: int = 0
    tiers: set[str] = field(default_factory=set)
    last_dispatch: int | None = None  # the id of the dispatch counted last (an AQL packet may run in parts)

    @property
    def by_category(self) -> dict[str, int]:
        return dict(zip(CATEGORIES, self.categories, strict=True))

    @property
    def tier(self) -> str:
        """e.g. "interp", "jit: 100% native", "auto: 93% native"."""
        t = "/".join(sorted(self.tiers))
        if not self.tiers & {"jit", "threaded", "auto"}:
            return t
        n, total = self.native, self.wave_instructions
        pct = "0" if not n else "100" if n == total else str(n * 100 // total) if n * 100 >= total else "<1"
        return f"{t}: {pct}% native"


def add(table: dict[str, KernelStats], s: Stats) -> None:
    """Count dispatch statistics `s` (kept under HWEMU_STATS: it names its kernel) in `table`."""
    k = table.setdefault(s.kernel, KernelStats())
    if k.last_dispatch != s.dispatch:
        k.dispatches += 1
        k.last_dispatch = s.dispatch
    k.waves += s.waves
    k.wave_instructions += s.wave_instructions
    k.categories = [a + b for a, b in zip(k.categories, s.categories, strict=True)]
    k.native += s.native
    k.lds_bytes, k.scratch_bytes = max(k.lds_bytes, s.lds_bytes), max(k.scratch_bytes, s.scratch_bytes)
    k.tiers.add(s.tier)


def format_table(tables: list[tuple[str, dict[str, KernelStats]]]) -> str:
    """The per-kernel table of GPUs' `(label, table)` ("" when no kernel ran); a GPU column when several ran any."""
    used = [(g, t) for g, t in tables if t]
    if not used:
        return ""
    head = ["kernel", "dispatches", "waves", "wave-insts", *CATEGORIES, "LDS B/wg", "scratch B/wave", "tier"]
    rows = sorted(((g, name, k) for g, t in used for name, k in list(t.items())), key=lambda r: -r[2].wave_instructions)
    body = [[name, k.dispatches, k.waves, k.wave_instructions, *k.categories, k.lds_bytes, k.scratch_bytes, k.tier]
            for _, name, k in rows]
    if len(used) > 1:
        head, body = ["GPU", *head], [[g, *r] for (g, _, _), r in zip(rows, body, strict=True)]
    cells = [head, *([str(c) for c in r] for r in body)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    text = [isinstance(v, str) for v in body[0]]  # names and the tier: left-aligned; numbers: right-aligned
    lines = ["  ".join(c.ljust(w) if t else c.rjust(w) for c, w, t in zip(r, widths, text, strict=True)).rstrip()
             for r in cells]
    return ("hwemu: per-kernel statistics (wave-instructions by category; LDS bytes per workgroup, scratch bytes per "
            "wave)\n" + "\n".join(lines))


_tables: list[tuple[str, dict[str, KernelStats]]] = []


def report_at_exit(label: str, table: dict[str, KernelStats]) -> None:
    """Print `table` (a runner GPU's) with the others registered here when the process exits, if HWEMU_STATS is still
    on then (a process, or a test, that turned it off again wants no table)."""
    if not _tables:
        atexit.register(_report)
    _tables.append((label, table))


def _report() -> None:
    text = format_table(_tables) if category.enabled() else ""
    if text:
        print(text, file=sys.stderr, flush=True)
