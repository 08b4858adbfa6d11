//! collbench-gen (work in progress).
