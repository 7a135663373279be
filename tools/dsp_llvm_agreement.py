"""Agreement of hwemu's Hexagon decoder + disassembler with LLVM 19 (llvm-mc-19 --disassemble).

    python -m tools.dsp_llvm_agreement --count 20000 [--seed 1] [--show 3]
    python -m tools.dsp_llvm_agreement --corpus      # tests/dsp_programs/*.c with clang-19 -O0/-O2, llvm-objdump-19

Random well-formed packets (emu.dsp.strategies) go through `llvm-mc-19 -triple=hexagon -mcpu=hexagonv65 -mhvx
--disassemble`, one packet per line with a marker packet after each; every packet LLVM accepts is decoded by
hwemu and the texts compared. Prints the agreement rate and the differences grouped by instruction.
Corpus mode: every packet of the programs' .text, hwemu against `llvm-objdump-19 -d --no-print-imm-hex`.
The functions here are also used by tests/test_dsp_decode.py.
"""
from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

LLVM_MC, LLVM_OBJDUMP, CLANG = "llvm-mc-19", "llvm-objdump-19", "clang-19"
PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "dsp_programs"
CFLAGS = ["--target=hexagon", "-mcpu=hexagonv65", "-mhvx=v65", "-mhvx-length=128b", "-static", "-nostdlib",
          "-ffreestanding", "-fuse-ld=lld"]
_OBJ_LINE = re.compile(r"^\s*([0-9a-f]+):\t[0-9a-f]{2}(?: [0-9a-f]{2}){3}\t[0-9a-f]{8} (.*)$")
_MC = [LLVM_MC, "-triple=hexagon", "-mcpu=hexagonv65", "-mhvx", "--disassemble"]
MARKER = (0x05EE7448, 0x7800C69F)  # { r31 = ##0x5eed1234 }, as llvm-mc-19 -show-encoding assembles it
_MARKER_TEXT = "r31 = ##1592594996"
_WARNING = re.compile(r"^<stdin>:(\d+):\d+: warning")


def available() -> bool:
    return bool(shutil.which(LLVM_MC))


def corpus_available() -> bool:
    return bool(shutil.which(CLANG) and shutil.which(LLVM_OBJDUMP) and shutil.which("ld.lld-19"))


def compile_program(src: Path, opt: str, out: Path, defines: tuple[str, ...] = ()) -> None:
    subprocess.run([CLANG, *CFLAGS, opt, *(f"-D{d}" for d in defines), str(src), "-o", str(out)], check=True,
                   capture_output=True)


def objdump_packets(path: Path) -> dict[int, str]:
    """packet address -> its text as llvm-objdump-19 prints it (normalised like `ours`; immext lines dropped)."""
    r = subprocess.run([LLVM_OBJDUMP, "-d", "--no-print-imm-hex", str(path)], capture_output=True, text=True,
                       check=True)
    out: dict[int, str] = {}
    start, insts = 0, []
    for line in r.stdout.splitlines():
        m = _OBJ_LINE.match(line)
        if not m:
            continue
        addr, text = int(m.group(1), 16), m.group(2)
        if text.startswith("{"):
            start, insts = addr, []
        body, brace, tail = text.lstrip("{ ").partition(" }")
        insts += [t.strip() for t in body.split("; \t") if t.strip() and not t.strip().startswith("immext(")]
        if brace:
            out[start] = normalise(insts, tail.strip())
    return out


def text_section(path: Path) -> tuple[int, bytes]:
    from objfile.elf import Elf
    elf = Elf(path.read_bytes())
    sec = next(s for s in elf.sections if s.name == ".text")
    return sec.addr, elf.data(sec)


def corpus_diffs(decoder, opts=("-O0", "-O2")):
    """Compile every program; per difference (program, opt, address, LLVM's text, hwemu text); and the
    number of packets compared. A packet llvm-objdump-19 prints as <unknown> (it does so for some packets
    clang-19 itself emitted, which llvm-mc-19 disassembles) is compared with llvm-mc-19's text instead."""
    import tempfile

    from emu.dsp.decode import words
    diffs, total, unknown = [], 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted(PROGRAMS.glob("*.c")):
            for opt in opts:
                exe = Path(tmp) / f"{src.stem}{opt}"
                compile_program(src, opt, exe)
                theirs = objdump_packets(exe)
                base, code = text_section(exe)
                ws = words(code)
                k = 0
                while k < len(ws):
                    addr = base + 4 * k
                    mine = ours(decoder, ws[k:k + 4], addr)
                    total += 1
                    size = len(decoder.packet(ws[k:k + 4], addr).words) if not mine.startswith("<error") else 1
                    if theirs.get(addr) is None and not mine.startswith("<error"):
                        unknown.append((src.name, opt, addr, ws[k:k + size]))
                    elif theirs.get(addr) != mine:
                        diffs.append((src.name, opt, addr, theirs.get(addr), mine))
                    k += size
    at = 0  # llvm-mc places packet k after all the packets and markers before it
    for (name, opt, addr, ws_), text in zip(unknown, llvm_texts([u[3] for u in unknown]), strict=True):
        mine = ours(decoder, ws_, at)
        if text != mine:
            diffs.append((name, opt, addr, text, mine))
        at += 4 * (len(ws_) + len(MARKER))
    return diffs, total


