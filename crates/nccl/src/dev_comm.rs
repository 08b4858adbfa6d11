//! The NCCL 2.28 structs of the device API that cross the C boundary
//! (`ncclDevComm`, `ncclDevCommRequirements`): plain `repr(C)` data in a
//! leaf file, so the C API's table ([`crate::ffi`]) and the device-API
//! kernels ([`crate::device_api`], which re-exports them) both name them
//! without importing each other. Fields NCCL owns are `pub(crate)` only
//! for the layout test in `device_api`.

use std::ffi::c_void;

/// `ncclDevComm` of NCCL 2.28.3 (nccl_device/impl/comm__types.h), which the
/// kernels take by value. collbench reads only the ranks; the rest is
/// NCCL's and travels untouched. device_api.cu asserts the same layout.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DevComm {
    pub rank: i32,
    pub n_ranks: i32,
    n_ranks_rcp32: u32,
    pub lsa_rank: i32,
    pub lsa_size: i32,
    lsa_size_rcp32: u32,
    pub(crate) window_table: *mut c_void,
    pub(crate) resource_window: *mut c_void,
    /// `struct ncclWindow_vidmem` (two pointers, two ints, two u32).
    pub(crate) resource_window_inlined: [u64; 4],
    pub(crate) lsa_multimem: *mut c_void,
    /// `ncclLsaBarrierHandle` (resource handle, barrier count).
    pub(crate) lsa_barrier: [u32; 2],
}

impl DevComm {
    /// All zeros, for ncclDevCommCreate to fill.
    pub fn zeroed() -> DevComm {
        DevComm {
            rank: 0,
            n_ranks: 0,
            n_ranks_rcp32: 0,
            lsa_rank: 0,
            lsa_size: 0,
            lsa_size_rcp32: 0,
            window_table: std::ptr::null_mut(),
            resource_window: std::ptr::null_mut(),
            resource_window_inlined: [0; 4],
            lsa_multimem: std::ptr::null_mut(),
            lsa_barrier: [0; 2],
        }
    }
}

/// `ncclDevCommRequirements` of NCCL 2.28.3 (nccl_device/core.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DevCommRequirements {
    resource_requirements_list: *mut c_void,
    team_requirements_list: *mut c_void,
    pub lsa_multimem: bool,
    pub lsa_barrier_count: i32,
}

impl DevCommRequirements {
    /// What implementation `-D` needs with `ctas` CTAs: one LSA barrier per
    /// CTA (nccl-tests' 2.28 requirements for its NVLink kernels).
    pub fn lsa_barriers(ctas: i32) -> DevCommRequirements {
        DevCommRequirements {
            resource_requirements_list: std::ptr::null_mut(),
            team_requirements_list: std::ptr::null_mut(),
            lsa_multimem: false,
            lsa_barrier_count: ctas,
        }
    }
}
