"""tinygrad's CI mock jobs, run side by side on hwemu and on tinygrad's own mock.

    python -m tools.tinygrad_ci --tinygrad CHECKOUT [--jobs testamd,hcq2] [--arch gfx1100] [--renderer LLVM]
                                [--steps SUBSTR] [--files SUBSTR] [--mocks hwemu,tinygrad] [--profile] [--list]

CHECKOUT is a tinygrad repository (its test/ and extra/ are the client; tinygrad's own mock is its test/mockgpu).
Each step of the jobs below (kept in sync with CHECKOUT's .github/workflows/test.yml: a step whose command the
workflow no longer has is reported) runs in CHECKOUT once per mock, with the same command, environment and `-n`:
hwemu's run goes through `hwemu run --` (tinygrad's mock interface becomes hwemu's), tinygrad's with HWEMU=0.
Per step and per test file the table gives passed / failed / errors / skipped and the wall time on each mock,
their ratio, and each hwemu-only failure's first error line. With --profile both runs are sampled by py-spy
(every thread of every process) and the table adds the device's share of the samples: hwemu's frames and threads,
or tinygrad's emulator's frames (test/mockgpu); the client's own time is a run's wall time times the share outside
the device, and `vs floor` is hwemu's wall over tinygrad's mock's client time (the goal is at most 1.25).
py-spy counts a thread blocked in a short native wait as active part of the time (the more often it wakes, the
more): hwemu's engine between looks at the doorbells, a client waiting for the engine's next packet. The table
gives hwemu's share also without those samples (`busy`), which is the share of the work the device does.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import xml.etree.ElementTree as ET

from emu.cli import program_env

TESTAMD_FILES = ("test/backend/test_ops.py test/backend/test_dtype.py test/backend/test_dtype_alu.py "
                 "test/backend/test_linearizer.py test/backend/test_randomness.py test/backend/test_jit.py "
                 "test/backend/test_graph.py test/backend/test_multitensor.py test/device/test_hcq.py "
                 "test/external/external_test_am.py test/backend/test_asm_gemm.py::TestAsmGEMM")
TRANSCENDENTAL = " ".join(f"test/backend/test_ops.py::TestOps::test_{f}" for f in ("sin", "cos", "tan", "exp", "log"))
HCQ2_ENV = "HCQ_RUNTIME_DEV=PYTHON HCQ2=1 DEV=MOCKKFD+AMD FORWARD_ONLY=1 PYTHONPATH=."


@dataclasses.dataclass(frozen=True)
class Step:
    job: str
    name: str
    run: str                               # the workflow's command line (env assignments first, as written there)
    env: tuple[tuple[str, str], ...] = ()  # the job's env
    in_workflow: bool = True               # False: not a CI step (the device-share workload)

    @property
    def key(self) -> str:
        return f"{self.job}/{self.name}"


TESTAMD = (("test_plus", "DEBUG=5 FORWARD_ONLY=1 python3 test/test_tiny.py TestTiny.test_plus"),
           ("pytest", f"python -m pytest -n=auto {TESTAMD_FILES} --durations=20"),
           ("disk", "python -m pytest test/unit/test_disk_tensor.py -k test_copy_from_disk"),
           ("transcendental", f"TRANSCENDENTAL=2 python -m pytest -n=auto {TRANSCENDENTAL} --durations=20"))
ASM_MATMUL = 'PYTHONPATH="." DEV=MOCKKFD+AMD N=256 python3 extra/gemm/amd_{}_matmul.py'
OTHERS = (("testamdasm", "test/amd", "python -m pytest -n=auto test/amd/ --durations 20"),
          ("testamdasm", "test/amd LLVM", "DEV=MOCKKFD+AMD:LLVM python -m pytest -n=auto test/amd/ --durations 20"),
          ("testamdasm", "sqtt", "VIZ=-2 python3 -m pytest -n=auto test/amd/test_sqtt_profiler.py"),
          ("testamdasm", "asm_matmul", ASM_MATMUL.format("asm")),
          ("testamdasm", "copy_matmul", ASM_MATMUL.format("copy")),
          ("testamdasm", "amd_llvm", "DEV=MOCKKFD+AMD:LLVM python test/device/test_amd_llvm.py"),
          ("hcq2", "test_tiny", f"{HCQ2_ENV} python test/test_tiny.py"),
          ("hcq2", "multitensor", f"{HCQ2_ENV} python -m pytest -n=auto test/backend/test_multitensor.py"),
          ("hcq2", "jit", f"{HCQ2_ENV} python test/unit/test_jit.py"),
          ("hcq2", "hcq2", f"{HCQ2_ENV} python -m pytest test/device/test_hcq2.py"),
          ("testdsp", "pytest", "MOCKDSP=1 DEV=DSP python -m pytest -n=auto test/test_tiny.py "
           "test/backend/test_transcendental.py::TestTranscendentalVectorized test/backend/test_quantize_onnx.py"))
JOB_ENV = {"testamdasm": (("DEV", "MOCKKFD+AMD"),)}


def jobs(archs: list[str], renderers: list[str]) -> list[Step]:
    """The mock jobs of tinygrad's test.yml at the commit matching tinygrad 0.14.0 (a9069c177a), and `share`."""
    steps = []
    for arch in archs:
        for r in renderers:
            env = (("DEV", f"MOCKKFD+AMD:{'LLVM' if r == 'LLVM' else ''}:{arch}"), ("SKIP_SLOW_TEST", "1"))
            steps += [Step(f"testamd[{r or 'amd'} {arch}]", name, run, env) for name, run in TESTAMD]
    steps += [Step(job, name, run, JOB_ENV.get(job, ())) for job, name, run in OTHERS]
    steps.append(Step("share", "tiny+jit+uops", "python -m pytest -n=auto test/test_tiny.py test/backend/test_jit.py "
                      "test/backend/test_uops.py", (("DEV", "MOCKKFD+AMD:LLVM"),), in_workflow=False))
    return steps


