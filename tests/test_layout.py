"""ARCHITECTURE.md's layout rules, checked on the source: no import cycles among the modules of emu/, stack/ and
objfile/ (function-local and TYPE_CHECKING imports included, and importing `a.b.c` runs the packages `a` and `a.b`
first), the stack never imports emu, and objfile, which both read, imports neither."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("emu", "stack", "objfile")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = f.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of our packages that importing `name` runs directly: each imported module and its packages."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets.add(base)
            targets.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)
    runs = set()
    for t in targets:
        parts = t.split(".")
        runs.update(m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in known)
    runs.discard(name)
    return {m for m in runs if not name.startswith(m + ".")}  # a module's own packages are already running


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_cycle_finder_sees_a_package_cycle():
    """The finder itself: a module importing a sibling package whose __init__ imports the module back."""
    g = {"emu.amd.kfd": {"emu.os", "emu.os.usermem"}, "emu.os": {"emu.amd.kfd"}, "emu.os.usermem": set()}
    assert _cycles(g) == [["emu.amd.kfd", "emu.os"]]


def test_stack_never_imports_emu():
    bad = {m: sorted(d for d in deps if d.split(".")[0] == "emu") for m, deps in _graph().items()
           if m.split(".")[0] == "stack"}
    assert {m: d for m, d in bad.items() if d} == {}


def test_object_files_are_read_by_a_leaf_package():
    """objfile (the ELF and code-object readers) serves both sides, so it depends on neither."""
    bad = {m: sorted(d for d in deps if d.split(".")[0] in ("emu", "stack")) for m, deps in _graph().items()
           if m.split(".")[0] == "objfile"}
    assert {m: d for m, d in bad.items() if d} == {}


ARCH_NAME = re.compile(r"(rdna\d|cdna\d?|gfx\d+)", re.I)
# where chips are told apart by name: the descriptor, and the conversion of the vendor tables and pseudocode
NAMES_ALLOWED = ("emu/amd/target.py", "emu/amd/isa/", "emu/pcode/")


def _names_an_arch(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return ARCH_NAME.fullmatch(node.value) is not None
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_names_an_arch(e) for e in node.elts)


def test_only_the_target_descriptor_tells_chips_apart_by_name():
    """emu.amd.target describes every chip; other modules ask it (a generation's facts, a chip's capabilities) and
    never compare an arch or family name (`family == "cdna"`, `arch in ("gfx90a", ...)`)."""
    found = []
    for f in sorted((ROOT / "emu").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith(NAMES_ALLOWED):
            continue
        for node in ast.walk(ast.parse(f.read_text(), rel)):
            if isinstance(node, ast.Compare) and any(_names_an_arch(x) for x in (node.left, *node.comparators)):
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"arch or family names compared outside emu/amd/target.py: {found}"


# the operand codes of VCC, TTMPs, M0/NULL, EXEC, the source markers, apertures and VCCZ..LDS_DIRECT (emu.amd.regs)
SPECIAL_CODES = {106, 107, 108, 123, 124, 125, 126, 127, 233, 234, *range(235, 240), *range(249, 255)}
CODE_USERS = ("emu/amd/exec/", "emu/amd/asm/", "emu/amd/debug/", "emu/amd/decode.py", "emu/amd/dispatch.py")


def test_operand_codes_come_from_the_register_table():
    """The executor, disassembler and debugger compare scalar operand codes with emu.amd.regs's names (and M0 /
    NULL with the generation's), never with the numbers: one table says where each register is."""
    found = []
    for f in sorted((ROOT / "emu" / "amd").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if not rel.startswith(CODE_USERS):
            continue
        for node in ast.walk(ast.parse(f.read_text(), rel)):
            if isinstance(node, ast.Compare):
                found += [f"{rel}:{node.lineno}: {c.value}" for c in ast.walk(node) if isinstance(c, ast.Constant)
                          and type(c.value) is int and c.value in SPECIAL_CODES]
    assert not found, f"operand codes written as numbers: {found}"


# emu's seam modules implement stack's file-I/O hook interface and parse the DEV grammar: they may import stack
STACK_SEAM = {"emu.cli": {"stack.hcq.fileio", "stack.device"}, "emu.os.system": {"stack.hcq.fileio"},
              "emu.os.pci": {"stack.hcq.fileio"},
              "emu.os.tinygrad": {"stack.device"}}
def test_emu_imports_no_stack_definitions():
    """The device model decodes with the hardware's definitions (emu.amd.hw), never with the host runtime's
    encoders' constants: an encoder and a decoder that share one definition cannot catch a wrong field. Only the
    seam modules import stack (STACK_SEAM)."""
    bad = {}
    for m, deps in _graph().items():
        if m.split(".")[0] != "emu":
            continue
        allowed = STACK_SEAM.get(m, set())
        extra = sorted(d for d in deps if d.split(".")[0] == "stack" and d not in allowed | {"stack", "stack.hcq"})
        if extra:
            bad[m] = extra
    assert bad == {}, f"emu modules importing stack: {bad}"


def test_dispatches_start_in_one_place():
    """Every dispatch (the PM4 CP's, the AQL packet processor's and so the runner's, run_asm's) starts from compute
    registers in emu.amd.compute.launch: nothing else builds a Dispatch or runs one."""
    found = []
    for f in sorted((ROOT / "emu").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(f.read_text(), rel)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
                    "Dispatch", "run_dispatch") and rel != "emu/amd/compute.py":
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"dispatches built or run outside emu/amd/compute.py: {found}"


def test_ruff_finds_nothing():
    """The lint rules of pyproject.toml ([tool.ruff]) hold for every module and test."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *PACKAGES, "tools", "tests"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
