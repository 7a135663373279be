// divmod64: 64-bit integer multiply, divide and remainder (AMDGPU has no 64-bit divide instruction: the compiler
// expands them into long instruction sequences). For i < n, x = a[i], y = b[i] (int64), ux, uy = x, y as uint64:
//   out[6i + 0] = x / y      (C: truncates toward zero)       out[6i + 1] = x % y   (sign of x)
//   out[6i + 2] = ux / uy    (unsigned)                       out[6i + 3] = ux % uy
//   out[6i + 4] = ux * uy    (low 64 bits, as int64)          out[6i + 5] = (uint)x / ((uint)y | 1)  (32-bit)
// Requires y != 0 and not (x == INT64_MIN and y == -1). Exact (Python ints are the easy reference).
// Launch: 1-D, any block size; threads at i >= n do nothing.
kernel void divmod64(global const long *a, global const long *b, global long *out, int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  long x = a[i], y = b[i];
  ulong ux = (ulong)x, uy = (ulong)y;
  global long *o = out + 6 * i;
  o[0] = x / y;
  o[1] = x % y;
  o[2] = (long)(ux / uy);
  o[3] = (long)(ux % uy);
  o[4] = (long)(ux * uy);
  o[5] = (long)((uint)ux / ((uint)uy | 1u));
}
