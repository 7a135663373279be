"""AMD instruction sets, one per generation, from the vendor tables of each family.

The tables (encodings, operand kinds, pseudocode) are the autogen modules of the pinned tinygrad wheel,
extracted from AMD's machine-readable ISA XML and reference PDFs. They are read as *source text* with
`ast` (never imported), converted into the plain dataclasses of emu.amd.isa.tables and cached on disk; afterwards
loading an ISA touches neither tinygrad nor its files. A family's tables are the instruction set of its newest
generation; the older generations' sets are derived from them (emu.amd.isa.generations: CDNA3's, gfx942, without
CDNA4's additions; CDNA2's, gfx90a, without CDNA3's and with what gfx90a has that the tables do not list).

`load(arch)`: the instruction set of a chip (gfx name) or of a generation (its name, `name(arch)`); a family name
stands for the family's whole tables. `family(arch)`: the name of the vendor tables it comes from.
"""
from __future__ import annotations

import functools
from pathlib import Path

from emu import cache
from emu.amd import target
from emu.amd.isa import generations
from emu.amd.isa.tables import ISA, Encoding, Field, Op, Operand

FAMILIES = tuple(target.GENERATIONS)
ARCHES = {a: t.isa for a, t in target.TARGETS.items()}
SCHEMA = 2  # bump when the cached representation changes
UnknownArch = target.UnknownArch


def family(arch: str) -> str:
    """The instruction tables' name ('rdna3', 'rdna4', 'cdna') for a gfx name, a family or a generation's name."""
    return target.generation(arch).isa


def name(arch: str) -> str:
    """The name of the instruction set of a gfx name (its generation's: 'cdna3' for gfx942, 'cdna2' for gfx90a), of
    a generation's name or of a family name (the family's whole tables: 'rdna3', 'rdna4', 'cdna')."""
    return target.generation(arch).name


def fp8(arch: str) -> str:
    """The fp8 / bf8 formats of the instruction set of `arch`: "ocp" or "fnuz" (Generation.fp8)."""
    return target.generation(arch).fp8


def _cache_path(fam: str) -> Path:
    from importlib.metadata import version  # cheap: reads dist-info, does not import tinygrad
    return cache.root() / f"isa-{fam}-tinygrad{version('tinygrad')}-v{SCHEMA}.pickle"


@functools.cache
def load(arch: str) -> ISA:
    """The instruction set of a gfx arch, a generation's name or a family (its whole tables): the family's tables,
    converted from the vendor's on first use and then cached, or a generation's set derived from them."""
    n = name(arch)
    if n in generations.DELTAS:
        return generations.derive(load(generations.DELTAS[n].base), n)
    return _tables(family(arch))


def _tables(fam: str) -> ISA:
    def convert() -> ISA:
        from emu.amd.isa.vendor import convert
        return convert(fam)
    return cache.pickled(_cache_path(fam), convert)


__all__ = ["ISA", "Encoding", "Field", "Op", "Operand", "UnknownArch", "family", "name", "fp8", "load", "FAMILIES",
           "ARCHES"]
