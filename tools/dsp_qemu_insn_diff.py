"""Instruction-level differential test of hwemu's Hexagon semantics against qemu-hexagon.

    python -m tools.dsp_qemu_insn_diff [--per-form 2] [--seed 1] [--only REGEX] [--show 3]

For every register-to-register instruction form, scalar and HVX (no branches, memory, control-register
writes, new values or system instructions), random words are generated, each run in a program built around
it: r0-r31 get random and edge values, P3:0 random, USR zero (float forms: once in each rounding mode of
USR.FPRND, flags clear), v0-v31 and q0-q3 random; the instruction
packet runs; r0-r31, P3:0 and USR are stored to a GP-addressed slot, v0-v31 and q0-q3 (as vectors) to a
vector slot; at the end the slots are written to stdout. The program (assembled by llvm-mc-19, linked by
ld.lld-19) runs on qemu-hexagon and on hwemu, and the slots are compared. A case may also be a packet in
assembly text (`packet_cases`). The functions here are also used by tests/test_dsp_semantics_qemu.py.
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
USR_FPRND, FPRND_MODES = 22, (0, 1, 2, 3)  # USR's rounding-mode field: nearest, toward zero, down, up
VSLOT = 128 * 36  # v0-v31, q0-q3
_DATA = 48  # random vectors the vector registers are loaded from
_EXCLUDE_ATTRS = {"A_JUMP", "A_CALL", "A_COF", "A_LOAD", "A_STORE", "A_MEMLIKE", "A_PRIV", "A_GUEST",
                  "A_IMPLICIT_WRITES_LC0", "A_IMPLICIT_WRITES_LC1", "A_IMPLICIT_WRITES_SA0", "A_IMPLICIT_WRITES_SA1",
                  "A_IMPLICIT_WRITES_SP", "A_IMPLICIT_WRITES_FP", "A_IMPLICIT_WRITES_LR"}


def testable(f: Form) -> bool:
    insn = f.insn
    if insn.attribs & _EXCLUDE_ATTRS or f.tag.startswith(("J", "Y", "A4_ext", "L", "S2_store", "S4_store")):
        return False
    if any(o.cls in "NOC" or o.suffix for o in f.operands):
        return False
    return not re.search(r"fTRAP|fBRANCH|fLOAD|fSTORE|fWRITE_|trap|loop|fTMPVDATA|EXT_VREG|fGATHER|fSCATTER",
                         insn.semantics)


def _compiles(decoder: Decoder, f: Form) -> bool:
    from emu.dsp.lower import CompileError
    from emu.dsp.pyback import semantics
    try:
        semantics(decoder.isa, f.tag)
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


def program(cases: list[tuple[str, list[int], int, int]], seed: int = 0) -> str:
    """Assembly: per case (the packet as an assembly line, 32 register values, P3:0, USR)."""
    rng = random.Random(seed)
    out = [".text", ".globl _start", "_start:"]
    for k, (packet, regs, preds, usr) in enumerate(cases):
        for v in range(32):
            out += [f"{{ r0 = ##vdata+{128 * rng.randrange(_DATA)} }}", f"{{ v{v} = vmem(r0+#0) }}"]
        out += [f"{{ r0 = ##{rng.getrandbits(32)} }}\n{{ q{q} = vand(v{q + 4},r0) }}" for q in range(4)]
        out += [f"{{ r0 = ##buf+{k * SLOT} }}", "{ gp = r0 }", f"{{ r0 = ##{preds} }}", "{ p3:0 = r0 }",
                f"{{ r0 = ##{usr} }}", "{ usr = r0 }"]
        out += [f"{{ r{i} = ##{regs[i]}; r{i + 1} = ##{regs[i + 1]} }}" for i in range(0, 32, 2)]
        out.append(packet)
        out += [f"{{ memd(gp+#{8 * i}) = r{2 * i + 1}:{2 * i} }}" for i in range(16)]
        out += ["{ r0 = p3:0 }", "{ r1 = usr }", "{ memd(gp+#128) = r1:0 }", f"{{ r0 = ##vbuf+{k * VSLOT} }}"]
        out += [f"{{ vmem(r0++#1) = v{v} }}" for v in range(32)]
        out += ["{ r1 = #-1 }"] + [f"{{ v0 = vand(q{q},r1) }}\n{{ vmem(r0++#1) = v0 }}" for q in range(4)]
    n = len(cases)
    out += ["{ r0 = #1; r1 = ##buf }", f"{{ r2 = ##{n * SLOT}; r6 = #64 }}", "{ trap0(#1) }",
            "{ r0 = #1; r1 = ##vbuf }", f"{{ r2 = ##{n * VSLOT}; r6 = #64 }}", "{ trap0(#1) }",
            "{ r0 = #0; r6 = #93 }", "{ trap0(#1) }", ".data", ".p2align 7", "vdata:"]
    out += [".byte " + ", ".join(str(rng.getrandbits(8)) for _ in range(128)) for _ in range(_DATA)]
    out += [".bss", ".p2align 7", f"vbuf: .space {n * VSLOT}", f"buf: .space {n * SLOT}"]
    return "\n".join(out) + "\n"


def build(asm: str, exe: Path) -> None:
    obj = exe.with_suffix(".o")
    subprocess.run(["llvm-mc-19", "-triple=hexagon", "-mcpu=hexagonv65", "-mhvx", "-filetype=obj", "-o", str(obj)],
                   input=asm, text=True, check=True, capture_output=True)
    subprocess.run(["ld.lld-19", "-static", "-o", str(exe), str(obj)], check=True, capture_output=True)


def _regs(rng: random.Random) -> list[int]:
    return [rng.choice([rng.getrandbits(32), rng.getrandbits(8), -rng.getrandbits(16) & 0xFFFFFFFF, 0x7FFFFFFF,
                        0x80000000, 0x3F800000, 0xFFFFFFFF]) for _ in range(32)]


def cases_for(decoder: Decoder, fs: list[Form], per_form: int, seed: int):
    """(form, (packet line, registers, P3:0, USR)) per random instance of each form; a float form (F2_*)
    gets per_form instances in each of USR's four rounding modes."""
    rng = random.Random(seed)
    ext = next(f for f in decoder.by_iclass[0] if f.tag == "A4_ext")
    out = []
    for f in fs:
        for mode in FPRND_MODES if f.tag.startswith("F2_") else (0,):
            for _ in range(per_form):
                words = [_word(rng, f)]
                while _aliased(decoder, words[0]):
                    words = [_word(rng, f)]
                if f.extendable >= 0 and rng.random() < 0.25:
                    words = [(rng.getrandbits(32) & ~ext.mask & ~0xC000) | ext.value | 0x4000, words[0]]
                line = "\t.word " + ", ".join(f"{w:#010x}" for w in words)
                out.append((f.tag, (line, _regs(rng), rng.getrandbits(32), mode << USR_FPRND)))
    return out


