"""Coverage of the vendor semantics: how many definitions parse and compile, and why the others fail.

    python -m emu.dsp.coverage [--json]
"""
from __future__ import annotations

import argparse
import json

from emu.dsp import syntax
from emu.dsp.isa import ISA, load
from emu.dsp.lower import CompileError
from emu.dsp.pyback import semantics


def report(isa: ISA) -> dict:
    groups = {"scalar": {"total": 0, "parsed": 0, "compiled": 0}, "hvx": {"total": 0, "parsed": 0, "compiled": 0}}
    failing: dict[str, str] = {}
    for tag, insn in isa.insns.items():
        g = groups["hvx" if insn.hvx else "scalar"]
        g["total"] += 1
        try:
            syntax.parse(insn.semantics)
        except syntax.ParseError as e:
            failing[tag] = f"parse: {e}"
            continue
        g["parsed"] += 1
        try:
            semantics(isa, tag)
        except CompileError as e:
            failing[tag] = str(e)
            continue
        g["compiled"] += 1
    total = {k: groups["scalar"][k] + groups["hvx"][k] for k in ("total", "parsed", "compiled")}
    return {**total, **groups, "failing": failing}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    r = report(load())
    if ap.parse_args().json:
        print(json.dumps(r, indent=1, sort_keys=True))
        return
    for k in ("scalar", "hvx"):
        g = r[k]
        print(f"{k:7s} {g['total']:5d} definitions, {g['parsed']:5d} parse, {g['compiled']:5d} compile "
              f"({100 * g['compiled'] / g['total']:.1f}%)")
    for tag, why in sorted(r["failing"].items()):
        print(f"  {tag}: {why}")


if __name__ == "__main__":
    main()
