// ew_i64: with x = (ulong)a[i], y = (ulong)b[i]:
//   out[i] = (long)(x * y + (ulong)(a[i] >> 7) - (y << 3) + ((x ^ y) & 0x0000ffff0000ffff)), for i < n,
// all in 64-bit wrap-around arithmetic (a[i] >> 7 is an arithmetic shift). numpy with uint64/int64 wrap-around:
//   x*y + (a >> 7).view(uint64) - (y << 3) + ((x ^ y) & 0x0000ffff0000ffff), viewed as int64. Exact.
// Launch: 1-D, any block size; threads at i >= n do nothing.
kernel void ew_i64(global const long *a, global const long *b, global long *out, int n) {
  int i = get_global_id(0);
  if (i < n) {
    ulong x = (ulong)a[i], y = (ulong)b[i];
    out[i] = (long)(x * y + (ulong)(a[i] >> 7) - (y << 3) + ((x ^ y) & 0x0000ffff0000ffffUL));
  }
}
