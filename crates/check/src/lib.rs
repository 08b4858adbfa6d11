//! collbench-check (work in progress).
