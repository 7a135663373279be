"""Regenerate the tables of emu/amd/asm read off llvm-mc-19 by disassembling one instruction per value: the
symbolic names LLVM 19 prints (names.py: hwreg, sendmsg, export targets; buffer_formats.py) and how it sizes image
operands (image_sizes.py).

    python -m tools.gen_asm_names [DIR]    (writes the three modules into DIR, default emu/amd/asm)
"""
from __future__ import annotations

import pprint
import re
import sys
from pathlib import Path

from tools.llvm_agreement import disassemble_each, llvm_mc_disassemble

# instruction set (emu.amd.isa.name) -> the chip read off; a set not listed uses its family's (emu.amd.asm.names.of)
ARCH = {"rdna3": "gfx1100", "rdna4": "gfx1201", "cdna": "gfx942", "cdna2": "gfx90a"}


def _family(name: str) -> str:
    from emu.amd import isa
    return isa.family(name)


def _words(words: list[int]) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in words)


def _names(arch: str, words: list[int], per: int, pattern: str) -> list[str | None]:
    """Disassemble instructions of `per` dwords; the regex group of each printed text (None where no name)."""
    got = {raw: text for raw, text in llvm_mc_disassemble(_words(words), arch)}
    out = []
    for i in range(0, len(words), per):
        text = got.get(_words(words[i:i + per]), "")
        m = re.search(pattern, text)
        out.append(m.group(1) if m else None)
    return out


def hwreg(fam: str) -> dict[int, str]:
    getreg = 0xB0000000 | (17 << 23)  # s_getreg_b32 s0, simm16 (SOPK op 17)
    words = [getreg | (31 << 11) | i for i in range(64)]
    return {i: n for i, n in enumerate(_names(ARCH[fam], words, 1, r"hwreg\(([A-Z][A-Z_0-9]*)\)")) if n}


def sendmsg(fam: str) -> dict[int, str]:
    op = 54 if _family(fam) != "cdna" else 16  # s_sendmsg
    words = [0xBF800000 | (op << 16) | i for i in range(256)]
    return {i: n for i, n in enumerate(_names(ARCH[fam], words, 1, r"sendmsg\((MSG_[A-Z_0-9]+)")) if n}


def buffer_formats(fam: str) -> dict[int, str]:
    """format field -> name inside format:[...] (CDNA: dfmt | nfmt << 4)."""
    if fam == "rdna3":  # tbuffer_load_format_x v0, off, s[0:3], 0 format:N  (MTBUF, op 0, soffset inline 0)
        words = [w for f in range(128) for w in (0xE8000000 | (f << 19), 0x80000000)]
    elif fam == "rdna4":  # VBUFFER tbuffer_load_format_x (op 0), soffset null
        words = [w for f in range(128) for w in (0xC400007C | (128 << 14), f << 23, 0)]
    else:  # CDNA
        words = [w for f in range(128) for w in (0xE8000000 | ((f & 15) << 19) | ((f >> 4) << 23), 0x80000000)]
    per = 3 if fam == "rdna4" else 2
    return {i: n for i, n in enumerate(_names(ARCH[fam], words, per, r"format:\[([A-Z_0-9,]+)\]")) if n}


def exp_targets(fam: str) -> dict[int, str]:
    if _family(fam) == "cdna":
        return {}
    words = [w for t in range(64) for w in (0xF8000000 | (t << 4), 0)]
    return {i: n for i, n in enumerate(_names(ARCH[fam], words, 2, r"^exp\w* (\w+)")) if n}




def _count(text: str) -> int:
    """Registers in 'v5' or 'v[5:7]'."""
    m = re.fullmatch(r"v(\d+)|v\[(\d+):(\d+)\]", text.strip())
    if not m:
        return 0
    return 1 if m.group(1) else int(m.group(3)) - int(m.group(2)) + 1


def _image_words(fam: str, op: int, dim: int, a16: int, d16: int, tfe: int, dmask: int, nsa: int,
                 sampler: bool) -> list[int]:
    if fam == "rdna3":
        w0 = 60 << 26 | op << 18 | dmask << 8 | dim << 2 | a16 << 16 | d16 << 17 | nsa
        w1 = 10 | 50 << 8 | tfe << 21 | (1 << 26 if sampler else 0)
        return [w0, w1] + ([11 | 12 << 8 | 13 << 16 | 14 << 24] if nsa else [])
    if sampler:  # VSAMPLE
        w0 = 57 << 26 | op << 14 | dmask << 22 | dim | tfe << 3 | d16 << 5 | a16 << 6
        w1 = 50 | 8 << 23
    else:  # VIMAGE
        w0 = 52 << 26 | op << 14 | dmask << 22 | dim | d16 << 5 | a16 << 6
        w1 = 50 | tfe << 23
    return [w0, w1, 10 | 20 << 8 | 30 << 16 | 40 << 24]


