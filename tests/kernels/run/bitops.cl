// bitops: bit operations. For i < n, x = a[i] (uint32), y = b[i] (uint64), r = y & 31, o = out + 10 * i (uint32):
//   o[0] = popcount(x)   o[1] = clz(x) (32 for 0)   o[2] = bitreverse32(x)   o[3] = ctz(x) (32 for 0)
//   o[4] = popcount(y)   o[5] = clz(y) (64 for 0)   o[6] = rotate_left(x, r)
//   o[7] = (x >> (y & 15)) & 0x7f (bit-field extract)   o[8], o[9] = low, high 32 bits of bitreverse64(y)
// Exact (numpy: bit tricks or a Python loop).
// Launch: 1-D, any block size; threads at i >= n do nothing.
kernel void bitops(global const uint *a, global const ulong *b, global uint *out, int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  uint x = a[i];
  ulong y = b[i];
  uint r = (uint)y & 31u;
  global uint *o = out + 10 * i;
  o[0] = popcount(x);
  o[1] = clz(x);
  o[2] = __builtin_bitreverse32(x);
  o[3] = x ? (uint)__builtin_ctz(x) : 32u;
  o[4] = (uint)popcount(y);
  o[5] = (uint)clz(y);
  o[6] = (x << r) | (x >> ((32u - r) & 31u));
  o[7] = (x >> (y & 15)) & 0x7fu;
  ulong rev = __builtin_bitreverse64(y);
  o[8] = (uint)rev;
  o[9] = (uint)(rev >> 32);
}
