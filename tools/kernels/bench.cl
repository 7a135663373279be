// Kernels of tools/bench.py (the tiled matmul is tests/kernels/run/matmul_tiled.cl). Launch: 1-D, block 256.
#pragma OPENCL FP_CONTRACT OFF

// add_f32: c[i] = a[i] + b[i] for i < n. numpy: a + b (float32), bit-exact.
kernel void add_f32(global const float *a, global const float *b, global float *c, int n) {
  int i = get_global_id(0);
  if (i < n) c[i] = a[i] + b[i];
}

// sum_f32: partial[g] = sum of in[g * 256 + l] over l < 256 (items at i >= n add 0), a tree in LDS with barriers.
// Applied again to the partials until one value is left. With integer-valued inputs whose total stays below
// 2^24 every partial sum is exact, so the result equals numpy's sum in any order.
kernel void sum_f32(global const float *in, global float *partial, int n) {
  __local float s[256];
  uint l = get_local_id(0), i = get_global_id(0);
  s[l] = i < (uint)n ? in[i] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint stride = 128; stride > 0; stride >>= 1) {
    if (l < stride) s[l] += s[l + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) partial[get_group_id(0)] = s[0];
}

// fma_chain: out[i] = x after FMA_ITERS steps of x = fma(x, a[i], b[i]) from x = b[i]: one long dependent chain
// per work-item. With |a| < 1 the values converge (stay finite). numpy: the same steps in float64, rounded to
// float32 after each: exact when a has few significant bits (a * x and the sum then fit float64 without rounding).
#define FMA_ITERS 1000
kernel void fma_chain(global const float *a, global const float *b, global float *out) {
  int i = get_global_id(0);
  float x = b[i], m = a[i], c = b[i];
  for (int k = 0; k < FMA_ITERS; k++) x = fma(x, m, c);
  out[i] = x;
}
