"""AMD ISA description per family, converted once from the vendor tables.

The tables (encodings, operand kinds, pseudocode) are the autogen modules of the pinned tinygrad wheel,
extracted from AMD's machine-readable ISA XML and reference PDFs. They are read as *source text* with
`ast` (never imported), converted into the plain dataclasses of emu.amd.isa.tables and cached on disk; afterwards
loading an ISA touches neither tinygrad nor its files.
"""
from __future__ import annotations

import functools
import os
import pickle
from pathlib import Path

from emu import cache
from emu.amd import target
from emu.amd.isa.tables import ISA, Encoding, Field, Op, Operand

FAMILIES = tuple(target.GENERATIONS)
ARCHES = {a: t.isa for a, t in target.TARGETS.items()}
SCHEMA = 1  # bump when the cached representation changes
UnknownArch = target.UnknownArch


def family(arch: str) -> str:
    """The instruction tables' name ('rdna3', 'rdna4', 'cdna') for a gfx name or a family name."""
    return target.generation(arch).isa


def _cache_path(fam: str) -> Path:
    from importlib.metadata import version  # cheap: reads dist-info, does not import tinygrad
    return cache.root() / f"isa-{fam}-tinygrad{version('tinygrad')}-v{SCHEMA}.pickle"


@functools.cache
def load(arch: str) -> ISA:
    """The ISA of a family or gfx arch; converted from the vendor tables on first use, then cached."""
    fam = family(arch)
    path = _cache_path(fam)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        pass
    from emu.amd.isa.vendor import convert
    isa = convert(fam)
    try:  # atomic publish: concurrent processes may convert at once
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "wb") as f:
            pickle.dump(isa, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs the conversion next time
    return isa


__all__ = ["ISA", "Encoding", "Field", "Op", "Operand", "UnknownArch", "family", "load", "FAMILIES", "ARCHES"]
