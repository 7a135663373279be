"""The process's LLVM JIT engine (MCJIT on the host CPU) with an on-disk object cache.

    engine() -> Engine                                   # one per process, thread-safe
    Engine.module(name: str | None = None) -> ir.Module  # triple and data layout of the host set
    Engine.compile(module: ir.Module | str, name: str, key: str | None = None) -> int   # address of `name`
    Engine.load(key: str) -> int | None                  # the cached function, without building or compiling

`key` is the caller's content hash of what it compiled (a module is identified by it: the same key must always
name the same code). The engine gives the compiled function a symbol of its own (from the key, or a counter) and
makes the module's other definitions internal, so that names never clash between modules or processes. With a key
the object code is kept in memory and under `$HWEMU_CACHE/llvm/` (default `~/.cache/hwemu/llvm/`), named by a hash
of the key, VERSION, LLVM's version, the target (triple, CPU, features) and the optimization level, so that another
process skips optimization and code generation (`load` even lets it skip building the module). A cache file holds
a magic, the SHA-256 of the object and the object; a file that does not check out (truncated, corrupted, another
format) is ignored and replaced. Without a key nothing is cached.

The pipeline (`OPT`): LLVM's O2 module pipeline on the new pass manager, code generation at CodeGenOpt::Default.
No fast-math flags are ever set: LLVM keeps every float operation as written (no reassociation, no contraction).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir

from emu.pcode import llvmfloats as FL

__all__ = ["Engine", "engine", "VERSION", "cache_dir"]

VERSION = "pcode-llvm-2"  # bump when the emitted code changes for the same pcode (cache files of others are unused)
OPT = 2
_MAGIC = b"HWEMUOB1"


def cache_dir() -> Path:
    """Where compiled objects are kept: $HWEMU_CACHE/llvm (default ~/.cache/hwemu/llvm)."""
    base = os.environ.get("HWEMU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hwemu")
    return Path(base) / "llvm"


class Engine:
    """One MCJIT engine for the host CPU: modules are optimized, compiled to objects and loaded into it."""

    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        self.tm = target.create_target_machine(cpu=cpu, features=features, opt=OPT)
        self.triple, self.data_layout = self.tm.triple, str(self.tm.target_data)
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)
        FL.register_symbols(llvm.add_symbol)
        self._target_id = "\0".join((VERSION, ".".join(map(str, llvm.llvm_version_info)), self.triple, cpu,
                                     features, str(OPT)))
        self._lock = threading.RLock()
        self._count = 0
        self._loaded: dict[str, bool] = {}  # keys whose object is in the engine
        self.stats = {"compiled": 0, "disk_hits": 0, "memory_hits": 0}

    def module(self, name: str | None = None) -> ir.Module:
        """An empty module for this engine (a fresh name unless given)."""
        with self._lock:
            self._count += 1
            m = ir.Module(name or f"pcode{self._count}")
        m.triple, m.data_layout = self.triple, self.data_layout
        return m

    def compile(self, module: ir.Module | str, name: str, key: str | None = None) -> int:
        """The address of function `name` of `module` (llvmlite IR or its text), optimized and compiled; with a
        key, from the cache when the key's object is there (in this process or on disk)."""
        with self._lock:
            if key is not None:
                addr = self.load(key)
                if addr is not None:
                    return addr
            m = llvm.parse_assembly(str(module))
            m.verify()
            self._count += 1
            symbol = self._symbol(key) if key is not None else f"hwemu_fn{self._count}"
            for fn in m.functions:
                if fn.name == name:
                    fn.name = symbol
                elif not fn.is_declaration:
                    fn.linkage = llvm.Linkage.internal
            for g in m.global_variables:
                if not g.is_declaration:
                    g.linkage = llvm.Linkage.internal
            if m.get_function(symbol).is_declaration:
                raise KeyError(f"module defines no function {name!r}")
            pb = llvm.create_pass_builder(self.tm, llvm.PipelineTuningOptions(speed_level=OPT))
            pb.getModulePassManager().run(m, pb)
            obj = self.tm.emit_object(m)
            self._add(obj)
            self.stats["compiled"] += 1
            if key is not None:
                self._loaded[key] = True
                self._store(key, obj)
            return self._address(symbol)

    def load(self, key: str) -> int | None:
        """The address of the function compiled under `key`, or None when neither this process nor the disk cache
        has it."""
        with self._lock:
            if self._loaded.get(key):
                self.stats["memory_hits"] += 1
                return self._address(self._symbol(key))
            obj = self._read(key)
            if obj is None:
                return None
            self._add(obj)
            try:
                addr = self._address(self._symbol(key))
            except KeyError:  # not what this key compiles to: compiled again
                return None
            self._loaded[key] = True
            self.stats["disk_hits"] += 1
            return addr

    # ---- internals ---------------------------------------------------------------------------------------------
    def _add(self, obj: bytes) -> None:
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()

    def _address(self, symbol: str) -> int:
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

    def _read(self, key: str) -> bytes | None:
        try:
            data = self.path(key).read_bytes()
        except OSError:
            return None
        head, digest, obj = data[:len(_MAGIC)], data[len(_MAGIC):len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
        if head != _MAGIC or not obj or hashlib.sha256(obj).digest() != digest:
            return None  # truncated or corrupted: compiled again (and rewritten)
        return obj

    def _store(self, key: str, obj: bytes) -> None:
        """Write the cache file atomically (a temporary file renamed); a cache that cannot be written is skipped."""
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_MAGIC + hashlib.sha256(obj).digest() + obj)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass


_ENGINE: Engine | None = None
_ENGINE_LOCK = threading.Lock()


def engine() -> Engine:
    """The process's engine (created on first use)."""
    global _ENGINE
    if _ENGINE is None:
        with _ENGINE_LOCK:
            if _ENGINE is None:
                _ENGINE = Engine()
    return _ENGINE
