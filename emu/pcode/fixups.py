"""The one table of corrections: instructions whose vendor pcode is absent, prose, or wrong.

Each entry maps an instruction name (optionally per family) to `Fixup(pcode, reason)`: `pcode` replaces the
vendor text (None: the instruction is unsupported, `reason` says why). Keep it small.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fixup:
    pcode: str | None
    reason: str


FIXUPS: dict[str, Fixup] = {}
FAMILY_FIXUPS: dict[tuple[str, str], Fixup] = {}  # (family, name) -> Fixup, wins over FIXUPS


def fixup(family: str, name: str) -> Fixup | None:
    return FAMILY_FIXUPS.get((family, name)) or FIXUPS.get(name)
