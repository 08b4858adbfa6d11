#!/usr/bin/env bash
# CI: builds dist/Containerfile's two images from target/dist (run
# `bash dist/build.sh` first) and runs the README's main job inside the
# runtime image.
#
# No container registry is reachable from CI, so the runtime's base is a
# Debian 12 made here with debootstrap (minbase plus python3-venv, about
# 2 minutes) and imported with buildah; the Containerfile's BASE build
# argument points at it. NCCL_EXTRA is empty: the NCCL wheel is 350 MB and
# there is no GPU here. RUN steps and the job run with buildah's chroot
# isolation, which needs no OCI runtime (runc/crun) and works inside the
# CI container.
#
# CONTAINERS_STORAGE_CONF (containers-storage.conf(5)) keeps the images
# out of the host's storage where that matters.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends buildah debootstrap >/dev/null
fi

echo "== image: base (debootstrap bookworm minbase)"
debootstrap --variant=minbase --include=python3-venv bookworm "$work/rootfs" \
  http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log"; exit 1; }
rm -f "$work"/rootfs/var/cache/apt/archives/*.deb
tar -C "$work/rootfs" -cf "$work/base.tar" .
ctr=$(buildah from scratch)
buildah add "$ctr" "$work/base.tar" / >/dev/null
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
buildah commit -q "$ctr" localhost/collbench-base:ci >/dev/null
buildah rm "$ctr" >/dev/null

# The README's two commands, with what CI needs added: the local base, no
# NCCL download, chroot isolation.
ci_args=(--build-arg BASE=localhost/collbench-base:ci --build-arg NCCL_EXTRA= --isolation chroot -q)
echo "== image: runtime and binary stages"
buildah bud "${ci_args[@]}" -f dist/Containerfile --target runtime -t collbench target/dist >/dev/null
buildah bud "${ci_args[@]}" -f dist/Containerfile --target binary -t collbench-bin target/dist >/dev/null

echo "== image: the binary stage holds /collbench alone"
ctr=$(buildah from localhost/collbench-bin)
mnt=$(buildah mount "$ctr")
files=$(cd "$mnt" && find . -mindepth 1 | sort | tr '\n' ' ')
buildah umount "$ctr" >/dev/null
buildah rm "$ctr" >/dev/null
[ "$files" = "./collbench " ] || { echo "binary stage holds: $files" >&2; exit 1; }

echo "== image: the main job in the runtime image"
ctr=$(buildah from localhost/collbench)
buildah run --isolation chroot "$ctr" -- collbench run all -b 8 -e 4M -f 8 | tee "$work/main.txt" | tail -16
buildah rm "$ctr" >/dev/null
grep -q "^# Out of bounds values : 0 OK" "$work/main.txt"
! grep -q "FAILED" "$work/main.txt"
buildah images
