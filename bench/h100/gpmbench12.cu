// Real-GPU anchors, twelfth set: where rewrites of a small host region merge, and the
// queue in front of a fence beside fewer SMs streaming to device memory.
//   rewrite: gpmbench10's depth (the block on the last SM waits 400,000 cycles, then times
//            16 system fences, no store of its own, beside S blocks of 8 warps), each
//            streaming SM rewriting a region of its own of F bytes of pinned host memory
//            with 16-byte stores, over S = 1..131 and F = 512 B..32 KB: does one SM alone
//            merge, and does the merging follow F, S or S x F? stream_gbps: the bytes the
//            streams stored over their own time (first store to stop).
//   ddepth:  one block fencing (system fence, no store) beside S blocks of W warps
//            streaming 16-byte stores to device memory, 4 GB in all, wrapping in 512 MB
//            (so the L2 is full of dirty lines, as after gpmbench3's earlier repetitions):
//            gpmbench3's `depth device` at S = 8, 32 and 66 as well as 131.
//   rewrite2 (./g12 more): rewrite at regions of 16 to 48 lines an SM, and at 1 to 32 warps.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench12.cu -o g12 && ./g12 > measured12.csv &&
// ./g12 more > measured12-more.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// One block per SM. The block on SM fsm times the fences; blocks on SMs [0, S) rewrite
// their own region of elems 16-byte elements until it raises stop.
__global__ void k_rewrite(unsigned S, unsigned fsm, int fences, size_t elems, volatile unsigned *stop, uint4 *sp,
                          unsigned long long *fcyc, unsigned long long *bytes, unsigned long long *span,
                          unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s == fsm) {
    if (threadIdx.x != 0) return;
    unsigned long long w = clock64();
    while (clock64() - w < 400000ULL) {}
    unsigned long long c0 = clock64();
    __threadfence_system();
    unsigned long long c1 = clock64();
    for (int i = 1; i < fences; i++) __threadfence_system();
    unsigned long long c2 = clock64();
    fcyc[0] = c1 - c0;
    fcyc[1] = c2 - c1;
    *stop = 1;
    __threadfence();
    return;
  }
  if (s >= S) return;
  uint4 *base = sp + (size_t)s * elems;
  uint4 v = make_uint4(s, 2, 3, 4);
  unsigned long long n = 0, start = clock64(), end = start;
  size_t i = threadIdx.x % elems, step = blockDim.x % elems;  // under 4 KB a thread rewrites one element
  for (unsigned long long k = 0;; k++) {
    if ((k & 63) == 0) {
      end = clock64();
      if (*stop || end - start > 40000000ULL) break;
    }
    base[i] = v;
    i += step;
    if (i >= elems) i -= elems;
    n++;
  }
  atomicAdd(bytes, n * 16);
  if (threadIdx.x == 0) atomicMax(span, end - start);
}

