//! collbench-nccl (work in progress).
