"""Run a static Hexagon Linux program on hwemu, with qemu-hexagon's command line:

    python -m emu.dsp [-strace] [-L DIR] [-cpu CPU] PROGRAM [ARGS...]

stdin goes to the program, its stdout and stderr come out, and the exit status is the program's; a memory
fault exits 139 and an illegal packet 132 (the statuses of SIGSEGV and SIGILL), with a report on stderr.
`write_shims(DIR)` makes `qemu-hexagon-static` / `qemu-hexagon` executables that run it (for PATH).
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

_WITH_ARG = {"-L", "-cpu", "-d", "-E", "-U", "-D", "-R", "-s"}  # qemu options that take a value (ignored)
QEMU_NAMES = ("qemu-hexagon-static", "qemu-hexagon")


def write_shims(folder: str | os.PathLike) -> list[Path]:
    """Executables named like qemu-hexagon in `folder` that run this emulator: put the folder first on PATH
    and programs that start qemu-hexagon-static (tinygrad's MOCKDSP mode) run on hwemu."""
    out = []
    for name in QEMU_NAMES:
        path = Path(folder) / name
        path.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m emu.dsp \"$@\"\n")
        path.chmod(0o755)
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    from emu.dsp.core import IllegalPacket
    from emu.dsp.linux import Process
    from emu.dsp.memory import MemoryFault
    args = list(sys.argv[1:] if argv is None else argv)
    strace = False
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt == "-strace":
            strace = True
        elif opt in _WITH_ARG and args:
            args.pop(0)
        elif opt in ("-h", "-help", "--help"):
            print(__doc__.strip())
            return 0
    if not args:
        print("usage: python -m emu.dsp [-strace] PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    try:
        p = Process(args[0], stdin=sys.stdin.buffer.read() if not sys.stdin.isatty() else b"", argv=args[1:],
                    strace=sys.stderr if strace else None)
    except (OSError, ValueError) as e:
        print(f"hwemu: {args[0]}: {e}", file=sys.stderr)
        return 1
    status = 0
    try:
        status = p.run()
    except MemoryFault as e:
        print(f"hwemu: memory fault: {e}", file=sys.stderr)
        status = 139
    except IllegalPacket as e:
        print(f"hwemu: illegal packet: {e}", file=sys.stderr)
        status = 132
    finally:
        sys.stdout.buffer.write(p.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(p.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
