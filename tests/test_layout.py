"""ARCHITECTURE.md's layout rules, checked on the source: no import cycles among the modules of emu/, stack/ and
objfile/ (function-local and TYPE_CHECKING imports included, and importing `a.b.c` runs the packages `a` and `a.b`
first), the stack never imports emu, and objfile, which both read, imports neither."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("emu", "stack", "objfile")


@functools.cache
def _tree(f: Path) -> ast.Module:
    """The module's syntax tree, parsed once for all the checks (they only read it)."""
    return ast.parse(f.read_text(), f.relative_to(ROOT).as_posix())


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
    for node in ast.walk(_tree(path)):
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


@functools.cache
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
        for node in ast.walk(_tree(f)):
            if isinstance(node, ast.Compare) and any(_names_an_arch(x) for x in (node.left, *node.comparators)):
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"arch or family names compared outside emu/amd/target.py: {found}"


# tables keyed by an instruction set's name besides the vendor tables' conversion: what llvm-mc-19 prints per set
# (generated by tools/gen_asm_names.py, looked up by the set's name as emu.amd.isa's tables are), and the tinygrad
# adapter's translation of its client's arch argument (tinygrad names its tables rdna3, rdna4, cdna)
KEYS_ALLOWED = (*NAMES_ALLOWED, "emu/amd/asm/names.py", "emu/amd/asm/buffer_formats.py",
                "emu/amd/asm/image_sizes.py", "emu/os/tinygrad_emu.py")


def _keyed_by_arch(tree: ast.AST) -> list[int]:
    """Lines of dicts with a key naming an arch or family (`{"cdna": ...}`) and of lookups by one (`X["rdna3"]`):
    per-family data, which belongs in the descriptor."""
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Dict) and any(k is not None and _names_an_arch(k) for k in n.keys)
            or isinstance(n, ast.Subscript) and _names_an_arch(n.slice)]


def test_no_data_keyed_by_arch_names():
    """Facts that differ between generations are fields of emu.amd.target's descriptors (or of the instruction set,
    emu.amd.isa), not dicts keyed by a family name that a consumer indexes with `gen.isa`."""
    found = []
    for f in sorted((ROOT / "emu").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if not rel.startswith(KEYS_ALLOWED):
            found += [f"{rel}:{line}" for line in _keyed_by_arch(_tree(f))]
    assert not found, f"data keyed by arch or family names outside emu/amd/target.py: {found}"
    tree = ast.parse('A = {"rdna3": 1, **B}\nC = D["gfx942"]\nE = {"x": "cdna"}\nF = G["rdna"]\nH = {**I}\n')
    assert _keyed_by_arch(tree) == [1, 2]


# the operand codes of VCC, TTMPs, M0/NULL, EXEC, the source markers, apertures and VCCZ..LDS_DIRECT (emu.amd.regs)
SPECIAL_CODES = {106, 107, 108, 123, 124, 125, 126, 127, 233, 234, *range(235, 240), *range(249, 255)}
CODE_USERS = ("emu/amd/exec/", "emu/amd/asm/", "emu/amd/debug/", "emu/amd/decode.py", "emu/amd/dispatch.py",
              "emu/amd/strategies/")


def _codes(node: ast.AST) -> list[int]:
    return [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and type(c.value) is int
            and c.value in SPECIAL_CODES]


def _named_codes(tree: ast.Module) -> list[tuple[int, int]]:
    """(line, code) of module constants bound to an operand code (`DPP8_FI = 234`, `A, B = 250, 233`): a second
    table of them."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            out += [(node.lineno, c) for v in values if isinstance(v, ast.Constant) for c in _codes(v)]
    return out


def test_operand_codes_come_from_the_register_table():
    """The executor, disassembler, debugger and instruction strategies compare scalar operand codes with
    emu.amd.regs's names (and M0 / NULL with the generation's), never with the numbers, and name none of them
    again: one table says where each register is."""
    found = []
    for f in sorted((ROOT / "emu" / "amd").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if not rel.startswith(CODE_USERS):
            continue
        tree = _tree(f)
        found += [f"{rel}:{line}: {code}" for line, code in _named_codes(tree)]
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                found += [f"{rel}:{node.lineno}: {c}" for c in _codes(node)]
    assert not found, f"operand codes written as numbers: {found}"


def test_a_second_table_of_operand_codes_is_seen():
    """The check itself: module constants bound to operand codes, alone or unpacked, are found; other numbers and
    constants inside functions are not."""
    tree = ast.parse("DPP8_FI = 234\nA, B = 250, 7\nBLOCK = 64\nX: int = 126\ndef f():\n    y = 106\n")
    assert _named_codes(tree) == [(1, 234), (2, 250), (4, 126)]


# the fast tiers' modules: what they do not run they decline through emu.amd.exec.takes, counted under HWEMU_STATS
FAST_TIERS = ("interp", "threaded", "translate", "takes")


def _catches_everything(h: ast.ExceptHandler) -> bool:
    """A handler of every error (bare, Exception, BaseException) that does not raise it again."""
    names = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
    broad = h.type is None or any(isinstance(n, ast.Name) and n.id in ("Exception", "BaseException") for n in names)
    return broad and not (h.body and isinstance(h.body[-1], ast.Raise) and h.body[-1].exc is None)


def test_fast_tiers_catch_no_bugs():
    """A fast tier declines an instruction through one explicit table (emu.amd.exec.takes), never by catching
    whatever its code generator raised: a bug there must fail, not turn into a silent slowdown."""
    found = []
    for f in sorted((ROOT / "emu" / "amd" / "exec").glob("*.py")):
        if f.stem.startswith(FAST_TIERS):
            rel = f.relative_to(ROOT).as_posix()
            found += [f"{rel}:{h.lineno}" for h in ast.walk(_tree(f))
                      if isinstance(h, ast.ExceptHandler) and _catches_everything(h)]
    assert not found, f"fast-tier code catching every error: {found}"
    tree = ast.parse("try:\n    f()\nexcept Exception:\n    g()\ntry:\n    f()\nexcept (KeyError, BaseException):\n"
                     "    pass\ntry:\n    f()\nexcept BaseException:\n    g()\n    raise\n")
    assert [_catches_everything(h) for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler)] == [True, True, False]

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
        for node in ast.walk(_tree(f)):
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
