// collbench verification kernels: the exact patterns of
// crates/core/src/verify.rs, on the GPU, so checking 8 GiB costs one pass
// over memory instead of a copy to the host.
//
// Regenerate verify.ptx (checked in beside this file) on a machine with
// nvcc: see regen-ptx.sh. The PTX targets compute_75 (the oldest CUDA 13 supports) so the driver can JIT
// it for every GPU from Volta on; collbench embeds it and loads it through
// the driver API, so users need no toolkit.
//
// Keep in step with verify.rs: mix(), Pattern::input/reduced/modulus,
// output_source() and ulp_distance(). The enum values below equal the
// explicit discriminants of Collective and ReduceOp in crates/core; the
// cu_contract tests in crates/nccl/src/kernels.rs check them, and the
// layout of Params, against this file.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>

typedef unsigned long long u64;

// Mirrors `KernelParams` in crates/nccl/src/kernels.rs (repr(C)).
struct Params {
  u64 seed;
  u64 modulus;
  u64 send_count;
  u64 recv_count;
  u64 param_count;
  int world;
  int rank;
  int root;
  int coll;   // Collective as i32 (its explicit discriminant)
  int redop;  // ReduceOp as i32; -1 = data movement only
  int tol;    // ULPs allowed (2 for floating avg)
};

enum { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALLTOALL, BROADCAST, REDUCE, SENDRECV, GATHER, SCATTER, HYPERCUBE, ALLTOALLV };
enum { SUM, PROD, MAX, MIN, AVG, MULSUM };

__device__ __forceinline__ u64 mix(u64 x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

__device__ __forceinline__ double input(const Params& p, int rank, u64 index) {
  u64 h = mix(index ^ ((u64)rank << 40) ^ (p.seed * 0x9E3779B97F4A7C15ULL));
  if (p.redop == PROD) return (rank < 4 && (h & 1)) ? 2.0 : 1.0;
  return (double)(h % p.modulus);
}

__device__ double reduced(const Params& p, u64 index, bool is_float) {
  int op = p.redop < 0 ? SUM : p.redop;
  double acc = op == PROD ? 1.0 : (op == MIN ? 1e300 : (op == MAX ? -1e300 : 0.0));
  for (int r = 0; r < p.world; r++) {
    double v = input(p, r, index);
    switch (op) {
      case PROD: acc *= v; break;
      case MIN: acc = fmin(acc, v); break;
      case MAX: acc = fmax(acc, v); break;
      case MULSUM: acc += v * (double)(1 + r % 2); break;
      default: acc += v;
    }
  }
  if (op == AVG) acc = is_float ? acc / p.world : trunc(acc / p.world);
  return acc;
}

// Returns false where the collective leaves element j undefined.
__device__ bool expected(const Params& p, u64 j, bool is_float, double* out) {
  u64 base = p.param_count > 0 ? p.param_count : 1;
  int n = p.world;
  switch (p.coll) {
    case ALL_REDUCE: *out = reduced(p, j, is_float); return true;
    case REDUCE_SCATTER: *out = reduced(p, (u64)p.rank * p.recv_count + j, is_float); return true;
    case ALL_GATHER:
    case HYPERCUBE: *out = input(p, (int)(j / base), j % base); return true;
    case ALLTOALL: *out = input(p, (int)(j / base), (u64)p.rank * base + j % base); return true;
    case BROADCAST: *out = input(p, p.root, j); return true;
    case REDUCE:
      if (p.rank != p.root) return false;
      *out = reduced(p, j, is_float); return true;
    case SENDRECV: *out = input(p, (p.rank + n - 1) % n, j); return true;
    case GATHER:
      if (p.rank != p.root) return false;
      *out = input(p, (int)(j / base), j % base); return true;
    case SCATTER: *out = input(p, p.root, (u64)p.rank * base + j); return true;
  }
  return false;
}

template <typename T> struct Ty;
#define INT_TY(T, B)                                              \
  template <> struct Ty<T> {                                      \
    typedef B Bits;                                               \
    static const bool is_float = false;                           \
    __device__ static T from(double v) { return (T)v; }           \
    __device__ static Bits bits(T x) { return (Bits)x; }          \
  };
INT_TY(int8_t, uint8_t)
INT_TY(uint8_t, uint8_t)
INT_TY(int32_t, uint32_t)
INT_TY(uint32_t, uint32_t)
INT_TY(int64_t, u64)
INT_TY(u64, u64)
template <> struct Ty<float> {
  typedef uint32_t Bits;
  static const bool is_float = true;
  __device__ static float from(double v) { return (float)v; }
  __device__ static Bits bits(float x) { return __float_as_uint(x); }
};
template <> struct Ty<double> {
  typedef u64 Bits;
  static const bool is_float = true;
  __device__ static double from(double v) { return v; }
  __device__ static Bits bits(double x) { return (u64)__double_as_longlong(x); }
};
template <> struct Ty<__half> {
  typedef uint16_t Bits;
  static const bool is_float = true;
  __device__ static __half from(double v) { return __float2half((float)v); }
  __device__ static Bits bits(__half x) { return __half_as_ushort(x); }
};
template <> struct Ty<__nv_bfloat16> {
  typedef uint16_t Bits;
  static const bool is_float = true;
  __device__ static __nv_bfloat16 from(double v) { return __float2bfloat16((float)v); }
  __device__ static Bits bits(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
};
template <> struct Ty<__nv_fp8_e4m3> {
  typedef uint8_t Bits;
  static const bool is_float = true;
  __device__ static __nv_fp8_e4m3 from(double v) { return __nv_fp8_e4m3((float)v); }
  __device__ static Bits bits(__nv_fp8_e4m3 x) { return x.__x; }
};
template <> struct Ty<__nv_fp8_e5m2> {
  typedef uint8_t Bits;
  static const bool is_float = true;
  __device__ static __nv_fp8_e5m2 from(double v) { return __nv_fp8_e5m2((float)v); }
  __device__ static Bits bits(__nv_fp8_e5m2 x) { return x.__x; }
};

// Sign-magnitude distance, as ulp_distance() in verify.rs.
template <typename B>
__device__ u64 ulps(B a, B b) {
  const int bits = sizeof(B) * 8;
  const u64 sign = 1ULL << (bits - 1);
  long long ka = (a & sign) ? -(long long)((u64)a & (sign - 1)) : (long long)a;
  long long kb = (b & sign) ? -(long long)((u64)b & (sign - 1)) : (long long)b;
  long long d = ka - kb;
  return (u64)(d < 0 ? -d : d);
}

template <typename T>
__device__ void fill(T* buf, Params p) {
  u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.send_count; i += stride)
    buf[i] = Ty<T>::from(input(p, p.rank, i));
}

template <typename T>
__device__ void check(const T* out, Params p, u64* wrong) {
  __shared__ unsigned int block_wrong;
  if (threadIdx.x == 0) block_wrong = 0;
  __syncthreads();
  unsigned int mine = 0;
  u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < p.recv_count; j += stride) {
    double want;
    if (!expected(p, j, Ty<T>::is_float, &want)) continue;
    typename Ty<T>::Bits g = Ty<T>::bits(out[j]);
    typename Ty<T>::Bits w = Ty<T>::bits(Ty<T>::from(want));
    if (g != w && (p.tol == 0 || ulps(g, w) > (u64)p.tol)) mine++;
  }
  if (mine) atomicAdd(&block_wrong, mine);
  __syncthreads();
  if (threadIdx.x == 0 && block_wrong) atomicAdd(wrong, (u64)block_wrong);
}

