"""How much of a family's vendor pcode the compiler handles.

    python -m emu.pcode.coverage --arch rdna3|rdna4|cdna [--json]

`total` counts every opcode whose vendor entry has pcode text; `parsed` those whose text (after fixups) the front
end accepts, plus the entries the fixup table declares prose (reason "prose: ..."); `compiled` those the backend
turned into an executable function; `fixups` those whose text comes from (or is declared unsupported by)
emu.pcode.fixups; `failing` names every opcode that did not compile, with the reason.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from emu.pcode import PcodeSyntaxError, Unsupported, compile_op, pcode_of
from emu.pcode.fixups import fixup
from emu.pcode.source import vendor
from emu.pcode.syntax import parse


def coverage(arch: str) -> dict:
    fam = vendor().family(arch)
    t = vendor().load(arch)
    total = parsed = compiled = fixed = 0
    failing: dict[str, str] = {}
    for op in sorted(t.by_name.values(), key=lambda o: (o.enc, o.value)):
        if not op.pcode:
            continue
        total += 1
        key = op.name if op.name not in failing else f"{op.enc}.{op.name}"
        fixed += fixup(fam, op.name) is not None
        try:
            text, reason = pcode_of(arch, op.enc, op.name)
            if text is None:
                parsed += (reason or "").startswith("prose:")
                raise Unsupported(f"fixup: {reason}")
            parse(text)
            parsed += 1
            compile_op(arch, op.enc, op.name)
            compiled += 1
        except PcodeSyntaxError as e:
            failing[key] = f"pcode is not parseable (prose?): {e}"
        except Unsupported as e:
            failing[key] = str(e)
    return {"arch": fam, "total": total, "parsed": parsed, "compiled": compiled, "fixups": fixed, "failing": failing}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emu.pcode.coverage", description=__doc__.split("\n")[0])
    ap.add_argument("--arch", required=True, help="rdna3, rdna4, cdna or a gfx name")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args(argv)
    try:
        r = coverage(a.arch)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r, indent=1, sort_keys=False))
        return 0
    n = r["total"]
    print(f"{r['arch']}: {n} opcodes with pcode")
    for k in ("parsed", "compiled", "fixups"):
        print(f"  {k:9} {r[k]:5}  {100.0 * r[k] / n:6.2f}%")
    print(f"  failing   {len(r['failing']):5}")
    for reason, count in Counter(v.split(":")[0] for v in r["failing"].values()).most_common():
        print(f"    {count:4}  {reason}")
    for name, reason in r["failing"].items():
        print(f"  {name}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
