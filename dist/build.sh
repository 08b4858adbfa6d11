#!/usr/bin/env bash
# Builds collbench for other machines into target/dist/:
#   collbench          x86_64 Linux, glibc 2.17 or newer (portable binary;
#                      also as collbench-x86_64, the name dist/Containerfile
#                      copies)
#   collbench-aarch64  the same for Arm hosts (Grace: GH200, GB200), when
#                      rustup can add the aarch64 target
#   collbench-*.whl    the wheels holding them (manylinux2014 tags), for
#                      `pip install`
#
# maturin builds each wheel with zig as the linker (`--zig`), which links
# against glibc 2.17's symbol versions whatever this machine's glibc is;
# the binary in the wheel is the portable binary. Everything it needs
# (maturin, zig from PyPI's `ziglang`) goes into a virtual environment in
# target/dist-tools, so nothing is installed system-wide beyond Rust and
# Python 3 with venv. docs/dist.md explains the choices.
#
# DIST_ARCHES="x86_64 aarch64" (the default) picks the architectures.
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN_VERSION=1.16.0
ZIG_VERSION=0.17.1
tools=target/dist-tools/venv
out=target/dist

if [ ! -x "$tools/bin/maturin" ] || ! "$tools/bin/python" -c 'import ziglang' 2>/dev/null; then
  echo "== dist: installing maturin $MATURIN_VERSION and zig $ZIG_VERSION into $tools"
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q "maturin==$MATURIN_VERSION" "ziglang==$ZIG_VERSION"
fi
# maturin finds zig as `python -m ziglang` through the python on PATH.
export PATH="$PWD/$tools/bin:$PATH"

mkdir -p "$out"

# Builds the wheel for `arch` and copies its binary to target/dist/`name`.
build() {
  local arch=$1 name=$2
  echo "== dist: $arch"
  # A wheel of an older version must not be picked up (or installed) by
  # mistake: one wheel per architecture.
  rm -f "$out"/collbench-*_"$arch".whl
  maturin build --release --zig --target "$arch-unknown-linux-gnu" --out "$out"
  local wheel
  wheel=$(ls "$out"/collbench-*_"$arch".whl)
  python3 - "$wheel" "$out/$name" <<'EOF'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/collbench"))
    with open(dest, "wb") as f:
        f.write(z.read(name))
os.chmod(dest, 0o755)
EOF
  echo "== dist: $out/$name, $wheel"
}

for arch in ${DIST_ARCHES:-x86_64 aarch64}; do
  case $arch in
    x86_64) build x86_64 collbench && ln -f "$out/collbench" "$out/collbench-x86_64" ;;
    aarch64)
      if rustup target list --installed | grep -qx aarch64-unknown-linux-gnu \
        || rustup target add aarch64-unknown-linux-gnu; then
        build aarch64 collbench-aarch64
      else
        echo "== dist: skipping aarch64: rustup cannot add aarch64-unknown-linux-gnu here (docs/dist.md: building for Arm)" >&2
      fi
      ;;
    *) echo "dist/build.sh: unknown architecture '$arch' in DIST_ARCHES; use x86_64 and/or aarch64" >&2; exit 2 ;;
  esac
done
ls -l "$out"
