__kernel void dmath(__global double *out, __global const double *a, __global const float *b) {
  int i = get_global_id(0);
  double x = a[i], y = (double)b[i];
  double r = fma(x, y, 2.5) / (y + 1.0) + sqrt(fabs(x)) + rint(x * 3.0) + ceil(y) + copysign(x, y);
  out[i] = r > 1e10 ? fmin(r, x) : fmax(r, y);
  out[i + 1] = (double)(long)x + (float)x;
}
