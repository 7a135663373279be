"""Numeric tables the vendor semantics index that the vendor files themselves do not contain (data, as bytes).

    CABAC         S2_cabacdecbin: the H.264 CABAC range table rangeTabLPS[pStateIdx][qCodIRangeIdx] and the
                  state transitions transIdxMPS / transIdxLPS (ITU-T H.264, tables 9-44 and 9-45), under the
                  names the vendor text uses (rLPS_table_64x4, AC_next_state_MPS_64, AC_next_state_LPS_64)
    RECIP_SEED    F2_sfrecipa: the 7-bit-indexed reciprocal seed ROM (fSF_RECIP_LOOKUP)
    INVSQRT_SEED  F2_sfinvsqrta: the inverse-square-root seed ROM (fSF_INVSQRT_LOOKUP)

The values are those of Qualcomm's simulator as QEMU 7.2's target/hexagon/arch.c lists them (Debian's qemu source
package); tests/test_dsp_semantics_qemu.py checks the instructions that read them against qemu-hexagon.
"""
from __future__ import annotations

_RLPS = bytes.fromhex(
    "80b0d0f080a7c5e3809ebbd87b96b2cd748ea9c36f87a0b9698098af647a90a65f74899e5a6e829655687b8e516375874d5e6f80"
    "4959697a4555647442505f6e3e4c5a683b4856633845515e35414d59333e4955303b45502e38424c2b353f4829323b4527303841"
    "252d363e232b333b2129303820272e351e252b321d2329301b21272d1a1f252b181e2329171c2127161b2025151a1e2314181d21"
    "13171b1f12161a1e1115191c1014171b0f1316190e1215180e1114170d1013160c0f12150c0e11140b0e10130b0d0f120a0c0f11"
    "0a0c0e10090b0d0f090b0c0e080a0c0e08090b0d07090b0c07090a0c07080a0b0608090b0607090a0607080902020202")
_MPS = bytes([*range(1, 63), 62, 63])
_LPS = bytes.fromhex(
    "000001020204040506070809090b0b0c0d0d0f0f10101212131315151616171818191a1a1b1b1c1d1d1e1e1e1f2020212121222223"
    "232324242425252526263f")
RECIP_SEED = bytes.fromhex(
    "fefaf6f2efebe7e4e0ddd9d6d2cfccc9c6c2bfbcb9b6b3b1aeaba8a5a3a09d9b989693918e8c8a878583807e7c7a787573716f6d6b"
    "69676563615f5e5c5a58565453514f4e4c4a4947454442403f3d3c3a393736343332302f2d2c2b29282725242321201f1e1c1b1a"
    "19171615141312110f0e0d0c0b0a090807060504030200")
INVSQRT_SEED = bytes.fromhex(
    "696663615e5b59575452504d4b49474543413f3d3b3937363432302f2d2c2a2827252422211f1e1d1b1a19171615141211100f0d"
    "0c0b0a090807060504030201fefaf6f3efebe8e4e1dedbd7d4d1cecbc9c6c3c0bebbb8b6b3b1afacaaa8a5a3a19f9d9b99979593"
    "918f8d8b8987868482807f7d7b7a7877757472716f6e6c6b")
assert len(_RLPS) == 256 and len(_MPS) == len(_LPS) == 64 and len(RECIP_SEED) == len(INVSQRT_SEED) == 128

# table name in the vendor text -> (its bytes, its dimensions)
TABLES: dict[str, tuple[bytes, tuple[int, ...]]] = {
    "rLPS_table_64x4": (_RLPS, (64, 4)), "AC_next_state_MPS_64": (_MPS, (64,)), "AC_next_state_LPS_64": (_LPS, (64,)),
}


def lookup(name: str, *index: int) -> int:
    """Element `index` of a table (row-major); an index outside the table reads 0 (the C would read past it)."""
    data, dims = TABLES[name]
    flat = 0
    for i, n in zip(index, dims, strict=True):
        if not 0 <= i < n:
            return 0
        flat = flat * n + i
    return data[flat]


def fSF_RECIP_LOOKUP(idx: int) -> int:
    return RECIP_SEED[idx & 0x7F]


def fSF_INVSQRT_LOOKUP(idx: int) -> int:
    return INVSQRT_SEED[idx & 0x7F]
