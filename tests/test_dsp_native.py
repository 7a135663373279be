"""The native tier (emu.dsp.native) against the interpreter: the same registers, memory, counters, PC and fault
after the same packets, on the corpus programs and on random packet streams (loops, faults mid-block)."""
import os
import random
import struct

import numpy as np
import pytest
from dsp_support import vendor_isa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from emu.dsp import native, native_packet, tables
from emu.dsp.core import IllegalPacket, Thread
from emu.dsp.decode import Decoder
from emu.dsp.linux import Process
from emu.dsp.memory import Memory, MemoryFault
from emu.dsp.strategies import random_packet
from tools import dsp_llvm_agreement as la

PROGRAMS = sorted(p.stem for p in la.PROGRAMS.glob("*.c"))
STDIN = bytes(range(256)) * 20 + b"tail"
CODE, DATA_SIZE, READ_ONLY = 0x100000, 0x80000, 0x81000  # data from 0; then a gap, a read-only page
ENDLOOP0 = [0x7F008000, 0x7F00C000]  # { nop; nop }:endloop0
# fround -O0 on 9 of its 18 operands: the same packets (605 addresses, the same instructions in each; its exit path
# too), 28% of the 2.8 million the interpreter runs on all of them (test_dsp_programs runs them all against qemu)
DEFINES = {("fround", "-O0"): ("OPERANDS=9",)}


def stream(dec: Decoder, rng: random.Random, count: int) -> list[int]:
    """count random packets (mostly without jumps, which leave the code) and a last one ending hardware loop 0."""
    words = []
    while len(words) < 4 * count:
        pkt = random_packet(dec, rng)
        try:
            tags = [i.tag for i in dec.packet(pkt + [0] * (4 - len(pkt)), CODE).insts]
        except ValueError:
            tags = []
        if rng.random() < 0.1 or not any(t.startswith(("J", "SL2_j", "SL2_r", "L4_r")) for t in tags):
            words += pkt
    return words + ENDLOOP0


@pytest.fixture(scope="module")
def isa():
    for name in tables.TABLES:  # read now, where the vendor definitions are: compile_at_once moves HWEMU_CACHE
        tables.TABLES.get(name)
    return vendor_isa()


_USERS_CACHE = os.environ.get("HWEMU_CACHE")


@pytest.fixture(autouse=True)
def compile_at_once(monkeypatch, tmp_path_factory):
    """Every block is compiled the first time it is reached (cached objects in a cache of the test session, unless
    the test asks for `users_cache`)."""
    monkeypatch.setattr(native, "HOT", 1)
    monkeypatch.setattr(native, "HOT_COMPILE", 1)
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path_factory.getbasetemp() / "hwemu-cache"))


@pytest.fixture
def users_cache(monkeypatch):
    """The user's cache instead of the session's: blocks the same at every run (the corpus programs') are compiled
    at the first run only and loaded from the disk at later ones, as the tier does for the user. Their keys name the
    sources of the compiler and the translator (native._digest), so a change to either compiles them again."""
    if _USERS_CACHE is None:
        monkeypatch.delenv("HWEMU_CACHE")
    else:
        monkeypatch.setenv("HWEMU_CACHE", _USERS_CACHE)


def state(t: Thread, mem: Memory) -> tuple:
    pages = {n: (bytes(p.data), p.perms) for n, p in mem.pages.items()}
    return (list(t.r), list(t.c), list(t.p), t.v.tobytes(), t.q.tobytes(), t.pc, t.packets, t.insns, pages)


@pytest.mark.skipif(not la.corpus_available(), reason="clang-19 / ld.lld-19 not installed (./dev)")
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_corpus_program_same_on_both_tiers(isa, users_cache, tmp_path, name, opt):
    exe = tmp_path / name
    la.compile_program(la.PROGRAMS / f"{name}.c", opt, exe, DEFINES.get((name, opt), ()))
    runs = []
    for tier in (False, True):
        p = Process(str(exe), stdin=STDIN, isa=isa, native=tier)
        try:
            out = p.run(max_packets=5_000_000)
        except (MemoryFault, IllegalPacket) as e:
            out = (type(e), str(e))
        runs.append((bytes(p.stdout), out, state(p.thread, p.mem)))
    assert runs[1] == runs[0]


