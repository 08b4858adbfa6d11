// A minimal nccl-tests-style timer: the reference collbench is compared
// against on the same machine, the same lease and the same minutes
// (nccl-tests itself is not installed on the lent GPU machines, and their
// speed moves by several percent between leases).
//
//   nvcc -O2 -o nccl_ref nccl_ref.cu -lnccl
//   nccl_ref OP ITERS MINBYTES MAXBYTES [GRAPH_LAUNCHES]
//
// OP: all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv
// (float, sum, root 0). Sizes double from MINBYTES to MAXBYTES and mean what
// they mean in nccl-tests (the gathered/scattered total for all_gather,
// reduce_scatter and alltoall); 5 warm-up iterations, then ITERS timed ones,
// buffers rotated like nccl-tests; time = wall clock of the loop / ITERS.
// GRAPH_LAUNCHES > 0 captures the ITERS launches in one CUDA graph per GPU
// (thread-local capture, as nccl-tests -G) and replays it that many times.
//
// One process drives every visible GPU, unless REF_ID_FILE is set: then it is
// one rank of a job of one process per GPU, its rank and size taken from
// OMPI_COMM_WORLD_RANK/SIZE (so `mpirun --bind-to core` can start it exactly as
// the anchors' nccl-tests were started) or RANK/WORLD_SIZE; rank 0 writes the
// NCCL unique id to REF_ID_FILE and the others read it. Each rank prints its
// own times.
//
// REF_FILL=1 fills both buffers with pseudo-random floats in [0, 1) before
// timing, as nccl-tests' data initialisation leaves them; otherwise they
// hold what cudaMalloc gave (zeros), which can move faster.
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
#define NK(x) do { ncclResult_t res_ = (x); if (res_ != ncclSuccess) { fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(res_)); exit(1); } } while (0)

__global__ void fill_random(float* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
    p[i] = (h >> 8) * (1.0f / 16777216.0f);
  }
}

static void maybe_fill(char* sb, char* rb, size_t bytes, int rank) {
  const char* f = getenv("REF_FILL");
  if (!f || strcmp(f, "1") != 0) return;
  fill_random<<<1024, 256>>>((float*)sb, bytes / 4, 17u + rank);
  fill_random<<<1024, 256>>>((float*)rb, bytes / 4, 91u + rank);
  CK(cudaDeviceSynchronize());
}

static double now_us() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int env_int(const char* a, const char* b, int dflt) {
  const char* v = getenv(a);
  if (!v) v = getenv(b);
  return v ? atoi(v) : dflt;
}

enum Op { AR, AG, RS, A2A, BC, RED, SR };
static const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"};

