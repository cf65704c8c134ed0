/* Run P2's torch-free probe: the exported seed-row champion through the C ABI
 * (include/evo.h), timed by FAST's graph method in a process that holds no PyTorch, with
 * the graph built and replayed three ways:
 *
 *   plain    captured once (relaxed mode), instantiated, uploaded, replayed as is
 *            (what export_check.py does through torch.cuda.graph)
 *   repoint  the same executable graph, every kernel node re-pointed before each replay
 *            by cuGraphExecKernelNodeSetParams to the launches of another capture whose
 *            sets are paired by a fresh permutation (what FAST does, crates/gates/src/
 *            device/launch.rs `LaunchGraph::repoint`)
 *   same     re-pointed each replay to its own launches (the update, no new pointers)
 *
 * Each replay: every set's O written over (poison), L2 written over by cuMemsetD8Async of
 * twice its size, start event, replay of one call per set, end event; the figure is the
 * median of 20 replays' µs per call after 25 ms of warm-up. Modes are interleaved round by
 * round, the order rotated each round.
 *
 *   cc probe5.c -O2 -I EXPORT/include -I $CUDA_HOME/include -L EXPORT/lib -levo_runtime \
 *      -L $CUDA_HOME/lib64/stubs -lcuda -lm -Wl,-rpath,EXPORT/lib -o probe5
 *   ./probe5 EXPORT causal(0|1) rounds [instantiate flags, default 0] [refresh 0|1] [layout]
 *
 * layout (run P5) says how Q, K, V, O and the flush buffer are allocated:
 *   0  cuMemAlloc each (the default)
 *   1  the same after a kept 1 MiB cuMemAlloc
 *   2  the same after 200 MiB were allocated and freed
 *   3  each from its own cuMemCreate'd handle mapped at a reserved range aligned to the
 *      allocation granularity (the driver's recommended, 2 MiB on H100)
 *   4  as 3, each buffer starting 1 MiB into its range
 * Run P6 adds two more arguments after layout: reinit (evo_init called that many more
 * times, each followed by one call, before the timed one: the champion's module loaded
 * again) and busy (seconds of back-to-back replays before the timing: a warm GPU).
 *
 * With refresh 1 every replay first writes the sets' Q, K and V again (a device copy from
 * a pristine copy), as FAST's draw and export_check.py's redraw do. Built with
 * -DPROBE5_LIBRARY -shared -fPIC it is a library whose probe5_main(argc, argv) runs the
 * same from another process (run P4 calls it from Python before and after PyTorch).
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evo.h"

#define CU(call)                                                 \
  do {                                                           \
    CUresult r_ = (call);                                        \
    if (r_ != CUDA_SUCCESS) {                                    \
      const char* s_ = "";                                       \
      cuGetErrorString(r_, &s_);                                 \
      fprintf(stderr, "%s failed: %s\n", #call, s_);            \
      exit(2);                                                   \
    }                                                            \
  } while (0)

enum { B = 1, H = 8, L = 512, D = 64, SETS = 50, PERMS = 4, MODES = 3, REPEATS = 20 };
static const char* MODE_NAMES[MODES] = {"plain", "repoint", "same"};

static CUstream stream;
static CUdeviceptr q, k, v, o, flush_buf, pristine;
static size_t qe = (size_t)B * H * L * D, flush_bytes;
static int causal;

static uint64_t state = 2026;
static uint32_t next_u32(void) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(state >> 33);
}

/* f16 bits of a value in about [-2, 2]: a centred sum of four uniforms, as FAST draws. */
static uint16_t draw_half(void) {
  int s = 0;
  for (int i = 0; i < 4; i++) s += (int)(next_u32() & 0xffff);
  float f = (float)(2 * s - 4 * 65535) / (2.0f * 37837.2f);
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t e = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
  if (e <= 0) return (uint16_t)sign;
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((x & 0x7fffffu) >> 13));
}

