// half2_math: packed f16 math on half2 (two halves per 32-bit register: v_pk_* instructions).
// For i < n, with x = a[i], y = b[i], z = c[i] (half2; .x is the element at the lower address):
//   out[2i] = x * y + z                 out[2i + 1] = (x - y.yx) * z.xx    (.yx swaps the halves, .xx broadcasts .x)
// Each operation rounded to float16 (FP_CONTRACT OFF): bit-exact against numpy float16 on (n, 2) arrays:
//   x * y + z and (x - y[:, ::-1]) * z[:, :1].
// Launch: 1-D, any block size; threads at i >= n do nothing.
#pragma OPENCL FP_CONTRACT OFF
kernel void half2_math(global const half2 *a, global const half2 *b, global const half2 *c, global half2 *out,
                       int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  half2 x = a[i], y = b[i], z = c[i];
  out[2 * i] = x * y + z;
  out[2 * i + 1] = (x - y.yx) * z.xx;
}
