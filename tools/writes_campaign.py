"""Instructions write only what they name, on every opcode and every tier (issue 23, item 4).

    python -m tools.writes_campaign [--arch gfx1100 gfx1201 gfx942 gfx950 gfx90a] [--tier ref interp threaded jit]
                                    [--draws 2] [--every 1] [--seed 0] [--jobs 1] [--show 20]

Every opcode of the instruction set of each arch (every opcode space: SALU, VALU, program control, scalar and vector
memory, LDS, images, exports) gets `--draws` random well-formed encodings in each encoding that can carry it
(emu.amd.strategies, drawn from a fixed seed), each disassembled by llvm-mc-19 (gfx950, which LLVM 19 does not
know: by hwemu), and each is run on every tier from its own random state (emu.amd.writes.check). Printed per
arch and tier: the opcodes covered (at least one draw ran), those skipped with the reason (no drawable encoding:
LLVM 19 lacks it; LLVM rejects every draw; every draw faulted, by fault kind) and the violations: a register
written beyond the destinations the disassembly names and the definition's implicit ones, SCC written by a
definition that writes none, or an emulator error. Exit status 1 when there is a violation.

The jit tier compiles a region per instruction and the threaded tier a handler per kind (LLVM, about 0.02 s each
on a 2-core machine: every 5th gfx1100 opcode took 7 s interpreted, 16 s with 512 region compiles, 10 s with them
loaded from the disk cache, where a second run with the same seed finds them), so no batching is needed.
`--every N` takes every Nth opcode (the test suite's slice).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed

from emu.amd import isa, strategies
from emu.amd.exec import kinds, takes, threaded
from emu.amd.writes import Outcome, check
from emu.pcode.llvmjit import engine

ARCHES = ("gfx1100", "gfx1201", "gfx942", "gfx950", "gfx90a")
TIERS = ("ref", "interp", "threaded", "jit")
LLVM_KNOWS = ("gfx1100", "gfx1201", "gfx942", "gfx90a")


@dataclass(frozen=True)
class Draw:
    opcode: tuple[str, str]  # (opcode space, name)
    encoding: str
    code: bytes
    text: str | None  # LLVM's disassembly (None: rejected); hwemu's where LLVM does not know the arch


@dataclass
class Report:
    arch: str
    tier: str
    opcodes: int = 0
    covered: int = 0
    skipped: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # reason -> opcodes
    violations: list[str] = field(default_factory=list)
    declined: int = 0  # covered opcodes the tier ran on a lower tier (jit, threaded: no native code for them)
    draws: Counter = field(default_factory=Counter)  # outcome -> draws
    seconds: float = 0.0
    llvm: Counter = field(default_factory=Counter)  # LLVM compiles and disk-cache loads while it ran


def _sample(strategy, n: int, seed: int) -> list[bytes]:
    """Up to `n` distinct draws of `strategy`, the same ones for the same seed."""
    out: list[bytes] = []

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(strategy)
    def collect(x: bytes) -> None:
        if x not in out:
            out.append(x)
    collect()
    return out[:n]


def universe(arch: str) -> tuple[dict[tuple[str, str], list[str]], dict[tuple[str, str], str]]:
    """Every opcode of the arch's table: the encodings that draw it, and for the others why none does."""
    t = isa.load(arch)
    drawn: dict[tuple[str, str], list[str]] = defaultdict(list)
    for enc in strategies.encodings(arch):
        e = t.encodings[enc]
        space = "VOPD" if e.base == "VOPD" else e.space
        for name in strategies.opcodes(arch, enc):
            drawn[(space, name)].append(enc)
        if not e.space and (e.base, e.base) in t.by_name:  # EXP: one opcode, no opcode field
            drawn[(e.base, e.base)].append(enc)
    why = {}
    for space, name in t.by_name:
        if (space, name) not in drawn:
            encs = [n for n, e in t.encodings.items() if e.space == space]
            why[(space, name)] = next((f"LLVM 19 lacks it: {r}" for n in encs
                                       if (r := strategies.llvm_lacks(arch, n, name))), "no encoding draws it")
    return dict(drawn), why


def draws(arch: str, draws_each: int, every: int, seed: int) -> tuple[list[Draw], dict[tuple[str, str], str]]:
    """The campaign's instructions for `arch` (every `every`th opcode) and the opcodes it cannot draw."""
    drawn, why = universe(arch)
    picked = sorted(drawn)[::every]
    why = {k: v for i, (k, v) in enumerate(sorted(why.items())) if i % every == 0}
    out = []
    for i, op in enumerate(picked):
        for enc in drawn[op]:
            only = op[1] if strategies.opcodes(arch, enc) else None
            for code in _sample(strategies.instructions(arch, enc, only), draws_each, seed + i):
                out.append(Draw(op, enc, code, None))
    if arch in LLVM_KNOWS:
        from tools.llvm_agreement import disassemble_each
        texts = disassemble_each([d.code for d in out], arch)
    else:
        from emu.amd.decode import decode
        texts = [str(decode(d.code, arch)[0]) for d in out]
    return [Draw(d.opcode, d.encoding, d.code, t) for d, t in zip(out, texts, strict=True)], why