// Block 0 fences until every streaming block is done; blocks 1..S stream siters
// 16-byte stores a thread, grid-stride, wrapping in mask+1 elements.
__global__ void k_ddepth(volatile unsigned *done, uint4 *sp, size_t mask, int siters, unsigned long long *fcyc,
                         unsigned long long *fn) {
  unsigned S = gridDim.x - 1;
  if (blockIdx.x == 0) {
    if (threadIdx.x != 0) return;
    unsigned long long n = 0, c0 = clock64();
    for (;;) {
      if ((n & 15) == 0 && *done >= S) break;
      __threadfence_system();
      n++;
    }
    *fcyc = clock64() - c0; *fn = n;
    return;
  }
  size_t nt = (size_t)S * blockDim.x, g = (size_t)(blockIdx.x - 1) * blockDim.x + threadIdx.x;
  uint4 v = make_uint4(1, 2, 3, 4);
  for (int k = 0; k < siters; k++) sp[((size_t)k * nt + g) & mask] = v;
  __syncthreads();
  if (threadIdx.x == 0) { __threadfence(); atomicAdd((unsigned *)done, 1); }
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char **argv) {
  int more = argc > 1;  // ./g12 more: the second run's rows (rewrite2)
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  printf("device,%s,-,sms,%d\n", pr.name, sms);
  const size_t HB = 1ull << 30;
  void *h_raw, *h_dev, *d_buf;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  CK(cudaMalloc(&d_buf, HB));
  unsigned *d_seen, *d_stop;
  CK(cudaMalloc(&d_seen, 4 * 256)); CK(cudaMalloc(&d_stop, 4));
  unsigned long long *d_fc, *d_bytes, *d_span, *d_fn;
  CK(cudaMalloc(&d_fc, 16)); CK(cudaMalloc(&d_bytes, 8)); CK(cudaMalloc(&d_span, 8)); CK(cudaMalloc(&d_fn, 8));
  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_rewrite, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  int clk; CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));  // kHz, max SM clock
  printf("device,clock,-,max_khz,%d\n", clk);

  // A. rewrite
  unsigned fsm = sms - 1;
  const int fences = 16;
  struct R { int S, W; size_t F; };
  std::vector<R> runs;
  if (!more) {
    for (int S : {1, 2, 4, 8, 16, 32, 66, 131})
      for (size_t F : {512ull, 1ull << 10, 2ull << 10, 4ull << 10, 8ull << 10, 16ull << 10, 32ull << 10})
        runs.push_back({S, 8, F});
  } else {
    // rewrite2: the region's size in lines between 16 and 32, and the warps
    for (int S : {1, 2, 4, 8})
      for (size_t F : {2048ull, 2560ull, 3072ull, 3584ull, 4096ull, 6144ull}) runs.push_back({S, 8, F});
    for (int S : {1, 4, 32})
      for (int W : {1, 2, 4, 16, 32})
        for (size_t F : {512ull, 4096ull}) runs.push_back({S, W, F});
  }
  for (R r : runs) {
    int S = r.S, W = r.W; size_t F = r.F;
    {
      std::vector<double> first, rest, gb, bpc;
      int bad = 0;
      for (int rep = 0; rep < 3; rep++) {
        CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256));
        CK(cudaMemset(d_bytes, 0, 8)); CK(cudaMemset(d_span, 0, 8));
        CK(cudaEventRecord(a));
        k_rewrite<<<sms, 32 * W, smem>>>((unsigned)S, fsm, fences, F / 16, d_stop, (uint4 *)h_dev, d_fc, d_bytes, d_span,
                                      d_seen);
        CK(cudaGetLastError());
        CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        unsigned long long fc[2], by, sp;
        CK(cudaMemcpy(fc, d_fc, 16, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&by, d_bytes, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&sp, d_span, 8, cudaMemcpyDeviceToHost));
        unsigned seen[256];
        CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
        for (int i = 0; i < sms; i++) bad += seen[i] != 1;
        first.push_back((double)fc[0]);
        rest.push_back((double)fc[1] / (fences - 1));
        gb.push_back((double)by / (ms * 1e-3) / 1e9);
        bpc.push_back(sp ? (double)by / (double)sp : 0);
      }
      char var[64];
      if (more) snprintf(var, sizeof var, "own/S%d/W%d", S, W); else snprintf(var, sizeof var, "own/S%d", S);
      const char *bn = more ? "rewrite2" : "rewrite";
      printf("%s,%s,%zu,first_fence_cycles,%.0f\n", bn, var, F, median(first));
      printf("%s,%s,%zu,fence_cycles,%.0f\n", bn, var, F, median(rest));
      printf("%s,%s,%zu,stream_gbps,%.2f\n", bn, var, F, median(gb));
      printf("%s,%s,%zu,bytes_per_cycle,%.2f\n", bn, var, F, median(bpc));
      printf("%s,%s,%zu,blocks_not_one_per_sm,%d\n", bn, var, F, bad);
      fflush(stdout);
    }
  }

  // B. ddepth
  if (!more) {
    size_t mask = (HB / 2) / 16 - 1;
    for (int S : {8, 32, 66, sms - 1})
      for (int W : {1, 8, 32}) {
        int threads = 32 * W;
        int siters = (int)(4096.0 * 1048576.0 / (16.0 * threads * S));
        std::vector<double> ts, cyc;
        for (int rep = 0; rep < 3; rep++) {
          CK(cudaMemset(d_stop, 0, 4));
          CK(cudaEventRecord(a));
          k_ddepth<<<1 + S, threads>>>(d_stop, (uint4 *)d_buf, mask, siters, d_fc, d_fn);
          CK(cudaGetLastError());
          CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
          float ms; CK(cudaEventElapsedTime(&ms, a, b)); ts.push_back(ms);
          unsigned long long fc, fn;
          CK(cudaMemcpy(&fc, d_fc, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&fn, d_fn, 8, cudaMemcpyDeviceToHost));
          cyc.push_back(fn ? (double)fc / fn : 0);
        }
        char var[64];
        snprintf(var, sizeof var, "device/S%d/W%d", S, W);
        printf("ddepth,%s,-,fence_cycles,%.1f\n", var, median(cyc));
        printf("ddepth,%s,-,stream_gbps,%.2f\n", var, (double)siters * 16.0 * threads * S / (median(ts) * 1e-3) / 1e9);
        fflush(stdout);
      }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
