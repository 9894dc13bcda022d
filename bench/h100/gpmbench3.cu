// Real-GPU anchors, third set: what the model still guessed. Load latencies by level
// (L1, L2, device memory, pinned host memory), L2 atomics, whether a fence waits for
// other SMs' writes, the cost of the loop in gpmbench.cu's conc kernel, and the parts of
// conventional logging's time (gpmbench.cu's k_conv with the tail, the log or the fences
// moved or removed), and how deep the queue in front of a fence is.
// Build and run: nvcc -O3 -arch=sm_90 gpmbench3.cu -o g3 && ./g3 > measured3.csv
// Prints CSV: bench,variant,param,metric,value
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <random>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ unsigned long long gtimer() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__global__ void k_clock(unsigned long long *out) {
  unsigned long long c0 = clock64(), t0 = gtimer();
  while (gtimer() - t0 < 20000000ULL) {}
  out[0] = clock64() - c0; out[1] = gtimer() - t0;
}

// A. One thread chases a random cycle of lines (each hop's address is the last load's
// value): warm hops first (not timed), then timed hops. M: 0 L1 (ld.ca), 1 L2 (ld.cg),
// 2 volatile (ld.volatile: no L1).
template <int M>
__global__ void k_chase(const unsigned *p, int warm, int hops, unsigned long long *out) {
  unsigned j = 0;
  for (int i = 0; i < warm; i++) j = M == 0 ? __ldca(p + j) : M == 1 ? __ldcg(p + j) : *(volatile const unsigned *)(p + j);
  unsigned long long c0 = clock64();
  for (int i = 0; i < hops; i++) j = M == 0 ? __ldca(p + j) : M == 1 ? __ldcg(p + j) : *(volatile const unsigned *)(p + j);
  unsigned long long c1 = clock64();
  out[0] = c1 - c0; out[1] = j;
}

// B. One thread, dependent atomics on one word of device memory (they execute at the L2).
// K: 0 atomicAdd, 1 atomicCAS, 2 atomicExch.
template <int K>
__global__ void k_atom(int *p, int n, unsigned long long *out) {
  int v = 0;
  unsigned long long c0 = clock64();
  for (int i = 0; i < n; i++) {
    int *q = p + (v >> 30);  // always p (v stays small), but the address waits for v
    v = K == 0 ? atomicAdd(q, 1) : K == 1 ? atomicCAS(q, v, v + 1) : atomicExch(q, v + 1);
  }
  out[0] = clock64() - c0; out[1] = v;
}

// C. Does a fence wait for other SMs' writes? Blocks [0, F) are fencers: thread 0 loops
// (an optional 4-byte store to its own host line, then a fence) until every streamer block
// is done, or for `alone` iterations when there are none; it checks the streamers'
// counter every 16 iterations in both cases. Blocks [F, grid) stream 16-byte stores,
// wrapping in a buffer of mask+1 elements, then count themselves done.
__global__ void k_by(int F, int fence, int fstore, volatile unsigned *fl, uint4 *sp, size_t mask, int siters,
                     unsigned *done, int alone, unsigned long long *fcyc, unsigned long long *fn) {
  int S = gridDim.x - F;
  if ((int)blockIdx.x < F) {
    if (threadIdx.x != 0) return;
    volatile unsigned *vd = done;
    volatile unsigned *q = fl + (size_t)blockIdx.x * 4096 * 32;
    unsigned long long n = 0, c0 = clock64();
    for (;;) {
      if ((n & 15) == 0) {
        unsigned d = *vd;
        if (S > 0 ? d >= (unsigned)S : n >= (unsigned long long)alone) break;
      }
      if (fstore) q[(n & 4095) * 32] = (unsigned)n;
      if (fence == 3) __threadfence_system(); else if (fence == 2) __threadfence();
      n++;
    }
    fcyc[blockIdx.x] = clock64() - c0; fn[blockIdx.x] = n;
    return;
  }
  size_t nt = (size_t)S * blockDim.x, g = (size_t)(blockIdx.x - F) * blockDim.x + threadIdx.x;
  uint4 v = make_uint4(1, 2, 3, 4);
  for (int k = 0; k < siters; k++) sp[((size_t)k * nt + g) & mask] = v;
  __syncthreads();
  if (threadIdx.x == 0) { __threadfence(); atomicAdd(done, 1); }
}

