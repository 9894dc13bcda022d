// Real-GPU anchors, fifth set: where the writes in front of a fence wait. One block of 256
// threads per SM (each block takes most of an SM's shared memory); streaming blocks run on
// SM ids 0..S-1, each writing 16-byte stores to its own contiguous region of pinned host
// memory (so the streams are dense, unlike gpmbench4's interleaved ones).
//   burst:   the S blocks meet at a barrier, each writes b bytes as fast as it can
//            (issue_cycles: until its last store is issued), then thread 0 fences
//            (fence_cycles: __threadfence_system after that). Where issue stops being
//            fast shows how many bytes the memory system takes before it pushes back.
//   depth:   the block on the last SM waits 400,000 cycles, then fences 64 times (system
//            fence, no store of its own) beside S streaming blocks, then stops them.
//   offered: as depth, but each streaming warp stores 512 B once every P cycles, so the
//            streams offer a chosen fraction of the host link's bandwidth (26.3 B/cycle).
// Build and run: nvcc -O3 -arch=sm_90 gpmbench5.cu -o g5 && ./g5 > measured5.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// burst: blocks on SMs [0, S) write per bytes each to region s*per of sp.
__global__ void k_burst(unsigned S, size_t per, uint4 *sp, unsigned *arrive, unsigned long long *issue,
                        unsigned long long *fence, unsigned *seen, unsigned *timeout) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s >= S) return;
  __shared__ unsigned long long t0;
  if (threadIdx.x == 0) {
    atomicAdd(arrive, 1);
    volatile unsigned *va = arrive;
    unsigned long long w = clock64();
    while (*va < S) {
      if (clock64() - w > 2000000000ULL) { atomicAdd(timeout, 1); break; }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) t0 = clock64();
  __syncthreads();
  uint4 *base = sp + (size_t)s * (per / 16);
  size_t n = per / 16;
  uint4 v = make_uint4(s, 2, 3, 4);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) base[i] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long t1 = clock64();
    __threadfence_system();
    unsigned long long t2 = clock64();
    issue[s] = t1 - t0;
    fence[s] = t2 - t1;
  }
}

