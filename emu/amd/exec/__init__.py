"""The wave engine: flat wave state, execution plans (one fused step per decoded instruction), operand access,
VALU / memory plans, and the run loop with its tiers."""

TIERS = ("ref", "interp", "threaded", "jit", "auto")  # HWEMU_TIER values (emu.amd.exec.jit)