def out_of_sync(steps: list[Step], workflow: str) -> list[Step]:
    """Steps whose command (env assignments aside) the workflow file does not contain."""
    text = " ".join(open(workflow).read().split()).replace('"', "") if os.path.exists(workflow) else ""
    return [s for s in steps if s.in_workflow and " ".join(_split(s.run)[1]).replace('"', "") not in text]


def _split(run: str) -> tuple[dict[str, str], list[str]]:
    """A command line's leading VAR=value assignments and its argv."""
    words, env = shlex.split(run), {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    return env, words


def _select_files(argv: list[str], pattern: str | None) -> list[str] | None:
    """argv with only the test files matching `pattern` (None: no file of the step matches)."""
    if not pattern:
        return argv
    files = [w for w in argv if w.startswith(("test/", "extra/"))]
    keep = [w for w in files if pattern in w]
    return [w for w in argv if w not in files or w in keep] if keep else None


@dataclasses.dataclass
class Result:
    wall: float
    status: int
    counts: collections.Counter            # passed / failed / errors / skipped
    files: dict[str, collections.Counter]  # per test file (pytest steps)
    failures: dict[str, str]               # test id -> first error line
    tail: str                              # the output's last lines, for a step that ran no test
    device: tuple[float, float] | None = None  # share of the samples in the device, and without blocked waits


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.match(r"(E\s+)?\w*(Error|Exception|Timeout|assert)", ln)]
    return (errs or lines or [""])[0][:160]


def _junit(path: str) -> tuple[collections.Counter, dict, dict]:
    counts, files, failures = collections.Counter(), collections.defaultdict(collections.Counter), {}
    for case in ET.parse(path).getroot().iter("testcase"):
        cls = case.get("classname", "")
        file = cls.rsplit(".", 1)[0].replace(".", "/") + ".py" if "." in cls else cls
        tid = f"{cls}::{case.get('name')}"
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "failed" if child.tag == "failure" else "errors"
                failures[tid] = _first_line(child.get("message", "") + "\n" + (child.text or ""))
                break
            if child.tag == "skipped":
                kind = "skipped"
        counts[kind] += 1
        files[file][kind] += 1
    return counts, dict(files), failures


