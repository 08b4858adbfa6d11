// collbench's device-API collectives (`-D N`, nccl-tests' "device
// implementations"): all_reduce and alltoall written against NCCL 2.28's
// device API (nccl_device.h), each rank loading and storing its peers'
// symmetric windows directly over NVLink (the LSA team) between two LSA
// barriers. collbench embeds the PTX (device_api.ptx, made by
// regen-device-ptx.sh) and launches the kernels through the driver API with
// `-V` CTAs of 512 threads, as nccl-tests launches its own.
//
// Every kernel has nccl-tests' device-kernel signature:
//   (ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
//    size_t recvoffset, size_t count, int root, ncclDevComm devComm)
// with byte offsets into the windows and the ncclDevComm passed by value;
// crates/nccl/src/device_api.rs mirrors ncclDevComm's layout, checked here
// by the static_asserts below (and the Rust side's tests read them).
//
// Implementations (the numbers of nccl-tests 2.19.6 for one NVLink domain):
//   all_reduce 1: one element per thread, summed over peers, written to
//                 every peer;
//   all_reduce 2: the same in 16-byte packs where the offsets allow;
//   alltoall   1: one element per thread, pushed to every peer;
//   alltoall   2: the same in 16-byte packs where the offsets allow.
// Sum only, on int8 .. double (no bfloat16 or fp8), as in nccl-tests.

#include <cuda_fp16.h>
#include <stdint.h>
#include <stddef.h>
#include "nccl_device.h"

// The layout crates/nccl/src/device_api.rs gives `DevComm` and
// `DevCommRequirements` (NCCL 2.28.3, 64-bit). A header that moves a field
// stops the build here instead of handing the kernels a garbled struct.
static_assert(sizeof(ncclDevComm) == 88, "ncclDevComm size");
static_assert(offsetof(ncclDevComm, rank) == 0, "ncclDevComm.rank");
static_assert(offsetof(ncclDevComm, nRanks) == 4, "ncclDevComm.nRanks");
static_assert(offsetof(ncclDevComm, lsaRank) == 12, "ncclDevComm.lsaRank");
static_assert(offsetof(ncclDevComm, lsaSize) == 16, "ncclDevComm.lsaSize");
static_assert(offsetof(ncclDevComm, windowTable) == 24, "ncclDevComm.windowTable");
static_assert(offsetof(ncclDevComm, resourceWindow) == 32, "ncclDevComm.resourceWindow");
static_assert(offsetof(ncclDevComm, resourceWindow_inlined) == 40, "ncclDevComm.resourceWindow_inlined");
static_assert(offsetof(ncclDevComm, lsaMultimem) == 72, "ncclDevComm.lsaMultimem");
static_assert(offsetof(ncclDevComm, lsaBarrier) == 80, "ncclDevComm.lsaBarrier");
static_assert(sizeof(ncclDevCommRequirements) == 24, "ncclDevCommRequirements size");
static_assert(offsetof(ncclDevCommRequirements, lsaMultimem) == 16, "ncclDevCommRequirements.lsaMultimem");
static_assert(offsetof(ncclDevCommRequirements, lsaBarrierCount) == 20, "ncclDevCommRequirements.lsaBarrierCount");

// 16 bytes of elements of T, added element by element.
template <typename T>
struct Pack {
  static const int N = 16 / sizeof(T);
  T v[N];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const void* p) {
  union { uint4 raw; Pack<T> pack; } u;
  u.raw = *(const uint4*)p;
  return u.pack;
}

template <typename T>
__device__ __forceinline__ void store_pack(void* p, const Pack<T>& pack) {
  union { uint4 raw; Pack<T> pack; } u;
  u.pack = pack;
  *(uint4*)p = u.raw;
}

template <typename T>
__device__ __forceinline__ void add_pack(Pack<T>& acc, const Pack<T>& x) {
#pragma unroll
  for (int i = 0; i < Pack<T>::N; i++) acc.v[i] = acc.v[i] + x.v[i];
}

