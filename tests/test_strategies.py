"""emu.amd.strategies: every drawn instruction must be one LLVM 19 decodes, consuming exactly its bytes."""
import functools
import re
import shutil
import subprocess
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from emu.amd import isa, strategies

LLVM_MC = shutil.which("llvm-mc-19")
ARCHES = ("gfx1100", "gfx1201", "gfx942", "gfx90a")
DRAWS = 60  # per encoding and arch
MIN_ACCEPTED = 0.98
MIN_SAME = 0.95


@functools.cache
def draw_all(arch: str, n: int = DRAWS) -> dict[str, list[bytes]]:
    """n instructions per supported encoding, deterministically (derandomized hypothesis)."""
    names = strategies.encodings(arch)
    out: dict[str, list[bytes]] = defaultdict(list)

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.data())
    def collect(data):
        for name in names:
            out[name].append(data.draw(strategies.instructions(arch, name)))

    collect()
    return dict(out)


_ENCODING = re.compile(r";\s*encoding:\s*\[([^\]]*)\]")
_WARNING = re.compile(r"<stdin>:(\d+):\d+: warning")
_BAD = re.compile(r"<unknown>|invalid", re.IGNORECASE)  # LLVM's notes on operands it could not print
_MARK = bytes([0x34, 0x12, 0x80, 0xBF])  # s_nop 0x1234 on every family: separates the instructions


def llvm_decode(arch: str, insts: list[bytes]) -> list[tuple[str, bytes] | None]:
    """LLVM's (disassembly, re-encoding) of each instruction; None where LLVM rejects it or does not
    decode exactly its bytes as one instruction.

    One llvm-mc call for all: each instruction is bracketed on its own line (a rejected one is skipped
    whole and reported by line number) and followed by a marker instruction that delimits its output."""
    mark = "[" + " ".join(f"0x{b:02x}" for b in _MARK) + "]\n"
    text = "".join("[" + " ".join(f"0x{b:02x}" for b in i) + "]\n" + mark for i in insts)
    res = subprocess.run([LLVM_MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "--disassemble", "-show-encoding"],
                         input=text, capture_output=True, text=True)
    warned = {int(m.group(1)) for m in _WARNING.finditer(res.stderr)}
    groups: list[list[tuple[str, bytes]]] = [[]]
    for line in res.stdout.splitlines():
        if m := _ENCODING.search(line):
            enc = bytes(int(x, 16) for x in m.group(1).split(","))
            if enc == _MARK:
                groups.append([])
            else:
                groups[-1].append((line.split(";")[0].strip(), enc))
    assert len(groups) == len(insts) + 1, "llvm-mc output does not match its input"
    return [g[0] if len(g) == 1 and 2 * k + 1 not in warned and not _BAD.search(g[0][0]) else None
            for k, g in enumerate(groups[:-1])]


@pytest.mark.skipif(not LLVM_MC, reason="llvm-mc-19 not installed")
@pytest.mark.parametrize("arch", ARCHES)
def test_llvm_accepts_drawn_instructions(arch):
    """Per encoding: LLVM decodes >= 98% of the draws as exactly one instruction of their size, and re-encodes
    >= 95% to the same bytes (no bits LLVM ignores or canonicalises away)."""
    draws = draw_all(arch)
    flat = [(name, i) for name, insts in draws.items() for i in insts]
    results = llvm_decode(arch, [i for _, i in flat])
    rejected: dict[str, list[str]] = defaultdict(list)
    changed: dict[str, list[str]] = defaultdict(list)
    for (name, inst), res in zip(flat, results, strict=True):
        if res is None:
            rejected[name].append(inst.hex())
        elif res[1] != inst:
            changed[name].append(f"{inst.hex()} -> {res[1].hex()} {res[0]}")
    for what, bad, floor in (("rejects", rejected, MIN_ACCEPTED), ("re-encodes differently", changed, MIN_SAME)):
        low = {name: f"{len(b)}/{len(draws[name])} e.g. {b[:2]}" for name, b in bad.items()
               if len(b) > (1 - floor) * len(draws[name])}
        assert not low, f"{arch}: LLVM {what} too many: {low}"


