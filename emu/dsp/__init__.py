"""Hexagon DSP: semantics compiled from the vendor definitions, decoder, disassembler."""
