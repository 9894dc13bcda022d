// Real-GPU anchors, thirteenth set: what a rewrite of host memory costs one warp, and when
// rewrites merge (gpmbench12's rewrite rows left both open).
//   rewrite3: S blocks (one per SM, on SMs 0..S-1) of W warps; each warp rewrites L lines
//             of pinned host memory of its own, one whole 128-byte line a store (32 lanes x
//             4 bytes, shape w4) or four lines a store (32 lanes x 16 bytes, shape v16), in
//             turn, spinning D cycles (clock64) between its stores, for 400,000 cycles.
//             bytes_per_cycle: the bytes the block stored over its cycles (median block);
//             stores_per_kcycle: one warp's stores per 1,000 cycles (median warp).
//             `new`: the same warps storing to fresh lines (a 16 MB region each), the
//             stream's rate for comparison.
//   more (./g13 more): v16 rewrites of 4 lines a warp beside 1-131 SMs, each warp's own
//             lines or (shared) the block's warps all on the same 4 lines.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench13.cu -o g13 && ./g13 > measured13.csv &&
// ./g13 more > measured13-more.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// Warp w of the block on SM s rewrites lines [0, L) of its own region (regionBytes apart
// per warp), a line (v16 = 0) or four lines (v16 = 1) a store, D cycles apart.
__global__ void k_rw(unsigned S, int v16, unsigned L, unsigned D, int sharedw, size_t regionBytes, char *host,
                     unsigned long long *bytes, unsigned long long *stores, unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (s >= S) return;
  unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32, W = blockDim.x / 32;
  char *base = host + ((size_t)s * W + (sharedw ? 0 : w)) * regionBytes;  // sharedw: the block's warps share one region
  unsigned step = v16 ? 4 : 1;  // lines a store covers
  unsigned long long n = 0, start = clock64(), now = start;
  unsigned li = 0;
  while (now - start < 400000ULL) {
    // Plain (weak) stores, as gpmbench12's; the empty asm with a memory
    // clobber keeps the compiler from dropping a store the next one overwrites.
    if (v16) {
      uint4 v = make_uint4(s, w, (unsigned)n, 4);
      *(uint4 *)(base + (size_t)li * 128 + lane * 16) = v;
    } else {
      *(unsigned *)(base + (size_t)li * 128 + lane * 4) = (unsigned)n;
    }
    asm volatile("" ::: "memory");
    n++;
    li += step;
    if (li >= L) li = 0;
    now = clock64();
    if (D) {
      unsigned long long t = now;
      while (now - t < D) now = clock64();
    }
  }
  if (lane == 0) {
    atomicAdd(&bytes[s], n * (v16 ? 512 : 128));
    stores[s * 32 + w] = n;
  }
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char **argv) {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  printf("device,%s,-,sms,%d\n", pr.name, sms);
  const size_t HB = 2ull << 30;
  void *h_raw, *h_dev;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  unsigned *d_seen; unsigned long long *d_bytes, *d_stores;
  CK(cudaMalloc(&d_seen, 4 * 256)); CK(cudaMalloc(&d_bytes, 8 * 256)); CK(cudaMalloc(&d_stores, 8 * 256 * 32));
  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_rw, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  struct C { int S, W, v16; unsigned L, D; bool fresh; int sharedw = 0; };
  std::vector<C> cs;
  for (int v16 : {0, 1})
    for (int W : {1, 2, 4, 8, 16, 32})
      for (unsigned L : {1u, 4u, 16u, 64u}) {
        if (v16 && L < 4) continue;
        cs.push_back({1, W, v16, L, 0, false});
      }
  for (unsigned D : {25u, 50u, 100u, 200u, 400u, 800u, 1600u}) {
    cs.push_back({1, 1, 0, 1, D, false});
    cs.push_back({1, 1, 0, 64, D, false});
  }
  for (int v16 : {0, 1})
    for (int W : {1, 8, 32}) cs.push_back({1, W, v16, 0, 0, true});
  for (int S : {8, 66})
    for (unsigned L : {4u, 16u}) {
      cs.push_back({S, 8, 0, L, 0, false});
      cs.push_back({S, 8, 1, L * 4, 0, false});
    }
  if (argc > 1) {  // ./g13 more: rewrites of one warp's lines beside other SMs, and warps sharing lines
    cs.clear();
    for (int S : {1, 8, 32, 131})
      for (int W : {8, 32})
        for (int sh : {0, 1}) {
          C c{S, W, 1, 4, 0, false};
          c.sharedw = sh;
          cs.push_back(c);
        }
  }
  for (C c : cs) {
    size_t region = c.fresh ? (16ull << 20) : 64ull * 128;
    unsigned L = c.fresh ? (unsigned)(region / 128) : c.L;
    if ((size_t)c.S * c.W * region > HB) continue;
    std::vector<double> bpc, spk;
    int bad = 0;
    for (int rep = 0; rep < 3; rep++) {
      CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_bytes, 0, 8 * 256)); CK(cudaMemset(d_stores, 0, 8 * 256 * 32));
      k_rw<<<sms, 32 * c.W, smem>>>((unsigned)c.S, c.v16, L, c.D, c.sharedw, region, (char *)h_dev, d_bytes, d_stores, d_seen);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      std::vector<unsigned long long> by(256), st(256 * 32);
      unsigned seen[256];
      CK(cudaMemcpy(by.data(), d_bytes, 8 * 256, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(st.data(), d_stores, 8 * 256 * 32, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
      for (int i = 0; i < sms; i++) bad += seen[i] != 1;
      std::vector<double> b, s;
      for (int i = 0; i < c.S; i++) {
        b.push_back((double)by[i] / 400000.0);
        for (int w = 0; w < c.W; w++) s.push_back((double)st[i * 32 + w] / 400.0);
      }
      bpc.push_back(median(b));
      spk.push_back(median(s));
    }
    char var[96], par[32];
    snprintf(var, sizeof var, "%s/S%d/W%d%s", c.v16 ? "v16" : "w4", c.S, c.W, c.sharedw ? "/shared" : "");
    if (c.fresh) snprintf(par, sizeof par, "new");
    else snprintf(par, sizeof par, "L%u/D%u", c.L, c.D);
    printf("rewrite3,%s,%s,bytes_per_cycle,%.2f\n", var, par, median(bpc));
    printf("rewrite3,%s,%s,stores_per_kcycle,%.2f\n", var, par, median(spk));
    printf("rewrite3,%s,%s,blocks_not_one_per_sm,%d\n", var, par, bad);
    fflush(stdout);
  }
  return 0;
}
