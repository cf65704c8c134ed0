/* Run P7's probe: P4-P6 found probe5.c 5% slower on every run after the first within one
 * process, whatever the allocation layout, module reloads, warm-up or idle time. This
 * program times the exported seed-row champion (non-causal, FAST's graph method, plain
 * replays: poison O, flush L2, events around one call per set) ITERS times in one
 * process; before each iteration after the first it makes again only what RECREATE
 * names: s = the stream, b = the buffers (Q, K, V, O, flush), g = the graph, e = the
 * events, c = the context (all of it: reset the primary context, reload the export), or
 * "-" for nothing.
 *
 *   cc probe10.c -O2 -I EXPORT/include -I $CUDA_HOME/include -L EXPORT/lib -levo_runtime \
 *      -L $CUDA_HOME/lib64/stubs -lcuda -Wl,-rpath,EXPORT/lib -o probe10
 *   ./probe10 EXPORT RECREATE ITERS
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evo.h"

#define CU(call)                                              \
  do {                                                        \
    CUresult r_ = (call);                                     \
    if (r_ != CUDA_SUCCESS) {                                 \
      const char* s_ = "";                                    \
      cuGetErrorString(r_, &s_);                              \
      fprintf(stderr, "%s failed: %s\n", #call, s_);         \
      exit(2);                                                \
    }                                                         \
  } while (0)

enum { B = 1, H = 8, L = 512, D = 64, SETS = 50, REPEATS = 20 };
static const size_t QE = (size_t)B * H * L * D;
static CUdevice dev;
static CUcontext ctx;
static CUstream stream;
static CUdeviceptr q, k, v, o, flush_buf;
static size_t flush_bytes;
static CUgraph graph;
static CUgraphExec exec;
static CUevent start, end;
static const char* export_dir;

static uint64_t state = 2026;
static uint16_t draw_half(void) {
  int s = 0;
  for (int i = 0; i < 4; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    s += (int)((state >> 33) & 0xffff);
  }
  float f = (float)(2 * s - 4 * 65535) / (2.0f * 37837.2f);
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t e = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
  if (e <= 0) return (uint16_t)sign;
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((x & 0x7fffffu) >> 13));
}

static void make_context(void) {
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  if (evo_init(export_dir) != EVO_OK) {
    fprintf(stderr, "evo_init: %s\n", evo_last_error());
    exit(2);
  }
}

static void make_buffers(void) {
  size_t bytes = SETS * QE * 2;
  uint16_t* host = malloc(bytes);
  CU(cuMemAlloc(&q, bytes));
  CU(cuMemAlloc(&k, bytes));
  CU(cuMemAlloc(&v, bytes));
  CU(cuMemAlloc(&o, bytes));
  CU(cuMemAlloc(&flush_buf, flush_bytes));
  CUdeviceptr ins[3] = {q, k, v};
  for (int t = 0; t < 3; t++) {
    for (size_t i = 0; i < SETS * QE; i++) host[i] = draw_half();
    CU(cuMemcpyHtoD(ins[t], host, bytes));
  }
  free(host);
}

static void free_buffers(void) {
  CU(cuMemFree(q));
  CU(cuMemFree(k));
  CU(cuMemFree(v));
  CU(cuMemFree(o));
  CU(cuMemFree(flush_buf));
}

static void call(int i) {
  size_t off = (size_t)i * QE * 2;
  if (evo_attention_forward((void*)(q + off), (void*)(k + off), (void*)(v + off), (void*)(o + off), B, H,
                            L, L, D, EVO_DTYPE_F16, 0, stream) != EVO_OK) {
    fprintf(stderr, "evo_attention_forward: %s\n", evo_last_error());
    exit(2);
  }
}

static void make_graph(void) {
  for (int i = 0; i < SETS; i++) call(i);
  CU(cuStreamSynchronize(stream));
  CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  for (int i = 0; i < SETS; i++) call(i);
  CU(cuStreamEndCapture(stream, &graph));
  CU(cuGraphInstantiate(&exec, graph, 0));
  CU(cuGraphUpload(exec, stream));
}

static void free_graph(void) {
  CU(cuGraphExecDestroy(exec));
  CU(cuGraphDestroy(graph));
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double measure(void) {
  double per_call[REPEATS], spent = 0;
  for (int rep = -1; rep < REPEATS; rep++) {
    do {
      float ms;
      CU(cuMemsetD8Async(o, 0x5a, SETS * QE * 2, stream));
      CU(cuMemsetD8Async(flush_buf, 0, flush_bytes, stream));
      CU(cuEventRecord(start, stream));
      CU(cuGraphLaunch(exec, stream));
      CU(cuEventRecord(end, stream));
      CU(cuEventSynchronize(end));
      CU(cuEventElapsedTime(&ms, start, end));
      if (rep >= 0) per_call[rep] = ms * 1e3 / SETS;
      spent += ms;
    } while (rep < 0 && spent < 25.0);
  }
  qsort(per_call, REPEATS, sizeof(double), cmp);
  return (per_call[REPEATS / 2 - 1] + per_call[REPEATS / 2]) / 2;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s EXPORT RECREATE ITERS\n", argv[0]);
    return 2;
  }
  export_dir = argv[1];
  const char* what = argv[2];
  int iters = atoi(argv[3]);
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  int l2 = 0;
  CU(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  flush_bytes = 2 * (size_t)l2;
  make_context();
  CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  make_buffers();
  CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&end, CU_EVENT_DEFAULT));
  make_graph();
  printf("recreate %-4s", what);
  for (int it = 0; it < iters; it++) {
    if (it > 0 && strchr(what, 'c')) {
      free_graph();
      CU(cuDevicePrimaryCtxReset(dev)); /* everything in it goes */
      make_context();
      CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
      make_buffers();
      CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
      CU(cuEventCreate(&end, CU_EVENT_DEFAULT));
      make_graph();
    } else if (it > 0) {
      int s = strchr(what, 's') != NULL, b = strchr(what, 'b') != NULL;
      int g = s || b || strchr(what, 'g') != NULL;
      if (g) free_graph();
      if (b) free_buffers();
      if (s) {
        CU(cuStreamDestroy(stream));
        CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
      }
      if (b) make_buffers();
      if (strchr(what, 'e')) {
        CU(cuEventDestroy(start));
        CU(cuEventDestroy(end));
        CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
        CU(cuEventCreate(&end, CU_EVENT_DEFAULT));
      }
      if (g) make_graph();
    }
    printf("  %.3f", measure());
    fflush(stdout);
  }
  printf("   (µs per call, iteration by iteration)\n");
  return 0;
}