// Peer `peer`'s window at byte `offset`, as T*.
template <typename T>
__device__ __forceinline__ T* lsa(ncclWindow_t win, size_t offset, int peer) {
  return (T*)ncclGetLsaPointer(win, offset, peer);
}

// Elements before the first 16-byte boundary at `offset`, when send and
// receive offsets share their place within 16 bytes (else all of them:
// no packs).
template <typename T>
__device__ __forceinline__ size_t head_elements(size_t sendoffset, size_t recvoffset, size_t count) {
  if (sendoffset % 16 != recvoffset % 16 || sendoffset % sizeof(T) != 0) return count;
  size_t head = ((16 - sendoffset % 16) % 16) / sizeof(T);
  return head < count ? head : count;
}

// ---------------------------------------------------------------- all_reduce

// Threads of all ranks share the elements: thread t of CTA b on rank r
// takes global index t + blockDim * (r + b * nRanks), stride blockDim *
// gridDim * nRanks, so each element is reduced once in the whole job and
// written to every rank.
__device__ __forceinline__ size_t all_reduce_first(const ncclDevComm& c) {
  return threadIdx.x + (size_t)blockDim.x * (c.rank + (size_t)blockIdx.x * c.nRanks);
}
__device__ __forceinline__ size_t all_reduce_stride(const ncclDevComm& c) {
  return (size_t)blockDim.x * gridDim.x * c.nRanks;
}

// Elements [from, to) of the operands, one element at a time.
template <typename T>
__device__ void all_reduce_scalar(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                                  size_t recvoffset, size_t from, size_t to, const ncclDevComm& c) {
  for (size_t i = from + all_reduce_first(c); i < to; i += all_reduce_stride(c)) {
    T acc = lsa<T>(sendwin, sendoffset, 0)[i];
    for (int peer = 1; peer < c.nRanks; peer++) acc = acc + lsa<T>(sendwin, sendoffset, peer)[i];
    for (int peer = 0; peer < c.nRanks; peer++) lsa<T>(recvwin, recvoffset, peer)[i] = acc;
  }
}

template <typename T>
__device__ void all_reduce_lsa(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                               size_t recvoffset, size_t count, const ncclDevComm& c) {
  all_reduce_scalar<T>(sendwin, sendoffset, recvwin, recvoffset, 0, count, c);
}

// Packs of 16 bytes, eight (128 bytes, as nccl-tests) per thread per
// step, then the scalar ends.
template <typename T>
__device__ void all_reduce_lsa_packed(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                                      size_t recvoffset, size_t count, const ncclDevComm& c) {
  const int N = Pack<T>::N, U = 8;
  size_t head = head_elements<T>(sendoffset, recvoffset, count);
  size_t packs = (count - head) / N;
  size_t tail = head + packs * N;
  size_t so = sendoffset + head * sizeof(T), ro = recvoffset + head * sizeof(T);
  size_t stride = all_reduce_stride(c);
  for (size_t base = all_reduce_first(c); base < packs; base += stride * U) {
    Pack<T> acc[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      size_t p = base + u * stride;
      if (p < packs) acc[u] = load_pack<T>(lsa<char>(sendwin, so, 0) + p * 16);
    }
    for (int peer = 1; peer < c.nRanks; peer++) {
      const char* src = lsa<char>(sendwin, so, peer);
#pragma unroll
      for (int u = 0; u < U; u++) {
        size_t p = base + u * stride;
        if (p < packs) add_pack(acc[u], load_pack<T>(src + p * 16));
      }
    }
    for (int peer = 0; peer < c.nRanks; peer++) {
      char* dst = lsa<char>(recvwin, ro, peer);
#pragma unroll
      for (int u = 0; u < U; u++) {
        size_t p = base + u * stride;
        if (p < packs) store_pack(dst + p * 16, acc[u]);
      }
    }
  }
  all_reduce_scalar<T>(sendwin, sendoffset, recvwin, recvoffset, 0, head, c);
  all_reduce_scalar<T>(sendwin, sendoffset, recvwin, recvoffset, tail, count, c);
}

// ------------------------------------------------------------------ alltoall

// Each rank pushes its own chunks: chunk `peer` of this rank's input goes
// to chunk `rank` of peer's output. Threads of one rank share the elements.

