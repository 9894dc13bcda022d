// Real-GPU anchors, eleventh set: where a host read joins the queue of host writes. A host
// read beside streaming SMs waits a quarter to a half of what a fence beside them waits
// (measured7.csv, rprobe). If the writes queue first per GPC and reads join downstream, a
// probe in the streamers' GPC waits more than one in another GPC; if per SM, the same.
//   rjoin: streaming SMs (8 warps, 16-byte stores into their own 4 MB regions of pinned host
//          memory) chosen by GPC group (gpmbench6.cu's map, the same on H100 and H200), and a
//          probe block on SM P that, after 400,000 cycles, times 32 dependent 4-byte loads of
//          host lines no one writes (chase: cycles each) and then 16 system fences (fence:
//          cycles each), then stops the streams. Median of 3.
//   rtable (./g11 table): the same for streams from one group at a time (groups 0-7, all of
//          the group's SMs but its first two) and the probe on the first SM of each group 0-13.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench11.cu -o g11 && ./g11 > measured11.csv
//   (and ./g11 table > measured11-table.csv)
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// role[s]: 0 idle, 1 stream, 2 probe.
__global__ void k_rjoin(const unsigned char *role, volatile unsigned *stop, uint4 *sp, const unsigned *chase,
                        unsigned long long *out, unsigned *seen) {
  extern __shared__ unsigned char pad[];
  unsigned s = smid();
  if (threadIdx.x == 0) { pad[0] = 1; atomicAdd(&seen[s], 1); }
  if (role[s] == 2) {
    if (threadIdx.x != 0) return;
    unsigned long long w = clock64();
    while (clock64() - w < 400000ULL) {}
    unsigned j = 0;
    unsigned long long c0 = clock64();
    for (int i = 0; i < 32; i++) j = *(volatile const unsigned *)(chase + j * 32);
    unsigned long long c1 = clock64();
    for (int i = 0; i < 16; i++) __threadfence_system();
    unsigned long long c2 = clock64();
    out[0] = c1 - c0;
    out[1] = c2 - c1;
    out[2] = j;
    *stop = 1;
    __threadfence();
    return;
  }
  if (role[s] != 1) return;
  const size_t region = (4u << 20) / 16;
  uint4 *base = sp + (size_t)s * region;
  uint4 v = make_uint4(s, 2, 3, 4);
  unsigned long long start = clock64();
  size_t i = threadIdx.x;
  for (unsigned long long k = 0;; k++) {
    if ((k & 63) == 0 && (*stop || clock64() - start > 400000000ULL)) break;
    base[i] = v;
    i += blockDim.x;
    if (i >= region) i -= region;
  }
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

// GPC group g's SM ids (gpmbench6.cu, measured6-h100.csv): groups 0-6 hold 16 SMs each.
static std::vector<int> group(int g) {
  std::vector<int> ids;
  for (int k = 0; k < 8; k++) {
    int a = k < 4 ? 2 + 2 * g + 16 * k : 64 + 2 * g + 14 * (k - 4);
    ids.push_back(a);
    ids.push_back(a + 1);
  }
  return ids;
}

// The SM ids of groups 7-13 (gpmbench6.cu's map).
static std::vector<int> smallGroup(int g) {
  if (g == 7) return {0, 1, 16, 17, 32, 33, 48, 49};
  int a = 120 + 2 * (g - 8);
  return {a, a + 1};
}

int main(int argc, char **argv) {
  bool table = argc > 1 && strcmp(argv[1], "table") == 0;
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  printf("device,%s,-,sms,%d\n", pr.name, sms);
  const size_t HB = 1ull << 30;
  void *h_raw, *h_dev;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  unsigned *hw = (unsigned *)h_raw;
  unsigned *chase = hw + (900ull << 20) / 4;
  for (unsigned i = 0; i < 64; i++) chase[i * 32] = (i + 17) & 63;
  unsigned char *d_role; unsigned *d_stop, *d_seen; unsigned long long *d_out;
  CK(cudaMalloc(&d_role, 256)); CK(cudaMalloc(&d_stop, 4)); CK(cudaMalloc(&d_seen, 4 * 256)); CK(cudaMalloc(&d_out, 32));
  int smem = 200 << 10;  // one block per SM
  CK(cudaFuncSetAttribute(k_rjoin, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  // Each case: streaming set and probe SM.
  struct C { const char *name; std::vector<int> streams; int probe; };
  std::vector<C> cs;
  std::vector<int> g0 = group(0), g1 = group(1);
  if (table) {
    for (int sg = 0; sg < 8; sg++) {
      std::vector<int> m = sg < 7 ? group(sg) : smallGroup(7);
      std::vector<int> st(m.begin() + 2, m.end());
      for (int pg = 0; pg < 14; pg++) {
        int p = pg < 7 ? group(pg)[0] : smallGroup(pg)[0];
        char name[64];
        snprintf(name, sizeof name, "streams-g%d/probe-g%d", sg, pg);
        cs.push_back({strdup(name), st, p});
      }
    }
  } else {
  std::vector<int> g0less(g0.begin() + 2, g0.end());  // group 0 without SMs 2 and 3
  cs.push_back({"none", {}, 2});
  cs.push_back({"g0x14/probe-g0", g0less, 2});
  cs.push_back({"g0x14/probe-g1", g0less, 4});
  cs.push_back({"g0x14/probe-g13", g0less, 131});
  std::vector<int> g1less(g1.begin() + 2, g1.end());  // group 1 without SMs 4 and 5
  cs.push_back({"g1x14/probe-g1", g1less, 4});
  cs.push_back({"g1x14/probe-g0", g1less, 2});
  std::vector<int> spread;  // two SMs of each of groups 0-6, not SMs 2, 3
  for (int g = 0; g < 7; g++) { std::vector<int> x = group(g); spread.push_back(x[2]); spread.push_back(x[3]); }
  cs.push_back({"spread14/probe-g0", spread, 2});
  cs.push_back({"spread14/probe-g13", spread, 131});
  std::vector<int> all;  // every SM but 2 and 131
  for (int s = 0; s < sms; s++) if (s != 2 && s != 131) all.push_back(s);
  cs.push_back({"all130/probe-g0", all, 2});
  std::vector<int> all2;
  for (int s = 0; s < sms; s++) if (s != 2 && s != 131) all2.push_back(s);
  cs.push_back({"all130/probe-g13", all2, 131});
  }
  for (auto &c : cs) {
    unsigned char role[256]; memset(role, 0, sizeof role);
    for (int s : c.streams) role[s] = 1;
    role[c.probe] = 2;
    CK(cudaMemcpy(d_role, role, 256, cudaMemcpyHostToDevice));
    std::vector<double> ch, fe; int bad = 0;
    for (int r = 0; r < 3; r++) {
      CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256));
      k_rjoin<<<sms, 256, smem>>>(d_role, (volatile unsigned *)d_stop, (uint4 *)h_dev,
                                  (const unsigned *)((char *)h_dev + (900ull << 20)), d_out, d_seen);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      unsigned long long hc[4];
      CK(cudaMemcpy(hc, d_out, 32, cudaMemcpyDeviceToHost));
      ch.push_back((double)hc[0] / 32); fe.push_back((double)hc[1] / 16);
      unsigned seen[256];
      CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
      for (int i = 0; i < sms; i++) bad += seen[i] != 1;
    }
    const char *bench = table ? "rtable" : "rjoin";
    printf("%s,%s,%zu,chase_cycles,%.1f\n", bench, c.name, c.streams.size(), median(ch));
    printf("%s,%s,%zu,fence_cycles,%.1f\n", bench, c.name, c.streams.size(), median(fe));
    printf("%s,%s,%zu,blocks_not_one_per_sm,%d\n", bench, c.name, c.streams.size(), bad);
    fflush(stdout);
  }
  return 0;
}