// alltoallv (ALLTOALLV): the layout depends on the run's traffic, so the
// host passes this rank's segments, one per source rank s in rank order:
// segs[3s] = where s's segment starts in the output, segs[3s+1] = its
// element count, segs[3s+2] = where it starts in s's input (as
// alltoallv_source() in verify.rs). Element j belongs to the last segment
// starting at or before j, if it is inside it; past the last, nothing is
// defined. (check() is left as it is so the PTX of the other kernels does
// not change.)
__device__ bool expected_v(const Params& p, const u64* segs, u64 j, double* out) {
  int lo = 0, hi = p.world - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (segs[3 * mid] <= j) lo = mid; else hi = mid - 1;
  }
  u64 start = segs[3 * lo];
  if (j < start || j - start >= segs[3 * lo + 1]) return false;
  *out = input(p, lo, segs[3 * lo + 2] + (j - start));
  return true;
}

template <typename T>
__device__ void check_v(const T* out, Params p, const u64* segs, u64* wrong) {
  __shared__ unsigned int block_wrong_v;
  if (threadIdx.x == 0) block_wrong_v = 0;
  __syncthreads();
  unsigned int mine = 0;
  u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < p.recv_count; j += stride) {
    double want;
    if (!expected_v(p, segs, j, &want)) continue;
    // Data movement only: bit-exact.
    if (Ty<T>::bits(out[j]) != Ty<T>::bits(Ty<T>::from(want))) mine++;
  }
  if (mine) atomicAdd(&block_wrong_v, mine);
  __syncthreads();
  if (threadIdx.x == 0 && block_wrong_v) atomicAdd(wrong, (u64)block_wrong_v);
}

#define KERNELS(NAME, T)                                                                        \
  extern "C" __global__ void collbench_fill_##NAME(T* buf, Params p) { fill<T>(buf, p); }       \
  extern "C" __global__ void collbench_check_##NAME(const T* out, Params p, u64* wrong) {       \
    check<T>(out, p, wrong);                                                                    \
  }
// Appended after KERNELS' entries so those keep their place in the PTX.
#define ALLTOALLV_KERNELS(NAME, T)                                                              \
  extern "C" __global__ void collbench_check_alltoallv_##NAME(const T* out, Params p,          \
                                                              const u64* segs, u64* wrong) {   \
    check_v<T>(out, p, segs, wrong);                                                            \
  }
KERNELS(int8, int8_t)
KERNELS(uint8, uint8_t)
KERNELS(int32, int32_t)
KERNELS(uint32, uint32_t)
KERNELS(int64, int64_t)
KERNELS(uint64, u64)
KERNELS(half, __half)
KERNELS(float, float)
KERNELS(double, double)
KERNELS(bfloat16, __nv_bfloat16)
KERNELS(f8e4m3, __nv_fp8_e4m3)
KERNELS(f8e5m2, __nv_fp8_e5m2)
ALLTOALLV_KERNELS(int8, int8_t)
ALLTOALLV_KERNELS(uint8, uint8_t)
ALLTOALLV_KERNELS(int32, int32_t)
ALLTOALLV_KERNELS(uint32, uint32_t)
ALLTOALLV_KERNELS(int64, int64_t)
ALLTOALLV_KERNELS(uint64, u64)
ALLTOALLV_KERNELS(half, __half)
ALLTOALLV_KERNELS(float, float)
ALLTOALLV_KERNELS(double, double)
ALLTOALLV_KERNELS(bfloat16, __nv_bfloat16)
ALLTOALLV_KERNELS(f8e4m3, __nv_fp8_e4m3)
ALLTOALLV_KERNELS(f8e5m2, __nv_fp8_e5m2)
