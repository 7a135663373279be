// int24: the 24-bit multiplies LLVM selects for operands whose high bits do not matter (v_mul_u32_u24,
// v_mul_i32_i24, v_mad_u32_u24, v_mad_i32_i24, v_mul_hi_u32_u24, v_mul_hi_i32_i24: tinygrad's index arithmetic).
// The masks and shifts below are folded into the instructions, which read only the low 24 bits of x and y.
// For i < n, x = a[i], y = b[i], z = c[i] (uint32), u = low 24 bits, s = them sign-extended, o = out + 6 * i:
//   o[0] = ux * uy   o[1] = sx * sy   o[2] = ux * uy + z   o[3] = sx * sy + z   (mod 2^32)
//   o[4], o[5] = the high 32 bits of the 48-bit products ux * uy and sx * sy.
// Exact (numpy int64 / Python ints).
// Launch: 1-D, any block size; threads at i >= n do nothing.
kernel void int24(global const uint *a, global const uint *b, global const uint *c, global uint *out, int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  uint x = a[i], y = b[i], z = c[i];
  uint ux = x & 0xffffffu, uy = y & 0xffffffu;
  int sx = (int)(x << 8) >> 8, sy = (int)(y << 8) >> 8;
  global uint *o = out + 6 * i;
  o[0] = ux * uy;
  o[1] = (uint)(sx * sy);
  o[2] = ux * uy + z;
  o[3] = (uint)(sx * sy + (int)z);
  o[4] = (uint)(((ulong)ux * uy) >> 32);
  o[5] = (uint)(((long)sx * sy) >> 32);
}
