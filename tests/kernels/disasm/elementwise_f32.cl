__kernel void saxpy(__global float *y, __global const float *x, float a, int n) {
  int i = get_global_id(0);
  if (i < n) y[i] = fma(a, x[i], y[i]) + sqrt(fabs(x[i])) - floor(y[i] * 0.5f) + fmin(x[i], 3.0f);
}
