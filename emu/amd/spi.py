"""Where the workgroups and waves of a dispatch run: the shader processor input's placement, in hwemu's model.

The hardware's dispatcher places each workgroup on a WGP with room for it, by load, in an order that varies from
run to run; hwemu runs workgroups one after another, so it deals them out in a fixed order instead: workgroup n
(its linear index, x fastest) on WGP n % WGPs of `wgps(chip)`, which goes over the shader engines first, then the
shader arrays, then the WGPs of an array (so consecutive workgroups spread over the engines, as the hardware's
round robin over engines does), and a workgroup's wave w on SIMD w % SIMDs of its WGP. The units that count or
trace per WGP and SIMD (emu.amd.perfmon, emu.amd.sqtt) place work by it, and so agree.
"""
from __future__ import annotations

from emu.amd import target


def wgps(chip: target.Target) -> list[tuple[int, int, int]]:
    """(shader engine, shader array, WGP in the array) of every WGP, in the order workgroups are dealt to them."""
    per_array = chip.cus // chip.arrays // 2  # a WGP is two CUs
    return [(se, sa, w) for w in range(per_array) for sa in range(chip.arrays_per_engine)
            for se in range(chip.shader_engines)]


def simds(chip: target.Target) -> int:
    """SIMDs per WGP."""
    return 2 * chip.simd_per_cu


def workgroup(ids: tuple[int, int, int], grid: tuple[int, int, int], start: tuple[int, int, int]) -> int:
    """The linear index of the workgroup with ids `ids` in a dispatch of `grid` workgroups from `start`."""
    (x, y, z), (gx, gy, _), (sx, sy, sz) = ids, grid, start
    return (x - sx) + gx * ((y - sy) + gy * (z - sz))
