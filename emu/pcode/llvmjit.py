"""The process's LLVM JIT engine (MCJIT on the host CPU) with an on-disk object cache.

    engine() -> Engine                                   # one per process, thread-safe
    Engine.module(name: str | None = None) -> ir.Module  # triple and data layout of the host set
    Engine.compile(module: ir.Module | str, name: str, key: str | None = None, exports=()) -> int  # of `name`
    Engine.compile_all(modules: dict[str, ir.Module | str], name: str) -> dict[str, int]  # many keys at once
    Engine.load(key: str) -> int | None                  # the cached function, without building or compiling
    Engine.address(symbol: str) -> int                   # an exported function's address
    GATE: Gate                                           # enter() before calling compiled code, leave() after

`key` is the caller's content hash of what it compiled (a module is identified by it: the same key must always
name the same code). The engine gives the compiled function a symbol of its own (from the key, or a counter) and
makes the module's other definitions internal, so that names never clash between modules or processes. With a key
the object code is kept in memory and under `$HWEMU_CACHE/llvm/` (default `~/.cache/hwemu/llvm/`), named by a hash
of the key, VERSION, LLVM's version, the target (triple, CPU, features) and the optimization level, so that another
process skips optimization and code generation (`load` even lets it skip building the module). Processes that
compile the same key at once (pytest-xdist workers running alike kernels) take turns on a lock file (one of 256,
by the key's hash), and the later ones load what the first one wrote. A cache file holds
a magic, the SHA-256 of the object and the object; a file that does not check out (truncated, corrupted, another
format) is ignored and replaced. Keys compiled together (compile_all) share one object file, and each key's file
names it and the symbols it defines. Without a key nothing is cached.

The pipeline (`OPT`): LLVM's O2 module pipeline on the new pass manager, code generation at CodeGenOpt::Default;
`engine(name, opt=0)` makes an engine for code compiled in bulk, where compile time counts: only global dead code
elimination, SROA, instcombine and simplifycfg, then code generation at CodeGenOpt::None.
No fast-math flags are ever set: LLVM keeps every float operation as written (no reassociation, no contraction).

At process exit (atexit, registered when the engine is made) the engine closes: the GATE waits for the calls
of compiled code in flight (they are budgeted: each returns within milliseconds) and admits no more, and a compile
in flight finishes; afterwards `engine` (for an engine not made yet), `compile` and `load` raise Closed and callers
run their interpreted form. So no thread (e.g. a mock GPU's engine thread, a daemon) runs or compiles native code
while the interpreter and LLVM are torn down, and what the process's later exit handlers still launch runs
interpreted.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
import threading
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir

from emu import cache
from emu.pcode import llvmfloats as FL

__all__ = ["Engine", "engine", "VERSION", "cache_dir", "GATE", "Closed"]

VERSION = "pcode-llvm-2"  # bump when the emitted code changes for the same pcode (cache files of others are unused)
OPT = 2
_MAGIC = b"HWEMUOB1"
_LINK = b"HWEMULN1"  # a key's cache file that names the object of many keys (Engine.compile_all)


def cache_dir() -> Path:
    """Where compiled objects are kept: $HWEMU_CACHE/llvm (default ~/.cache/hwemu/llvm)."""
    return cache.root() / "llvm"


class Closed(RuntimeError):
    """The process is exiting: no more native code is compiled or run."""


class Gate:
    """Admits calls of compiled code until the process exits: `enter()` is False once closed."""

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._busy = 0
        self.closed = False

    def enter(self) -> bool:
        with self._cv:
            if self.closed:
                return False
            self._busy += 1
            return True

    def leave(self) -> None:
        with self._cv:
            self._busy -= 1
            if not self._busy:
                self._cv.notify_all()

    def close(self, timeout: float) -> None:
        """Admit no more calls and wait (up to `timeout` seconds) for those in flight."""
        with self._cv:
            self.closed = True
            self._cv.wait_for(lambda: not self._busy, timeout)


GATE = Gate()
CLOSE_TIMEOUT = 30.0  # seconds the exit waits for native calls in flight
atexit.register(GATE.close, CLOSE_TIMEOUT)  # closed at exit even when no engine was made: none is made afterwards


class Engine:
    """One MCJIT engine for the host CPU: modules are optimized, compiled to objects and loaded into it."""

    def __init__(self, opt: int = OPT, codegen: int | None = None) -> None:
        """`opt`: the optimizer's level (0: only global dead code elimination, SROA, instcombine and simplifycfg);
        `codegen`: the code generator's (default `opt`; 0 is LLVM's fast instruction selection and register
        allocation)."""
        self.opt, codegen = opt, opt if codegen is None else codegen
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        self.tm = target.create_target_machine(cpu=cpu, features=features, opt=codegen)
        self.triple, self.data_layout = self.tm.triple, str(self.tm.target_data)
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)
        FL.register_symbols(llvm.add_symbol)
        self._target_id = "\0".join((VERSION, ".".join(map(str, llvm.llvm_version_info)), self.triple, cpu,
                                     features, str(opt), str(codegen)))
        self._lock = threading.RLock()
        self._count = 0
        self._loaded: dict[str, bool] = {}  # keys whose object is in the engine
        self._objects: set[str] = set()  # the objects loaded (a key's digest, or a compile_all's name)
        self._symbols: set[str] = set()  # the key symbols they define
        self.stats = {"compiled": 0, "disk_hits": 0, "memory_hits": 0}
        self.closed = GATE.closed  # an engine made while the process exits compiles nothing (its close has run)
        atexit.register(self.close)

    def close(self) -> None:
        """No more native code: wait for the calls in flight and a compile in flight (see the module's docstring)."""
        GATE.close(CLOSE_TIMEOUT)
        with self._lock:
            self.closed = True

    def _open(self) -> None:
        if self.closed:
            raise Closed("the process is exiting: LLVM compiles nothing more")

    def module(self, name: str | None = None) -> ir.Module:
        """An empty module for this engine (a fresh name unless given)."""
        with self._lock:
            self._count += 1
            m = ir.Module(name or f"pcode{self._count}")
        m.triple, m.data_layout = self.triple, self.data_layout
        return m

    def compile(self, module: ir.Module | str, name: str, key: str | None = None, exports: tuple | list = ()) -> int:
        """The address of function `name` of `module` (llvmlite IR or its text), optimized and compiled; with a
        key, from the cache when the key's object is there (in this process or on disk). The functions named in
        `exports` keep their names (see `address`); the module's other definitions are internal."""
        if key is not None:
            return self.compile_all({key: module}, name, exports)[key]
        with self._lock:
            self._open()
            self._count += 1
            symbol = f"hwemu_fn{self._count}"
            self._add(self._emit(self._prepared(module, name, symbol, exports)), symbol, [symbol])
            self.stats["compiled"] += 1
            return self.address(symbol)

    def compile_all(self, modules: dict[str, ir.Module | str], name: str, exports: tuple | list = ()) -> dict[str, int]:
        """The address of function `name` of each keyed module (as `compile`); those neither in memory nor on disk
        are compiled together, as one module (LLVM's fixed cost a module and a function is most of a small one's
        time: the threaded tier's handlers), kept on disk as one object that each key's cache file names."""
        with self._lock, self._turn(list(modules)):
            self._open()
            found = {key: self.load(key) for key in modules}
            rest = [key for key, addr in found.items() if addr is None]
            if not rest:
                return found
            symbols = [self._symbol(key) for key in rest]
            linked = self._prepared(modules[rest[0]], name, symbols[0], exports)
            for key, symbol in zip(rest[1:], symbols[1:], strict=True):
                linked.link_in(self._prepared(modules[key], name, symbol, exports))
            obj = _MAGIC + hashlib.sha256(code := self._emit(linked)).digest() + code
            self.stats["compiled"] += len(rest)
            if len(rest) == 1:  # the key's own object
                ident = self._digest(rest[0])
                self._store(self.path(rest[0]), obj)
            else:
                ident = "b" + hashlib.sha256("\0".join([self._target_id, *rest]).encode()).hexdigest()[:40]
                self._store(cache_dir() / f"{ident}.o", obj)
                for key in rest:
                    self._store(self.path(key), _LINK + " ".join([ident, *symbols]).encode())
            self._add(code, ident, symbols)
            for key, symbol in zip(rest, symbols, strict=True):
                self._loaded[key] = True
                found[key] = self.address(symbol)
            return found

    def _prepared(self, module: ir.Module | str, name: str, symbol: str, exports: tuple | list = ()):
        """`module` parsed and checked, its function `name` renamed `symbol` and its other definitions internal."""
        m = llvm.parse_assembly(str(module))
        m.verify()
        for fn in m.functions:
            if fn.name == name:
                fn.name = symbol
            elif not fn.is_declaration and fn.name not in exports:
                fn.linkage = llvm.Linkage.internal
        for g in m.global_variables:
            if not g.is_declaration:
                g.linkage = llvm.Linkage.internal
        if m.get_function(symbol).is_declaration:
            raise KeyError(f"module defines no function {name!r}")
        return m

    def _emit(self, m) -> bytes:
        """The object code of `m`, optimized at this engine's level."""
        pb = llvm.create_pass_builder(self.tm, llvm.PipelineTuningOptions(speed_level=self.opt))
        if self.opt:
            pb.getModulePassManager().run(m, pb)
        else:
            mpm = llvm.create_new_module_pass_manager()
            mpm.add_global_dead_code_eliminate_pass()  # e.g. the translator's outlined semantics it then inlined
            mpm.run(m, pb)
            fpm = llvm.create_new_function_pass_manager()
            fpm.add_sroa_pass()
            fpm.add_instruction_combine_pass()
            fpm.add_simplify_cfg_pass()
            for fn in m.functions:
                if not fn.is_declaration:
                    fpm.run(fn, pb)
        return self.tm.emit_object(m)

    def load(self, key: str) -> int | None:
        """The address of the function compiled under `key`, or None when neither this process nor the disk cache
        has it."""
        with self._lock:
            self._open()
            if self._loaded.get(key) or self._symbol(key) in self._symbols:  # an object loaded defines it
                self._loaded[key] = True
                self.stats["memory_hits"] += 1
                return self.address(self._symbol(key))
            found = self._read(key)
            if found is None:
                return None
            ident, obj, symbols = found
            if ident not in self._objects and not self._symbols.isdisjoint(symbols):
                return None  # another object of this process defines some of them: compiled again on its own
            self._add(obj, ident, symbols)
            try:
                addr = self.address(self._symbol(key))
            except KeyError:  # not what this key compiles to: compiled again
                return None
            self._loaded[key] = True
            self.stats["disk_hits"] += 1
            return addr

    # ---- internals ---------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _turn(self, keys: list[str]):
        """This process's turn to compile `keys` (exclusive locks on their lock files, taken in order; none when the
        cache directory cannot hold them)."""
        with contextlib.ExitStack() as held:
            try:
                locks = cache_dir() / "locks"  # 256 of them: keys share a lock by the first byte of their digest
                if keys:
                    locks.mkdir(parents=True, exist_ok=True)
                for name in sorted({self._digest(key)[:2] for key in keys}):
                    fd = os.open(locks / name, os.O_RDWR | os.O_CREAT, 0o644)
                    held.callback(os.close, fd)  # releases the lock (the file stays: unlinking it would race a waiter)
                    fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                held.close()
            yield

    def _add(self, obj: bytes, ident: str, symbols: list[str]) -> None:
        """Load object `ident` (once), which defines `symbols`."""
        if ident in self._objects:
            return
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()
        self._objects.add(ident)
        self._symbols.update(symbols)

    def address(self, symbol: str) -> int:
        """The address of a function compiled into this engine under `symbol` (a key's, or an export's name)."""
        addr = self._engine.get_function_address(symbol)
        if not addr:
            raise KeyError(f"no function {symbol!r} in the compiled code")
        return addr

    def _digest(self, key: str) -> str:
        return hashlib.sha256(f"{self._target_id}\0{key}".encode()).hexdigest()[:40]

    def _symbol(self, key: str) -> str:
        return f"hwemu_k{self._digest(key)}"

    def path(self, key: str) -> Path:
        """The cache file of `key` (for this engine's target and VERSION)."""
        return cache_dir() / f"{self._digest(key)}.o"

    def _read(self, key: str) -> tuple[str, bytes, list[str]] | None:
        """(the object's name, its code, the key symbols it defines) from the key's cache file, or from the object
        of many keys that it names (compile_all); None when missing, truncated or corrupted."""
        ident = self._digest(key)
        data = self._file(ident)
        symbols = [self._symbol(key)]
        if data is not None and data.startswith(_LINK):
            ident, *symbols = data[len(_LINK):].decode("ascii", "replace").split() or [""]
            if not re.fullmatch(r"b[0-9a-f]{40}", ident) or self._symbol(key) not in symbols:
                return None
            data = self._file(ident)
        if data is None:
            return None
        head, digest, obj = data[:len(_MAGIC)], data[len(_MAGIC):len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
        if head != _MAGIC or not obj or hashlib.sha256(obj).digest() != digest:
            return None  # truncated or corrupted: compiled again (and rewritten)
        return ident, obj, symbols

    @staticmethod
    def _file(ident: str) -> bytes | None:
        try:
            return (cache_dir() / f"{ident}.o").read_bytes()
        except OSError:
            return None

    @staticmethod
    def _store(path: Path, data: bytes) -> None:
        """Write a cache file atomically (a temporary file renamed); a cache that cannot be written is skipped."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass


_ENGINES: dict[str, Engine] = {}
_ENGINE_LOCK = threading.Lock()


def engine(name: str = "main", opt: int = OPT, codegen: int | None = None) -> Engine:
    """The process's engine `name` (created on first use; Closed once the process is exiting). Each has its own lock:
    a long compile on one (a region) does not hold up loads from the cache on another (the threaded tier's handlers).
    `opt` and `codegen` (Engine) apply when it is made."""
    e = _ENGINES.get(name)
    if e is None:
        with _ENGINE_LOCK:
            e = _ENGINES.get(name)
            if e is None:
                if GATE.closed:  # LLVM may already be torn down (its C++ destructors run at exit)
                    raise Closed("the process is exiting: LLVM makes no engine")
                e = _ENGINES[name] = Engine(opt, codegen)
    return e
