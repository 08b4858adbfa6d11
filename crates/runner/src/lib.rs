//! collbench-runner (work in progress).
