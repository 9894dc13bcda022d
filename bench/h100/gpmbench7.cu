// Real-GPU anchors, seventh set: the read path, which the earlier sets measured only as
// one thread's latencies.
//   lstream: one block per SM (1 SM or all of them), W warps, each thread loading U
//            independent 16-byte vectors per step (a warp's load is 512 contiguous bytes)
//            and folding them in before the next step, from device or pinned host memory.
//            Bytes per SM cycle: the bytes over the slowest block's clock64 time.
//   smem:    one thread chases a cycle through shared memory (ld.volatile.shared).
//   rprobe:  as gpmbench5's depth, but the block on the last SM, after 400,000 cycles,
//            times 32 dependent loads of host lines nobody writes (chase) and 32 pairs of a
//            4-byte store to its own host line and a load of it back (own), beside S
//            blocks of 8 warps streaming 16-byte stores to host memory; then 16 system
//            fences (fence: cycles each).
//   l2stream: lstream over a part of device memory the L2 already holds.
//   mixed:   R blocks each read 4 MB of host memory (8 warps, 4 loads in flight a thread)
//            while Wn other blocks each write 4 MB to host memory; each group's bytes over
//            its slowest block's cycles, alone and together.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench7.cu -o g7 && ./g7 > measured7.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// lstream: block b reads elements [b*iters*U*T, (b+1)*iters*U*T) of p, T = blockDim.x;
// step k, vector u of thread t is element (k*U+u)*T + t of its block's part.
template <int U>
__global__ void k_lstream(const uint4 *p, int iters, unsigned long long *cyc, unsigned *sink) {
  const size_t T = blockDim.x;
  const uint4 *q = p + (size_t)blockIdx.x * iters * U * T + threadIdx.x;
  unsigned acc = 0;
  __syncthreads();
  unsigned long long c0 = clock64();
#pragma unroll 1
  for (int k = 0; k < iters; k++) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = q[u * T];
#pragma unroll
    for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    q += U * T;
  }
  __syncthreads();
  if (threadIdx.x == 0) cyc[blockIdx.x] = clock64() - c0;
  if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads live
}

// smem: s[i] = (i + 129) mod 4096 words, a single cycle; warm lap of 64 hops, then hops.
__global__ void k_smem(int hops, unsigned long long *out) {
  __shared__ unsigned s[4096];
  volatile unsigned *vs = s;
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) s[i] = (i + 129) & 4095;
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned j = 0;
  for (int i = 0; i < 64; i++) j = vs[j];
  unsigned long long c0 = clock64();
  for (int i = 0; i < hops; i++) j = vs[j];
  unsigned long long c1 = clock64();
  out[0] = c1 - c0;
  out[1] = j;
}

// rprobe: the block on SM psm probes; blocks on SMs [0, S) stream into their own 4 MB
// regions of sp until stopped. chase: host lines whose first word is the next line's index.
__global__ void k_rprobe(unsigned S, unsigned psm, int hops, volatile unsigned *stop, uint4 *sp,
                         const unsigned *chase, volatile unsigned *own, unsigned long long *out,
                         unsigned long long *bytes, unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s == psm) {
    if (threadIdx.x != 0) return;
    unsigned long long w = clock64();
    while (clock64() - w < 400000ULL) {}
    unsigned j = 0;
    unsigned long long c0 = clock64();
    for (int i = 0; i < hops; i++) j = *(volatile const unsigned *)(chase + j * 32);
    unsigned long long c1 = clock64();
    unsigned acc = 0;
    for (int i = 0; i < hops; i++) {
      own[(i + (j >> 30)) * 32] = i;  // j >> 30 is 0 (j < 64): the chase comes first
      acc += own[(i + (j >> 30)) * 32];
    }
    unsigned long long c2 = clock64();
    for (int i = 0; i < 16; i++) __threadfence_system();
    unsigned long long c3 = clock64();
    out[0] = c1 - c0;
    out[1] = c2 - c1;
    out[2] = j + acc;
    out[3] = c3 - c2;
    *stop = 1;
    __threadfence();
    return;
  }
  if (s >= S) return;
  const size_t region = (4u << 20) / 16;
  uint4 *base = sp + (size_t)s * region;
  uint4 v = make_uint4(s, 2, 3, 4);
  unsigned long long n = 0, start = clock64();
  size_t i = threadIdx.x;
  for (unsigned long long k = 0;; k++) {
    if ((k & 63) == 0 && (*stop || clock64() - start > 400000000ULL)) break;
    base[i] = v;
    i += blockDim.x;
    if (i >= region) i -= region;
    n++;
  }
  atomicAdd(bytes, n * 16);
}

