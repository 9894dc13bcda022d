// Real-GPU anchors, sixth set: is the buffer in front of the host link per GPC? Thread
// block clusters run on one GPC, so launching clusters of 16, 8 and 4 blocks (one block
// per SM) and joining the SMs each cluster ran on groups SM ids by GPC (gpcmap rows: the
// group of each SM id). Then gpmbench5's depth kernel on chosen SM sets: k streaming SMs
// all in one group (`same/k`), k SMs each in a different group (`distinct/k`), or two SMs
// in each of k groups (`two-each/k`); the fencer runs on an SM outside the streaming set.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench6.cu -o g6 && ./g6 > measured6.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <numeric>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

__global__ void k_map(unsigned *out) {
  extern __shared__ unsigned char pad[];
  if (threadIdx.x == 0) { pad[0] = 1; out[blockIdx.x] = smid(); }
}

// The block on SM fsm fences 64 times after a 400,000-cycle wait, then stops the streams;
// blocks on SMs with set[s] != 0 stream 16-byte stores into their own 4 MB regions.
__global__ void k_depth(const unsigned char *set, unsigned fsm, int fences, volatile unsigned *stop, uint4 *sp,
                        unsigned long long *fcyc, unsigned long long *bytes, unsigned *seen) {
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
  if (!set[s]) return;
  const size_t region = (4u << 20) / 16;
  uint4 *base = sp + (size_t)s * region;
  uint4 v = make_uint4(s, 2, 3, 4);
  unsigned long long n = 0, start = clock64();
  size_t i = threadIdx.x;
  for (unsigned long long k = 0;; k++) {
    if ((k & 63) == 0 && (*stop || clock64() - start > 40000000ULL)) break;
    base[i] = v;
    i += blockDim.x;
    if (i >= region) i -= region;
    n++;
  }
  atomicAdd((unsigned long long *)bytes, n * 16);
}

