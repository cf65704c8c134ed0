/* Runs one champion of an export through the C ABI (include/evo.h) on GPU 0 and checks
 * it against a double-precision reference on the host, under GREEN's f16 tolerances.
 * Also checks that bad calls are error codes with messages, not crashes.
 *
 *   cc run_champion.c -I OUT/include -I $CUDA_HOME/include -L OUT/lib -levo_runtime \
 *      -lcuda -lm -Wl,-rpath,OUT/lib -o run_champion
 *   ./run_champion OUT [B H Lq Lk D causal]      (default: 1 8 512 512 64 0)
 *
 * Prints one line per check; exit status 0 when all pass.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evo.h"

#define CU(call)                                                          \
  do {                                                                    \
    CUresult r_ = (call);                                                 \
    if (r_ != CUDA_SUCCESS) {                                             \
      const char* s_ = "";                                                \
      cuGetErrorString(r_, &s_);                                          \
      fprintf(stderr, "%s failed: %s\n", #call, s_);                     \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

/* IEEE half from float, round to nearest even (inputs here are normal and small). */
static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
  uint32_t man = x & 0x7fffffu;
  if (exp <= 0) return (uint16_t)sign; /* flush the tiny ones: never drawn here */
  uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)h;
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    float f = ldexpf((float)man, -24);
    return sign ? -f : f;
  }
  if (exp == 31) x = sign | 0x7f800000u | (man << 13);
  else x = sign | ((exp - 15 + 127) << 23) | (man << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* Standard normal-ish values from a fixed LCG: the same inputs on every machine. */
static uint64_t state = 2026;
static float draw(void) {
  float s = 0;
  for (int i = 0; i < 4; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    s += (float)((state >> 40) & 0xffffffu) / 16777216.0f - 0.5f;
  }
  return s * 1.7320508f; /* variance 1 */
}

static int failures = 0;
static void check(int ok, const char* what) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  failures += !ok;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s EXPORT_DIR [B H Lq Lk D causal]\n", argv[0]);
    return 2;
  }
  int B = 1, H = 8, Lq = 512, Lk = 512, D = 64, causal = 0;
  if (argc >= 8) {
    B = atoi(argv[2]); H = atoi(argv[3]); Lq = atoi(argv[4]); Lk = atoi(argv[5]);
    D = atoi(argv[6]); causal = atoi(argv[7]);
  }
  printf("evo runtime %s; B%d H%d Lq%d Lk%d D%d f16%s\n", evo_version(), B, H, Lq, Lk, D,
         causal ? " causal" : "");
  CUdevice dev;
  CUcontext ctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUstream stream;
  CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  size_t nq = (size_t)B * H * Lq * D, nkv = (size_t)B * H * Lk * D;
  uint16_t *hq = malloc(nq * 2), *hk = malloc(nkv * 2), *hv = malloc(nkv * 2), *ho = malloc(nq * 2);
  for (size_t i = 0; i < nq; i++) hq[i] = to_half(draw());
  for (size_t i = 0; i < nkv; i++) hk[i] = to_half(draw());
  for (size_t i = 0; i < nkv; i++) hv[i] = to_half(draw());
  CUdeviceptr q, k, v, o;
  CU(cuMemAlloc(&q, nq * 2));
  CU(cuMemAlloc(&k, nkv * 2));
  CU(cuMemAlloc(&v, nkv * 2));
  CU(cuMemAlloc(&o, nq * 2));
  CU(cuMemcpyHtoD(q, hq, nq * 2));
  CU(cuMemcpyHtoD(k, hk, nkv * 2));
  CU(cuMemcpyHtoD(v, hv, nkv * 2));

  int rc = evo_init(argv[1]);
  check(rc == EVO_OK, "evo_init reads the export");
  if (rc != EVO_OK) {
    fprintf(stderr, "  %s\n", evo_last_error());
    return 1;
  }
  rc = evo_attention_forward((void*)q, (void*)k, (void*)v, (void*)o, B, H, Lq, Lk, D,
                             EVO_DTYPE_F16, causal, stream);
  if (rc != EVO_OK) fprintf(stderr, "  %s\n", evo_last_error());
  check(rc == EVO_OK, "evo_attention_forward runs the champion");
  CU(cuStreamSynchronize(stream));
  CU(cuMemcpyDtoH(ho, o, nq * 2));

  /* The reference, every row, in double. */
  double num = 0, den = 0, max_abs = 0;
  double* s = malloc((size_t)Lk * sizeof(double));
  double scale = 1.0 / sqrt((double)D);
  for (size_t bh = 0; bh < (size_t)B * H; bh++) {
    for (int i = 0; i < Lq; i++) {
      const uint16_t* qi = hq + (bh * Lq + i) * D;
      int keys = causal ? (i + 1 < Lk ? i + 1 : Lk) : Lk;
      double m = -INFINITY, l = 0;
      for (int j = 0; j < keys; j++) {
        const uint16_t* kj = hk + (bh * Lk + j) * D;
        double dot = 0;
        for (int c = 0; c < D; c++) dot += (double)from_half(qi[c]) * from_half(kj[c]);
        s[j] = dot * scale;
        if (s[j] > m) m = s[j];
      }
      for (int j = 0; j < keys; j++) l += (s[j] = exp(s[j] - m));
      for (int c = 0; c < D; c++) {
        double ref = 0;
        for (int j = 0; j < keys; j++) ref += s[j] * from_half(hv[(bh * Lk + j) * D + c]);
        ref /= l;
        double got = from_half(ho[(bh * Lq + i) * D + c]);
        double e = fabs(got - ref);
        if (!(e <= max_abs)) max_abs = isnan(e) ? INFINITY : (e > max_abs ? e : max_abs);
        num += (got - ref) * (got - ref);
        den += ref * ref;
      }
    }
  }
  double rel_frob = sqrt(num / den);
  printf("rel_frob %.3e (GREEN f16: 1.5e-3), max_abs %.3e (1e-2)\n", rel_frob, max_abs);
  check(rel_frob <= 1.5e-3 && max_abs <= 1e-2, "the output is within GREEN's f16 tolerances");

  rc = evo_attention_forward(hq, (void*)k, (void*)v, (void*)o, B, H, Lq, Lk, D, EVO_DTYPE_F16,
                             causal, stream);
  printf("  host q: %s\n", evo_last_error());
  check(rc == EVO_ERROR_INVALID_ARGUMENT, "a host pointer is EVO_ERROR_INVALID_ARGUMENT");
  rc = evo_attention_forward((void*)q, (void*)k, (void*)v, (void*)o, B, H, Lq * 16, Lk, D,
                             EVO_DTYPE_F16, causal, stream);
  printf("  16x Lq on the same buffers: %s\n", evo_last_error());
  check(rc == EVO_ERROR_INVALID_ARGUMENT, "buffers too small for the shape are refused");
  rc = evo_attention_forward((void*)q, (void*)k, (void*)v, (void*)o, B, H, Lq, Lk, 80,
                             EVO_DTYPE_F16, causal, stream);
  printf("  D=80: %s\n", evo_last_error());
  check(rc == EVO_ERROR_UNSUPPORTED, "an uncovered head dim is EVO_ERROR_UNSUPPORTED");
  rc = evo_attention_forward((void*)q, (void*)k, (void*)v, (void*)o, B, H, Lq, Lk, D, 7,
                             causal, stream);
  check(rc == EVO_ERROR_INVALID_ARGUMENT && strstr(evo_last_error(), "dtype"),
        "an unknown dtype code is EVO_ERROR_INVALID_ARGUMENT");
  CU(cuCtxSynchronize());
  printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
