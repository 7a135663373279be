"""Where the vendor definitions are missing or wrong: one table, every entry with its reason.

An entry replaces an instruction's semantics text (the same C language over the same macros), or withholds
the instruction (None): the coverage tool then reports it as failing with the reason, and the core refuses
it (IllegalPacket) rather than compute a result nobody has checked. Each withheld entry names what is
missing, for the session that supplies it.
"""
from __future__ import annotations

_OUTSIDE = "call simulator helpers outside the vendor files"
_CHECK = "(tools/dsp_qemu_insn_diff --only {} compares a fix with qemu-hexagon)"

FIXUPS: dict[str, tuple[str | None, str]] = {
    "F2_dfmpyhh": (None, f"the semantics {_OUTSIDE} (internal_mpyhh: the high partial product of the "
                         "dfmpy sequence)"),

}
