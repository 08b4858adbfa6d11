//! collbench-report (work in progress).