def machine(isa, words: list[int], seed: int) -> tuple[Thread, Memory]:
    """Code at CODE (a hardware loop over it: SA0 = CODE, LC0 small), random registers, most of them pointers into
    a random data region, so that loads and stores mostly hit mapped memory and sometimes fault."""
    rng = random.Random(seed)
    mem = Memory()
    mem.map(0, DATA_SIZE, "rw")
    mem.write(0, rng.randbytes(DATA_SIZE))
    mem.map(READ_ONLY, 0x1000, "r")
    mem.map(CODE, 0x1000, "rx")
    for k, w in enumerate(words):
        mem.pages[CODE // 0x1000].data[4 * k:4 * k + 4] = w.to_bytes(4, "little")
    t = Thread(isa, mem)
    t.pc = CODE
    for n in range(32):
        t.r[n] = rng.choice([rng.randrange(DATA_SIZE)] * 17 + [READ_ONLY + rng.randrange(0x1000), rng.getrandbits(32),
                                                               rng.randrange(16)])
    t.c[0], t.c[1], t.c[2], t.c[3] = CODE, rng.randrange(1, 5), CODE, rng.randrange(3)
    t.p = [rng.getrandbits(8) for _ in range(4)]
    t.v[:] = np.frombuffer(rng.randbytes(32 * 128), np.uint8).reshape(32, 128)
    t.q[:] = np.frombuffer(rng.randbytes(64), np.uint8).reshape(4, 16)
    return t, mem


def one_packet(isa, word: int, seed: int) -> tuple[Thread, Memory]:
    """machine() with the packet of one instruction `word` at CODE, then a loop's end, which ends the block the
    native tier compiles there (else the zero words after it, 47 packets of duplex loads, would be compiled too)."""
    return machine(isa, [word, *ENDLOOP0], seed)


def run(t: Thread, n: int, tier: bool):
    """Run n packets on one tier; the exception that stopped them (type and message), or None."""
    native_tier = native.Tier(t) if tier else None
    try:
        if native_tier:
            native_tier.run(n)
        else:
            for _ in range(n):
                t.step()
    except (MemoryFault, IllegalPacket) as e:
        return type(e), str(e)
    finally:
        assert native_tier is None or native_tier.stats["failed"] == 0  # no block the tier failed to compile
    return None


@settings(max_examples=40)
@given(st.integers(1, 8), st.integers(0, 2**32 - 1))
@example(3, 5114)  # cmp.gt(r29, Ns.new) of a new value with bit 31 set: a signed compare
def test_random_packet_streams_same_on_both_tiers(isa, count, seed):
    """Straight-line packets ending in a hardware loop back to the start; whatever they do (branch away, fault,
    trap), both tiers end in the same state with the same exception."""
    words = stream(Decoder.of(isa), random.Random(seed), count)
    outcomes = []
    for tier in (False, True):
        t, mem = machine(isa, words, seed)
        outcomes.append((run(t, 64, tier), state(t, mem)))
    assert outcomes[1] == outcomes[0]


def test_fault_mid_block_leaves_the_state_before_the_packet(isa):
    """A block of three packets whose second stores to unmapped memory: the first commits, then the same fault as
    the interpreter's, naming the second packet, with nothing of it committed."""
    words = [0xB000C021, 0xA180C000, 0xB000C022]  # { r1 = add(r0,#1) }  { memw(r0+#0) = r0 }  { r2 = add(r0,#1) }
    outcomes = []
    for tier in (False, True):
        t, mem = machine(isa, words, 1)
        t.r[0] = 0xDEAD0000  # unmapped
        outcomes.append((run(t, 3, tier), state(t, mem)))
    (err, st0), (err1, st1) = outcomes
    assert err == err1 and err[0] is MemoryFault and "0xdead0000" in err[1]
    assert st1 == st0 and st0[5] == CODE + 4 and st0[0][1] == 0xDEAD0001


def test_watchdog_packet_limit_is_exact(isa):
    """A tight native loop stops at exactly the packet limit (as the interpreter's watchdog counts)."""
    from emu.dsp.linux import Runaway
    loop = [0xB001C021, 0x59FFFFFE]  # { r1 = add(r1,#1) }  { jump .-4 }  (parse bits 11: one-word packets)
    results = []
    for tier in (False, True):
        t, mem = machine(isa, loop, 2)
        t.r[1] = 0
        p = Process.__new__(Process)
        p.thread, p.mem, p.native = t, mem, tier
        with pytest.raises(Runaway):
            p.run(max_packets=10_001)
        results.append(state(t, mem))
    assert results[1] == results[0] and results[0][6] == 10_001


def test_a_run_that_stops_mid_block_resumes_in_that_block(isa):
    """Slices of the run (the watchdog's) end at arbitrary packets of a loop body; each resumes inside the block
    already compiled for the body instead of compiling a block from every packet it stopped at (which once made a
    tinygrad kernel compile 750 blocks for its 766 packets), and ends in the interpreter's state."""
    body = [0xB001C021, 0xB002C042, 0xB003C063, 0xB004C084, 0xB005C0A5]  # { rN = add(rN,#1) } for N = 1..5
    words = body + ENDLOOP0[:1] + [0x7F00C000]  # then { nop; nop }:endloop0 back to the start
    results = []
    for tier in (False, True):
        t, mem = machine(isa, words, 3)
        t.c[0], t.c[1] = CODE, 1000  # loop 0: start, count
        if tier:
            tiered = native.Tier(t)
            for n in [7, 11, 13] * 30:  # slices of lengths prime to the body's 6 packets
                tiered.run(n)
            assert len(set(tiered.blocks.values())) == 1, "one block for the loop body, entered at each packet"
        else:
            for _ in range(31 * 30):
                t.step()
        results.append(state(t, mem))
    assert results[1] == results[0]


def test_a_later_run_enters_the_block_an_earlier_run_compiled_from_before_its_start(isa, monkeypatch):
    """Which packets start blocks depends on what got hot first: a run that first gets hot in the middle of a block
    an earlier run compiled (on disk) enters that block there, compiling nothing, and ends in the interpreter's
    state (a tinygrad HVX kernel compiled its blocks anew at every run, interpreting each packet 64 times)."""
    body = [0xB006C026, 0xB007C027, 0xB008C028, 0xB009C029, 0xB00AC02A]  # { rN = add(rN,#1) } for N = 6..10
    words = body + ENDLOOP0[:1] + [0x7F00C000]
    earlier, _ = machine(isa, words, 4)
    earlier.c[0], earlier.c[1] = CODE, 10
    first = native.Tier(earlier)
    first.run(60)
    assert first.blocks[CODE] and first.stats["native_packets"] > 0
    monkeypatch.setattr(native, "HOT_COMPILE", 1 << 30)  # nothing is compiled now: only what is on disk runs
    results = []
    for tier in (False, True):
        t, mem = machine(isa, words, 5)
        t.pc, t.c[0], t.c[1] = CODE + 8, CODE + 8, 30  # a loop from the third packet: never at the block's start
        if tier:
            later = native.Tier(t)
            later.run(100)
            assert later.stats["compiled"] == 0 and later.stats["native_packets"] > 80
        else:
            for _ in range(100):
                t.step()
        results.append(state(t, mem))
    assert results[1] == results[0]


# binary32 / binary64 operands at the edges: zeros, subnormals, the normal range's ends, infinities, quiet and
# signaling NaNs, integers at the conversion limits, values whose products or sums round, underflow or overflow
F32_EDGES = [0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
             0x7FA00000, 0xFFA00001, 0xFFFFFFFF, 0x3F800000, 0xBF800001, 0x3F000000, 0x4B000001, 0x4EFFFFFF,
             0x4F000000, 0xCF000000, 0xCF000001, 0x4F800000, 0x5F000000, 0xDF000000, 0x5F800000, 0x1F800001,
             0x20000000, 0x7FFFFFFF, 0x01000001, 0x00FFFFFF, 0x3FC00000, 0xBFC00000, 0x40200000]
F64_EDGES = [0, 1 << 63, 1, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000,
             0xFFF0000000000000, 0x7FF8000000000000, 0x7FF4000000000000, 0x3FF0000000000000, 0x41E0000000000000,
             0xC1E0000000000000, 0x43E0000000000000, 0x47EFFFFFE0000000, 0x47EFFFFFF0000000, 0x3810000000000000,
             0x380FFFFFF0000000, 0x36A0000000000000, 0x3FF0000000000001]


def float_forms(isa) -> list:
    """The instruction forms whose semantics compute with floats (floats come only from these macros and types,
    so the others need not be lowered to tell)."""
    from emu.dsp.llvmback import Unsupported, uses_float
    hints = ("FLOAT", "DOUBLE", "fFPSETROUND", "fRAISEFLAGS", "conv_", "fSF", "fDF", "float", "double", "isnan")
    forms = []
    for fs in Decoder.of(isa).by_iclass:
        for f in fs:
            if any(h in isa.insns[f.tag].semantics for h in hints):
                try:
                    if uses_float(native_packet.semantics(isa, f.tag)):
                        forms.append(f)
                except Unsupported:
                    pass
    return forms


# the scalar float instructions compilers emit: the native tier must run them (in round-to-nearest)
NATIVE_FLOATS = {"F2_sfadd", "F2_sfsub", "F2_sfmpy", "F2_sffma", "F2_sffms", "F2_sfcmpeq", "F2_sfcmpgt",
                 "F2_sfcmpge", "F2_sfcmpuo", "F2_sfmax", "F2_sfmin", "F2_dfadd", "F2_dfsub", "F2_conv_w2sf",
                 "F2_conv_uw2sf", "F2_conv_sf2w_chop", "F2_conv_sf2uw_chop", "F2_conv_sf2w", "F2_conv_sf2df",
                 "F2_conv_df2sf", "F2_conv_d2df", "F2_conv_df2d_chop", "F2_conv_w2df", "F2_conv_df2w_chop"}


def _bits32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


# a binary32 operand: an edge, any float (hypothesis favours its own edges), one whose products underflow, any bits
F32_VALUES = st.one_of(st.sampled_from(F32_EDGES), st.floats(width=32).map(_bits32),
                       st.tuples(st.booleans(), st.floats(2.0 ** -72, 2.0 ** -54, width=32)).map(
                           lambda sx: _bits32(-sx[1] if sx[0] else sx[1])),
                       st.integers(0, 2**32 - 1))


FLOAT_TAGS = ("F2_conv_d2df", "F2_conv_d2sf", "F2_conv_df2d", "F2_conv_df2d_chop", "F2_conv_df2sf", "F2_conv_df2ud",
              "F2_conv_df2ud_chop", "F2_conv_df2uw", "F2_conv_df2uw_chop", "F2_conv_df2w", "F2_conv_df2w_chop",
              "F2_conv_sf2d", "F2_conv_sf2d_chop", "F2_conv_sf2df", "F2_conv_sf2ud", "F2_conv_sf2ud_chop",
              "F2_conv_sf2uw", "F2_conv_sf2uw_chop", "F2_conv_sf2w", "F2_conv_sf2w_chop", "F2_conv_ud2df",
              "F2_conv_ud2sf", "F2_conv_uw2df", "F2_conv_uw2sf", "F2_conv_w2df", "F2_conv_w2sf", "F2_dfadd",
              "F2_dfclass", "F2_dfcmpeq", "F2_dfcmpge", "F2_dfcmpgt", "F2_dfcmpuo", "F2_dfmax", "F2_dfmin",
              "F2_dfmpyfix", "F2_dfmpyhh", "F2_dfsub", "F2_sfadd", "F2_sfclass", "F2_sfcmpeq", "F2_sfcmpge",
              "F2_sfcmpgt", "F2_sfcmpuo", "F2_sffma", "F2_sffma_lib", "F2_sffma_sc", "F2_sffms", "F2_sffms_lib",
              "F2_sfmax", "F2_sfmin", "F2_sfmpy", "F2_sfsub")
# the 32 registers' bits as one draw (32 integer draws cost more than the instruction's two runs)
REGISTERS = st.binary(min_size=128, max_size=128)
F64_VALUES = st.sampled_from(F64_EDGES) | st.floats().map(lambda x: int(np.float64(x).view(np.uint64)))


def test_float_tags_are_every_float_instruction(isa):
    assert {f.tag for f in float_forms(isa)} == set(FLOAT_TAGS)
    assert NATIVE_FLOATS <= set(FLOAT_TAGS)


@settings(max_examples=8)
@given(data=st.data())
@pytest.mark.parametrize("tag", FLOAT_TAGS)
def test_float_instruction_same_on_both_tiers(isa, tag, data):
    """A float instruction, compiled once, on edge-case operands (binary32 in registers, binary64 in pairs) in
    each rounding mode: the native tier computes what the interpreter (ieee's exact model) does, results and
    USR's sticky flags (other rounding modes go to the interpreter)."""
    from emu.dsp.strategies import _fill
    form = next(f for fs in Decoder.of(isa).by_iclass for f in fs if f.tag == tag)
    word = (_fill(random.Random(tag), form, 32) & ~0xC000) | 0xC000  # a packet of one instruction
    inst = Decoder.of(isa).packet([word], CODE).insts[0]
    sources = [(n, o.pair) for o, n in zip(inst.form.operands, inst.ops, strict=True) if o.cls == "R"]
    operands = []
    for _ in range(8):
        regs = list(struct.unpack("<32I", data.draw(REGISTERS, label="registers")))
        for n, pair in sources:
            if pair:
                d = data.draw(F64_VALUES, label=f"r{n + 1}:{n}")
                regs[n], regs[(n + 1) % 32] = d & 0xFFFFFFFF, d >> 32
            else:
                regs[n] = data.draw(F32_VALUES, label=f"r{n}")
        rounding = data.draw(st.sampled_from([0, 0, 0, 1, 2, 3]), label="USR.FPRND")
        operands.append((regs, rounding << 22 | data.draw(st.integers(0, 0x1F), label="USR's sticky flags") << 1))
    outcomes = []
    for tier in (False, True):
        t, mem = one_packet(isa, word, 0)
        tiered = native.Tier(t) if tier else None
        results = []
        for regs, usr in operands:
            t.r[:], t.c[8], t.pc = regs, usr, CODE
            tiered.run(1) if tiered else t.step()
            results.append(state(t, mem)[:6])
        outcomes.append(results)
    assert outcomes[1] == outcomes[0]


def test_common_float_instructions_run_natively(isa):
    """The scalar float instructions compilers emit compile to native blocks (in round-to-nearest)."""
    from emu.dsp.strategies import _fill
    forms = {f.tag: f for fs in Decoder.of(isa).by_iclass for f in fs}
    for tag in sorted(NATIVE_FLOATS):
        word = (_fill(random.Random(1), forms[tag], 32) & ~0xC000) | 0xC000
        t, _ = one_packet(isa, word, 1)
        t.c[8] = 0
        tiered = native.Tier(t)
        tiered.run(1)
        assert tiered.stats["native_packets"] == 1, tag


def test_a_block_that_fails_to_compile_is_reported_and_interpreted(isa, monkeypatch):
    """A bug of the tier (here: the block builder raising) is a RuntimeWarning naming the block, not a silent
    slowdown, and the program still runs right on the interpreter."""
    words = [0xB001C021, 0xB002C042]  # { r1 = add(r1,#1) }  { r2 = add(r2,#2) }
    t, mem = machine(isa, words, 4)
    t.step(), t.step()
    expected = state(t, mem)

    def broken(*_):
        raise ValueError("an emitted operand of the wrong type")
    monkeypatch.setattr(native, "build", broken)
    t, mem = machine(isa, words, 4)
    with pytest.warns(RuntimeWarning, match=r"block at 0x10000[04] \(ValueError: an emitted operand"):
        tier = native.Tier(t)
        tier.run(2)
    assert tier.stats["failed"] == 2 and state(t, mem) == expected  # a block tried at each packet


def test_a_block_that_answers_elsewhere_at_once_is_not_entered_forever(isa, monkeypatch):
    """A block found for a PC (a cached block's cover, from another program) may not hold the packet there: it answers
    ELSEWHERE without running one. The tier then interprets that packet, as the reference does, instead of compiling
    and entering the block again and again (a run that never ended: seed 187810752 with a worker's session cache)."""
    from emu.dsp.native_block import ELSEWHERE
    words = stream(Decoder.of(isa), random.Random(7), 3)
    ref, _ = machine(isa, words, 7)
    want = run(ref, 12, False)
    t, _ = machine(isa, words, 7)
    tier = native.Tier(t)
    entered = []

    def elsewhere(pc: int, fn: int, end: int) -> int:
        entered.append(pc)
        assert len(entered) < 1000, "the tier entered a block that runs nothing again and again"
        return ELSEWHERE
    monkeypatch.setattr(tier, "_compile", lambda pc, cached: 1)
    monkeypatch.setattr(tier, "_native", elsewhere)
    try:
        tier.run(12)
        got = None
    except (MemoryFault, IllegalPacket) as e:
        got = type(e), str(e)
    assert got == want and (t.pc, t.packets, t.r) == (ref.pc, ref.packets, ref.r)
