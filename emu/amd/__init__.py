"""AMD GPUs: ISA tables (emu.amd.isa), decoder and disassembler (emu.amd.decode, emu.amd.asm),
the kernel runner (GPU, GPUFault) and free-standing waves (Wave)."""
from emu.amd.asm import text as _text  # noqa: F401 - makes str(Inst) the LLVM text
from emu.amd.decode import Inst, Operand, decode

__all__ = ["Inst", "Operand", "decode", "GPU", "GPUFault", "Wave"]

_LAZY = {"GPU": "emu.amd.gpu", "GPUFault": "emu.amd.memory", "Wave": "emu.amd.exec.wave"}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'emu.amd' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(mod), name)
