"""Agreement of hwemu's AMD disassembler with LLVM 19 (llvm-mc-19, llvm-objdump-19).

    python -m tools.llvm_agreement --arch gfx1100 --count 20000 [--seed 1] [--show 3]   (gfx1201, gfx942, gfx90a)
    python -m tools.llvm_agreement --corpus            # the OpenCL kernel corpus, all arches, -O0/-O3

Random mode: streams of random dwords (fully random, and with the top bits forced to each encoding's fixed
prefix so that every encoding appears) go through `llvm-mc-19 --disassemble -show-encoding`; every instruction
LLVM accepts, with its exact bytes, is decoded by hwemu and the texts compared. Prints the agreement rate and
the differences grouped by mnemonic. The functions here are also used by tests/test_llvm_diff.py.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

LLVM_MC, LLVM_OBJDUMP = "llvm-mc-19", "llvm-objdump-19"
ARCHES = ("gfx1100", "gfx1201", "gfx942", "gfx90a")  # the chips LLVM 19 knows
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "kernels" / "disasm"
_MC_LINE = re.compile(r"^\s+(.*?)\s*; encoding: \[([0-9a-fx,]+)\]")
_OBJ_LINE = re.compile(r"^\s+(.*?)\s*// ([0-9A-F]{12}): ((?:[0-9A-F]{8} ?)+)")


def available() -> bool:
    return bool(shutil.which(LLVM_MC) and shutil.which(LLVM_OBJDUMP))


def llvm_mc_disassemble(code: bytes, arch: str) -> list[tuple[bytes, str]]:
    """(encoding bytes, text) of every instruction llvm-mc accepts in a byte stream (it skips 4 bytes when not).
    llvm-mc-19 crashes part-way through many random gfx90a / gfx942 streams (what it printed before still counts):
    its crash report's stack trace is not symbolized, which took most of the time of such a run."""
    text = "\n".join(" ".join(f"0x{b:02x}" for b in code[i:i + 48]) for i in range(0, len(code), 48))
    p = subprocess.run([LLVM_MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "--disassemble", "-show-encoding"],
                       input=text, capture_output=True, text=True,
                       env=dict(os.environ, LLVM_DISABLE_SYMBOLIZATION="1"))
    out = []
    for line in p.stdout.splitlines():
        m = _MC_LINE.match(line)
        if m:
            out.append((bytes(int(b, 16) for b in m.group(2).split(",")), m.group(1)))
    return out


def objdump(path: str | Path) -> dict[int, str]:
    """address -> instruction text as llvm-objdump-19 -d prints it (the trailing comment stripped)."""
    p = subprocess.run([LLVM_OBJDUMP, "-d", str(path)], capture_output=True, text=True, check=True)
    out = {}
    for line in p.stdout.splitlines():
        m = _OBJ_LINE.match(line)
        if m:
            out[int(m.group(2), 16)] = m.group(1)
    return out


def prefixes(arch: str) -> list[tuple[int, int]]:
    """(mask, value) of every encoding's fixed bits in the first dword."""
    from emu.amd.decode import decoder
    return [(g.mask, g.value) for g in decoder(arch).groups]


def random_stream(arch: str, n_words: int, seed: int) -> bytes:
    """Random dwords; three of four instructions start with a forced encoding prefix, followed by random words."""
    rng = random.Random(seed)
    pre = prefixes(arch)
    words: list[int] = []
    while len(words) < n_words:
        w = rng.getrandbits(32)
        if rng.random() < 0.75:
            mask, value = rng.choice(pre)
            w = (w & ~mask) | value
        words += [w, rng.getrandbits(32), rng.getrandbits(32)]
    return b"".join(w.to_bytes(4, "little") for w in words[:n_words])


def _sentinel(k: int) -> bytes:
    return (0xBF808000 | (k & 0x7FFF)).to_bytes(4, "little")  # s_nop 0x8000+k on every family


def disassemble_each(codes: list[bytes], arch: str) -> list[str | None]:
    """llvm-mc's text for each instruction on its own (numbered s_nop sentinels between them); None if rejected.
    An instruction that swallows its sentinel still gets its text: the next sentinel tells where we are."""
    if len(codes) > 0x4000:  # sentinel numbers must stay unique
        return [t for i in range(0, len(codes), 0x4000) for t in disassemble_each(codes[i:i + 0x4000], arch)]
    out: list[str | None] = [None] * len(codes)
    sentinels = {_sentinel(k): k for k in range(len(codes))}
    k = 0
    stream = b"".join(c + _sentinel(i) for i, c in enumerate(codes))
    for raw, text in llvm_mc_disassemble(stream, arch):
        if raw in sentinels:
            k = sentinels[raw] + 1
        elif k < len(out) and out[k] is None:
            out[k] = text
    return out