int main(int argc, char** argv) {
  if (argc < 5) { fprintf(stderr, "usage: nccl_ref OP ITERS MINBYTES MAXBYTES [GRAPH_LAUNCHES]\n"); return 2; }
  int op = -1;
  for (int i = 0; i < 7; i++) if (strcmp(argv[1], names[i]) == 0) op = i;
  if (op < 0) { fprintf(stderr, "unknown op %s\n", argv[1]); return 2; }
  int iters = atoi(argv[2]);
  size_t minb = strtoull(argv[3], 0, 0), maxb = strtoull(argv[4], 0, 0);
  int graph = argc > 5 ? atoi(argv[5]) : 0;

  const char* idfile = getenv("REF_ID_FILE");
  int ngpu = 0, nranks, rank0;  // GPUs in this process, world size, first rank here
  ncclComm_t comms[8];
  cudaStream_t s[8];
  char *sb[8], *rb[8];
  if (idfile) {
    int rank = env_int("OMPI_COMM_WORLD_RANK", "RANK", 0);
    nranks = env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", 1);
    int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", rank);
    ncclUniqueId id;
    if (rank == 0) {
      NK(ncclGetUniqueId(&id));
      char tmp[4096];
      snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
      FILE* f = fopen(tmp, "wb");
      fwrite(&id, sizeof id, 1, f);
      fclose(f);
      rename(tmp, idfile);
    } else {
      FILE* f = 0;
      for (int t = 0; t < 3000 && !(f = fopen(idfile, "rb")); t++) usleep(10000);
      if (!f || fread(&id, sizeof id, 1, f) != 1) { fprintf(stderr, "no unique id in %s\n", idfile); return 1; }
      fclose(f);
    }
    CK(cudaSetDevice(local));
    NK(ncclCommInitRank(&comms[0], nranks, id, rank));
    ngpu = 1;
    rank0 = rank;
    CK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
    CK(cudaMalloc(&sb[0], maxb));
    CK(cudaMalloc(&rb[0], maxb));
    maybe_fill(sb[0], rb[0], maxb, rank);
  } else {
    CK(cudaGetDeviceCount(&ngpu));
    if (ngpu > 8) ngpu = 8;
    int devs[8];
    for (int i = 0; i < ngpu; i++) devs[i] = i;
    NK(ncclCommInitAll(comms, ngpu, devs));
    nranks = ngpu;
    rank0 = 0;
    for (int i = 0; i < ngpu; i++) {
      CK(cudaSetDevice(i));
      CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
      CK(cudaMalloc(&sb[i], maxb));
      CK(cudaMalloc(&rb[i], maxb));
      maybe_fill(sb[i], rb[i], maxb, i);
    }
  }
  double factor = op == AR ? 2.0 * (nranks - 1) / nranks
                : (op == AG || op == RS || op == A2A) ? (double)(nranks - 1) / nranks : 1.0;
  printf("# nccl_ref %s: rank %d of %d, %d GPU(s) in this process, %d iterations, 5 warm-up, graph launches %d, buffers %s\n",
         names[op], rank0, nranks, ngpu, iters, graph, getenv("REF_FILL") ? "random" : "as allocated");
  printf("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
  double sum_bw = 0;
  int rows = 0;
  for (size_t bytes = minb; bytes <= maxb; bytes *= 2) {
    // Elements per rank that the size means, as nccl-tests counts them.
    size_t count = (op == AG || op == RS || op == A2A) ? bytes / 4 / nranks : bytes / 4;
    if (count == 0) continue;
    double t[2];
    for (int ip = 0; ip < 2; ip++) {
      auto issue = [&](int it) {
        size_t steps = maxb / bytes, shift = bytes * (it % (steps ? steps : 1));
        NK(ncclGroupStart());
        for (int i = 0; i < ngpu; i++) {
          int r = rank0 + i;
          char* recv = rb[i] + shift;
          char* send = sb[i] + shift;
          switch (op) {
            case AR: NK(ncclAllReduce(ip ? recv : send, recv, count, ncclFloat, ncclSum, comms[i], s[i])); break;
            case AG: NK(ncclAllGather(ip ? recv + r * count * 4 : send, recv, count, ncclFloat, comms[i], s[i])); break;
            case RS: NK(ncclReduceScatter(send, ip ? send + r * count * 4 : recv, count, ncclFloat, ncclSum, comms[i], s[i])); break;
            case A2A: NK(ncclAlltoAll(ip ? recv : send, recv, count, ncclFloat, comms[i], s[i])); break;
            case BC: NK(ncclBroadcast(ip ? recv : send, recv, count, ncclFloat, 0, comms[i], s[i])); break;
            case RED: NK(ncclReduce(ip ? recv : send, recv, count, ncclFloat, ncclSum, 0, comms[i], s[i])); break;
            case SR:
              NK(ncclSend(ip ? recv : send, count, ncclFloat, (r + 1) % nranks, comms[i], s[i]));
              NK(ncclRecv(recv, count, ncclFloat, (r + nranks - 1) % nranks, comms[i], s[i]));
              break;
          }
        }
        NK(ncclGroupEnd());
      };
      auto wait = [&]() {
        for (int i = 0; i < ngpu; i++) while (cudaStreamQuery(s[i]) == cudaErrorNotReady) {}
      };
      for (int it = 0; it < 5; it++) issue(it);
      wait();
      double t0;
      if (graph > 0) {
        cudaGraph_t g[8];
        cudaGraphExec_t ge[8];
        for (int i = 0; i < ngpu; i++) CK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal));
        for (int it = 0; it < iters; it++) issue(it);
        for (int i = 0; i < ngpu; i++) CK(cudaStreamEndCapture(s[i], &g[i]));
        for (int i = 0; i < ngpu; i++) CK(cudaGraphInstantiate(&ge[i], g[i], 0));
        t0 = now_us();
        for (int l = 0; l < graph; l++)
          for (int i = 0; i < ngpu; i++) CK(cudaGraphLaunch(ge[i], s[i]));
        wait();
        t[ip] = (now_us() - t0) / iters / graph;
        for (int i = 0; i < ngpu; i++) { cudaGraphExecDestroy(ge[i]); cudaGraphDestroy(g[i]); }
      } else {
        t0 = now_us();
        for (int it = 0; it < iters; it++) issue(it);
        wait();
        t[ip] = (now_us() - t0) / iters;
      }
    }
    double alg0 = bytes / 1e3 / t[0], alg1 = bytes / 1e3 / t[1];
    printf("%12zu  %12zu  %8s  %6s  %6s  %7.2f  %6.2f  %6.2f  %6s  %7.2f  %6.2f  %6.2f  %6s\n", bytes, count, "float",
           (op == AR || op == RS || op == RED) ? "sum" : "none", (op == BC || op == RED) ? "0" : "-1",
           t[0], alg0, alg0 * factor, "N/A", t[1], alg1, alg1 * factor, "N/A");
    fflush(stdout);
    sum_bw += (alg0 + alg1) * factor;
    rows += 2;
  }
  printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n", sum_bw / rows);
  for (int i = 0; i < ngpu; i++) ncclCommDestroy(comms[i]);
  return 0;
}
