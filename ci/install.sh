#!/usr/bin/env bash
# CI: runs the README's "Install" commands as a user would, each in a fresh
# home so nothing of this machine's is reused: the wheel from `bash
# dist/build.sh` into a fresh venv (no index: no download) running the
# main job, the portable binary, gen with the image, and the install from
# source. ci/image.sh builds and runs the image; crates/cli/tests/
# readme_install.rs checks that every command of the README's section is
# in one of the two scripts, so they cannot drift apart.
#
# Expects target/dist from `bash dist/build.sh` (.ci/run runs it first).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A fresh home; Rust stays where it is installed.
export CARGO_HOME=${CARGO_HOME:-$HOME/.cargo} RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export HOME=$work

# The main job's checks: every row exact, the run finished.
check_main_job() {
  grep -q "^# Out of bounds values : 0 OK" "$1"
  ! grep -q "FAILED" "$1"
}

echo "== install: pip (the wheel, a fresh venv, no index)"
python3 -m venv ~/.venvs/collbench
~/.venvs/collbench/bin/pip install --no-index target/dist/collbench-*-manylinux2014_x86_64.*.whl
~/.venvs/collbench/bin/collbench run all_reduce -b 8 -e 1M -f 32 | tee "$work/wheel.txt" | tail -4
check_main_job "$work/wheel.txt"
~/.venvs/collbench/bin/collbench run all -b 8 -e 4M -f 8 >"$work/main.txt"
check_main_job "$work/main.txt"

echo "== install: the portable binary"
install -D -m 755 target/dist/collbench ~/.local/bin/collbench
~/.local/bin/collbench doctor

echo "== install: launch files for the image"
export PATH=~/.local/bin:$PATH
(
  cd "$work"
  collbench gen k8s --kind jobset --nodes 2 --gpus-per-node 8 --inject-into nvcr.io/nvidia/pytorch:25.01-py3 --topology-required cloud.google.com/gce-topology-block > job.yaml
  grep -q "image: ghcr.io/collbench/collbench:" job.yaml
  collbench gen slurm --nodes 2 --gpus-per-node 8 --container > job.sbatch
  grep -q -- "--container-image=ghcr.io#collbench/collbench:" job.sbatch
)

echo "== install: from source"
# --debug reuses the test build (target/debug) instead of a release build
# from scratch (about 6 minutes on CI's 2 cores); the command is the same.
cargo install --locked --path crates/cli --debug --root "$work/cargo"
"$work/cargo/bin/collbench" --version