def compare(pairs: list[tuple[bytes, str]], arch: str) -> list[tuple[bytes, str, str]]:
    """Differences (bytes, llvm text, hwemu text) among LLVM-decoded instructions.

    llvm-mc's text for a few invalid operands depends on the instructions decoded before (its VINTERP and
    image operand decoders keep state): an instruction that differs is disassembled again on its own, and
    that context-free text is the reference."""
    from emu.amd import decode
    bad = []
    for raw, text in pairs:
        insts = decode(raw, arch)
        ours = str(insts[0]) if insts[0].size == len(raw) else f"{insts[0]} (size {insts[0].size})"
        if ours != text:
            bad.append((raw, text, ours))
    alone = disassemble_each([b[0] for b in bad], arch) if bad else []
    return [b for b, text in zip(bad, alone, strict=True) if text != b[2]]


def random_agreement(arch: str, count: int, seed: int = 1) -> tuple[int, list[tuple[bytes, str, str]]]:
    """Decode random streams until `count` LLVM-accepted instructions; returns (count, differences)."""
    pairs: list[tuple[bytes, str]] = []
    s = seed
    while len(pairs) < count:
        pairs += llvm_mc_disassemble(random_stream(arch, 12000, s), arch)
        s += 1000
    pairs = pairs[:count]
    return len(pairs), compare(pairs, arch)


def corpus_diffs(arches=ARCHES, opts=("-O0", "-O3"), files=None):
    """Compile every corpus kernel; yield (kernel, arch, opt, address, llvm text, hwemu text) per difference
    and a final count of compared instructions."""
    import tempfile

    from emu.amd.asm.disasm import code_object_instructions
    from stack.codegen.opencl import compile_cl
    total = 0
    diffs = []
    for src in files or sorted(CORPUS.glob("*.cl")):
        for arch in arches:
            for opt in opts:
                co = compile_cl(src.read_text(), arch, opt)
                with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
                    f.write(co)
                    f.flush()
                    ref = objdump(f.name)
                ours = {i.pc: str(i) for _, insts in code_object_instructions(co, arch) for i in insts}
                for addr, text in ref.items():
                    total += 1
                    if ours.get(addr) != text:
                        diffs.append((src.stem, arch, opt, addr, text, ours.get(addr)))
    return total, diffs


def _report(diffs, show: int) -> None:
    groups = defaultdict(list)
    for d in diffs:
        groups[d[-2].split()[0] if d[-2] else "?"].append(d)
    for name, ds in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(ds):6d}  {name}")
        for d in ds[:show]:
            raw = d[0].hex() if isinstance(d[0], bytes) else " ".join(map(str, d[:4]))
            print(f"            {raw}\n              llvm:  {d[-2]}\n              hwemu: {d[-1]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", choices=ARCHES,
                    help=f"gfx arch (repeatable); default {', '.join(ARCHES)}")
    ap.add_argument("--count", type=int, default=20000, help="LLVM-accepted instructions per arch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=2, help="examples shown per mnemonic")
    ap.add_argument("--corpus", action="store_true", help="compare the OpenCL kernel corpus instead")
    a = ap.parse_args(argv)
    if not available():
        print(f"{LLVM_MC}/{LLVM_OBJDUMP} not found", file=sys.stderr)
        return 2
    arches = a.arch or list(ARCHES)
    if a.corpus:
        total, diffs = corpus_diffs(tuple(arches))
        print(f"corpus: {total - len(diffs)}/{total} identical ({100 * (1 - len(diffs) / max(total, 1)):.3f}%)")
        _report(diffs, a.show)
        return 0
    for arch in arches:
        n, diffs = random_agreement(arch, a.count, a.seed)
        print(f"{arch}: {n - len(diffs)}/{n} agree ({100 * (1 - len(diffs) / n):.3f}%)")
        _report(diffs, a.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def strategy_instructions(arch: str, per_encoding: int) -> bytes:
    """Instructions drawn from emu.amd.strategies (derandomized), `per_encoding` of every encoding."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from emu.amd import strategies
    names = strategies.encodings(arch)
    out: list[bytes] = []

    @settings(max_examples=per_encoding, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.data())
    def collect(data):
        out.extend(data.draw(strategies.instructions(arch, name)) for name in names)

    collect()
    return b"".join(out)


def strategy_agreement(arch: str, per_encoding: int) -> tuple[int, list[tuple[bytes, str, str]]]:
    """Instructions from the hypothesis strategies, disassembled by llvm-mc and by hwemu."""
    pairs = llvm_mc_disassemble(strategy_instructions(arch, per_encoding), arch)
    return len(pairs), compare(pairs, arch)
