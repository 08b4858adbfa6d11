/* Reference for bench/cpu-vs-mpi.sh: MPI_Allreduce timed the way
 * nccl-tests times a collective (warm-up, then wall clock around N
 * iterations ending with a barrier-free completion, busbw = 2(n-1)/n *
 * bytes / time).
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun -np 2 ./mpi_allreduce BYTES ITERS WARMUP
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t bytes = argc > 1 ? strtoull(argv[1], 0, 0) : (64u << 20);
  int iters = argc > 2 ? atoi(argv[2]) : 20, warm = argc > 3 ? atoi(argv[3]) : 5;
  size_t count = bytes / sizeof(float);
  float* s = malloc(bytes);
  float* r = malloc(bytes);
  for (size_t i = 0; i < count; i++) s[i] = (float)(i % 7 + rank);
  for (int i = 0; i < warm; i++) MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t = (MPI_Wtime() - t0) / iters, tmax;
  MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  double tsum;
  MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double mean = tsum / n, algbw = bytes / 1e9 / mean;
    printf("mpi_allreduce ranks=%d bytes=%zu time_us=%.1f algbw=%.2f busbw=%.2f\n", n, bytes, mean * 1e6, algbw,
           algbw * 2.0 * (n - 1) / n);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
