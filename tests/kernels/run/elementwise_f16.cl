// ew_f16: out[i] = (a[i] * b[i]) + (a[i] - b[i]) * 0.5, for i < n, in half precision.
// Every operation is rounded to float16 (FP_CONTRACT OFF), so with finite inputs the result is bit-exact against
// numpy float16 arithmetic: (a * b) + (a - b) * np.float16(0.5)  (numpy rounds each f16 op correctly).
// Launch: 1-D, any block size; threads at i >= n do nothing.
#pragma OPENCL FP_CONTRACT OFF
kernel void ew_f16(global const half *a, global const half *b, global half *out, int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = (a[i] * b[i]) + (a[i] - b[i]) * (half)0.5f;
}
