"""The scalar operand codes of a wave: one table for the decoder, the disassembler, the state layout and every tier.

A 9-bit source field (and the 7- or 8-bit SGPR fields) names:

    0 ..        SGPRs (Generation.sgprs of them; gfx9's 102..105 are FLAT_SCRATCH and XNACK_MASK)
    106, 107    VCC_LO, VCC_HI
    108 .. 123  TTMP0 .. TTMP15
    124, 125    M0 and NULL on gfx9, NULL and M0 from gfx11 (Generation.m0, .null)
    126, 127    EXEC_LO, EXEC_HI
    128 .. 208  integer inline constants 0 .. 64, -1 .. -16
    235 .. 238  SRC_SHARED_BASE, SRC_SHARED_LIMIT, SRC_PRIVATE_BASE, SRC_PRIVATE_LIMIT (the apertures)
    239         SRC_POPS_EXITING_WAVE_ID
    240 .. 248  float inline constants 0.5, -0.5, 1, -1, 2, -2, 4, -4, 1/(2*pi)
    251 .. 254  VCCZ, EXECZ, SCC, LDS_DIRECT
    255         a literal dword follows the instruction
    256 ..      VGPRs (9-bit fields)

In a 32-bit VALU encoding, src0 values 233/234, 249 and 250 select DPP8 (FI), SDWA and DPP16 instead.
"""
from __future__ import annotations

VCC, EXEC = 106, 126  # VCC_LO and EXEC_LO; their high halves are the next codes
FLAT_SCRATCH = 102  # gfx9: FLAT_SCRATCH_LO, _HI: the wave's scratch base where scratch is not architected
TTMP0, TTMP_END = 108, 124
INLINE_INT = range(128, 209)
SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT = 235, 236, 237, 238
POPS_EXITING_WAVE_ID = 239
INLINE_FLOAT = range(240, 249)
VCCZ, EXECZ, SCC, LDS_DIRECT, LITERAL = 251, 252, 253, 254, 255
VGPR0 = 256
DPP8, DPP8FI, SDWA, DPP16 = 233, 234, 249, 250


def storage(code: int, n: int = 1) -> bool:
    """Whether codes code .. code+n-1 are all SGPRs or all TTMPs: registers held as plain slots of the scalar file,
    read and written without side effects."""
    return code + n <= VCC or TTMP0 <= code and code + n <= TTMP_END
