"""Random well-formed Hexagon packets: words with correct parse bits, constant extenders before extendable
instructions, duplexes last, end-of-loop markers; the fields not fixed by the encoding are random.

`random_packet(decoder, rng)` for tools; `packets(decoder)` is the hypothesis strategy.
"""
from __future__ import annotations

import random

from hypothesis import strategies as st

from emu.dsp.decode import PARSE_DUPLEX, PARSE_END, PARSE_LOOP, Decoder, Form

_NOT_END = 0b01


def _set(word: int, positions: tuple[int, ...], value: int) -> int:
    for k, p in enumerate(reversed(positions)):
        word = (word & ~(1 << p)) | ((value >> k) & 1) << p
    return word


def _fill(rng: random.Random, f: Form, bits: int, earlier: int = 0) -> int:
    """Random operand fields; the don't-care bits are zero (as LLVM's tables require), now and then random;
    register pairs mostly even; a new-value operand mostly names one of the `earlier` instructions."""
    used = f.mask | sum(1 << b for pos in f.fields for b in pos)
    keep = used if rng.random() < 0.95 else (1 << bits) - 1
    word = (rng.getrandbits(bits) & keep & ~f.mask) | f.value
    for o, pos in zip(f.operands, f.fields, strict=True):
        if o.pair and pos and o.cls != "#" and rng.random() < 0.9:
            word &= ~(1 << pos[-1])
        if o.cls in "NO" and earlier and rng.random() < 0.9:
            word = _set(word, pos, rng.randint(1, min(earlier, 3)) << 1)
    return word


def random_packet(decoder: Decoder, rng: random.Random) -> list[int]:
    forms = [f for fs in decoder.by_iclass for f in fs if f.tag != "A4_ext"]
    ext = next(f for f in decoder.by_iclass[0] if f.tag == "A4_ext")
    words: list[int] = []
    duplex = rng.random() < 0.25
    n = rng.randint(0 if duplex else 1, 3 if duplex else 4)
    for _ in range(n):
        f = rng.choice(forms)
        extend = f.extendable >= 0 and rng.random() < 0.3
        if len(words) + 1 + extend + duplex > 4:
            break
        if extend:
            words.append(_fill(rng, ext, 32))
        words.append(_fill(rng, f, 32, len(words) - sum(w >> 28 == 0 for w in words)))
    if duplex:
        code = rng.choice([c for c, d in decoder.duplex.items() if d.low in decoder.sub and d.high in decoder.sub])
        d = decoder.duplex[code]
        lo, hi = rng.choice(decoder.sub[d.low]), rng.choice(decoder.sub[d.high])
        extendable = hi.extendable >= 0 or lo.extendable >= 0
        if extendable and len(words) < 3 and rng.random() < 0.3:
            words.append(_fill(rng, ext, 32))
        words.append((code >> 1) << 29 | (code & 1) << 13 | _fill(rng, hi, 13) << 16 | _fill(rng, lo, 13))
    parse = [_NOT_END] * (len(words) - 1) + [PARSE_DUPLEX if duplex else PARSE_END]
    for k in (0, 1):  # end of loop 0 / loop 1: parse bits 10 in the first / second word
        if k < len(words) - 1 and rng.random() < 0.15:
            parse[k] = PARSE_LOOP
    return [(w & ~0xC000) | p << 14 for w, p in zip(words, parse, strict=True)]


def packets(decoder: Decoder) -> st.SearchStrategy[list[int]]:
    return st.randoms(use_true_random=False).map(lambda rng: random_packet(decoder, rng))
