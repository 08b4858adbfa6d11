#!/usr/bin/env bash
# The format and lint gates of .ci/run, alone: run before every commit that
# touches Rust or doc comments. (CI failed once on rustdoc's
# broken-intra-doc-links after clippy and the tests were clean.)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p collbench-cli --features mpi --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
echo "lint: fmt, clippy (default and mpi) and rustdoc are clean"
