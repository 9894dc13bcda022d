// Real-GPU anchors, eighth set: what a load of a host line just written costs, and whether
// the queue in front of a fence beside streaming SMs is counted in bytes or in writes.
//   own:    one thread stores 4 bytes to a host line, spins D cycles, then loads the line
//           back (ld.volatile); cycles of the load, mean of 32 lines.
//   other:  the block on SM 0 stores to a host line and makes a system fence, then raises a
//           flag; the block on the last SM, seeing it, loads that line; cycles of the load,
//           mean of 32 lines.
//   qform:  gpmbench5's depth with the streams' store shape varied: `v16` 16-byte stores,
//           a warp's store covering 4 whole lines; `w4` 4-byte stores, a warp's store one
//           whole line; `sparse` 4-byte stores, each lane to its own line (32 lines a warp
//           store, 4 bytes of each). The fencer (last SM) times 16 system fences after
//           400,000 cycles; the streams' data bytes and warp store instructions per cycle
//           (over the fencer's time from its start to the end of its fences).
// Build and run: nvcc -O3 -arch=sm_90 gpmbench8.cu -o g8 && ./g8 > measured8.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

__global__ void k_own(volatile unsigned *own, unsigned long long delay, unsigned long long *out) {
  unsigned long long sum = 0;
  unsigned acc = 0;
  for (int i = 0; i < 32; i++) {
    own[i * 32] = i;
    unsigned long long w = clock64();
    while (clock64() - w < delay) {}
    unsigned long long c0 = clock64();
    acc += own[i * 32];
    unsigned long long c1 = clock64();
    sum += c1 - c0;
  }
  out[0] = sum / 32;
  out[1] = acc;
}

__global__ void k_other(volatile unsigned *line, volatile unsigned *flag, unsigned last,
                        unsigned long long *out, unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (threadIdx.x != 0) return;
  if (s == 0) {
    for (int i = 0; i < 32; i++) {
      line[i * 32] = i + 1;
      __threadfence_system();
      flag[0] = i + 1;
      __threadfence();
      unsigned long long w = clock64();
      while (flag[32] != (unsigned)(i + 1) && clock64() - w < 1000000000ULL) {}
    }
  } else if (s == last) {
    unsigned long long sum = 0;
    unsigned acc = 0;
    for (int i = 0; i < 32; i++) {
      unsigned long long w = clock64();
      while (flag[0] != (unsigned)(i + 1) && clock64() - w < 1000000000ULL) {}
      unsigned long long c0 = clock64();
      acc += line[i * 32];
      unsigned long long c1 = clock64();
      sum += c1 - c0;
      flag[32] = i + 1;
      __threadfence();
    }
    out[0] = sum / 32;
    out[1] = acc;
  }
}

