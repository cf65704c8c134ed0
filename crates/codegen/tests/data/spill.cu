extern "C" __global__ void spill_kernel(float* out, const float* in, int n) {
  float acc[64];
  #pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = in[threadIdx.x + i * n];
  for (int k = 0; k < n; ++k) {
    #pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = acc[i] * acc[(i + k) & 63] + 1.0f;
  }
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < 64; ++i) s += acc[i];
  out[threadIdx.x] = s;
}
__device__ __noinline__ float helper(float x) { return x * 2.0f; }
extern "C" __global__ void tiny(float* out) {
  __shared__ float buf[256];
  buf[threadIdx.x] = helper(out[threadIdx.x]);
  __syncthreads();
  out[threadIdx.x] = buf[255 - threadIdx.x];
}