def _llvm_stats() -> Counter:
    """Compiles and cache loads so far of the regions' and the threaded handlers' LLVM engines."""
    return Counter(engine().stats) + Counter(threaded.handler_engine().stats)


def _native(tier: str, inst) -> bool:
    if tier == "jit":
        return takes.native(inst) is None
    if tier == "threaded":
        return kinds.kind(inst) is not None
    return True


def run(arch: str, tier: str, draws_each: int = 2, every: int = 1, seed: int = 0) -> Report:
    """The campaign on one arch and tier."""
    t0 = time.monotonic()
    ds, why = draws(arch, draws_each, every, seed)
    os.environ["HWEMU_TIER"] = tier
    rep = Report(arch, tier)
    before = _llvm_stats()
    by_op: dict[tuple[str, str], list[tuple[Draw, Outcome | None]]] = defaultdict(list)
    for i, d in enumerate(ds):
        by_op[d.opcode].append((d, None if d.text is None else check(d.code, arch, seed + i, d.text)))
    rep.opcodes = len(by_op) + len(why)
    for (space, name), reason in why.items():
        rep.skipped[reason].append(f"{space} {name}")
    for op, results in sorted(by_op.items()):
        outs = [o for _, o in results if o is not None]
        rep.draws.update("rejected by LLVM" if o is None else o.status if o.status != "fault" else f"fault: {o.detail}"
                         for _, o in results)
        for d, o in results:
            if o is not None and o.violation:
                wrote = ", ".join(f"{f}{i}" for f, i in sorted(o.extra)) + (" SCC" if o.scc else "")
                rep.violations.append(f"{d.text} [{d.encoding} {op[1]}, {d.code.hex()}]: "
                                      f"{o.detail or 'wrote ' + wrote}")
        ran = [o for o in outs if o.status == "ran"]
        if ran:
            rep.covered += 1
            rep.declined += not any(_native(tier, o.inst) for o in ran)
        elif not outs:
            rep.skipped["LLVM 19 rejects every draw"].append(" ".join(op))
        elif all(o.status == "invalid" for o in outs):
            rep.skipped["hwemu decodes no draw"].append(" ".join(op))
        else:
            kinds = sorted({o.detail.split(":")[0] for o in outs if o.status == "fault"})
            rep.skipped[f"every draw faulted ({', '.join(kinds)})"].append(" ".join(op))
    rep.seconds = time.monotonic() - t0
    rep.llvm = _llvm_stats() - before
    return rep


def show(rep: Report, n: int) -> str:
    lines = [f"{rep.arch} {rep.tier}: {rep.opcodes} opcodes, {rep.covered} covered"
             + (f" ({rep.declined} of them run by a lower tier)" if rep.tier in ("jit", "threaded") else "")
             + f", {sum(map(len, rep.skipped.values()))} skipped, {len(rep.violations)} violations; "
             f"{sum(rep.draws.values())} draws in {rep.seconds:.0f} s"
             + (f" ({rep.llvm['compiled']} LLVM compiles, {rep.llvm['disk_hits']} loaded from the disk cache)"
                if rep.tier in ("jit", "threaded") else "")]
    for k, ops in sorted(rep.skipped.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  skipped, {k}: {len(ops)} ({', '.join(ops[:n])}{', ...' if len(ops) > n else ''})")
    lines += [f"  violation: {v}" for v in rep.violations[:n]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.writes_campaign", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", nargs="+", default=list(ARCHES), choices=ARCHES)
    ap.add_argument("--tier", nargs="+", default=list(TIERS), choices=TIERS)
    ap.add_argument("--draws", type=int, default=2, help="draws per opcode and encoding (default 2)")
    ap.add_argument("--every", type=int, default=1, help="every Nth opcode (default 1: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--show", type=int, default=20,
                    help="violations, and skipped opcodes per reason, printed per arch and tier (default 20)")
    a = ap.parse_args(argv)
    if a.draws < 1 or a.every < 1 or a.jobs < 1:
        ap.error("--draws, --every and --jobs must be positive")
    jobs = [(arch, tier, a.draws, a.every, a.seed) for arch in a.arch for tier in a.tier]
    bad = 0
    with ProcessPoolExecutor(a.jobs) as pool:
        for rep in pool.map(run, *zip(*jobs, strict=True)):
            print(show(rep, a.show), flush=True)
            bad += len(rep.violations)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