// qform: blocks on SMs [0, S) stream in shape mode into their own 4 MB regions until stopped.
__global__ void k_qform(unsigned S, unsigned fsm, int mode, volatile unsigned *stop, char *sp,
                        unsigned long long *fcyc, unsigned long long *bytes, unsigned long long *insts,
                        unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s == fsm) {
    if (threadIdx.x != 0) return;
    unsigned long long w = clock64();
    while (clock64() - w < 400000ULL) {}
    unsigned long long c0 = clock64();
    for (int i = 0; i < 16; i++) __threadfence_system();
    unsigned long long c1 = clock64();
    fcyc[0] = c1 - c0;
    fcyc[1] = c1 - w;  // about the streams' time: they start with the kernel
    *stop = 1;
    __threadfence();
    return;
  }
  if (s >= S) return;
  const size_t region = 4u << 20;
  char *base = sp + (size_t)s * region;
  unsigned long long n = 0, start = clock64();
  size_t i = threadIdx.x;  // in units of the mode's step
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (unsigned long long k = 0;; k++) {
    if ((k & 63) == 0 && (*stop || clock64() - start > 400000000ULL)) break;
    if (mode == 0) {
      ((uint4 *)base)[i % (region / 16)] = make_uint4(s, 2, 3, 4);
      i += blockDim.x;
    } else if (mode == 1) {
      ((unsigned *)base)[i % (region / 4)] = s;
      i += blockDim.x;
    } else {
      // warp w's k-th store: 32 lines, lane l to line (k*8 + w)*32 + l
      size_t line = ((k * (blockDim.x >> 5) + warp) * 32 + lane) % (region / 128);
      ((unsigned *)base)[line * 32] = s;
    }
    n++;
  }
  unsigned long long b = mode == 0 ? 16 : 4;
  atomicAdd(bytes, n * b);
  if (lane == 0) atomicAdd(insts, n);
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
  char *hd = (char *)h_dev;
  unsigned long long *d_out, *d_fc, *d_bytes, *d_insts;
  unsigned *d_seen, *d_stop, *d_flag;
  CK(cudaMalloc(&d_out, 16)); CK(cudaMalloc(&d_fc, 16)); CK(cudaMalloc(&d_bytes, 8)); CK(cudaMalloc(&d_insts, 8));
  CK(cudaMalloc(&d_seen, 4 * 256)); CK(cudaMalloc(&d_stop, 4)); CK(cudaMalloc(&d_flag, 256));
  unsigned long long h[2];

  // own: 32 lines at 900 MB, a fresh set of lines per delay and repetition
  int set = 0;
  for (unsigned long long d : {0ull, 500ull, 1000ull, 2000ull, 5000ull, 20000ull, 100000ull}) {
    std::vector<double> v;
    for (int r = 0; r < 5; r++, set++) {
      k_own<<<1, 1>>>((volatile unsigned *)(hd + (900ull << 20) + (size_t)set * 32 * 128), d, d_out);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h, d_out, 16, cudaMemcpyDeviceToHost));
      v.push_back((double)h[0]);
    }
    printf("own,store-then-load,%llu,cycles,%.1f\n", d, median(v));
    fflush(stdout);
  }

  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_other, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(k_qform, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  auto bad = [&]() {
    unsigned seen[256]; int b = 0;
    CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
    for (int i = 0; i < sms; i++) b += seen[i] != 1;
    return b;
  };

  // other
  {
    std::vector<double> v; int b = 0;
    for (int r = 0; r < 5; r++) {
      CK(cudaMemset(d_flag, 0, 256)); CK(cudaMemset(d_seen, 0, 4 * 256));
      k_other<<<sms, 32, smem>>>((volatile unsigned *)(hd + (960ull << 20) + (size_t)r * 32 * 128),
                                 (volatile unsigned *)d_flag, (unsigned)(sms - 1), d_out, d_seen);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h, d_out, 16, cudaMemcpyDeviceToHost));
      v.push_back((double)h[0]);
      b += bad();
    }
    printf("other,fenced-then-load,-,cycles,%.1f\n", median(v));
    printf("other,fenced-then-load,-,blocks_not_one_per_sm,%d\n", b);
    fflush(stdout);
  }

  // qform
  const char *mn[3] = {"v16", "w4", "sparse"};
  cudaEvent_t ev0, ev1; CK(cudaEventCreate(&ev0)); CK(cudaEventCreate(&ev1));
  for (int S : {8, 131})
    for (int mode = 0; mode < 3; mode++) {
      std::vector<double> fc, gb, ip; int b = 0;
      for (int r = 0; r < 3; r++) {
        CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_bytes, 0, 8)); CK(cudaMemset(d_insts, 0, 8));
        CK(cudaEventRecord(ev0));
        k_qform<<<sms, 256, smem>>>((unsigned)S, (unsigned)(sms - 1), mode, (volatile unsigned *)d_stop, hd, d_fc, d_bytes, d_insts, d_seen);
        CK(cudaGetLastError());
        CK(cudaEventRecord(ev1)); CK(cudaEventSynchronize(ev1));
        float ms; CK(cudaEventElapsedTime(&ms, ev0, ev1));
        unsigned long long fcv[2], by, in;
        CK(cudaMemcpy(fcv, d_fc, 16, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&by, d_bytes, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&in, d_insts, 8, cudaMemcpyDeviceToHost));
        (void)ms;
        b += bad();
        double cyc = (double)fcv[1];
        fc.push_back((double)fcv[0] / 16);
        gb.push_back((double)by / cyc);
        ip.push_back((double)in / cyc);
      }
      char var[32]; snprintf(var, sizeof var, "S%d/%s", S, mn[mode]);
      printf("qform,%s,-,fence_cycles,%.1f\n", var, median(fc));
      printf("qform,%s,-,data_bytes_per_cycle,%.3f\n", var, median(gb));
      printf("qform,%s,-,warp_stores_per_cycle,%.4f\n", var, median(ip));
      printf("qform,%s,-,blocks_not_one_per_sm,%d\n", var, b);
      fflush(stdout);
    }
  return 0;
}
