//! collbench-mpi: the MPI backend and MPI as a bootstrap under `mpirun`.
//!
//! This crate links libmpi, so the CLI depends on it only with its `mpi`
//! cargo feature; the default build never needs an MPI library.
//!
//! - [`bootstrap`]: starts MPI and tells the control plane where rank 0
//!   listens (call it before `World::discover`/`Control::connect`); the
//!   one part of this crate that knows collbench-launch.
//! - [`MpiBackend`]: one rank per process, host buffers, every collective
//!   of the table through MPI, checked with core's exact patterns.
//!
//! Types: int8, uint8, int32, uint32, int64, uint64, float and double with
//! MPI's own types and operators; half, bfloat16, f8e4m3 and f8e5m2 as raw
//! bits with user-defined operators over collbench's element arithmetic.
//! Operators: sum, prod, min and max natively; avg as a sum divided
//! afterwards; mulsum as a sum of inputs premultiplied by the rank scalar.
//!
//! Modules, one job each: `bootstrap` (MPI start, rendezvous), `backend`
//! (buffers, timing, the `Backend` trait), `coll` (one MPI call sequence
//! per collective), `ops` (type and operator mapping, MPI errors), `check`
//! (exact verification).
//!
//! Not for: printing, the control plane, other launchers.

#![deny(unsafe_op_in_unsafe_fn)]

mod backend;
mod bootstrap;
mod check;
mod coll;
mod ops;

pub use backend::MpiBackend;
pub use bootstrap::{bootstrap, Session};
