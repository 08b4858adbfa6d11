//! collbench-output (work in progress).
