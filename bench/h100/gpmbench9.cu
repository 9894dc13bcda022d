// Real-GPU anchors, ninth set: what a warp's outstanding loads are counted in.
// gpmbench7's lstream showed one warp reading no faster with eight 16-byte loads in
// flight a thread than with four; this set tells lines, sectors and instructions apart.
//   lshape: one block on one SM, W warps, each thread issuing U independent 4- or 16-byte
//           loads per step from device memory and folding them in before the next step.
//           The shape of one warp's load instruction:
//             v16:    16 bytes a thread, contiguous: 512 bytes, 4 lines, 16 sectors;
//             w4:     4 bytes a thread, contiguous: 128 bytes, 1 line, 4 sectors;
//             sector: 4 bytes a thread, 32 bytes apart: 8 lines, 32 sectors;
//             line:   4 bytes a thread, 128 bytes apart: 32 lines, 32 sectors.
//           Every step reads lines no earlier step read, and each repetition a part of
//           device memory the last did not leave in the L2. Printed: the cycles a step
//           takes (the slowest warp's clock64 time over the steps, median of 5).
//   chase:  one thread, dependent 4-byte loads of device lines 4 KB apart, none cached:
//           the round trip a load's line takes alone.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench9.cu -o g9 && ./g9 > measured9.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

// Shapes: the word a thread reads, and how far apart (in words) two lanes' words are.
enum { V16 = 0, W4 = 1, SECTOR = 2, LINE = 3 };
static const char *shapeName[] = {"v16", "w4", "sector", "line"};
// Bytes one warp instruction spans, from the first lane's word to past the last one's.
static size_t spanBytes(int s) { return s == V16 ? 512 : s == W4 ? 128 : s == SECTOR ? 1024 : 4096; }

template <int S> struct word { typedef unsigned T; };
template <> struct word<V16> { typedef uint4 T; };
__device__ __forceinline__ unsigned fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }
__device__ __forceinline__ unsigned fold(unsigned v) { return v; }

// Warp w's step k, load u spans bytes [((k*U+u)*W + w) * span, +span) of p: every
// instruction a part of its own. Lane l reads word l*stride of it.
template <int S, int U>
__global__ void k_lshape(const char *p, int iters, unsigned long long *cyc, unsigned *sink) {
  typedef typename word<S>::T V;
  const size_t span = S == V16 ? 512 : S == W4 ? 128 : S == SECTOR ? 1024 : 4096;
  const size_t lane = S == V16 ? 16 : S == W4 ? 4 : S == SECTOR ? 32 : 128;
  const size_t W = blockDim.x / 32, w = threadIdx.x / 32, l = threadIdx.x % 32;
  const char *q = p + w * span + l * lane;
  unsigned acc = 0;
  __syncthreads();
  unsigned long long c0 = clock64();
#pragma unroll 1
  for (int k = 0; k < iters; k++) {
    V v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = *(const V *)(q + u * W * span);
#pragma unroll
    for (int u = 0; u < U; u++) acc ^= fold(v[u]);
    q += U * W * span;
  }
  unsigned long long c1 = clock64();
  if (l == 0) cyc[w] = c1 - c0;
  if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads live
}

// chase: word 0 of each line holds the byte offset of the next.
__global__ void k_chase(const char *p, int hops, unsigned long long *out) {
  unsigned off = 0;
  unsigned long long c0 = clock64();
  for (int i = 0; i < hops; i++) off = *(volatile const unsigned *)(p + off);
  unsigned long long c1 = clock64();
  out[0] = c1 - c0;
  out[1] = off;
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

typedef void (*kern)(const char *, int, unsigned long long *, unsigned *);
template <int S> static kern pick(int U) {
  switch (U) {
    case 1: return k_lshape<S, 1>;
    case 2: return k_lshape<S, 2>;
    case 4: return k_lshape<S, 4>;
    case 8: return k_lshape<S, 8>;
    case 16: return k_lshape<S, 16>;
  }
  return nullptr;
}

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  printf("bench,variant,param,metric,value\n");
  printf("device,%s,-,sms,%d\n", pr.name, pr.multiProcessorCount);
  const size_t DB = 4ull << 30;
  char *d_buf;
  CK(cudaMalloc(&d_buf, DB));
  CK(cudaMemset(d_buf, 1, DB));
  unsigned long long *d_cyc, *d_out;
  unsigned *d_sink;
  CK(cudaMalloc(&d_cyc, 8 * 64)); CK(cudaMalloc(&d_out, 16)); CK(cudaMalloc(&d_sink, 4));
  unsigned long long hc[64];

  // chase: 2,000 lines 4 KB apart in a part of memory the lshape runs do not touch first.
  {
    const int n = 2000;
    std::vector<unsigned> h(n * 1024);
    for (int i = 0; i < n; i++) h[(size_t)i * 1024] = (unsigned)(((i + 1) % n) * 4096);
    char *cp = d_buf + DB - (size_t)n * 4096;
    CK(cudaMemcpy(cp, h.data(), (size_t)n * 4096, cudaMemcpyHostToDevice));
    std::vector<double> v;
    for (int r = 0; r < 4; r++) {
      CK(cudaMemset(d_buf, 0, 64ull << 20));  // pushes the chased lines out of the L2
      k_chase<<<1, 1>>>(cp, n, d_out);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(hc, d_out, 16, cudaMemcpyDeviceToHost));
      v.push_back((double)hc[0] / n);
    }
    printf("chase,device,-,cycles_per_load,%.1f\n", median(v));
    fflush(stdout);
  }

  const int Us[] = {1, 2, 4, 8, 16};
  size_t off = 0;
  for (int S = 0; S < 4; S++)
    for (int W : {1, 8, 32})
      for (int U : Us) {
        if (S == LINE && U > 4) continue;
        kern k = S == V16 ? pick<V16>(U) : S == W4 ? pick<W4>(U) : S == SECTOR ? pick<SECTOR>(U) : pick<LINE>(U);
        size_t perStep = (size_t)U * W * spanBytes(S);
        int iters = (int)std::min<size_t>(256, (96ull << 20) / perStep);
        std::vector<double> v;
        for (int r = 0; r < 6; r++) {
          size_t need = perStep * iters + 4096;
          if (off + need > DB - (64ull << 20)) off = 0;
          k<<<1, 32 * W>>>(d_buf + off, iters, d_cyc, d_sink);
          off += need;
          CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
          CK(cudaMemcpy(hc, d_cyc, 8 * W, cudaMemcpyDeviceToHost));
          unsigned long long mx = 0;
          for (int i = 0; i < W; i++) mx = std::max(mx, hc[i]);
          if (r) v.push_back((double)mx / iters);
        }
        printf("lshape,%s/u%d,%d,cycles_per_step,%.1f\n", shapeName[S], U, W, median(v));
        fflush(stdout);
      }
  return 0;
}
