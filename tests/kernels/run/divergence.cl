// Divergent control flow: early return, nested ifs, loops with early exit, per-lane trip counts.
// divergent: for i < n, x = in[i] (|x| < 2**20), r = 0:
//   if x & 1:      r = x * 3 if x & 2 else -x
//   elif x & 4:    for k in range(x & 15): r += k * x; break out of the loop once r > 1000
//   else:          k = 0; while k < 64: (break if ((x >> (k & 7)) & 8) == 0 and k > (x & 7)); r ^= k << (k & 3); k += 1
//                  then r += k
//   out[i] = r (int32). Exact (a Python loop over the elements is the reference).
// collatz: for i < n, x = in[i] (uint32), s = 0: while x not in (0, 1): x = 3x + 1 (mod 2**32) if x odd else x >> 1;
//   s += 1; stop when s == 500. steps[i] = s. Exact.
// Launch: 1-D, any block size; threads at i >= n return at once.
kernel void divergent(global const int *in, global int *out, int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  int x = in[i], r = 0;
  if (x & 1) {
    if (x & 2) r = x * 3;
    else r = -x;
  } else if (x & 4) {
    for (int k = 0; k < (x & 15); k++) {
      r += k * x;
      if (r > 1000) break;
    }
  } else {
    int k = 0;
    while (k < 64) {
      if (((x >> (k & 7)) & 8) == 0 && k > (x & 7)) break;
      r ^= k << (k & 3);
      k++;
    }
    r += k;
  }
  out[i] = r;
}

kernel void collatz(global const uint *in, global uint *steps, int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  uint x = in[i], s = 0;
  while (x != 1u && x != 0u) {
    x = (x & 1u) ? 3u * x + 1u : x >> 1;
    if (++s == 500u) break;
  }
  steps[i] = s;
}
