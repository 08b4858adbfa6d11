//! collbench-launch (work in progress).
