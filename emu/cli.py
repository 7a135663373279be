"""`hwemu`: the command line of the emulator.

    hwemu info [--arch gfx1100] [--gpus N] [--real]   the KFD topology a runtime sees (like rocminfo)
    hwemu run [--dev DEV] [--arch A] [--gpus N] -- CMD ARGS...
                                                      run a program with the mock devices visible to it
    hwemu trace [--out FILE] [--dev DEV] [--thread-trace [FILTER]] -- CMD ARGS...
                                                      the same, writing a timeline of the emulated GPUs (Perfetto)
    hwemu disasm ...                                  disassemble code objects or bytes (python -m emu.amd.asm.disasm)
    hwemu kernel ...                                  run one kernel of a code object (python -m emu.amd.run)
    hwemu hexagon [-strace] PROGRAM [ARGS...]         run a static Hexagon Linux program (python -m emu.dsp)

Bad usage exits with status 2 and a one-line message; `hwemu run` and `hwemu trace` exit with the program's status.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from emu.dsp import mockdsp
from stack.hcq.fileio import file_interface

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"


def info(arch: str, gpus: int, real: bool) -> int:
    """Print the agents of the KFD topology, read through the file-I/O seam exactly as a runtime reads it."""
    io = file_interface("KFD" if real else "MOCKKFD", arch, gpus)
    if not io.exists(f"{TOPOLOGY}/nodes"):
        print("hwemu info: no KFD topology (is amdgpu loaded?)", file=sys.stderr)
        return 1
    print(f"{'real' if real else 'MOCKKFD'} KFD topology: {TOPOLOGY}")
    for node in sorted(io(f"{TOPOLOGY}/nodes").listdir(), key=int):
        base = f"{TOPOLOGY}/nodes/{node}"
        gpu_id = int(io(f"{base}/gpu_id").read())
        props = {k: int(v) for k, v in (line.split() for line in io(f"{base}/properties").read().splitlines())}
        if not gpu_id:
            print(f"  agent {node}: CPU, {props.get('cpu_cores_count', 0)} cores")
            continue
        v = props["gfx_target_version"]
        gfx = f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"
        banks = f"{base}/mem_banks/0/properties"
        mem = dict(line.split() for line in io(banks).read().splitlines()) if io.exists(banks) else {}
        minor = props["drm_render_minor"]
        ips = f"/sys/class/drm/renderD{minor}/device/ip_discovery/die/0"
        versions = []
        for hwid, name in (("11", "GC"), ("42", "SDMA"), ("108", "NBIO")):
            d = f"{ips}/{hwid}/0"
            if io.exists(d):
                versions.append(f"{name} " + ".".join(io(f"{d}/{p}").read().strip() for p in ("major", "minor",
                                                                                                "revision")))
        print(f"  agent {node}: GPU {gfx}, gpu_id {gpu_id}, /dev/dri/renderD{minor}, device {props['device_id']:#06x}")
        print(f"    {props['simd_count'] // props['simd_per_cu']} CUs, wave{props['wave_front_size']}, "
              f"{props['max_waves_per_simd']} waves/SIMD, {props['lds_size_in_kb']} KiB LDS, "
              f"{int(mem.get('size_in_bytes', props.get('local_mem_size', 0))) >> 20} MiB VRAM, "
              f"{props.get('max_engine_clk_fcompute', 0)} MHz")
        if versions:
            print(f"    IP: {', '.join(versions)}")
    return 0


def program_env(dev: str | None, command: str, base: dict[str, str] | None = None,
                native: tuple[str | None, int | None] | None = None) -> dict[str, str] | None:
    """The environment of a program run with the mock devices visible to it: DEV names the mock interface (hwemu's
    stack picks MOCKKFD from it), Python programs start with emu/os/boot on their path, whose sitecustomize points
    tinygrad at hwemu's mock interface, and qemu-hexagon on PATH is hwemu's Hexagon core; DEV=DSP is tinygrad's mock
    DSP (MOCKDSP=1) on that core. `native`: (arch, GPUs), either None for DEV's (or the default): also preload the
    native seam (emu.seam) for a mock system of those, which shows every program /dev/kfd, the render nodes and
    their sysfs, so DEV may then name the plain device (DEV=AMD). None (said on stderr) when DEV names neither a mock
    nor the DSP and the seam is not there. `base`: the environment to start from (default: this process's)."""
    env = dict(os.environ if base is None else base)
    env["DEV"] = dev or env.get("DEV") or "MOCKKFD+AMD" + (f":{native[0]}" if native and native[0] else "")
    if native is not None and (env := _with_seam(env, command, *native)) is None:
        return None
    if mockdsp.names_dsp(env["DEV"]):
        env.setdefault("MOCKDSP", "1")  # tinygrad's spelling of its mock DSP
        mockdsp.install(env, survive_exec=True)
    elif not env["DEV"].startswith("MOCK") and "LD_PRELOAD" not in env:
        print(f"hwemu {command}: DEV={env['DEV']} names no mock interface (e.g. MOCKKFD+AMD) and no DSP",
              file=sys.stderr)
        return None
    boot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "os", "boot")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (boot, env.get("PYTHONPATH")) if p)
    mockdsp.use_shims(env)  # programs that start qemu-hexagon (tinygrad's MOCKDSP) get hwemu's Hexagon core
    return env


