// Real-GPU anchors, fourth set: does the queue in front of a fence depend on which SMs
// stream? One block per SM (each block takes most of an SM's shared memory); the block
// on SM `fsm` fences 64 times (a system fence, no store of its own) and then raises a stop
// flag; the blocks on the SMs of the chosen set stream 16-byte stores to pinned host memory
// until the flag is up; every other block exits. Sets: S consecutive SM ids from 0, or S
// ids spread evenly over all SMs.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench4.cu -o g4 && ./g4 > measured4.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

__global__ void k_set(const unsigned char *stream, unsigned fsm, int fences, volatile unsigned *stop, uint4 *sp,
                      size_t mask, unsigned long long *fcyc, unsigned long long *bytes, unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s == fsm) {
    if (threadIdx.x != 0) return;
    unsigned long long c0 = clock64();
    for (int i = 0; i < fences; i++) __threadfence_system();
    fcyc[0] = clock64() - c0;
    *stop = 1;
    __threadfence();
    return;
  }
  if (!stream[s]) return;
  size_t g = (size_t)s * blockDim.x + threadIdx.x, nt = (size_t)gridDim.x * blockDim.x;
  uint4 v = make_uint4(1, 2, 3, 4);
  unsigned long long n = 0;
  for (size_t k = 0; k < (1u << 16); k++) {  // the cap only guards against a missing fencer
    if ((k & 63) == 0 && *stop) break;
    sp[(k * nt + g) & mask] = v;
    n++;
  }
  atomicAdd(bytes, n * 16);
}

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  const size_t HB = 1ull << 30;
  void *h_raw, *h_dev;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  unsigned char *d_set; CK(cudaMalloc(&d_set, 256));
  unsigned *d_stop, *d_seen; CK(cudaMalloc(&d_stop, 4)); CK(cudaMalloc(&d_seen, 4 * 256));
  unsigned long long *d_fc, *d_bytes; CK(cudaMalloc(&d_fc, 8)); CK(cudaMalloc(&d_bytes, 8));
  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_set, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  unsigned fsm = sms - 1;
  const int fences = 64;
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (const char *layout : {"consecutive", "spread"})
    for (int S : {0, 2, 8, 16, 32, 66, 131}) {
      std::vector<unsigned char> set(256, 0);
      for (int i = 0; i < S; i++) {
        int id = layout[0] == 'c' ? i : (int)((long)i * (sms - 1) / S);
        set[id] = 1;
      }
      if (S == 0 && layout[0] == 's') continue;
      CK(cudaMemcpy(d_set, set.data(), 256, cudaMemcpyHostToDevice));
      std::vector<double> cyc, gbps;
      int bad = 0;
      for (int rep = 0; rep < 3; rep++) {
        CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_bytes, 0, 8));
        CK(cudaEventRecord(a));
        k_set<<<sms, 256, smem>>>(d_set, fsm, fences, d_stop, (uint4 *)h_dev, (HB / 16) - 1, d_fc, d_bytes, d_seen);
        CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        unsigned long long fc, by; unsigned seen[256];
        CK(cudaMemcpy(&fc, d_fc, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&by, d_bytes, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
        for (int i = 0; i < sms; i++) bad += seen[i] != 1;
        cyc.push_back((double)fc / fences);
        gbps.push_back((double)by / (ms * 1e-3) / 1e9);
      }
      std::sort(cyc.begin(), cyc.end()); std::sort(gbps.begin(), gbps.end());
      printf("smset,%s/S%d,-,fence_cycles,%.1f\n", layout, S, cyc[1]);
      printf("smset,%s/S%d,-,stream_gbps,%.2f\n", layout, S, gbps[1]);
      printf("smset,%s/S%d,-,blocks_not_one_per_sm,%d\n", layout, S, bad);
    }
  return 0;
}
