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
# BUILDAH overrides the command (e.g. `buildah --root DIR --runroot DIR`
# to keep the images out of the host's storage).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
BUILDAH=${BUILDAH:-buildah}
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
ctr=$($BUILDAH from scratch)
$BUILDAH add "$ctr" "$work/base.tar" / >/dev/null
$BUILDAH config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
$BUILDAH commit -q "$ctr" localhost/collbench-base:ci >/dev/null
$BUILDAH rm "$ctr" >/dev/null

echo "== image: runtime and binary stages"
bud() {
  $BUILDAH bud --isolation chroot -q -f dist/Containerfile \
    --build-arg BASE=localhost/collbench-base:ci --build-arg NCCL_EXTRA= "$@" target/dist
}
bud --target runtime -t localhost/collbench:ci >/dev/null
bud --target binary -t localhost/collbench-bin:ci >/dev/null

echo "== image: the binary stage holds /collbench alone"
ctr=$($BUILDAH from localhost/collbench-bin:ci)
mnt=$($BUILDAH mount "$ctr")
files=$(cd "$mnt" && find . -mindepth 1 | sort | tr '\n' ' ')
$BUILDAH umount "$ctr" >/dev/null
$BUILDAH rm "$ctr" >/dev/null
[ "$files" = "./collbench " ] || { echo "binary stage holds: $files" >&2; exit 1; }

echo "== image: the main job in the runtime image"
ctr=$($BUILDAH from localhost/collbench:ci)
$BUILDAH run --isolation chroot "$ctr" -- collbench run all -b 8 -e 4M -f 8 | tee "$work/main.txt" | tail -16
$BUILDAH rm "$ctr" >/dev/null
grep -q "^# Out of bounds values : 0 OK" "$work/main.txt"
! grep -q "FAILED" "$work/main.txt"
$BUILDAH images
