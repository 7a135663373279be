__kernel void hmix(__global half *out, __global const half *a, __global const half *b) {
  int i = get_global_id(0);
  half x = a[i], y = b[i];
  out[i] = fma(x, y, (half)1.5h) * (x > y ? x : y) + fmax(x, (half)0.25h) - trunc(y);
}
