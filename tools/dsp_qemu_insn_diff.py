"""Instruction-level differential test of hwemu's Hexagon semantics against qemu-hexagon.

    python -m tools.dsp_qemu_insn_diff [--per-form 2] [--seed 1] [--only REGEX] [--show 3]

For every register-to-register instruction form (no branches, memory, control-register writes, new values,
system or HVX instructions), random words are generated (emu.dsp.strategies' field filling), each run in a
program built around it: all 32 registers, the predicates and USR get random/known values, the instruction
packet runs, and r0-r31, P3:0 and USR are stored to a GP-addressed slot; at the end the slots are written to
stdout. The program (assembled by llvm-mc-19, linked by ld.lld-19) runs on qemu-hexagon and on hwemu, and
the slots are compared. The functions here are also used by tests/test_dsp_semantics_qemu.py.
"""
from __future__ import annotations

import argparse
import random
import re
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

from emu.dsp.decode import Decoder, Form

SLOT = 8 * 18  # r0-r31, P3:0 and USR
_EXCLUDE_ATTRS = {"A_JUMP", "A_CALL", "A_COF", "A_LOAD", "A_STORE", "A_MEMLIKE", "A_PRIV", "A_GUEST",
                  "A_IMPLICIT_WRITES_LC0", "A_IMPLICIT_WRITES_LC1", "A_IMPLICIT_WRITES_SA0", "A_IMPLICIT_WRITES_SA1",
                  "A_IMPLICIT_WRITES_SP", "A_IMPLICIT_WRITES_FP", "A_IMPLICIT_WRITES_LR", "A_CVI"}


def testable(f: Form) -> bool:
    insn = f.insn
    if insn.attribs & _EXCLUDE_ATTRS or f.tag.startswith(("J", "Y", "V6_", "A4_ext", "L", "S2_store", "S4_store")):
        return False
    if any(o.cls in "NOC" or o.suffix for o in f.operands):
        return False
    return not re.search(r"fTRAP|fBRANCH|fLOAD|fSTORE|fWRITE_|trap|loop", insn.semantics)


def _compiles(decoder: Decoder, f: Form) -> bool:
    from emu.dsp.lower import CompileError, lower
    from emu.dsp.pyback import compile_semantics
    try:
        compile_semantics(lower(decoder.isa, f.insn))
    except CompileError:
        return False
    return True


def forms(decoder: Decoder, only: str | None = None) -> list[Form]:
    """The testable forms whose semantics compile (coverage reports the others)."""
    fs = [f for group in decoder.by_iclass for f in group if testable(f) and (only is None or re.search(only, f.tag))]
    return [f for f in fs if _compiles(decoder, f)]


def _word(rng: random.Random, f: Form) -> int:
    """Random fields (don't-care bits zero), register pairs even (an odd pair field is not a valid encoding:
    LLVM reads it as the even pair, QEMU as the odd one)."""
    used = f.mask | sum(1 << b for pos in f.fields for b in pos)
    used &= ~sum(1 << pos[-1] for o, pos in zip(f.operands, f.fields, strict=True) if o.pair and pos)
    return (rng.getrandbits(32) & used & ~f.mask) | f.value | 0xC000  # parse bits 11: ends the packet


def program(cases: list[tuple[list[int], list[int], int, int]]) -> str:
    """Assembly: per case (instruction words, 32 register values, P3:0, USR)."""
    out = [".text", ".globl _start", "_start:"]
    for k, (words, regs, preds, usr) in enumerate(cases):
        out += [f"{{ r0 = ##buf+{k * SLOT} }}", "{ gp = r0 }", f"{{ r0 = ##{preds} }}", "{ p3:0 = r0 }",
                f"{{ r0 = ##{usr} }}", "{ usr = r0 }"]
        out += [f"{{ r{i} = ##{regs[i]}; r{i + 1} = ##{regs[i + 1]} }}" for i in range(0, 32, 2)]
        out.append("\t.word " + ", ".join(f"{w:#010x}" for w in words))
        out += [f"{{ memd(gp+#{8 * i}) = r{2 * i + 1}:{2 * i} }}" for i in range(16)]
        out += ["{ r0 = p3:0 }", "{ r1 = usr }", "{ memd(gp+#128) = r1:0 }"]
    out += ["{ r0 = #1; r1 = ##buf }", f"{{ r2 = ##{len(cases) * SLOT}; r6 = #64 }}", "{ trap0(#1) }",
            "{ r0 = #0; r6 = #93 }", "{ trap0(#1) }", ".bss", ".p2align 3", f"buf: .space {len(cases) * SLOT}"]
    return "\n".join(out) + "\n"


