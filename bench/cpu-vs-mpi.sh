#!/usr/bin/env bash
# CPU backend vs OpenMPI's MPI_Allreduce, side by side on this machine:
# all_reduce, float sum, 64 MiB, 2 ranks, 5 warm-up + 20 timed iterations,
# alternating the two a few rounds so that load drifts hit both alike.
#   bench/cpu-vs-mpi.sh [ROUNDS]     (needs openmpi-bin libopenmpi-dev)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
bytes=$((64 << 20))
cargo build --release -q -p collbench-cli
mpicc -O2 -o target/mpi_allreduce bench/cpu/mpi_allreduce.c
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core target/mpi_allreduce "$bytes" 20 5)
cb=(target/release/collbench run all_reduce --backend cpu --ranks 2 -b "$bytes" -e "$bytes" -w 5 -n 20 --format csv)
for i in $(seq "$rounds"); do
  "${mpi[@]}" | sed 's/^/openmpi   /'
  "${cb[@]}" | awk -F, 'NR>1 && $7=="out_of_place" {printf "collbench ranks=2 bytes=%s time_us=%.1f algbw=%.2f busbw=%.2f wrong=%s\n", $5, $8, $9, $10, $11}'
done