static int find(std::vector<int> &p, int x) { while (p[x] != x) x = p[x] = p[p[x]]; return x; }

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  int smem = 200 << 10;
  CK(cudaFuncSetAttribute(k_map, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(k_depth, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncSetAttribute(k_map, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  unsigned *d_out; CK(cudaMalloc(&d_out, 4 * 1024));
  std::vector<int> par(sms); std::iota(par.begin(), par.end(), 0);
  for (int cs : {16, 8, 4, 2})
    for (int rep = 0; rep < 6; rep++) {
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = cs; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
      cfg.blockDim = dim3(64); cfg.dynamicSmemBytes = smem; cfg.attrs = at; cfg.numAttrs = 1;
      cfg.gridDim = dim3(cs);
      int ncl = 0;
      if (cudaOccupancyMaxActiveClusters(&ncl, k_map, &cfg) != cudaSuccess || ncl <= 0) { cudaGetLastError(); printf("gpcmap,cluster%d,-,max_active_clusters,0\n", cs); break; }
      // rep 0: as many clusters as fit; later reps: fewer, so the scheduler places them differently
      int use = rep == 0 ? ncl : std::max(1, ncl - rep);
      cfg.gridDim = dim3(cs * use);
      if (cudaLaunchKernelEx(&cfg, k_map, d_out) != cudaSuccess) { cudaGetLastError(); printf("gpcmap,cluster%d,-,launch_failed,1\n", cs); break; }
      CK(cudaDeviceSynchronize());
      std::vector<unsigned> out(cs * use);
      CK(cudaMemcpy(out.data(), d_out, 4 * out.size(), cudaMemcpyDeviceToHost));
      for (int c = 0; c < use; c++)
        for (int j = 1; j < cs; j++) {
          unsigned x = out[c * cs], y = out[c * cs + j];
          if (x < (unsigned)sms && y < (unsigned)sms) par[find(par, x)] = find(par, y);
        }
      if (rep == 0) printf("gpcmap,cluster%d,-,max_active_clusters,%d\n", cs, ncl);
    }
  // groups, largest first; ids in ascending order within each
  std::vector<std::vector<int>> groups;
  {
    std::vector<int> rootIdx(sms, -1);
    for (int s = 0; s < sms; s++) {
      int r = find(par, s);
      if (rootIdx[r] < 0) { rootIdx[r] = (int)groups.size(); groups.push_back({}); }
      groups[rootIdx[r]].push_back(s);
    }
    std::stable_sort(groups.begin(), groups.end(), [](const std::vector<int> &a, const std::vector<int> &b) { return a.size() > b.size(); });
  }
  printf("gpcmap,-,-,groups,%zu\n", groups.size());
  for (size_t g = 0; g < groups.size(); g++) {
    printf("gpcmap,group%zu,-,sms,%zu\n", g, groups[g].size());
    for (int s : groups[g]) printf("gpcmap,group%zu,sm%d,member,1\n", g, s);
  }
  fflush(stdout);

  const size_t HB = 1ull << 30;
  void *h_raw, *h_dev;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  unsigned char *d_set; CK(cudaMalloc(&d_set, 256));
  unsigned *d_stop, *d_seen; CK(cudaMalloc(&d_stop, 4)); CK(cudaMalloc(&d_seen, 4 * 256));
  unsigned long long *d_fc, *d_bytes; CK(cudaMalloc(&d_fc, 8)); CK(cudaMalloc(&d_bytes, 8));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  const int fences = 64;
  int G = (int)groups.size();
  // the fencer: the last SM of the smallest group; streamers never use that group
  unsigned fsm = (unsigned)groups[G - 1].back();
  int usable = G - 1;
  auto run = [&](const char *var, int k, const std::vector<int> &ids) {
    std::vector<unsigned char> set(256, 0);
    for (int s : ids) set[s] = 1;
    CK(cudaMemcpy(d_set, set.data(), 256, cudaMemcpyHostToDevice));
    std::vector<double> cyc, gb;
    int bad = 0;
    for (int rep = 0; rep < 3; rep++) {
      CK(cudaMemset(d_stop, 0, 4)); CK(cudaMemset(d_seen, 0, 4 * 256)); CK(cudaMemset(d_bytes, 0, 8));
      CK(cudaEventRecord(a));
      k_depth<<<sms, 256, smem>>>(d_set, fsm, fences, d_stop, (uint4 *)h_dev, d_fc, d_bytes, d_seen);
      CK(cudaGetLastError());
      CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
      float ms; CK(cudaEventElapsedTime(&ms, a, b));
      unsigned long long fc, by; unsigned seen[256];
      CK(cudaMemcpy(&fc, d_fc, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&by, d_bytes, 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(seen, d_seen, 4 * 256, cudaMemcpyDeviceToHost));
      for (int i = 0; i < sms; i++) bad += seen[i] != 1;
      cyc.push_back((double)fc / fences);
      gb.push_back((double)by / (ms * 1e-3) / 1e9);
    }
    std::sort(cyc.begin(), cyc.end()); std::sort(gb.begin(), gb.end());
    printf("gpcdepth,%s,%d,fence_cycles,%.1f\n", var, k, cyc[1]);
    printf("gpcdepth,%s,%d,stream_gbps,%.2f\n", var, k, gb[1]);
    printf("gpcdepth,%s,%d,blocks_not_one_per_sm,%d\n", var, k, bad);
    fflush(stdout);
  };
  run("none", 0, {});
  for (int k : {1, 2, 4, 8, 16}) {
    if ((int)groups[0].size() < k || usable < 1) break;
    run("same", k, std::vector<int>(groups[0].begin(), groups[0].begin() + k));
  }
  for (int k : {2, 3, 4, 5, 6, 7, 8}) {
    if (k > usable) break;
    std::vector<int> ids;
    for (int g = 0; g < k; g++) ids.push_back(groups[g][0]);
    run("distinct", k, ids);
  }
  for (int k : {1, 2, 4, 7}) {
    if (k > usable) break;
    std::vector<int> ids;
    for (int g = 0; g < k; g++) if (groups[g].size() >= 2) { ids.push_back(groups[g][0]); ids.push_back(groups[g][1]); }
    run("two-each", k, ids);
  }
  // the whole of k groups
  for (int k : {1, 2, 4}) {
    if (k > usable) break;
    std::vector<int> ids;
    for (int g = 0; g < k; g++) ids.insert(ids.end(), groups[g].begin(), groups[g].end());
    run("whole", k, ids);
  }
  return 0;
}
