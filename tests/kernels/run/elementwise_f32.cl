// ew_f32: out[i] = (a[i] + b[i]) * (a[i] - b[i]) - min(a[i], b[i]) / 4, for i < n.
// Every operation is rounded to float32 (FP_CONTRACT OFF: no fused multiply-add), so with finite inputs the
// result is bit-exact against numpy float32: ((a + b) * (a - b)) - np.fmin(a, b) * np.float32(0.25).
// Launch: 1-D, any block size; threads at i >= n do nothing.
#pragma OPENCL FP_CONTRACT OFF
kernel void ew_f32(global const float *a, global const float *b, global float *out, int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = (a[i] + b[i]) * (a[i] - b[i]) - fmin(a[i], b[i]) * 0.25f;
}