def _unittest(out: str, status: int) -> tuple[collections.Counter, dict]:
    """Counts of a `python test_x.py` (unittest) run, or of a script (one test: its exit status)."""
    counts, failures = collections.Counter(), {}
    ran = re.search(r"^Ran (\d+) tests? in", out, re.M)
    if not ran:
        counts["passed" if status == 0 else "failed"] += 1
        if status:
            failures["(script)"] = _first_line("\n".join(out.splitlines()[-30:]))
        return counts, failures
    for m in re.finditer(r"^(FAIL|ERROR): (\S+) \((\S+)\)\n-+\n(.*?)(?=^(?:=+|-+)$)", out, re.M | re.S):
        failures[f"{m.group(3)}::{m.group(2)}"] = _first_line(m.group(4).splitlines()[-1] if m.group(4) else "")
    summary = re.search(r"^(OK|FAILED)(?: \((.*)\))?$", out, re.M)
    extra = dict(kv.split("=") for kv in summary.group(2).split(", ")) if summary and summary.group(2) else {}
    counts["failed"] = int(extra.get("failures", 0))
    counts["errors"] = int(extra.get("errors", 0))
    counts["skipped"] = int(extra.get("skipped", 0)) + int(extra.get("expected failures", 0))
    counts["passed"] = int(ran.group(1)) - sum(counts.values())
    return counts, failures


def _py_spy() -> str | None:
    """py-spy on PATH or beside this interpreter (a venv's bin/)."""
    return shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))


MOCKS = ("hwemu", "tinygrad")


def device_frame(mock: str, root: str) -> re.Pattern:
    """A sample (py-spy --full-filenames) is the device's if a frame is in hwemu's emu package, or in the checkout's
    test/mockgpu (tinygrad's mock and the emulator it calls)."""
    import emu
    where = os.path.dirname(os.path.abspath(emu.__file__)) if mock == "hwemu" else os.path.join(root, "test", "mockgpu")
    return re.compile(r"\(" + re.escape(where + os.sep))


IDLE_WAITS = ("Doorbells.wait (", "Engine.wait_progress (")  # hwemu's blocked waits (module docstring)


def device_share(raw: str, pat: re.Pattern) -> tuple[float, float] | None:
    """(the share of py-spy's samples (raw flamegraph lines, every thread) that are the device's, the same without
    the samples of hwemu's blocked waits: those whose innermost device frame is a wait, not work the waiter runs)."""
    total = dev = idle = 0
    if not os.path.exists(raw):
        return None
    for line in open(raw, errors="replace"):
        stack, _, n = line.rstrip().rpartition(" ")
        if not n.isdigit():
            continue
        ours = [frame for frame in stack.split(";") if pat.search(frame)]
        total += int(n)
        dev += int(n) if ours else 0
        idle += int(n) if ours and ours[-1].startswith(IDLE_WAITS) else 0
    return (dev / total, (dev - idle) / (total - idle)) if total > idle else None


def _qemu_hexagon_static(workdir: str) -> str | None:
    """A folder with `qemu-hexagon-static` for tinygrad's MOCKDSP mode when only qemu-user's dynamic
    `qemu-hexagon` is installed (tinygrad's CI installs qemu-user-static; either runs its programs), else None."""
    dynamic = shutil.which("qemu-hexagon")
    if shutil.which("qemu-hexagon-static") or dynamic is None:
        return None
    folder = os.path.join(workdir, "qemu")
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, "qemu-hexagon-static")
    if not os.path.lexists(link):
        os.symlink(dynamic, link)
    return folder


FIRST_LLVM = {"gfx950": 20}  # the first LLVM that knows a chip (tinygrad's renderers compile through libLLVM)


def libllvm(major: int, dirs: tuple[str, ...] | None = None) -> str | None:
    """The newest libLLVM.so.N[.M] of LLVM `major` or later in the system's library directories."""
    dirs = dirs or tuple(os.path.join(d, sysconfig.get_config_var("MULTIARCH") or "") for d in ("/usr/lib", "/lib"))
    found = []
    for d in dirs:
        for name in os.listdir(d) if os.path.isdir(d) else ():
            m = re.fullmatch(r"libLLVM\.so\.(\d+)(?:\.\d+)*", name)
            if m and int(m[1]) >= major:
                found.append((int(m[1]), os.path.join(d, name)))
    return max(found)[1] if found else None


