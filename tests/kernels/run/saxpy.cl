// saxpy: y[i] = alpha * x[i] + y[i] for i < n; elements at i >= n are not touched (bound check).
// The multiply and the add are rounded separately (FP_CONTRACT OFF): bit-exact against numpy float32
// alpha * x + y. Launch: 1-D, any block size, typically a grid covering more than n threads.
#pragma OPENCL FP_CONTRACT OFF
kernel void saxpy(global float *y, global const float *x, float alpha, int n) {
  int i = get_global_id(0);
  if (i < n) y[i] = alpha * x[i] + y[i];
}