// depth and offered: the block on SM fsm fences; blocks on SMs [0, S) stream into their own
// 4 MB regions until stopped. period 0: as fast as possible; otherwise each warp issues one
// 16-byte store per lane every period cycles.
__global__ void k_depth(unsigned S, unsigned fsm, int fences, unsigned long long period, volatile unsigned *stop,
                        uint4 *sp, unsigned long long *fcyc, unsigned long long *bytes, unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s == fsm) {
    if (threadIdx.x != 0) return;
    unsigned long long w = clock64();
    while (clock64() - w < 400000ULL) {}
    unsigned long long c0 = clock64();
    for (int i = 0; i < fences; i++) __threadfence_system();
    fcyc[0] = clock64() - c0;
    *stop = 1;
    __threadfence();
    return;
  }
  if (s >= S) return;
  const size_t region = (4u << 20) / 16;  // elements
  uint4 *base = sp + (size_t)s * region;
  uint4 v = make_uint4(s, 2, 3, 4);
  unsigned long long n = 0, start = clock64(), next = start;
  size_t i = threadIdx.x;
  for (unsigned long long k = 0;; k++) {
    if ((k & (period ? 7 : 63)) == 0 && (*stop || clock64() - start > 40000000ULL)) break;
    base[i] = v;
    i += blockDim.x;
    if (i >= region) i -= region;
    n++;
    if (period) {
      next += period;
      while (clock64() < next) {}
    }
  }
  atomicAdd((unsigned long long *)bytes, n * 16);
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  printf("device,-,-,sms,%d\n", sms);
  const size_t HB = 1ull << 30;
  void *h_raw, *h_dev;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  unsigned *d_arrive, *d_seen, *d_timeout, *d_stop;
  CK(cudaMalloc(&d_arrive, 4)); CK(cudaMalloc(&d_seen, 4 * 256)); CK(cudaMalloc(&d_timeout, 4)); CK(cudaMalloc(&d_stop, 4));
  unsigned long long *d_issue, *d_fence, *d_fc, *d_bytes;
  CK(cudaMalloc(&d_issue, 8 * 256)); CK(cudaMalloc(&d_fence, 8 * 256)); CK(cudaMalloc(&d_fc, 8)); CK(cudaMalloc(&d_bytes, 8));
  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_burst, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(k_depth, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));

  auto checkSeen = [&](int &bad) {
    unsigned seen[256];
    CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
    for (int i = 0; i < sms; i++) bad += seen[i] != 1;
  };

  // burst
  for (int S : {1, 2, 4, 8, 16, 32, 66, 132})
    for (size_t per : {16ull << 10, 64ull << 10, 256ull << 10, 1ull << 20, 4ull << 20}) {
      std::vector<double> imed, imax, fmed, fmax, tmed, tmax, gbps;
      int bad = 0; unsigned to = 0;
      for (int rep = 0; rep < 3; rep++) {
        CK(cudaMemset(d_arrive, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_timeout, 0, 4));
        k_burst<<<sms, 256, smem>>>((unsigned)S, per, (uint4 *)h_dev, d_arrive, d_issue, d_fence, d_seen, d_timeout);
        CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
        unsigned long long is[256], fe[256]; unsigned t;
        CK(cudaMemcpy(is, d_issue, 8 * 256, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(fe, d_fence, 8 * 256, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&t, d_timeout, 4, cudaMemcpyDeviceToHost)); to += t;
        checkSeen(bad);
        std::vector<double> iv, fv, tv;
        for (int i = 0; i < S; i++) { iv.push_back((double)is[i]); fv.push_back((double)fe[i]); tv.push_back((double)(is[i] + fe[i])); }
        std::sort(iv.begin(), iv.end()); std::sort(fv.begin(), fv.end()); std::sort(tv.begin(), tv.end());
        imed.push_back(iv[S / 2]); imax.push_back(iv[S - 1]);
        fmed.push_back(fv[S / 2]); fmax.push_back(fv[S - 1]);
        tmed.push_back(tv[S / 2]); tmax.push_back(tv[S - 1]);
      }
      char var[64]; snprintf(var, sizeof var, "S%d", S);
      unsigned kb = (unsigned)(per >> 10);
      printf("burst,%s,%uK,issue_cycles_median,%.0f\n", var, kb, median(imed));
      printf("burst,%s,%uK,issue_cycles_max,%.0f\n", var, kb, median(imax));
      printf("burst,%s,%uK,fence_cycles_median,%.0f\n", var, kb, median(fmed));
      printf("burst,%s,%uK,fence_cycles_max,%.0f\n", var, kb, median(fmax));
      printf("burst,%s,%uK,total_cycles_median,%.0f\n", var, kb, median(tmed));
      printf("burst,%s,%uK,total_cycles_max,%.0f\n", var, kb, median(tmax));
      printf("burst,%s,%uK,bad_or_timeout,%d\n", var, kb, bad + (int)to);
      fflush(stdout);
    }

  // depth and offered
  unsigned fsm = sms - 1;
  const int fences = 64;
  auto runDepth = [&](const char *bench, int S, unsigned long long period, double frac) {
    std::vector<double> cyc, gb;
    int bad = 0;
    for (int rep = 0; rep < 3; rep++) {
      CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_bytes, 0, 8));
      CK(cudaEventRecord(a));
      k_depth<<<sms, 256, smem>>>((unsigned)S, fsm, fences, period, d_stop, (uint4 *)h_dev, d_fc, d_bytes, d_seen);
      CK(cudaGetLastError());
      CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
      float ms; CK(cudaEventElapsedTime(&ms, a, b));
      unsigned long long fc, by;
      CK(cudaMemcpy(&fc, d_fc, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&by, d_bytes, 8, cudaMemcpyDeviceToHost));
      checkSeen(bad);
      cyc.push_back((double)fc / fences);
      gb.push_back((double)by / (ms * 1e-3) / 1e9);
    }
    char var[64];
    if (frac > 0) snprintf(var, sizeof var, "S%d/f%.2f", S, frac); else snprintf(var, sizeof var, "S%d", S);
    printf("%s,%s,%llu,fence_cycles,%.1f\n", bench, var, period, median(cyc));
    printf("%s,%s,%llu,stream_gbps,%.2f\n", bench, var, period, median(gb));
    printf("%s,%s,%llu,blocks_not_one_per_sm,%d\n", bench, var, period, bad);
    fflush(stdout);
  };
  for (int S : {0, 1, 2, 4, 8, 16, 32, 66, 131}) runDepth("depth", S, 0, 0);
  for (int S : {8, 131})
    for (double f : {0.25, 0.5, 0.75, 0.9, 1.1, 1.5, 3.0}) {
      // each SM's 8 warps store 8 x 512 B per period: S x 4096 / period B/cycle in all
      unsigned long long period = (unsigned long long)(S * 4096.0 / (f * 26.3));
      runDepth("offered", S, period, f);
    }
  return 0;
}