def _llvm_for(env: dict[str, str]) -> None:
    """Points tinygrad at a libLLVM that knows DEV's chip when LLVM 19 (its first choice here) does not."""
    arch = env.get("DEV", "").rsplit(":", 1)[-1]
    if arch not in FIRST_LLVM or "LLVM_PATH" in env:
        return
    lib = libllvm(FIRST_LLVM[arch])
    if lib:
        env["LLVM_PATH"] = lib
    else:
        print(f"tinygrad_ci: note: {arch} needs LLVM {FIRST_LLVM[arch]} or later (tinygrad's renderers compile "
              f"through libLLVM) and none is installed: its steps fail on both mocks", file=sys.stderr)


def run_step(step: Step, mock: str, root: str, files: str | None, profile: bool, timeout: float,
             workdir: str) -> Result | None:
    env_over, argv = _split(step.run)
    argv = _select_files(argv, files)
    if argv is None:
        return None
    env = dict(os.environ)
    env.update(dict(step.env))
    env.update(env_over)
    env.setdefault("CC", "clang-19" if shutil.which("clang") is None and shutil.which("clang-19") else "clang")
    _llvm_for(env)
    # tinygrad's CI installs the checkout (pip install -e .): its tinygrad/ and test/ are importable from any script
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), root) if p)
    py = sys.executable
    argv = [py if a in ("python", "python3") else a for a in argv]
    tag = re.sub(r"\W+", "_", f"{step.key}_{mock}")
    junit = os.path.join(workdir, f"{tag}.xml")
    is_pytest = argv[1:3] == ["-m", "pytest"]
    if is_pytest:
        argv += [f"--junitxml={junit}", "-p", "no:cacheprovider"]
    if mock == "hwemu":  # what `hwemu run --` sets up, without its exec (a profiler follows the program itself)
        env.pop("HWEMU", None)
        env = program_env(None, "run", env)
        if env is None:  # said on stderr
            return Result(0.0, 2, collections.Counter(), {}, {}, "hwemu cannot serve this DEV")
    else:
        env["HWEMU"] = "0"
        env["PATH"] = os.pathsep.join(p for p in (_qemu_hexagon_static(workdir), env.get("PATH")) if p)
    raw = os.path.join(workdir, f"{tag}.raw")
    if profile:
        argv = [_py_spy(), "record", "--threads", "--subprocesses", "--nonblocking",
                "--full-filenames", "-r", "25", "-f", "raw", "-o", raw, "--"] + argv
    began = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout)
        out, status = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, status = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or "", -9
        out += f"\n(step stopped after {timeout:.0f} s)"
    wall = time.monotonic() - began
    with open(os.path.join(workdir, f"{tag}.log"), "w") as f:
        f.write(out)
    if is_pytest and os.path.exists(junit):
        counts, per_file, failures = _junit(junit)
    else:
        counts, failures = _unittest(out, status)
        per_file = {}
    if status == -9:
        counts["errors"] += 1
        failures["(timeout)"] = f"stopped after {timeout:.0f} s"
    tail = "" if sum(counts.values()) else _first_line("\n".join(out.splitlines()[-20:]))
    share = device_share(raw, device_frame(mock, root)) if profile else None
    return Result(wall, status, counts, per_file, failures, tail, share)


def _fmt(c: collections.Counter) -> str:
    return f"{c['passed']:5d} {c['failed']:4d} {c['errors']:4d} {c['skipped']:4d}"


