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
    **{t: (None, f"the semantics {_OUTSIDE} (arch_sf_recip_common / arch_sf_invsqrt_common: the special "
                 f"cases of the division and square-root sequences) " + _CHECK.format(t))
       for t in ("F2_sffixupn", "F2_sffixupd", "F2_sffixupr")},
    **{t: (None, "needs the reciprocal / inverse-square-root seed ROM (fSF_RECIP_LOOKUP, fSF_INVSQRT_LOOKUP), "
                 "which the vendor files do not contain") for t in ("F2_sfrecipa", "F2_sfinvsqrta")},
    "S2_cabacdecbin": (None, "indexes the H.264 CABAC tables rLPS_table_64x4 and AC_next_state_MPS_64, which "
                             "the vendor files do not contain (ITU-T H.264 table 9-44 has them)"),

}
