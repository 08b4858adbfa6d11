//! The handles the safe calls take and give ([`Communicator`],
//! [`Registration`], [`Window`]) and the facts about a loaded NCCL that
//! are not calls ([`NativeOps`], [`is_created_op`]).

use crate::error::NcclError;
use crate::ffi::{self, Comm, RedOpId};
use collbench_core::ReduceOp;
use std::ffi::c_void;

/// An NCCL communicator (`ncclComm_t`), owned by one local GPU.
#[derive(Debug)]
pub struct Communicator(pub(super) Comm);

impl Communicator {
    /// No communicator (before init, after destroy or abort).
    pub fn null() -> Communicator {
        Communicator(std::ptr::null_mut())
    }
}

/// An ncclCommRegister handle (`-R 1`), undone by [`Nccl::comm_deregister`](crate::ffi::Nccl::comm_deregister).
#[derive(Debug)]
pub struct Registration(pub(super) *mut c_void);

/// A symmetric window (`-R 2`), undone by [`Nccl::window_deregister`](crate::ffi::Nccl::window_deregister).
#[derive(Debug)]
pub struct Window(pub(super) *mut c_void);

impl Window {
    /// The `ncclWindow_t` handle, as device-API kernels take it.
    pub fn raw(&self) -> *mut c_void {
        self.0
    }
}

/// Which collectives this NCCL has natively (the rest run as send/recv).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NativeOps {
    /// ncclAlltoAll (NCCL >= 2.28)
    pub alltoall: bool,
    /// ncclGather (NCCL >= 2.28)
    pub gather: bool,
    /// ncclScatter (NCCL >= 2.28)
    pub scatter: bool,
}

/// An optional symbol called although this NCCL lacks it.
pub(super) fn missing(symbol: &'static str) -> NcclError {
    NcclError::MissingSymbol {
        symbol,
        reason: "this NCCL version does not have it".into(),
    }
}

/// Operators NCCL created at run time (ids after the built-in ones), as
/// opposed to sum, prod, max, min and avg.
pub fn is_created_op(op: RedOpId) -> bool {
    op > ffi::redop_id(ReduceOp::Avg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_created_operators_are_destroyed() {
        for op in ReduceOp::ALL {
            assert!(!is_created_op(ffi::redop_id(op)), "{op:?}");
        }
        assert!(is_created_op(5));
    }
}