def build(asm: str, exe: Path) -> None:
    obj = exe.with_suffix(".o")
    subprocess.run(["llvm-mc-19", "-triple=hexagon", "-mcpu=hexagonv65", "-filetype=obj", "-o", str(obj)],
                   input=asm, text=True, check=True, capture_output=True)
    subprocess.run(["ld.lld-19", "-static", "-o", str(exe), str(obj)], check=True, capture_output=True)


def cases_for(decoder: Decoder, fs: list[Form], per_form: int, seed: int):
    rng = random.Random(seed)
    ext = next(f for f in decoder.by_iclass[0] if f.tag == "A4_ext")
    out = []
    for f in fs:
        for _ in range(per_form):
            words = [_word(rng, f)]
            if f.extendable >= 0 and rng.random() < 0.25:
                words = [(rng.getrandbits(32) & ~ext.mask & ~0xC000) | ext.value | 0x4000, words[0]]
            regs = [rng.choice([rng.getrandbits(32), rng.getrandbits(8), -rng.getrandbits(16) & 0xFFFFFFFF,
                                0x7FFFFFFF, 0x80000000, 0x3F800000, 0xFFFFFFFF]) for _ in range(32)]
            out.append((f, (words, regs, rng.getrandbits(32), 0)))
    return out


def run_both(cases, isa) -> tuple[bytes, bytes]:
    from emu.dsp.linux import Process
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "insn_diff"
        build(program([c for _, c in cases]), exe)
        ref = subprocess.run(["qemu-hexagon", str(exe)], capture_output=True, timeout=300)
        p = Process(str(exe), isa=isa)
        p.run(max_packets=50_000_000)
    return ref.stdout, bytes(p.stdout)


def differences(cases, theirs: bytes, mine: bytes) -> list[tuple[str, list[int], str]]:
    """(tag, words, what differs) per case whose slot differs."""
    out = []
    names = [f"r{i}" for i in range(32)] + ["p3:0", "usr"]
    for k, (f, (words, *_)) in enumerate(cases):
        a, b = theirs[k * SLOT:(k + 1) * SLOT], mine[k * SLOT:(k + 1) * SLOT]
        if a != b:
            va, vb = ([int.from_bytes(x[4 * i:4 * i + 4], "little") for i in range(len(names))] for x in (a, b))
            what = ", ".join(f"{n}: qemu {x:#x} hwemu {y:#x}" for n, x, y in zip(names, va, vb, strict=True) if x != y)
            out.append((f.tag, words, what))
    return out


def main() -> None:
    from emu.dsp import disasm
    from emu.dsp.isa import load
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-form", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", help="regex over instruction tags")
    ap.add_argument("--show", type=int, default=2)
    a = ap.parse_args()
    isa = load()
    decoder = Decoder(isa)
    fs = forms(decoder, a.only)
    cases = cases_for(decoder, fs, a.per_form, a.seed)
    theirs, mine = run_both(cases, isa)
    diffs = differences(cases, theirs, mine)
    by_tag = defaultdict(list)
    for tag, words, what in diffs:
        by_tag[tag].append((words, what))
    for tag, group in sorted(by_tag.items()):
        print(f"{tag}: {len(group)} of {a.per_form}")
        for words, what in group[:a.show]:
            text = disasm.packet(decoder.packet(words)).replace("\n", " ").replace("\t", "")
            print(f"    {text}\n      {what}")
    print(f"{len(fs)} forms, {len(cases)} cases; {len(cases) - len(diffs)} agree with qemu-hexagon, "
          f"{len(by_tag)} forms differ")


if __name__ == "__main__":
    main()