def llvm_assemble(arch: str, lines: list[str]) -> list[bytes | None]:
    """llvm-mc's encoding of each assembly line, None where it reports an error (one call for all)."""
    res = subprocess.run([LLVM_MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-show-encoding"],
                         input="\n".join(lines) + "\n", capture_output=True, text=True)
    errors = {int(m.group(1)) for m in re.finditer(r"<stdin>:(\d+):\d+: error", res.stderr)}
    encs = iter(bytes(int(x, 16) for x in m.group(1).split(",")) for m in _ENCODING.finditer(res.stdout))
    return [None if k in errors else next(encs) for k in range(1, len(lines) + 1)]


# LLVM 19's gfx12 disassembler prints one data and one address register for VIMAGE whatever dmask/dim say,
# and its assembler then rejects the text.
NOT_REASSEMBLED = {("gfx1201", "VIMAGE")}
# opcodes whose encodings are many-to-one: LLVM's assembler writes its own canonical form of the same meaning
# (ds_swizzle: several and/or/xor masks give one lane pattern, e.g. BITMASK_PERM "11110" = BROADCAST,32,30)
CANONICALIZED = ("ds_swizzle",)


@pytest.mark.skipif(not LLVM_MC, reason="llvm-mc-19 not installed")
@pytest.mark.parametrize("arch", ARCHES)
def test_llvm_reassembles_drawn_instructions(arch):
    """LLVM's assembler takes LLVM's disassembly back to the drawn bytes (>= 95% per encoding): this also checks
    the rules only the assembler enforces (constant bus, VOPD banks, operand ranges, cache-policy pairs)."""
    draws = draw_all(arch)
    flat = [(name, i) for name, insts in draws.items() for i in insts if (arch, name) not in NOT_REASSEMBLED]
    decoded = llvm_decode(arch, [i for _, i in flat])
    kept = [(name, inst, res[0]) for (name, inst), res in zip(flat, decoded, strict=True) if res]
    bad: dict[str, list[str]] = defaultdict(list)
    differ = [(name, inst, asm, enc) for (name, inst, asm), enc in
              zip(kept, llvm_assemble(arch, [a for _, _, a in kept]), strict=True) if enc != inst]
    # the assembler may pick a shorter encoding of the same instruction (an operand-less VOP3 as VOP1): LLVM
    # disassembles it to the same text, so it is the same instruction
    again = llvm_decode(arch, [enc for *_, enc in differ if enc]) if differ else []
    same = {enc for (_, _, asm, enc), res in zip([d for d in differ if d[3]], again, strict=True)
            if res and res[0] == asm}
    for name, inst, asm, enc in differ:
        if enc not in same and not asm.startswith(CANONICALIZED):
            bad[name].append(f"{asm} ({inst.hex()} -> {enc and enc.hex()})")
    low = {name: f"{len(b)}/{len(draws[name])} e.g. {b[:2]}" for name, b in bad.items()
           if len(b) > (1 - MIN_SAME) * len(draws[name])}
    assert not low, f"{arch}: LLVM's assembler does not give back the drawn bytes for too many: {low}"


# Encodings without a single opcode to draw: V_READFIRSTLANE_B32 (the only VOP1 opcode writing an SGPR) reads
# a VGPR, so it has no literal form. (gfx942 and gfx90a have none of the CDNA4 scaled MFMAs: no VOP3PX2 at all.)
NO_OPCODES = {"gfx1100": {"VOP1_SDST_LIT"}, "gfx1201": {"VOP1_SDST_LIT"}, "gfx942": set(), "gfx90a": set()}


@pytest.mark.parametrize("arch", ARCHES)
def test_every_encoding_is_covered(arch):
    missing = set(isa.load(arch).encodings) - set(strategies.encodings(arch))
    assert missing == NO_OPCODES[arch]
    for name in missing:
        with pytest.raises(ValueError, match=name):
            strategies.instructions(arch, name)


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(ValueError, match="NOPE"):
        strategies.instructions("gfx1100", "NOPE")


@given(strategies.programs("gfx1100", 4))
@settings(max_examples=10, derandomize=True, database=None)
def test_programs_are_lists_of_instructions(prog):
    assert 1 <= len(prog) <= 4 and all(len(i) in (4, 8, 12, 16) for i in prog)