static void shuffle(int* p, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(next_u32() % (uint32_t)(i + 1)), t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

/* Captures one call per set, set i = (Q[pq[i]], K[pk[i]], V[pv[i]], O[po[i]]). */
static CUgraph capture(int perm[4][SETS]) {
  CUgraph g;
  CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  for (int i = 0; i < SETS; i++) {
    int rc = evo_attention_forward((void*)(q + perm[0][i] * qe * 2), (void*)(k + perm[1][i] * qe * 2),
                                   (void*)(v + perm[2][i] * qe * 2), (void*)(o + perm[3][i] * qe * 2),
                                   B, H, L, L, D, EVO_DTYPE_F16, causal, stream);
    if (rc != EVO_OK) {
      fprintf(stderr, "evo_attention_forward: %s\n", evo_last_error());
      exit(2);
    }
  }
  CU(cuStreamEndCapture(stream, &g));
  return g;
}

/* The graph's kernel nodes (any order: every node of a capture launches the same
 * function with the same configuration, so re-pointing node i of one capture to node i of
 * another is a bijection between their launches). */
static void kernel_nodes(CUgraph g, CUgraphNode* nodes) {
  CUgraphNode all[4 * SETS];
  size_t n = 4 * SETS;
  CU(cuGraphGetNodes(g, all, &n));
  int found = 0;
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType t;
    CU(cuGraphNodeGetType(all[i], &t));
    if (t == CU_GRAPH_NODE_TYPE_KERNEL && found < SETS) nodes[found++] = all[i];
  }
  if (found != SETS || n != SETS) {
    fprintf(stderr, "the capture holds %zu nodes, %d of them kernels; expected %d kernels only\n", n,
            found, SETS);
    exit(2);
  }
}

