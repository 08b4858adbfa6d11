#!/usr/bin/env bash
# Regenerates device_api.ptx from device_api.cu (the `-D N` kernels). Needs
# CUDA's nvcc (13.0, so the PTX is .version 9.0 or lower for the 580
# driver) and NCCL 2.28's device headers (nccl.h, nccl_device.h,
# nccl_device/): NCCL_INCLUDE names their directory. Commit both files.
#   NVCC=/work/cuda13/cuda/bin/nvcc NCCL_INCLUDE=/work/cuda13/x/nvidia/nccl/include \
#     crates/nccl/kernels/regen-device-ptx.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
include=${NCCL_INCLUDE:-/usr/include}
if [ ! -f "$include/nccl_device.h" ]; then
  echo "no nccl_device.h in $include: set NCCL_INCLUDE to NCCL 2.28's include directory" >&2
  exit 2
fi
out=${1:-$here/device_api.ptx}
"$nvcc" -ptx -O3 -arch=compute_75 -I"$include" -o "$out" "$here/device_api.cu"
echo "wrote $out with $("$nvcc" --version | tail -1) and $(grep -m1 'define NCCL_VERSION_CODE' "$include/nccl.h")"
