"""emu.dsp decoder and disassembler: packets, duplexes, extenders, loop ends, new values; against llvm-mc-19.

The big run is `python -m tools.dsp_llvm_agreement --count 20000`; here a CI-sized sample."""
import random

import pytest
from dsp_support import vendor_isa
from hypothesis import given
from hypothesis import strategies as st

from emu.dsp import disasm
from emu.dsp.decode import DecodeError, Decoder, words
from emu.dsp.strategies import packets, random_packet
from tools import dsp_llvm_agreement as la


@pytest.fixture(scope="module")
def decoder():
    return Decoder(vendor_isa())


# (words, address, llvm-mc-19's text), read off llvm-mc-19 -triple=hexagon -mcpu=hexagonv65 -mhvx
KNOWN = [
    ([0xF3014200, 0x9184C043], 0, "\t{\n\t\tr0 = add(r1,r2)\n\t\tr3 = memw(r4+#8)\n\t}"),
    ([0x740160A0, 0x7501C060], 0, "\t{\n\t\tif (p0.new) r0 = add(r1,#5)\n\t\tp0 = cmp.eq(r1,#3)\n\t}"),
    ([0x00004789, 0xB001C000], 0, "\t{\n\t\tr0 = add(r1,##123456)\n\t}"),  # immext
    ([0x7F008000, 0x31003111], 0,  # parse bits 10 in the first word: end of loop 0; a duplex last
     "\t{\n\t\tnop\n\t\tr0 = add(r0,#1)\n\t\tr1 = add(r1,#1)\n\t} :endloop0"),
    ([0x1FA2C1C0], 0, "\t{\n\t\tv0.b = vadd(v1.b,v2.b)\n\t}"),
    ([0x6900C04A], 0x1C, "\t{\n\t\tloop0(0x20,#10)\n\t}"),  # pc-relative: the packet address + offset
    ([0x68020101], 0, "\t{\n\t\tr2 = #0\n\t\tmemw(r0+#4) = r1\n\t}"),  # duplex: high half (slot 1) first
    ([0xF503C200], 0, "\t{\n\t\tr1:0 = combine(r3,r2)\n\t}"),
    ([0x00004000, 0x5800C000], 0xC, "\t{\n\t\tjump 0xc\n\t}"),  # an extended branch target
    ([0x961EC01E], 0, "\t{\n\t\tdealloc_return\n\t}"),  # the frame registers implied
    ([0xA09DC003], 0, "\t{\n\t\tallocframe(#24)\n\t}"),
]


@pytest.mark.parametrize("ws,addr,text", KNOWN)
def test_known_packets(decoder, ws, addr, text):
    assert disasm.packet(decoder.packet(ws, addr)) == text


def test_table(decoder):
    assert decoder.ambiguous == []  # no two encodings with the same fixed bits
    assert len(decoder.duplex) == 16 and sum(map(len, decoder.sub.values())) == 52
    n = sum(map(len, decoder.by_iclass))
    assert n == sum(i.encoding is not None and i.subclass is None for i in decoder.isa.insns.values())


def test_packet_structure(decoder):
    p = decoder.packet([0x00004789, 0xB001C000, 0xDEADBEEF], 0x100)  # words after the packet are not read
    assert p.size == 8 and p.words == (0x4789, 0xB001C000) and len(p.insts) == 1 and p.insts[0].extended
    assert p.insts[0].ops == (0, 1, 123456)
    assert words(b"\x00\x42\x01\xf3\x43\xc0\x84\x91\x01") == [0xF3014200, 0x9184C043]


@pytest.mark.parametrize("ws,why", [
    ([0x00004789, 0x00004789, 0xB001C000], "two constant extenders"),
    ([0xF3014200], "truncated"),
    ([0xF3014200] * 5, "no end within 4 words"),
    ([0x00004789, 0xF3004200, 0xF301C000], "no extendable operand"),
    ([0x0000C789], "constant extender ends the packet"),
    ([0x629FEFBE], "no instruction matches"),
])
def test_bad_packets(decoder, ws, why):
    with pytest.raises(DecodeError, match=why):
        decoder.packet(ws)


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=5))
def test_any_words_decode_or_raise(decoder, ws):
    """Arbitrary words (untrusted input): a packet or DecodeError, never another exception."""
    try:
        p = decoder.packet(ws, 0x1000)
    except DecodeError:
        return
    assert 1 <= len(p.words) <= 4 and disasm.packet(p).startswith("\t{")


@given(st.data())
def test_generated_packets_are_well_formed(decoder, data):
    ws = data.draw(packets(decoder))
    assert 1 <= len(ws) <= 4 and ((ws[-1] >> 14) & 3) in (0, 3)
    assert all((w >> 14) & 3 in (1, 2) for w in ws[:-1])
    try:
        p = decoder.packet(ws)
    except DecodeError as e:
        assert "new-value" in str(e) or "control register" in str(e)  # random fields may name no producer
        return
    assert p.size == 4 * len(ws)


@pytest.mark.skipif(not la.available(), reason="llvm-mc-19 not installed (./dev installs llvm-19)")
def test_llvm_agreement(decoder):
    rng = random.Random(20261130)
    sample = [random_packet(decoder, rng) for _ in range(2500)]
    accepted, diffs = la.compare(decoder, sample)
    assert accepted > 900
    unexplained = [d for d in diffs if not la.llvm_quirk(decoder, d[0])]
    assert unexplained == [] and len(diffs) <= accepted * 0.01


@pytest.mark.skipif(not la.corpus_available(), reason="clang-19 / ld.lld-19 / llvm-objdump-19 not installed (./dev)")
def test_clang_corpus_agrees_with_objdump(decoder):
    diffs, total = la.corpus_diffs(decoder)
    assert total > 1000 and diffs == []
