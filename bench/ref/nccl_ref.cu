// A minimal nccl-tests-style all_reduce timer, one process driving every
// visible GPU: the reference collbench's timing is compared against on the
// same machine and day (nccl-tests itself is not installed there).
//
//   nvcc -O2 -o nccl_ref nccl_ref.cu -lnccl -lcuda
//   ./nccl_ref [rt|drv] [iters] [minbytes] [maxbytes] [all_reduce|all_gather]
//   (sizes double; all_gather sizes are the gathered total, as nccl-tests')
//
// rt:  the current device is set with cudaSetDevice (as nccl-tests does).
// drv: the current context is set with the driver API only (as a program
//      that drives CUDA through the driver API does), to see whether NCCL's
// host-side launch path depends on it.
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "rt";
  int iters = argc > 2 ? atoi(argv[2]) : 100;
  int n = 0;
  cudaGetDeviceCount(&n);
  if (n > 8) n = 8;
  ncclComm_t comms[8];
  int devs[8];
  cudaStream_t s[8];
  float *sb[8], *rb[8];
  size_t minb = argc > 3 ? strtoull(argv[3], 0, 0) : 8;
  size_t maxb = argc > 4 ? strtoull(argv[4], 0, 0) : (8 << 20);
  int gather = argc > 5 && strcmp(argv[5], "all_gather") == 0;
  for (int i = 0; i < n; i++) devs[i] = i;
  ncclCommInitAll(comms, n, devs);
  for (int i = 0; i < n; i++) {
    cudaSetDevice(i);
    cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking);
    cudaMalloc(&sb[i], maxb);
    cudaMalloc(&rb[i], maxb);
  }
  if (strcmp(mode, "drv") == 0) {
    CUcontext ctx;
    CUdevice d;
    cuDeviceGet(&d, 0);
    cuDevicePrimaryCtxRetain(&ctx, d);
    cuCtxSetCurrent(ctx);
  } else {
    cudaSetDevice(0);
  }
  // Rows in nccl-tests' layout so `collbench compare` reads them.
  printf("# nccl_ref (%s) %s, %d GPUs in one process, %d iterations, 5 warm-up\n", mode, gather ? "all_gather" : "all_reduce", n, iters);
  printf("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
  double sum_bw = 0;
  int rows = 0;
  for (size_t bytes = minb; bytes <= maxb; bytes *= 2) {
    size_t count = gather ? bytes / 4 / n : bytes / 4;
    double t[2];
    for (int ip = 0; ip < 2; ip++) {
      double t0 = 0;
      for (int it = 0; it < 5 + iters; it++) {
        if (it == 5) {
          for (int i = 0; i < n; i++) while (cudaStreamQuery(s[i]) == cudaErrorNotReady) {}
          t0 = now_us();
        }
        size_t steps = maxb / bytes, shift = bytes * (it % steps);  // rotate like nccl-tests
        ncclGroupStart();
        for (int i = 0; i < n; i++) {
          char* r = (char*)rb[i] + shift;
          if (gather) {
            const char* snd = ip ? r + i * count * 4 : (const char*)sb[i] + shift;
            ncclAllGather(snd, r, count, ncclFloat, comms[i], s[i]);
          } else {
            const char* snd = ip ? r : (const char*)sb[i] + shift;
            ncclAllReduce(snd, r, count, ncclFloat, ncclSum, comms[i], s[i]);
          }
        }
        ncclGroupEnd();
      }
      for (int i = 0; i < n; i++) while (cudaStreamQuery(s[i]) == cudaErrorNotReady) {}
      t[ip] = (now_us() - t0) / iters;
    }
    double alg0 = bytes / 1e3 / t[0], alg1 = bytes / 1e3 / t[1];
    double f = gather ? (double)(n - 1) / n : 2.0 * (n - 1) / n;
    printf("%12zu  %12zu  %8s  %6s  %6s  %7.2f  %6.2f  %6.2f  %6s  %7.2f  %6.2f  %6.2f  %6s\n", bytes, count, "float", gather ? "none" : "sum",
           "-1", t[0], alg0, alg0 * f, "N/A", t[1], alg1, alg1 * f, "N/A");
    sum_bw += alg0 * f + alg1 * f;
    rows += 2;
  }
  printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n", sum_bw / rows);
  for (int i = 0; i < n; i++) ncclCommDestroy(comms[i]);
  return 0;
}
