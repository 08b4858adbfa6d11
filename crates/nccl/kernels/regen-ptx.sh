#!/usr/bin/env bash
# Regenerates verify.ptx from verify.cu. Run on a machine with CUDA's nvcc
# (e.g. through bench/gpu-suite.sh on a GPU host), then commit both files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$nvcc" -ptx -O3 -arch=compute_75 -o "${1:-$here/verify.ptx}" "$here/verify.cu"
echo "wrote ${1:-$here/verify.ptx} with $("$nvcc" --version | tail -1)"