/* A buffer of `bytes` as `layout` says (see the header). */
static CUdeviceptr alloc_buf(size_t bytes, int layout) {
  CUdeviceptr p;
  if (layout < 3) {
    CU(cuMemAlloc(&p, bytes));
    return p;
  }
  size_t offset = layout == 4 ? (1u << 20) : 0, gran = 0;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  size_t size = (bytes + offset + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CU(cuMemCreate(&h, size, &prop, 0));
  CU(cuMemAddressReserve(&p, size, gran, 0, 0));
  CU(cuMemMap(p, size, 0, h, 0));
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(p, size, &access, 1));
  return p + offset;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

#ifdef PROBE5_LIBRARY
int probe5_main(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  if (argc < 4) {
    fprintf(stderr, "usage: %s EXPORT causal rounds\n", argv[0]);
    return 2;
  }
  causal = atoi(argv[2]);
  int rounds = atoi(argv[3]);
  CUdevice dev;
  CUcontext ctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  int l2 = 0;
  CU(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  flush_bytes = 2 * (size_t)l2;

  size_t bytes = SETS * qe * 2;
  uint16_t* host = malloc(bytes);
  int layout = argc > 6 ? atoi(argv[6]) : 0;
  CUdeviceptr spacer = 0;
  if (layout == 1) CU(cuMemAlloc(&spacer, 1u << 20));
  if (layout == 2) {
    CU(cuMemAlloc(&spacer, 200u << 20));
    CU(cuMemFree(spacer));
    spacer = 0;
  }
  q = alloc_buf(bytes, layout);
  k = alloc_buf(bytes, layout);
  v = alloc_buf(bytes, layout);
  o = alloc_buf(bytes, layout);
  flush_buf = alloc_buf(flush_bytes, layout);
  CUdeviceptr ins[3] = {q, k, v};
  int refresh = argc > 5 ? atoi(argv[5]) : 0;
  if (refresh) CU(cuMemAlloc(&pristine, 3 * bytes));
  for (int t = 0; t < 3; t++) {
    for (size_t i = 0; i < SETS * qe; i++) host[i] = draw_half();
    CU(cuMemcpyHtoD(ins[t], host, bytes));
    if (refresh) CU(cuMemcpyHtoD(pristine + t * bytes, host, bytes));
  }
  free(host);
  int reinit = argc > 7 ? atoi(argv[7]) : 0;
  double busy_s = argc > 8 ? atof(argv[8]) : 0;
  for (int i = 0; i <= reinit; i++) {
    if (evo_init(argv[1]) != EVO_OK) {
      fprintf(stderr, "evo_init: %s\n", evo_last_error());
      return 2;
    }
    if (evo_attention_forward((void*)q, (void*)k, (void*)v, (void*)o, B, H, L, L, D, EVO_DTYPE_F16, causal,
                              stream) != EVO_OK) {
      fprintf(stderr, "evo_attention_forward: %s\n", evo_last_error());
      return 2;
    }
    CU(cuStreamSynchronize(stream));
  }

  /* PERMS captures: the first with set i = slot i, the others paired at random. */
  int perm[PERMS][4][SETS];
  CUgraph graphs[PERMS];
  CUgraphNode nodes[PERMS][SETS];
  for (int p = 0; p < PERMS; p++) {
    for (int t = 0; t < 4; t++) {
      for (int i = 0; i < SETS; i++) perm[p][t][i] = i;
      if (p > 0) shuffle(perm[p][t], SETS);
    }
    for (int i = 0; i < SETS; i++) /* warm each launch eagerly first */
      if (evo_attention_forward((void*)(q + perm[p][0][i] * qe * 2), (void*)(k + perm[p][1][i] * qe * 2),
                                (void*)(v + perm[p][2][i] * qe * 2), (void*)(o + perm[p][3][i] * qe * 2),
                                B, H, L, L, D, EVO_DTYPE_F16, causal, stream) != EVO_OK) {
        fprintf(stderr, "evo_attention_forward: %s\n", evo_last_error());
        return 2;
      }
    CU(cuStreamSynchronize(stream));
    graphs[p] = capture(perm[p]);
    kernel_nodes(graphs[p], nodes[p]);
  }
  CUgraphExec exec;
  unsigned long long flags = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
  CU(cuGraphInstantiate(&exec, graphs[0], flags));
  CU(cuGraphUpload(exec, stream));
  CUevent start, end;
  CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&end, CU_EVENT_DEFAULT));

  for (double busy_ms = 0; busy_ms < busy_s * 1e3;) {
    float ms;
    CU(cuEventRecord(start, stream));
    for (int i = 0; i < 10; i++) CU(cuGraphLaunch(exec, stream));
    CU(cuEventRecord(end, stream));
    CU(cuEventSynchronize(end));
    CU(cuEventElapsedTime(&ms, start, end));
    busy_ms += ms;
  }
  int turn = 0;
  double med[MODES][64];
  for (int r = 0; r < rounds && r < 64; r++) {
    for (int j = 0; j < MODES; j++) {
      int mode = (j + r) % MODES;
      double per_call[REPEATS], spent = 0;
      for (int rep = -1; rep < REPEATS; rep++) {
        do {
          int from = mode == 1 ? 1 + (turn++ % (PERMS - 1)) : 0;
          if (mode != 0)
            for (int i = 0; i < SETS; i++) {
              CUDA_KERNEL_NODE_PARAMS kp;
              CU(cuGraphKernelNodeGetParams(nodes[from][i], &kp));
              CU(cuGraphExecKernelNodeSetParams(exec, nodes[0][i], &kp));
            }
          if (refresh)
            for (int t = 0; t < 3; t++) CU(cuMemcpyDtoDAsync(ins[t], pristine + t * bytes, bytes, stream));
          CU(cuMemsetD8Async(o, 0x5a, bytes, stream));
          CU(cuMemsetD8Async(flush_buf, 0, flush_bytes, stream));
          CU(cuEventRecord(start, stream));
          CU(cuGraphLaunch(exec, stream));
          CU(cuEventRecord(end, stream));
          CU(cuEventSynchronize(end));
          float ms;
          CU(cuEventElapsedTime(&ms, start, end));
          if (rep >= 0) per_call[rep] = ms * 1e3 / SETS;
          spent += ms;
        } while (rep < 0 && spent < 25.0);
      }
      qsort(per_call, REPEATS, sizeof(double), cmp);
      med[mode][r] = (per_call[REPEATS / 2 - 1] + per_call[REPEATS / 2]) / 2;
    }
    printf("round %d causal=%d  plain %.3f  repoint %.3f  same %.3f\n", r, causal, med[0][r],
           med[1][r], med[2][r]);
    fflush(stdout);
  }
  printf("P2 C-ABI summary causal=%d flags=%llu refresh=%d layout=%d reinit=%d busy=%gs (median over %d rounds of each round's median µs per call):",
         causal, flags, refresh, layout, reinit, busy_s, rounds);
  for (int m = 0; m < MODES; m++) {
    qsort(med[m], rounds, sizeof(double), cmp);
    printf("  %s %.3f [%.3f, %.3f]", MODE_NAMES[m], med[m][rounds / 2], med[m][0], med[m][rounds - 1]);
  }
  printf("\n");
  fflush(stdout);
  /* Everything back, so that a library caller can run it again in the same process. */
  CU(cuStreamSynchronize(stream));
  CU(cuGraphExecDestroy(exec));
  for (int p = 0; p < PERMS; p++) CU(cuGraphDestroy(graphs[p]));
  CU(cuEventDestroy(start));
  CU(cuEventDestroy(end));
  if (layout < 3) { /* the mapped ones stay mapped: a probe, not a library */
    CU(cuMemFree(q));
    CU(cuMemFree(k));
    CU(cuMemFree(v));
    CU(cuMemFree(o));
    CU(cuMemFree(flush_buf));
  }
  if (spacer) CU(cuMemFree(spacer));
  if (refresh) CU(cuMemFree(pristine));
  CU(cuStreamDestroy(stream));
  CU(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
