"""Where the vendor definitions are missing or wrong: one table, every entry with its reason.

An entry replaces an instruction's semantics text (the same C language over the same macros), or withholds
the instruction (None): the coverage tool then reports it as failing with the reason, and the core refuses
it (IllegalPacket) rather than compute a result nobody has checked. Each withheld entry names what is
missing, for the session that supplies it.

The table is empty: every definition of QEMU 7.2's imported files compiles. What the vendor text reaches
outside those files is supplied elsewhere, each piece checked against qemu-hexagon: the simulator helpers
(internal_fmafx, internal_mpyhh, arch_sf_recip_common, arch_sf_invsqrt_common) in emu.dsp.ieee, the seed ROMs
and CABAC tables in emu.dsp.tables, the VTCM gather/scatter log in the core (emu.dsp.pyback.VTCM).
"""
from __future__ import annotations

FIXUPS: dict[str, tuple[str | None, str]] = {}