// D. gpmbench.cu's conc kernel with the store optional: the loop's own cost (the 64-bit
// modulo), its result kept live.
__global__ void k_conc(volatile unsigned *p, int iters, int store, size_t lines) {
  size_t w = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  size_t acc = 0;
  for (int i = 0; i < iters; i++) {
    size_t l = (w * iters + i) % lines;
    if (store) p[l * 32 + lane] = i; else acc += l;
  }
  if (acc == 0x123456789abcdefULL) p[lane] = 1;
}

// E. gpmbench.cu's conventional logging, with the fences optional.
__global__ void k_conv(volatile unsigned *log, volatile unsigned *tail, int *locks, int n, int parts, int cap, int fences) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  int p = tid % parts;
  bool done = false;
  while (!done) {
    if (atomicCAS(&locks[p], 0, 1) == 0) {
      unsigned t = tail[p];
      for (int j = 0; j < 5; j++) log[((size_t)p * cap + t) * 8 + j] = tid + j;
      if (fences) __threadfence_system();
      tail[p] = t + 1;
      if (fences) __threadfence_system();
      atomicExch(&locks[p], 0);
      done = true;
    }
  }
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
  template <class F> float median(F f, int reps) {
    std::vector<float> v;
    f(); CK(cudaDeviceSynchronize());
    for (int r = 0; r < reps; r++) {
      CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
      float ms; CK(cudaEventElapsedTime(&ms, a, b)); v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

// A random cycle over `lines` 128-byte lines (Sattolo), written as word indices.
static void cycle(unsigned *w, size_t lines, unsigned seed) {
  std::vector<unsigned> perm(lines);
  for (size_t i = 0; i < lines; i++) perm[i] = (unsigned)i;
  std::mt19937_64 rng(seed);
  for (size_t i = lines - 1; i > 0; i--) { size_t j = rng() % i; std::swap(perm[i], perm[j]); }
  for (size_t i = 0; i < lines; i++) w[(size_t)perm[i] * 32] = perm[(i + 1) % lines] * 32;
}

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int sms = pr.multiProcessorCount;
  printf("bench,variant,param,metric,value\n");
  printf("device,%s,-,sms,%d\n", pr.name, sms);
  unsigned long long *d_out, h_out[2];
  CK(cudaMalloc(&d_out, 64));
  k_clock<<<1, 1>>>(d_out); CK(cudaMemcpy(h_out, d_out, 16, cudaMemcpyDeviceToHost));
  double ghz = (double)h_out[0] / (double)h_out[1];
  printf("device,clock,-,ghz,%.4f\n", ghz);

  const size_t HB = 1ull << 30;
  void *h_raw, *h_dev, *d_buf;
  CK(cudaHostAlloc(&h_raw, HB, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&h_dev, h_raw, 0));
  CK(cudaMalloc(&d_buf, HB));
  Timer tm;

  // A. load latency by level
  {
    std::vector<unsigned> stage(HB / 4);
    struct L { const char *name; int mode; bool host; size_t bytes; int warm; };
    L ls[] = {
        {"l1", 0, false, 8 << 10, 64},            // 64 lines: L1 hits after the first lap
        {"l2", 1, false, 1 << 20, 8192},          // 1 MB, ld.cg after a warm lap: L2 hits
        {"device", 1, false, 256u << 20, 0},      // 256 MB of 50 MB L2: mostly misses
        {"host", 2, true, 512u << 20, 0},         // 512 MB of pinned host memory over PCIe
        {"host-l2", 1, true, 1 << 20, 8192},      // 1 MB of host memory, ld.cg after a warm lap
    };
    for (auto &l : ls) {
      size_t lines = l.bytes / 128;
      unsigned *w = l.host ? (unsigned *)h_raw : stage.data();
      cycle(w, lines, 1);
      if (!l.host) CK(cudaMemcpy(d_buf, stage.data(), l.bytes, cudaMemcpyHostToDevice));
      const unsigned *p = (const unsigned *)(l.host ? h_dev : d_buf);
      int hops = l.host && l.mode == 2 ? 2000 : 4000;
      for (int rep = 0; rep < 3; rep++) {
        if (l.mode == 0) k_chase<0><<<1, 1>>>(p, l.warm, hops, d_out);
        else if (l.mode == 1) k_chase<1><<<1, 1>>>(p, l.warm, hops, d_out);
        else k_chase<2><<<1, 1>>>(p, l.warm, hops, d_out);
        CK(cudaMemcpy(h_out, d_out, 16, cudaMemcpyDeviceToHost));
        printf("load,%s,rep%d,cycles,%.1f\n", l.name, rep, (double)h_out[0] / hops);
      }
    }
  }

  // B. atomics at the L2, one thread, dependent
  {
    int *a = (int *)d_buf;
    const char *an[3] = {"add", "cas", "exch"};
    for (int k = 0; k < 3; k++) {
      CK(cudaMemset(a, 0, 64));
      int n = 4000;
      for (int rep = 0; rep < 2; rep++) {
        if (k == 0) k_atom<0><<<1, 1>>>(a, n, d_out);
        else if (k == 1) k_atom<1><<<1, 1>>>(a, n, d_out);
        else k_atom<2><<<1, 1>>>(a, n, d_out);
        CK(cudaMemcpy(h_out, d_out, 16, cudaMemcpyDeviceToHost));
        printf("atom,device/%s,rep%d,cycles,%.1f\n", an[k], rep, (double)h_out[0] / n);
      }
    }
  }

  // C. a fence against other SMs' streaming writes
  {
    unsigned *d_done; CK(cudaMalloc(&d_done, 4));
    unsigned long long *d_fc, *d_fn; CK(cudaMalloc(&d_fc, 8 * sms)); CK(cudaMalloc(&d_fn, 8 * sms));
    std::vector<unsigned long long> fc(sms), fn(sms);
    volatile unsigned *fl = (volatile unsigned *)((char *)h_dev + (HB / 2));  // fencers' own lines, host
    struct V { int F, S; int target; double mb; };  // target 0 host, 1 device
    V vs[] = {{1, 0, 0, 0}, {1, 1, 0, 64}, {1, sms - 1, 0, 128}, {1, sms - 1, 1, 4096},
              {32, sms - 32, 0, 128}, {0, sms - 32, 0, 128}, {0, sms, 0, 128}};
    for (int fence : {3, 2})
      for (int fstore : {0, 1})
        for (auto &v : vs) {
          if (v.F == 0 && (fence != 3 || fstore != 0)) continue;  // streamers alone: once
          if (v.F == 32 && fstore != 0) continue;
          uint4 *sp = (uint4 *)(v.target ? d_buf : h_dev);
          size_t mask = (HB / 2) / 16 - 1;  // the first half: the fencers' lines are in the second
          int threads = 256;
          int siters = v.S ? (int)(v.mb * 1048576.0 / (16.0 * threads * v.S)) : 0;
          std::vector<float> ts;
          std::vector<double> cyc;
          for (int rep = 0; rep < 3; rep++) {
            CK(cudaMemset(d_done, 0, 4));
            CK(cudaEventRecord(tm.a));
            k_by<<<v.F + v.S, threads>>>(v.F, fence, fstore, fl, sp, mask, siters, d_done, 2000, d_fc, d_fn);
            CK(cudaEventRecord(tm.b)); CK(cudaEventSynchronize(tm.b));
            float ms; CK(cudaEventElapsedTime(&ms, tm.a, tm.b)); ts.push_back(ms);
            if (v.F) {
              CK(cudaMemcpy(fc.data(), d_fc, 8 * v.F, cudaMemcpyDeviceToHost));
              CK(cudaMemcpy(fn.data(), d_fn, 8 * v.F, cudaMemcpyDeviceToHost));
              std::vector<double> per;
              for (int i = 0; i < v.F; i++) per.push_back(fn[i] ? (double)fc[i] / fn[i] : 0);
              std::sort(per.begin(), per.end());
              cyc.push_back(per[per.size() / 2]);
            }
          }
          std::sort(ts.begin(), ts.end()); std::sort(cyc.begin(), cyc.end());
          char var[96];
          snprintf(var, sizeof var, "%s/%s/F%d/S%d/%s", fence == 3 ? "system" : "gpu", fstore ? "store" : "nostore", v.F, v.S,
                   v.S ? (v.target ? "device" : "host") : "none");
          if (v.F) printf("bystander,%s,-,fence_cycles,%.1f\n", var, cyc[1]);
          if (v.S) printf("bystander,%s,-,stream_gbps,%.2f\n", var, (double)siters * 16.0 * threads * v.S / (ts[1] * 1e-3) / 1e9);
        }
  }

  // D. the conc kernel's loop with and without its store, host memory
  for (int store : {0, 1})
    for (int warps : {1, 16, 132, 528, 2112}) {
      int tpb = std::min(warps * 32, 256), iters = 64;
      float ms = tm.median([&] { k_conc<<<warps * 32 / tpb, tpb>>>((volatile unsigned *)h_dev, iters, store, HB / 128); }, 5);
      printf("conc,host/%s,%d,us_per_iter,%.3f\n", store ? "none" : "nostore", warps, ms * 1000.0 / iters);
    }
  {
    float ms = tm.median([&] { k_conc<<<1, 32>>>((volatile unsigned *)h_dev, 0, 1, HB / 128); }, 50);
    printf("launch,empty,-,us,%.2f\n", ms * 1000);
  }

  // E. conventional logging, decomposed: where the log, the tail and the fences are
  {
    int *d_locks; CK(cudaMalloc(&d_locks, 64 * sizeof(int))); CK(cudaMemset(d_locks, 0, 64 * sizeof(int)));
    CK(cudaMemset((char *)d_buf + (512u << 20), 0, 4096));  // the tails start at 0
    memset((char *)h_raw + (512u << 20), 0, 4096);
    struct C { const char *name; int loghost, tailhost, fences; };
    C cs[] = {{"conv", 1, 1, 1}, {"conv-devtail", 1, 0, 1}, {"conv-nofence", 1, 1, 0},
              {"conv-dev-nofence", 0, 0, 0}, {"conv-dev", 0, 0, 1}};
    for (auto &c : cs)
      for (int n : {32, 128, 512, 2048}) {
        int tpb = std::min(n, 256), parts = 32, cap = (n + 31) / 32 + 1;
        volatile unsigned *lg = (volatile unsigned *)(c.loghost ? h_dev : d_buf);
        volatile unsigned *tl = (volatile unsigned *)((char *)(c.tailhost ? h_dev : d_buf) + (512u << 20));
        float ms = tm.median([&] { k_conv<<<(n + 255) / 256, tpb>>>(lg, tl, d_locks, n, parts, cap, c.fences); }, 21);
        printf("log,%s,%d,us,%.2f\n", c.name, n, ms * 1000);
      }
  }
  // F. how deep the queue in front of a fence is: one fencer (system fence, no store)
  // against S streaming SMs of W warps each, to host or device memory
  {
    unsigned *d_done; CK(cudaMalloc(&d_done, 4));
    unsigned long long *d_fc, *d_fn; CK(cudaMalloc(&d_fc, 8)); CK(cudaMalloc(&d_fn, 8));
    volatile unsigned *fl = (volatile unsigned *)((char *)h_dev + (HB / 2));
    size_t mask = (HB / 2) / 16 - 1;
    for (int target : {0, 1})
      for (int S : {1, 8, 32, 66, sms - 1})
        for (int W : {1, 8, 32}) {
          if (target == 1 && S != sms - 1) continue;
          int threads = 32 * W;
          double mb = target ? 4096 : (S == 1 ? 64 : 128);
          int siters = (int)(mb * 1048576.0 / (16.0 * threads * S));
          uint4 *sp = (uint4 *)(target ? d_buf : h_dev);
          std::vector<float> ts; std::vector<double> cyc;
          for (int rep = 0; rep < 3; rep++) {
            CK(cudaMemset(d_done, 0, 4));
            CK(cudaEventRecord(tm.a));
            k_by<<<1 + S, threads>>>(1, 3, 0, fl, sp, mask, siters, d_done, 2000, d_fc, d_fn);
            CK(cudaEventRecord(tm.b)); CK(cudaEventSynchronize(tm.b));
            float ms; CK(cudaEventElapsedTime(&ms, tm.a, tm.b)); ts.push_back(ms);
            unsigned long long fc, fn;
            CK(cudaMemcpy(&fc, d_fc, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&fn, d_fn, 8, cudaMemcpyDeviceToHost));
            cyc.push_back(fn ? (double)fc / fn : 0);
          }
          std::sort(ts.begin(), ts.end()); std::sort(cyc.begin(), cyc.end());
          char var[64];
          snprintf(var, sizeof var, "%s/S%d/W%d", target ? "device" : "host", S, W);
          printf("depth,%s,-,fence_cycles,%.1f\n", var, cyc[1]);
          printf("depth,%s,-,stream_gbps,%.2f\n", var, (double)siters * 16.0 * threads * S / (ts[1] * 1e-3) / 1e9);
        }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