def _blocks(stdout: str) -> list[tuple[list[str], str]]:
    """llvm-mc's packets: (instruction texts, what follows the closing brace)."""
    out: list[tuple[list[str], str]] = []
    cur: list[str] | None = None
    for line in stdout.splitlines():
        s = line.strip()
        if s == "{":
            cur = []
        elif s.startswith("}") and cur is not None:
            out.append((cur, s[1:].strip()))
            cur = None
        elif cur is not None and s:
            cur.append(s)
    return out


def llvm_texts(packets: list[list[int]]) -> list[str | None]:
    """llvm-mc's text of each packet (as emu.dsp.disasm.packet normalises it), None where LLVM rejects it.
    Packet k sits at the address of all bytes before it (markers included), as llvm-mc counts."""
    lines = []
    for p in packets:
        lines += [" ".join(f"0x{b:02x}" for w in p for b in w.to_bytes(4, "little")),
                  " ".join(f"0x{b:02x}" for w in MARKER for b in w.to_bytes(4, "little"))]
    r = subprocess.run(_MC, input="\n".join(lines) + "\n", capture_output=True, text=True)
    rejected = {(int(m.group(1)) - 1) // 2 for m in map(_WARNING.match, r.stderr.splitlines()) if m}
    out: list[str | None] = [None] * len(packets)
    k = 0
    pending: list[tuple[list[str], str]] = []
    for insts, tail in _blocks(r.stdout):
        if insts == [_MARKER_TEXT]:
            if k < len(packets) and k not in rejected and len(pending) == 1:
                out[k] = normalise(*pending[0])
            pending = []
            k += 1
        else:
            pending.append((insts, tail))
    return out


def normalise(insts: list[str], tail: str) -> str:
    return " ; ".join(insts) + (f" {tail}" if tail else "")


def ours(decoder, words: list[int], addr: int) -> str:
    from emu.dsp import disasm
    from emu.dsp.decode import DecodeError
    try:
        p = decoder.packet(words, addr)
    except DecodeError as e:
        return f"<error: {e}>"
    lines = disasm.packet(p).splitlines()
    return normalise([s.strip() for s in lines[1:-1]], lines[-1].strip()[1:].strip())


# LLVM 19's disassembler drops the constant extender of the compare-with-#-1 compound jumps (J4_cmpeqn1_*,
# J4_cmpgtn1_*): its assembler encodes `{ p1 = cmp.eq(r6,#-1); if (p1.new) jump:t ##0x12340 }` with an immext,
# and disassembling those bytes gives `jump:t 0x0`. hwemu extends the target, as the vendor semantics do
# (fIMMEXT(riV)). Differences of that kind are counted apart.
_LLVM_DROPS_EXTENDER = re.compile(r"^J4_cmp\w*n1_")


def llvm_quirk(decoder, words: list[int]) -> bool:
    try:
        p = decoder.packet(words)
    except ValueError:
        return False
    return any(i.extended and _LLVM_DROPS_EXTENDER.match(i.tag) for i in p.insts)


def compare(decoder, packets: list[list[int]]) -> tuple[int, list[tuple[list[int], str, str]]]:
    """(packets LLVM accepts, differences as (words, llvm text, hwemu text))."""
    addr, accepted, diffs = 0, 0, []
    for words, text in zip(packets, llvm_texts(packets), strict=True):
        if text is not None:
            accepted += 1
            mine = ours(decoder, words, addr)
            if mine != text:
                diffs.append((words, text, mine))
        addr += 4 * (len(words) + len(MARKER))
    return accepted, diffs


def main() -> None:
    from emu.dsp.decode import Decoder
    from emu.dsp.isa import load
    from emu.dsp.strategies import random_packet
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=3, help="examples shown per differing instruction")
    ap.add_argument("--corpus", action="store_true", help="the clang-compiled programs instead of random packets")
    a = ap.parse_args()
    decoder = Decoder(load())
    if a.corpus:
        diffs, total = corpus_diffs(decoder)
        for d in diffs[:20]:
            print(f"  {d[0]} {d[1]} {d[2]:#x}\n    objdump: {d[3]}\n    hwemu:   {d[4]}")
        print(f"{total} packets, {total - len(diffs)} agree ({100 * (total - len(diffs)) / max(total, 1):.2f}%)")
        return
    rng = random.Random(a.seed)
    packets = [random_packet(decoder, rng) for _ in range(a.count)]
    accepted, diffs = compare(decoder, packets)
    quirks = [d for d in diffs if llvm_quirk(decoder, d[0])]
    by_tag: dict[str, list] = defaultdict(list)
    for words, theirs, mine in diffs:
        try:
            tags = ",".join(i.tag for i in decoder.packet(words).insts)
        except ValueError:
            tags = "<rejected>"
        by_tag[tags].append((words, theirs, mine))
    for tags, group in sorted(by_tag.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(group):5d} {tags}")
        for words, theirs, mine in group[:a.show]:
            print(f"      {' '.join(f'{w:08x}' for w in words)}\n        llvm:  {theirs}\n        hwemu: {mine}")
    print(f"{accepted} of {a.count} packets accepted by LLVM; agreement "
          f"{100 * (accepted - len(diffs)) / max(accepted, 1):.2f}% ({len(diffs)} differ, {len(quirks)} of them "
          f"LLVM dropping the extender of a J4_cmp*n1 jump; without those "
          f"{100 * (accepted - len(diffs)) / max(accepted - len(quirks), 1):.2f}%)")


if __name__ == "__main__":
    main()