def image_variants(fam: str) -> dict[tuple[int, int], tuple]:
    """How LLVM sizes image operands. Every image opcode is disassembled with every dimension, a16, d16, tfe
    and channel count (RDNA3: with and without NSA). LLVM prints the data and address operands at the sizes
    the instruction implies when it has a variant of those sizes, else at the sizes of its default variant.
    (opcode, nsa) -> ({data size: address sizes with a variant}, default data size, default address size)."""
    if _family(fam) == "cdna":
        return {}
    from emu.amd import isa
    from emu.amd.asm.memory import image_address_words
    t = isa.load(fam)
    spaces = ("MIMG",) if fam == "rdna3" else ("VIMAGE", "VSAMPLE")
    cases, codes = [], []
    for space in spaces:
        for o in t.ops_of(space):
            sampler = "ssamp" in o.operands or space == "VSAMPLE"
            for nsa in ((0, 1) if fam == "rdna3" else (1,)):
                for dim in range(8):
                    for a16 in (0, 1):
                        for d16 in (0, 1):
                            for tfe in (0, 1):
                                for dmask in (1, 3, 7, 15):
                                    cases.append((o, nsa, image_address_words(o.name, dim, bool(a16)),
                                                  _image_data(o.name, dmask, d16, tfe)))
                                    codes.append(_words(_image_words(fam, o.value, dim, a16, d16, tfe, dmask,
                                                                     nsa, sampler)))
    seen: dict[tuple[int, int], tuple[set, set, set]] = {}
    for (o, nsa, want_addr, want_data), text in zip(cases, disassemble_each(codes, ARCH[fam]), strict=True):
        m = re.match(r"\S+\s+(v\d+|v\[\d+:\d+\]), (\[(?:[^\[\]]|\[[^\]]*\])*\]|v\d+|v\[\d+:\d+\])", text or "")
        if not m or not text.startswith("image_"):
            continue
        data = _count(m.group(1))
        addrs = m.group(2)
        addr = sum(_count(a) for a in (addrs[1:-1] if addrs.startswith("[") else addrs).split(","))
        seen.setdefault((o.value, nsa), (set(), set(), set()))
        if (data, addr) == (want_data, want_addr):
            seen[(o.value, nsa)][0].add((data, addr))
        else:
            seen[(o.value, nsa)][2].add((data, addr))
    out = {}
    for key, (pairs, _, fallbacks) in sorted(seen.items()):
        fb = min(fallbacks) if fallbacks else (0, 0)
        variants = {d: tuple(sorted(a for dd, a in pairs if dd == d)) for d in sorted({d for d, _ in pairs})}
        out[key] = (variants, *fb)
    return out


def _image_data(name: str, dmask: int, d16: int, tfe: int) -> int:
    n = 4 if "GATHER4" in name or "MSAA_LOAD" in name else max(1, bin(dmask).count("1"))
    return (n + 1) // 2 * d16 + n * (1 - d16) + tfe


GENERATED = "Generated by tools/gen_asm_names.py from llvm-mc-19; do not edit."
# module -> (its docstring, its tables: name and the function reading one instruction set's table off llvm-mc)
MODULES = {
    "names": ("Symbolic operand names as LLVM 19 prints them (hardware registers, messages, export targets), per\n"
              "instruction set (emu.amd.isa.name; a set not listed has its family's: `of`, for these tables and those\n"
              "of emu.amd.asm.buffer_formats and image_sizes). " + GENERATED,
              (("HWREG", hwreg), ("SENDMSG", sendmsg), ("EXPORT_TARGET", exp_targets))),
    "buffer_formats": ("The buffer data formats LLVM 19 prints (format:[...]), per instruction set (read through\n"
                       "emu.amd.asm.names.of). " + GENERATED, (("BUFFER_FORMAT", buffer_formats),)),
    "image_sizes": ("How LLVM 19 sizes image operands, per instruction set (read through emu.amd.asm.names.of; see\n"
                    "image_variants in tools/gen_asm_names.py). " + GENERATED, (("IMAGE", image_variants),)),
}
OF = """from emu.amd import isa


def of(table: dict, name: str) -> dict:
    \"\"\"The entry of instruction set `name` in one of the tables (its family's if it has none).\"\"\"
    return table[name] if name in table else table[isa.family(name)]


"""


def module(name: str) -> str:
    """The text of one generated module."""
    doc, tables = MODULES[name]
    out = [f'"""{doc}"""\n', OF if name == "names" else ""]
    for table_name, fn in tables:
        table = {fam: fn(fam) for fam in ARCH}
        table = {k: v for k, v in table.items() if k == _family(k) or v != table[_family(k)]}  # only where it differs
        out.append(f"{table_name} = {pprint.pformat(table, width=116, compact=True)}\n")
    return "".join(out)


def main(argv: list[str]) -> None:
    dest = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "emu" / "amd" / "asm"
    for name in MODULES:
        (dest / f"{name}.py").write_text(module(name))


if __name__ == "__main__":
    main(sys.argv[1:])