// mixed: blocks on SMs [0, R) read per bytes each from rp, blocks on [R, R+Wn) write per
// bytes each to wp; cyc[s] is each block's time.
__global__ void k_mixed(unsigned R, unsigned Wn, size_t per, const uint4 *rp, uint4 *wp,
                        unsigned long long *cyc, unsigned *sink, unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s >= R + Wn) return;
  const size_t n = per / 16, T = blockDim.x;
  __syncthreads();
  unsigned long long c0 = clock64();
  if (s < R) {
    const uint4 *q = rp + (size_t)s * n + threadIdx.x;
    unsigned acc = 0;
#pragma unroll 1
    for (size_t k = 0; k + 4 * T <= n; k += 4 * T) {
      uint4 a = q[k], b = q[k + T], c = q[k + 2 * T], d = q[k + 3 * T];
      acc ^= a.x ^ b.y ^ c.z ^ d.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
  } else {
    uint4 *q = wp + (size_t)(s - R) * n;
    uint4 v = make_uint4(s, 2, 3, 4);
    for (size_t k = threadIdx.x; k < n; k += T) q[k] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) cyc[s] = clock64() - c0;
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  printf("device,%s,-,sms,%d\n", pr.name, sms);
  const size_t HB = 1ull << 30, DB = 1ull << 30;
  void *h_raw, *h_dev, *d_buf;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  CK(cudaMalloc(&d_buf, DB));
  CK(cudaMemset(d_buf, 1, DB));
  unsigned *hw = (unsigned *)h_raw;
  for (size_t i = 0; i < HB / 4; i += 1024) hw[i] = (unsigned)i;  // touch every page
  unsigned long long *d_cyc, *d_out, *d_bytes;
  unsigned *d_sink, *d_seen, *d_stop;
  CK(cudaMalloc(&d_cyc, 8 * 256)); CK(cudaMalloc(&d_out, 8 * 4)); CK(cudaMalloc(&d_bytes, 8));
  CK(cudaMalloc(&d_sink, 4)); CK(cudaMalloc(&d_seen, 4 * 256)); CK(cudaMalloc(&d_stop, 4));
  unsigned long long hc[256];

  // A. lstream
  for (int t = 0; t < 2; t++)
    for (int nsm : {1, sms})
      for (int U : {1, 4})
        for (int w : {1, 4, 8, 32}) {
          int T = 32 * w;
          size_t total = t == 0 ? (nsm == 1 ? 4ull << 20 : 256ull << 20) : (nsm == 1 ? 16ull << 20 : 512ull << 20);
          int iters = (int)(total / 16 / ((size_t)nsm * T * U));
          double bytes = 16.0 * iters * U * T * nsm;
          std::vector<double> v;
          for (int r = 0; r < 6; r++) {
            // device: each repetition reads a part the last did not leave in the L2
            size_t off = t == 0 ? 0 : (nsm == 1 ? (size_t)r * (64ull << 20) : (size_t)(r & 1) * (512ull << 20));
            const uint4 *p = (const uint4 *)((char *)(t == 0 ? h_dev : d_buf) + off);
            if (U == 1) k_lstream<1><<<nsm, T>>>(p, iters, d_cyc, d_sink);
            else k_lstream<4><<<nsm, T>>>(p, iters, d_cyc, d_sink);
            CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hc, d_cyc, 8 * nsm, cudaMemcpyDeviceToHost));
            unsigned long long mx = 0;
            for (int i = 0; i < nsm; i++) mx = std::max(mx, hc[i]);
            if (r) v.push_back(bytes / (double)mx);
          }
          printf("lstream,%s/sms%d/u%d,%d,bytes_per_cycle,%.3f\n", t == 0 ? "host" : "device", nsm, U, w, median(v));
          fflush(stdout);
        }

  // E. l2stream: as lstream from device memory, but every repetition reads the same
  // part, which the first (dropped) left in the L2 (4 MB from one SM, 256 KB an SM from all)
  for (int nsm : {1, sms})
    for (int U : {4, 8})
      for (int w : {8, 32}) {
        int T = 32 * w;
        size_t total = nsm == 1 ? 4ull << 20 : (size_t)nsm * (256ull << 10);
        int iters = (int)(total / 16 / ((size_t)nsm * T * U));
        double bytes = 16.0 * iters * U * T * nsm;
        std::vector<double> v;
        for (int r = 0; r < 6; r++) {
          const uint4 *p = (const uint4 *)((char *)d_buf + (900ull << 20));
          if (U == 4) k_lstream<4><<<nsm, T>>>(p, iters, d_cyc, d_sink);
          else k_lstream<8><<<nsm, T>>>(p, iters, d_cyc, d_sink);
          CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
          CK(cudaMemcpy(hc, d_cyc, 8 * nsm, cudaMemcpyDeviceToHost));
          unsigned long long mx = 0;
          for (int i = 0; i < nsm; i++) mx = std::max(mx, hc[i]);
          if (r) v.push_back(bytes / (double)mx);
        }
        printf("l2stream,device/sms%d/u%d,%d,bytes_per_cycle,%.3f\n", nsm, U, w, median(v));
        fflush(stdout);
      }
  // lstream from device memory with 8 loads in flight a thread
  for (int nsm : {1, sms})
    for (int w : {8, 32}) {
      int T = 32 * w, U = 8;
      size_t total = nsm == 1 ? 16ull << 20 : 512ull << 20;
      int iters = (int)(total / 16 / ((size_t)nsm * T * U));
      double bytes = 16.0 * iters * U * T * nsm;
      std::vector<double> v;
      for (int r = 0; r < 6; r++) {
        size_t off = nsm == 1 ? (size_t)r * (64ull << 20) : (size_t)(r & 1) * (512ull << 20);
        k_lstream<8><<<nsm, T>>>((const uint4 *)((char *)d_buf + off), iters, d_cyc, d_sink);
        CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hc, d_cyc, 8 * nsm, cudaMemcpyDeviceToHost));
        unsigned long long mx = 0;
        for (int i = 0; i < nsm; i++) mx = std::max(mx, hc[i]);
        if (r) v.push_back(bytes / (double)mx);
      }
      printf("lstream,device/sms%d/u8,%d,bytes_per_cycle,%.3f\n", nsm, w, median(v));
      fflush(stdout);
    }

  // B. smem
  {
    std::vector<double> v;
    for (int r = 0; r < 5; r++) {
      k_smem<<<1, 256>>>(4000, d_out);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(hc, d_out, 16, cudaMemcpyDeviceToHost));
      v.push_back((double)hc[0] / 4000);
    }
    printf("smem,chase,4000,cycles,%.2f\n", median(v));
  }

  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_rprobe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(k_mixed, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  auto bad = [&]() {
    unsigned seen[256]; int b = 0;
    CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
    for (int i = 0; i < sms; i++) b += seen[i] != 1;
    return b;
  };

  // C. rprobe: chase lines at 900 MB, own lines at 932 MB of host memory
  unsigned *chase = hw + (900ull << 20) / 4;
  for (unsigned i = 0; i < 64; i++) chase[i * 32] = (i + 17) & 63;
  char *hd = (char *)h_dev;
  for (int S : {0, 1, 2, 4, 8, 16, 32, 66, 131}) {
    std::vector<double> ch, ow, fe; int b = 0;
    for (int r = 0; r < 3; r++) {
      CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_bytes, 0, 8));
      k_rprobe<<<sms, 256, smem>>>((unsigned)S, (unsigned)(sms - 1), 32, (volatile unsigned *)d_stop, (uint4 *)h_dev,
                                   (const unsigned *)(hd + (900ull << 20)), (volatile unsigned *)(hd + (932ull << 20)),
                                   d_out, d_bytes, d_seen);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(hc, d_out, 32, cudaMemcpyDeviceToHost));
      ch.push_back((double)hc[0] / 32); ow.push_back((double)hc[1] / 32); fe.push_back((double)hc[3] / 16);
      b += bad();
    }
    printf("rprobe,S%d,chase,cycles,%.1f\n", S, median(ch));
    printf("rprobe,S%d,own,cycles,%.1f\n", S, median(ow));
    printf("rprobe,S%d,fence,cycles,%.1f\n", S, median(fe));
    printf("rprobe,S%d,-,blocks_not_one_per_sm,%d\n", S, b);
    fflush(stdout);
  }

  // D. mixed: reads from host 0..264 MB, writes to host 512..776 MB
  const size_t per = 4ull << 20;
  for (auto rw : std::vector<std::pair<int, int>>{{66, 0}, {0, 66}, {66, 66}, {8, 0}, {0, 8}, {8, 8}, {1, 0}, {1, 8}, {8, 1}}) {
    unsigned R = rw.first, Wn = rw.second;
    std::vector<double> rg, wg; int b = 0;
    for (int r = 0; r < 4; r++) {
      CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_cyc, 0, 8 * 256));
      k_mixed<<<sms, 256, smem>>>(R, Wn, per, (const uint4 *)h_dev, (uint4 *)(hd + (512ull << 20)), d_cyc, d_sink, d_seen);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(hc, d_cyc, 8 * 256, cudaMemcpyDeviceToHost));
      unsigned long long rm = 0, wm = 0;
      for (unsigned i = 0; i < R; i++) rm = std::max(rm, hc[i]);
      for (unsigned i = R; i < R + Wn; i++) wm = std::max(wm, hc[i]);
      if (r) {
        if (R) rg.push_back((double)per * R / rm);
        if (Wn) wg.push_back((double)per * Wn / wm);
      }
      b += bad();
    }
    char var[32]; snprintf(var, sizeof var, "R%u/W%u", R, Wn);
    if (R) printf("mixed,%s,read,bytes_per_cycle,%.3f\n", var, median(rg));
    if (Wn) printf("mixed,%s,write,bytes_per_cycle,%.3f\n", var, median(wg));
    printf("mixed,%s,-,blocks_not_one_per_sm,%d\n", var, b);
    fflush(stdout);
  }
  return 0;
}