def _aliased(decoder: Decoder, word: int) -> bool:
    """Two written operands naming one register (vshuff(v30,v30,r28)): undefined, and qemu aliases them."""
    inst = decoder.packet([word]).insts[0]
    written = {o.name: (o.cls, v) for o, v in zip(inst.form.operands, inst.ops, strict=True) if o.written}
    return len(written) != len(set(written.values()))


def packet_cases(packets: list[str], seed: int = 0):
    """Cases for packets written in assembly (e.g. `{ v0.tmp = vmem(r1+#0); v2 = vadd(v0,v1) }`)."""
    rng = random.Random(seed)
    return [(p, (p, _regs(rng), rng.getrandbits(32), 0)) for p in packets]


def run_both(cases, isa) -> tuple[bytes, bytes]:
    from emu.dsp.linux import Process
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "insn_diff"
        build(program([c for _, c in cases]), exe)
        ref = subprocess.run(["qemu-hexagon", str(exe)], capture_output=True, timeout=600)
        p = Process(str(exe), isa=isa)
        p.run(max_packets=100_000_000)
    return ref.stdout, bytes(p.stdout)


def differences(cases, theirs: bytes, mine: bytes) -> list[tuple[str, str, str]]:
    """(name, packet, what differs) per case whose slots differ."""
    out = []
    names = [f"r{i}" for i in range(32)] + ["p3:0", "usr"]
    n = len(cases)
    for k, (name, (packet, *_)) in enumerate(cases):
        a, b = theirs[k * SLOT:(k + 1) * SLOT], mine[k * SLOT:(k + 1) * SLOT]
        va, vb = ([int.from_bytes(x[4 * i:4 * i + 4], "little") for i in range(len(names))] for x in (a, b))
        what = [f"{r}: qemu {x:#x} hwemu {y:#x}" for r, x, y in zip(names, va, vb, strict=True) if x != y]
        base = n * SLOT + k * VSLOT
        for v in range(36):
            x, y = (buf[base + 128 * v:base + 128 * (v + 1)] for buf in (theirs, mine))
            if x != y:
                what.append(f"{'v' if v < 32 else 'q'}{v if v < 32 else v - 32}: qemu {x[:16].hex()}.. "
                            f"hwemu {y[:16].hex()}..")
        if what:
            out.append((name, packet, ", ".join(what)))
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
    for tag, packet, what in diffs:
        by_tag[tag].append((packet, what))
    for tag, group in sorted(by_tag.items()):
        print(f"{tag}: {len(group)} of {a.per_form}")
        for packet, what in group[:a.show]:
            words = [int(w, 16) for w in packet.split(".word")[1].split(",")]
            text = disasm.packet(decoder.packet(words)).replace("\n", " ").replace("\t", "")
            print(f"    {text}\n      {what}")
    print(f"{len(fs)} forms, {len(cases)} cases; {len(cases) - len(diffs)} agree with qemu-hexagon, "
          f"{len(by_tag)} forms differ")


if __name__ == "__main__":
    main()
