// Real-GPU anchors, tenth set: is the queue in front of a fence a queue of writes, or lines
// the L2 holds dirty? gpmbench5's depth (a fence beside S SMs streaming 16-byte stores to
// pinned host memory) with each streaming SM rewriting a region of its own of F bytes, or
// all of them one shared region of F bytes. If the L2 held host lines dirty and merged
// rewrites, a small region would bound both the fences' wait and the bytes the link moves,
// and the streams could run faster than the link.
//   depth: the block on the last SM waits 400,000 cycles, then times 16 system fences (no
//          store of its own; the first alone and the mean of the other 15) beside S blocks
//          of 8 warps streaming into their regions, then stops them. stream_gbps: the bytes
//          the streams stored over the kernel's time.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench10.cu -o g10 && ./g10 > measured10.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// Blocks on SMs [0, S) store into region s (own) or region 0 (shared) of F/16 elements.
__global__ void k_depth(unsigned S, unsigned fsm, int fences, size_t elems, int shared, volatile unsigned *stop,
                        uint4 *sp, unsigned long long *fcyc, unsigned long long *bytes, unsigned *seen) {
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
  uint4 *base = sp + (shared ? 0 : (size_t)s * elems);
  uint4 v = make_uint4(s, 2, 3, 4);
  unsigned long long n = 0, start = clock64();
  size_t i = threadIdx.x % elems;
  for (unsigned long long k = 0;; k++) {
    if ((k & 63) == 0 && (*stop || clock64() - start > 40000000ULL)) break;
    base[i] = v;
    i += blockDim.x;
    if (i >= elems) i -= elems;
    n++;
  }
  atomicAdd((unsigned long long *)bytes, n * 16);
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  printf("device,%s,-,sms,%d\n", pr.name, sms);
  const size_t HB = 1ull << 30;
  void *h_raw, *h_dev;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  unsigned *d_seen, *d_stop;
  CK(cudaMalloc(&d_seen, 4 * 256)); CK(cudaMalloc(&d_stop, 4));
  unsigned long long *d_fc, *d_bytes;
  CK(cudaMalloc(&d_fc, 16)); CK(cudaMalloc(&d_bytes, 8));
  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_depth, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  unsigned fsm = sms - 1;
  const int fences = 16;
  for (int shared : {0, 1})
    for (int S : {2, 8, 32, 131})
      for (size_t F : {4ull << 10, 32ull << 10, 256ull << 10, 1ull << 20, 4ull << 20}) {
        if (!shared && (size_t)S * F > HB) continue;
        std::vector<double> first, rest, gb;
        int bad = 0;
        for (int rep = 0; rep < 3; rep++) {
          CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_bytes, 0, 8));
          CK(cudaEventRecord(a));
          k_depth<<<sms, 256, smem>>>((unsigned)S, fsm, fences, F / 16, shared, d_stop, (uint4 *)h_dev, d_fc, d_bytes, d_seen);
          CK(cudaGetLastError());
          CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
          float ms; CK(cudaEventElapsedTime(&ms, a, b));
          unsigned long long fc[2], by;
          CK(cudaMemcpy(fc, d_fc, 16, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&by, d_bytes, 8, cudaMemcpyDeviceToHost));
          unsigned seen[256];
          CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
          for (int i = 0; i < sms; i++) bad += seen[i] != 1;
          first.push_back((double)fc[0]);
          rest.push_back((double)fc[1] / (fences - 1));
          gb.push_back((double)by / (ms * 1e-3) / 1e9);
        }
        char var[64];
        snprintf(var, sizeof var, "%s/S%d", shared ? "shared" : "own", S);
        unsigned kb = (unsigned)(F >> 10);
        printf("depth,%s,%uK,first_fence_cycles,%.0f\n", var, kb, median(first));
        printf("depth,%s,%uK,fence_cycles,%.0f\n", var, kb, median(rest));
        printf("depth,%s,%uK,stream_gbps,%.2f\n", var, kb, median(gb));
        printf("depth,%s,%uK,blocks_not_one_per_sm,%d\n", var, kb, bad);
        fflush(stdout);
      }
  return 0;
}