template <typename T>
__device__ void alltoall_scalar(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                                size_t recvoffset, size_t from, size_t to, size_t count,
                                const ncclDevComm& c) {
  const T* src = lsa<T>(sendwin, sendoffset, c.rank);
  size_t stride = (size_t)blockDim.x * gridDim.x;
  for (size_t i = from + threadIdx.x + (size_t)blockDim.x * blockIdx.x; i < to; i += stride) {
    for (int peer = 0; peer < c.nRanks; peer++)
      lsa<T>(recvwin, recvoffset, peer)[c.rank * count + i] = src[peer * count + i];
  }
}

template <typename T>
__device__ void alltoall_nvl(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                             size_t recvoffset, size_t count, const ncclDevComm& c) {
  alltoall_scalar<T>(sendwin, sendoffset, recvwin, recvoffset, 0, count, count, c);
}

// Packs of 16 bytes where every chunk starts on a 16-byte boundary (the
// chunk size and both offsets are multiples of 16), eight per thread per
// step; otherwise one element at a time.
template <typename T>
__device__ void alltoall_nvl_packed(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,
                                    size_t recvoffset, size_t count, const ncclDevComm& c) {
  const int N = Pack<T>::N, U = 8;
  size_t chunk = count * sizeof(T);
  if (chunk % 16 != 0 || sendoffset % 16 != 0 || recvoffset % 16 != 0) {
    alltoall_scalar<T>(sendwin, sendoffset, recvwin, recvoffset, 0, count, count, c);
    return;
  }
  size_t packs = count / N;
  const char* src = lsa<char>(sendwin, sendoffset, c.rank);
  size_t stride = (size_t)blockDim.x * gridDim.x;
  for (size_t base = threadIdx.x + (size_t)blockDim.x * blockIdx.x; base < packs; base += stride * U) {
    for (int peer = 0; peer < c.nRanks; peer++) {
      const char* from = src + peer * chunk;
      char* to = lsa<char>(recvwin, recvoffset, peer) + c.rank * chunk;
      Pack<T> v[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        size_t p = base + u * stride;
        if (p < packs) v[u] = load_pack<T>(from + p * 16);
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        size_t p = base + u * stride;
        if (p < packs) store_pack(to + p * 16, v[u]);
      }
    }
  }
}

// ------------------------------------------------------------------- entries

// One LSA barrier per CTA (the devComm holds -V of them): peers' inputs are
// ready before anyone reads them, and every write has landed before any
// rank's kernel ends.
#define ENTRY(NAME, IMPL, T)                                                                   \
  extern "C" __global__ void __launch_bounds__(512)                                          \
      collbench_dev_##NAME(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin,     \
                           size_t recvoffset, size_t count, int root, ncclDevComm devComm) {  \
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm),     \
                                           devComm.lsaBarrier, blockIdx.x};                   \
    bar.sync(ncclCoopCta(), cuda::memory_order_acquire);                                      \
    IMPL<T>(sendwin, sendoffset, recvwin, recvoffset, count, devComm);                        \
    bar.sync(ncclCoopCta(), cuda::memory_order_release);                                      \
  }

#define TYPE_ENTRIES(TNAME, T)                                            \
  ENTRY(all_reduce_1_##TNAME, all_reduce_lsa, T)                          \
  ENTRY(all_reduce_2_##TNAME, all_reduce_lsa_packed, T)                   \
  ENTRY(alltoall_1_##TNAME, alltoall_nvl, T)                              \
  ENTRY(alltoall_2_##TNAME, alltoall_nvl_packed, T)

TYPE_ENTRIES(int8, int8_t)
TYPE_ENTRIES(uint8, uint8_t)
TYPE_ENTRIES(int32, int32_t)
TYPE_ENTRIES(uint32, uint32_t)
TYPE_ENTRIES(int64, int64_t)
TYPE_ENTRIES(uint64, uint64_t)
TYPE_ENTRIES(half, __half)
TYPE_ENTRIES(float, float)
TYPE_ENTRIES(double, double)