def _with_seam(env: dict[str, str], command: str, arch: str | None, gpus: int | None) -> dict[str, str] | None:
    """`env` with the native seam for `gpus` GPUs of `arch` (DEV's when None); without it (it cannot be built: the
    reason on stderr) `env` as it was; None (said on stderr) for a chip hwemu does not emulate."""
    from emu.seam import build, environment
    from stack.device import parse_dev
    try:
        spec = parse_dev(env["DEV"])
    except ValueError:
        spec = None
    arch = arch or (spec.arch if spec else None)
    if gpus is None:
        gpus = max(spec.indices) + 1 if spec and spec.indices else 1
    try:
        return environment(env, arch, gpus)
    except build.BuildError as e:
        print(f"hwemu {command}: {e}\nnative programs will not see the mock devices", file=sys.stderr)
        return env
    except ValueError as e:  # a chip without topology figures
        print(f"hwemu {command}: {e}", file=sys.stderr)
        return None


def run(dev: str | None, cmd: list[str], arch: str | None = None, gpus: int | None = None) -> int:
    """Run `cmd` in place of this process with the mock devices visible to it (program_env, with the native seam)."""
    env = program_env(dev, "run", native=(arch, gpus))
    if env is None:
        return 2
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as e:
        print(f"hwemu run: cannot run {cmd[0]!r}: {e.strerror}", file=sys.stderr)
        return 127


def trace(dev: str | None, out: str, cmd: list[str], waves: str | None = None) -> int:
    """Run `cmd` as `run` does, with HWEMU_TIMELINE=`out` (and the thread trace of the `waves` a HWEMU_TRACE-style
    filter selects); afterwards name the timeline files it wrote."""
    env = program_env(dev, "trace")
    if env is None:
        return 2
    if waves is not None:
        from emu.amd.debug.wavetrace import TraceFilterError, parse
        from emu.amd.timeline import THREAD_TRACE
        try:
            parse(waves, "--thread-trace", thread_trace=True)
        except TraceFilterError as e:
            print(f"hwemu trace: {e}", file=sys.stderr)
            return 2
        env[THREAD_TRACE] = waves
    out = os.path.abspath(out)
    if not os.path.isdir(os.path.dirname(out)):
        print(f"hwemu trace: --out {out}: no such directory", file=sys.stderr)
        return 2
    env["HWEMU_TIMELINE"] = out
    began = time.time()
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        print(f"hwemu trace: cannot run {cmd[0]!r}: {e.strerror}", file=sys.stderr)
        return 127
    while True:
        try:
            status = proc.wait()
            break
        except KeyboardInterrupt:  # the program got the Ctrl-C too: let it finish its timeline
            continue
    from emu.amd.timeline import complete, written_since
    files = written_since(out, began)
    for f in files:
        complete(f)
    if files:
        print(f"hwemu trace: timeline {', '.join(files)} (open it in https://ui.perfetto.dev)", file=sys.stderr)
    else:
        print("hwemu trace: the program used no emulated GPU: no timeline written", file=sys.stderr)
    return status if status >= 0 else 128 - status


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="hwemu", description="hwemu: emulated GPUs behind mock drivers")
    sub = ap.add_subparsers(dest="command", required=True, metavar="{info,run,trace,disasm,kernel,hexagon}")
    p_info = sub.add_parser("info", help="the KFD topology a runtime sees (like rocminfo)")
    p_info.add_argument("--arch", default=None, help="chip of the mock GPUs (default gfx1100)")
    p_info.add_argument("--gpus", type=int, default=1, help="number of mock GPUs")
    p_info.add_argument("--real", action="store_true", help="read the operating system's KFD instead")
    p_run = sub.add_parser("run", help="run a program with the mock devices visible to it")
    p_run.add_argument("--dev", default=None, help="DEV for the program (default: $DEV or MOCKKFD+AMD)")
    p_run.add_argument("--arch", default=None, help="chip of the mock GPUs native programs see (default: DEV's, "
                       "else gfx1100)")
    p_run.add_argument("--gpus", type=int, default=None, help="number of mock GPUs native programs see (default: "
                       "DEV's indices, else 1)")
    p_run.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    p_trace = sub.add_parser("trace", help="run a program, writing a timeline of the emulated GPUs for Perfetto UI")
    p_trace.add_argument("--out", default="hwemu-timeline.pftrace", help="the trace file (default %(default)s)")
    p_trace.add_argument("--dev", default=None, help="DEV for the program (default: $DEV or MOCKKFD+AMD)")
    p_trace.add_argument("--thread-trace", nargs="?", const="1", default=None, metavar="FILTER",
                         help="also draw each instruction the waves FILTER selects issued (HWEMU_TRACE's terms "
                              "kernel=, dispatch=, wg=, wave=; default every wave)")
    p_trace.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    sub.add_parser("disasm", help="disassemble (see hwemu disasm --help)", add_help=False)
    sub.add_parser("kernel", help="run one kernel of a code object (see hwemu kernel --help)", add_help=False)
    sub.add_parser("hexagon", help="run a static Hexagon Linux program (see hwemu hexagon --help)", add_help=False)
    if argv and argv[0] in ("disasm", "kernel", "hexagon"):
        from emu.amd import run as kernel
        from emu.amd.asm import disasm
        from emu.dsp import __main__ as hexagon
        return {"disasm": disasm, "kernel": kernel, "hexagon": hexagon}[argv[0]].main(argv[1:])
    a = ap.parse_args(argv)
    if a.command == "info":
        if a.gpus < 1:
            ap.error("--gpus must be at least 1")
        try:
            return info(a.arch, a.gpus, a.real)
        except (ValueError, OSError) as e:
            print(f"hwemu info: {e}", file=sys.stderr)
            return 2
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error(f"{a.command}: give the program to run after --")
    if a.command == "trace":
        return trace(a.dev, a.out, cmd, a.thread_trace)
    if a.gpus is not None and not 1 <= a.gpus <= 16:
        ap.error("--gpus must be 1 to 16")
    return run(a.dev, cmd, a.arch, a.gpus)


if __name__ == "__main__":
    sys.exit(main())
