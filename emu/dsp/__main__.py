"""Run a static Hexagon Linux program on hwemu, with qemu-hexagon's command line:

    python -m emu.dsp [-strace] [--max-packets N] [--timeout SECONDS] [-L DIR] [-cpu CPU] PROGRAM [ARGS...]

stdin goes to the program, its stdout and stderr come out, and the exit status is the program's; a memory
fault exits 139 and an illegal packet 132 (the statuses of SIGSEGV and SIGILL), with a report on stderr.

Watchdog: a program that has not exited after --max-packets packets (default 2000000000, environment
HWEMU_DSP_MAX_PACKETS) or --timeout seconds of wall time (default 600, HWEMU_DSP_TIMEOUT) is stopped with
a report naming its PC and packet count, exit status 124 (as timeout(1)); 0 turns a limit off. Ctrl-C stops
the program the same way with status 130. Output the program wrote before that still comes out.
`write_shims(DIR)` makes `qemu-hexagon-static` / `qemu-hexagon` executables that run it (for PATH); `shim_dir()`
writes them into hwemu's cache.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import sys
from pathlib import Path

from emu import cache

_WITH_ARG = {"-L", "-cpu", "-d", "-E", "-U", "-D", "-R", "-s"}  # qemu options that take a value (ignored)
QEMU_NAMES = ("qemu-hexagon-static", "qemu-hexagon")
MAX_PACKETS, TIMEOUT = 2_000_000_000, 600.0  # the watchdog's defaults
EXIT_WATCHDOG, EXIT_INTERRUPTED = 124, 130
_LIMITS = {"--max-packets": ("HWEMU_DSP_MAX_PACKETS", int, MAX_PACKETS), "--timeout": ("HWEMU_DSP_TIMEOUT", float,
                                                                                       TIMEOUT)}


def write_shims(folder: str | os.PathLike) -> list[Path]:
    """Executables named like qemu-hexagon in `folder` that run this emulator (this interpreter, this hwemu first
    on its path): put the folder first on PATH and programs that start qemu-hexagon-static (tinygrad's MOCKDSP
    mode) run on hwemu (on the fork server when one is up: emu.dsp.launcher). Each is replaced whole (a program
    starting one meanwhile runs the old or the new)."""
    launcher = shlex.quote(str(Path(__file__).resolve().with_name("launcher.py")))
    text = f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -I -S {launcher} \"$@\"\n"
    out = []
    for name in QEMU_NAMES:
        path = Path(folder) / name
        tmp = path.with_name(f".{name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, path)
        out.append(path)
    return out


def shim_dir() -> Path:
    """hwemu's cache folder of qemu-hexagon shims (write_shims) for this interpreter and this hwemu, written now."""
    key = hashlib.sha1(f"{sys.executable}\0{Path(__file__).resolve()}".encode()).hexdigest()[:12]
    folder = cache.root() / "bin" / key
    folder.mkdir(parents=True, exist_ok=True)
    write_shims(folder)
    return folder


def _limit(opt: str, text: str) -> int | float:
    _, kind, _ = _LIMITS[opt]
    value = kind(text)
    if not value >= 0:  # negative, or NaN
        raise ValueError(f"{opt} must be a number of at least 0, not {text!r}")
    return value


def _where(p) -> str:
    """The PC, the packet count and the packet at the PC (if it decodes)."""
    t = p.thread
    try:
        text = f" ({t.text(t.plan(t.pc)[0])})"
    except Exception:  # noqa: BLE001 - the report must not fail on a PC that does not decode
        text = ""
    return f"pc {t.pc:#x}{text} after {t.packets} packets"


def main(argv: list[str] | None = None) -> int:
    from emu.dsp.core import IllegalPacket
    from emu.dsp.linux import Process, Runaway
    from emu.dsp.memory import MemoryFault
    args = list(sys.argv[1:] if argv is None else argv)
    strace = False
    limits = {}
    try:
        for opt, (env, _, default) in _LIMITS.items():
            limits[opt] = _limit(opt, os.environ[env]) if os.environ.get(env) else default
        while args and args[0].startswith("-"):
            opt = args.pop(0)
            opt, eq, value = opt.partition("=")
            if opt == "-strace":
                strace = True
            elif opt in _LIMITS:
                if not eq and not args:
                    raise ValueError(f"{opt} needs a value")
                limits[opt] = _limit(opt, value if eq else args.pop(0))
            elif opt in _WITH_ARG and args:
                args.pop(0)
            elif opt in ("-h", "-help", "--help"):
                print(__doc__.strip())
                return 0
    except ValueError as e:
        print(f"hwemu hexagon: bad limit: {e}", file=sys.stderr)
        return 2
    if not args:
        print("usage: python -m emu.dsp [-strace] [--max-packets N] [--timeout SECONDS] PROGRAM [ARGS...]",
              file=sys.stderr)
        return 2
    try:
        p = Process(args[0], stdin=sys.stdin.buffer.read() if not sys.stdin.isatty() else b"", argv=args[1:],
                    strace=sys.stderr if strace else None)
    except (OSError, ValueError) as e:
        print(f"hwemu: {args[0]}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hwemu: interrupted while loading", file=sys.stderr)
        return EXIT_INTERRUPTED
    status = 0
    try:
        status = p.run(max_packets=limits["--max-packets"], timeout=limits["--timeout"])
    except MemoryFault as e:
        print(f"hwemu: memory fault: {e}", file=sys.stderr)
        status = 139
    except IllegalPacket as e:
        print(f"hwemu: illegal packet: {e}", file=sys.stderr)
        status = 132
    except Runaway as e:
        print(f"hwemu: watchdog: {str(e).partition(':')[0]}; stopped at {_where(p)}", file=sys.stderr)
        status = EXIT_WATCHDOG
    except KeyboardInterrupt:
        print(f"hwemu: interrupted at {_where(p)}", file=sys.stderr)
        status = EXIT_INTERRUPTED
    finally:
        sys.stdout.buffer.write(p.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(p.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
