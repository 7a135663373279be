"""Cross-lane source selection of VALU modifiers: DPP16, DPP8 (source lane per lane) and SDWA (sub-dword selects).

`dpp16(ctrl, lanes, broadcasts)` / `dpp8(sels, lanes)` return (source lane index array, lanes whose source exists);
the executor gathers the source operand through the index and decides what an invalid lane does
(bound_ctrl: read 0; otherwise the lane is not written).
"""
from __future__ import annotations

import numpy as np

U64 = np.uint64


def dpp16(ctrl: int, lanes: int, broadcasts: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Source lane and validity of each lane for a DPP16 control value; None for a reserved value. `broadcasts`:
    the gfx9 controls (wave shifts, row broadcasts) in place of gfx10+'s row_share and row_xmask."""
    i = np.arange(lanes)
    row, r = i & ~15, i & 15
    n = ctrl & 15
    ok = np.ones(lanes, bool)
    if ctrl <= 0xFF:  # quad_perm
        src = (i & ~3) | ((ctrl >> ((i & 3) * 2)) & 3)
    elif 0x101 <= ctrl <= 0x10F:  # row_shl
        src, ok = i + n, r + n < 16
    elif 0x111 <= ctrl <= 0x11F:  # row_shr
        src, ok = i - n, r >= n
    elif 0x121 <= ctrl <= 0x12F:  # row_ror
        src = row | ((r - n) & 15)
    elif ctrl == 0x140:  # row_mirror
        src = row | (15 - r)
    elif ctrl == 0x141:  # row_half_mirror
        src = row | (r & 8) | (7 - (r & 7))
    elif broadcasts and ctrl in (0x130, 0x134, 0x138, 0x13C):  # wave_shl1, wave_rol1, wave_shr1, wave_ror1
        step = 1 if ctrl in (0x130, 0x134) else -1
        src = i + step
        ok = (src >= 0) & (src < lanes) if ctrl in (0x130, 0x138) else ok
        src = src % lanes
    elif broadcasts and ctrl == 0x142:  # row_bcast15
        src, ok = row - 1, i >= 16
    elif broadcasts and ctrl == 0x143:  # row_bcast31
        src, ok = np.full(lanes, 31), i >= 32
    elif not broadcasts and 0x150 <= ctrl <= 0x15F:  # row_share
        src = row | n
    elif not broadcasts and ctrl == 0x142:  # reserved from gfx10 (gfx9's row_bcast15): hardware reads each row's lane 0
        src = row  # (tinygrad's hardware-confirmed test_dpp row_bcast15 vector, wave64 gfx11: lanes 0, 16, 32, 48
        # compare equal to it, lanes 1, 15, 31, 47, 63 do not); hwemu follows the hardware over the manual
    elif not broadcasts and 0x160 <= ctrl <= 0x16F:  # row_xmask
        src = row | (r ^ n)
    else:
        return None
    return np.where(ok, src, 0).astype(np.intp), ok


def dpp_write_mask(lanes: int, row_mask: int, bank_mask: int) -> np.ndarray:
    i = np.arange(lanes)
    return (((row_mask >> ((i >> 4) & 3)) & 1) & ((bank_mask >> ((i >> 2) & 3)) & 1)).astype(bool)


def dpp8(sels: list[int], lanes: int) -> np.ndarray:
    i = np.arange(lanes)
    return ((i & ~7) | np.array(sels)[i & 7]).astype(np.intp)


# SDWA selects: BYTE_0..3, WORD_0..1, DWORD
def sdwa_extract(v: np.ndarray, sel: int, sext: bool) -> np.ndarray:
    if sel >= 6:
        return v
    shift, bits = (8 * sel, 8) if sel < 4 else (16 * (sel - 4), 16)
    x = (v >> U64(shift)) & U64((1 << bits) - 1)
    if sext:
        sign = U64(1 << (bits - 1))
        x = (x ^ sign) - sign
        x &= U64(0xFFFFFFFF)
    return x


def sdwa_place(result: np.ndarray, old: np.ndarray, sel: int, unused: int) -> np.ndarray:
    """Put a result into dst_sel of the destination dword; unused bits: 0 zero, 1 sign-extend, 2 keep old."""
    if sel >= 6:
        return result
    shift, bits = (8 * sel, 8) if sel < 4 else (16 * (sel - 4), 16)
    field = ((1 << bits) - 1) << shift
    val = (result & U64((1 << bits) - 1)) << U64(shift)
    if unused == 2:
        return (old & U64(~field & 0xFFFFFFFF)) | val
    if unused == 1:
        top = shift + bits
        sign = (val >> U64(top - 1)) & U64(1)
        return val | (sign * U64((0xFFFFFFFF >> top) << top & 0xFFFFFFFF))
    return val
