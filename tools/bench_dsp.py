"""Speed of hwemu's Hexagon core against qemu-hexagon on the corpus programs (tests/dsp_programs).

    python -m tools.bench_dsp [--opt -O0] [--repeat 3]

Each program is compiled once, then run on qemu-hexagon and on hwemu (best of --repeat each, in this one
run); prints packets per second (hwemu's packet count for both) and the ratio. QEMU is a JIT: this is the
baseline the speed work starts from.
"""
from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

from tools.dsp_llvm_agreement import PROGRAMS, compile_program


def best(fn, repeat: int) -> tuple[float, object]:
    """The shortest of `repeat` runs of fn(), and fn's result."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def run_hwemu(exe: Path, stdin: bytes, isa) -> int:
    from emu.dsp.linux import Process
    p = Process(str(exe), stdin=stdin, isa=isa)
    p.run()
    return p.thread.packets


def main() -> None:
    from emu.dsp.isa import load
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opt", default="-O0")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    isa = load()
    print(f"{'program':14s} {'packets':>9s} {'hwemu pkt/s':>12s} {'qemu pkt/s':>12s} {'hwemu/qemu time':>16s}")
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted(PROGRAMS.glob("*.c")):
            exe = Path(tmp) / src.stem
            compile_program(src, a.opt, exe)
            stdin = bytes(range(256)) * 64
            t_h, packets = best(partial(run_hwemu, exe, stdin, isa), a.repeat)
            t_q, _ = best(partial(subprocess.run, ["qemu-hexagon", str(exe)], input=stdin, capture_output=True),
                          a.repeat)
            print(f"{src.stem + a.opt:14s} {packets:9d} {packets / t_h:12.0f} {packets / t_q:12.0f} "
                  f"{t_h / t_q:15.1f}x")


if __name__ == "__main__":
    main()