def report(step: Step, res: dict[str, Result]) -> list[str]:
    hw, tg = res.get("hwemu"), res.get("tinygrad")
    lines = []
    ratio = f"{hw.wall / tg.wall:6.2f}x" if hw and tg and tg.wall else "      "
    floor = ""
    if hw and tg and tg.device is not None:
        client = tg.wall * (1 - tg.device[0])
        floor = f" client {client:7.1f}s  vs floor {hw.wall / client:5.2f}x"
    share = "  ".join(f"{m} dev {r.device[0]:5.1%}" + (f" (busy {r.device[1]:5.1%})" if m == "hwemu" else "")
                      for m, r in res.items() if r.device is not None)
    lines.append(f"{step.key:34s} " + "  ".join(f"{m:8s} {_fmt(r.counts)} {r.wall:8.1f}s" for m, r in res.items())
                 + f"  {ratio}{floor}  {share}")
    files = sorted(set().union(*(r.files for r in res.values())))
    if len(files) > 1:
        for f in files:
            lines.append(f"  {f:32s} " + "  ".join(f"{m:8s} {_fmt(r.files.get(f, collections.Counter()))}"
                                                   + " " * 10 for m, r in res.items()))
    if hw:
        only = {t: e for t, e in hw.failures.items() if not tg or t not in tg.failures}
        for t, e in sorted(only.items()):
            lines.append(f"  hwemu-only failure: {t}: {e}")
        for m, r in res.items():
            if r.tail:
                lines.append(f"  {m} ran no test (exit {r.status}): {r.tail}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.tinygrad_ci", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tinygrad", required=True, help="a tinygrad checkout (its test/, extra/, .github/)")
    ap.add_argument("--jobs", default="testamd,testamdasm,hcq2,testdsp",
                    help="comma-separated job names (also: share, the device-share workload)")
    ap.add_argument("--arch", default="gfx1100,gfx1201,gfx950", help="testamd's arch matrix (comma-separated)")
    ap.add_argument("--renderer", default="LLVM,", help="testamd's renderers: LLVM and/or '' (tinygrad's default)")
    ap.add_argument("--steps", default=None, help="only steps whose job/name contains this")
    ap.add_argument("--files", default=None, help="only the test files (of multi-file steps) containing this")
    ap.add_argument("--mocks", default="hwemu,tinygrad", help="which mocks to run (hwemu, tinygrad)")
    ap.add_argument("--profile", action="store_true", help="sample each run with py-spy: the device's share")
    ap.add_argument("--timeout", type=float, default=3600, help="stop a step's run after this many seconds")
    ap.add_argument("--out", default=None, help="keep logs, junit files and samples here (default: a temp dir)")
    ap.add_argument("--list", action="store_true", help="list the steps and exit")
    a = ap.parse_args(argv)
    root = os.path.abspath(a.tinygrad)
    if not os.path.isdir(os.path.join(root, "test")) or not os.path.isdir(os.path.join(root, "tinygrad")):
        print(f"tinygrad_ci: --tinygrad {a.tinygrad}: not a tinygrad checkout (no test/, tinygrad/)", file=sys.stderr)
        return 2
    mocks = [m for m in a.mocks.split(",") if m]
    if any(m not in MOCKS for m in mocks):
        print(f"tinygrad_ci: --mocks {a.mocks}: choose from hwemu, tinygrad", file=sys.stderr)
        return 2
    if a.profile and _py_spy() is None:
        print("tinygrad_ci: --profile needs py-spy (pip install py-spy)", file=sys.stderr)
        return 2
    wanted = a.jobs.split(",")
    steps = [s for s in jobs(a.arch.split(","), a.renderer.split(","))
             if s.job.split("[")[0] in wanted and (not a.steps or a.steps in s.key)]
    stale = out_of_sync(steps, os.path.join(root, ".github", "workflows", "test.yml"))
    for s in stale:
        print(f"tinygrad_ci: note: the workflow has no step `{s.run}` ({s.key}): the table is out of sync",
              file=sys.stderr)
    if a.list:
        for s in steps:
            print(f"{s.key:34s} {' '.join(f'{k}={v}' for k, v in s.env)} {s.run}")
        return 0
    workdir = a.out or tempfile.mkdtemp(prefix="tinygrad_ci.")
    os.makedirs(workdir, exist_ok=True)
    print(f"{'step':34s} " + "  ".join(f"{m:8s} pass fail  err skip     wall" for m in mocks), flush=True)
    totals = {m: [collections.Counter(), 0.0] for m in mocks}
    for s in steps:
        res = {}
        for m in mocks:
            r = run_step(s, m, root, a.files, a.profile, a.timeout, workdir)
            if r is not None:
                res[m] = r
                totals[m][0].update(r.counts)
                totals[m][1] += r.wall
        if res:
            print("\n".join(report(s, res)), flush=True)
    print(f"{'total':34s} " + "  ".join(f"{m:8s} {_fmt(c)} {w:8.1f}s" for m, (c, w) in totals.items()))
    print(f"logs, junit files and samples: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
