//! NCCL's C API, resolved at run time from the library found by
//! [`crate::loader`]. Only what collbench calls; optional symbols (newer
//! NCCL) are `Option`s checked against the version before use. The raw
//! entry points are called only by the safe methods in [`crate::api`].

use crate::dev_comm::{DevComm, DevCommRequirements};
use crate::error::NcclError;
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};

/// `ncclComm_t` as the C functions take it.
pub type Comm = *mut c_void;
/// `cudaStream_t` (the same handle as the driver's `CUstream`)
pub type Stream = *mut c_void;
/// `ncclResult_t`
pub type NcclResult = c_int;
/// `ncclDataType_t`
pub type DataTypeId = c_int;
/// `ncclRedOp_t`
pub type RedOpId = c_int;

/// `ncclUniqueId`: 128 opaque bytes passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub internal: [c_char; 128],
}

impl UniqueId {
    /// The id as bytes, to send to the other processes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.internal.iter().map(|&c| c as u8).collect()
    }
    /// The id from another process's bytes (`None` unless 128 bytes).
    pub fn from_bytes(b: &[u8]) -> Option<UniqueId> {
        if b.len() != 128 {
            return None;
        }
        let mut id = UniqueId { internal: [0; 128] };
        for (d, s) in id.internal.iter_mut().zip(b) {
            *d = *s as c_char;
        }
        Some(id)
    }
}

/// `ncclConfig_t` as NCCL 2.28's nccl.h lays it out (`ncclConfig_v22800`;
/// the struct only grows at its end, so later libraries read it by its
/// `size` and `version`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub blocking: c_int,
    pub cga_cluster_size: c_int,
    pub min_ctas: c_int,
    pub max_ctas: c_int,
    pub net_name: *const c_char,
    pub split_share: c_int,
    pub traffic_class: c_int,
    pub comm_name: *const c_char,
    pub collnet_enable: c_int,
    /// NCCL >= 2.27.
    pub cta_policy: c_int,
    pub shrink_share: c_int,
    pub nvls_ctas: c_int,
    /// NCCL >= 2.28.
    pub n_channels_per_net_peer: c_int,
    pub nvlink_centric_sched: c_int,
}

/// `NCCL_CONFIG_UNDEF_INT`: NCCL picks.
pub const CONFIG_UNDEF_INT: c_int = c_int::MIN;
/// `NCCL_API_MAGIC`
const API_MAGIC: c_uint = 0xcafe_beef;

impl Config {
    /// `NCCL_CONFIG_INITIALIZER` for a library of `version`: every option
    /// unset. A 2.27 library gets 2.27's size and version (its struct
    /// ends after `nvlsCTAs`), so it is never handed fields it lacks.
    pub fn new(version: c_int) -> Config {
        let (size, v) = if version >= 22800 {
            (std::mem::size_of::<Config>(), 22800)
        } else {
            (std::mem::offset_of!(Config, n_channels_per_net_peer), 22700)
        };
        Config {
            size,
            magic: API_MAGIC,
            version: v,
            blocking: CONFIG_UNDEF_INT,
            cga_cluster_size: CONFIG_UNDEF_INT,
            min_ctas: CONFIG_UNDEF_INT,
            max_ctas: CONFIG_UNDEF_INT,
            net_name: std::ptr::null(),
            split_share: CONFIG_UNDEF_INT,
            traffic_class: CONFIG_UNDEF_INT,
            comm_name: std::ptr::null(),
            collnet_enable: CONFIG_UNDEF_INT,
            cta_policy: CONFIG_UNDEF_INT,
            shrink_share: CONFIG_UNDEF_INT,
            nvls_ctas: CONFIG_UNDEF_INT,
            n_channels_per_net_peer: CONFIG_UNDEF_INT,
            nvlink_centric_sched: CONFIG_UNDEF_INT,
        }
    }
}

pub const NCCL_SUCCESS: NcclResult = 0;
pub const NCCL_IN_PROGRESS: NcclResult = 7;
/// `ncclScalarHostImmediate`
pub const SCALAR_HOST_IMMEDIATE: c_int = 1;

/// A collective that takes (send, recv, count, datatype, op, comm, stream):
/// ncclAllReduce, ncclReduceScatter.
type ReduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    DataTypeId,
    RedOpId,
    Comm,
    Stream,
) -> NcclResult;
/// A collective that takes (send, recv, count, datatype, comm, stream):
/// ncclAllGather, ncclAlltoAll.
type CopyFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, DataTypeId, Comm, Stream) -> NcclResult;
/// A collective that takes (send, recv, count, datatype, root, comm, stream):
/// ncclBroadcast, ncclGather, ncclScatter.
type RootedFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    DataTypeId,
    c_int,
    Comm,
    Stream,
) -> NcclResult;

/// Resolved NCCL entry points.
#[allow(clippy::type_complexity)]
pub struct Nccl {
    /// Never unloaded: NCCL's proxy threads may outlive the communicators,
    /// and unmapping the code under them crashes the process at exit.
    _lib: std::mem::ManuallyDrop<Library>,
    pub version: c_int,
    pub(crate) get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    pub(crate) get_last_error: Option<unsafe extern "C" fn(Comm) -> *const c_char>,
    pub(crate) get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    pub(crate) comm_init_rank:
        unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> NcclResult,
    pub(crate) comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> NcclResult,
    /// NCCL >= 2.14
    pub(crate) comm_init_rank_config:
        Option<unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int, *mut Config) -> NcclResult>,
    pub(crate) comm_destroy: unsafe extern "C" fn(Comm) -> NcclResult,
    pub(crate) comm_abort: unsafe extern "C" fn(Comm) -> NcclResult,
    pub(crate) comm_get_async_error: unsafe extern "C" fn(Comm, *mut NcclResult) -> NcclResult,
    pub(crate) group_start: unsafe extern "C" fn() -> NcclResult,
    pub(crate) group_end: unsafe extern "C" fn() -> NcclResult,
    pub(crate) all_reduce: ReduceFn,
    pub(crate) all_gather: CopyFn,
    pub(crate) reduce_scatter: ReduceFn,
    pub(crate) broadcast: RootedFn,
    pub(crate) reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        DataTypeId,
        RedOpId,
        c_int,
        Comm,
        Stream,
    ) -> NcclResult,
    pub(crate) send:
        unsafe extern "C" fn(*const c_void, usize, DataTypeId, c_int, Comm, Stream) -> NcclResult,
    pub(crate) recv:
        unsafe extern "C" fn(*mut c_void, usize, DataTypeId, c_int, Comm, Stream) -> NcclResult,
    pub(crate) red_op_create_pre_mul_sum: Option<
        unsafe extern "C" fn(*mut RedOpId, *mut c_void, DataTypeId, c_int, Comm) -> NcclResult,
    >,
    pub(crate) red_op_destroy: Option<unsafe extern "C" fn(RedOpId, Comm) -> NcclResult>,
    /// NCCL >= 2.28
    pub(crate) alltoall: Option<CopyFn>,
    /// NCCL >= 2.28
    pub(crate) gather: Option<RootedFn>,
    /// NCCL >= 2.28
    pub(crate) scatter: Option<RootedFn>,
    pub(crate) comm_register:
        Option<unsafe extern "C" fn(Comm, *mut c_void, usize, *mut *mut c_void) -> NcclResult>,
    pub(crate) comm_deregister: Option<unsafe extern "C" fn(Comm, *mut c_void) -> NcclResult>,
    /// NCCL >= 2.19: memory NCCL can map into other ranks (`-R 2`).
    pub(crate) mem_alloc: Option<unsafe extern "C" fn(*mut *mut c_void, usize) -> NcclResult>,
    pub(crate) mem_free: Option<unsafe extern "C" fn(*mut c_void) -> NcclResult>,
    /// NCCL >= 2.27: symmetric window registration (`-R 2`); collective.
    pub(crate) comm_window_register: Option<
        unsafe extern "C" fn(Comm, *mut c_void, usize, *mut *mut c_void, c_int) -> NcclResult,
    >,
    pub(crate) comm_window_deregister:
        Option<unsafe extern "C" fn(Comm, *mut c_void) -> NcclResult>,
    /// NCCL >= 2.28: device communicators for the device API (`-D`).
    pub(crate) dev_comm_create:
        Option<unsafe extern "C" fn(Comm, *const DevCommRequirements, *mut DevComm) -> NcclResult>,
    pub(crate) dev_comm_destroy: Option<unsafe extern "C" fn(Comm, *const DevComm) -> NcclResult>,
}

/// `NCCL_WIN_COLL_SYMMETRIC`: every rank passes the same offset into its
/// window, so NCCL may use its symmetric-memory kernels.
pub const NCCL_WIN_COLL_SYMMETRIC: c_int = 0x01;

macro_rules! sym {
    ($lib:expr, $name:literal) => {
        *$lib
            .get(concat!($name, "\0").as_bytes())
            .map_err(|e| NcclError::MissingSymbol {
                symbol: $name,
                reason: e.to_string(),
            })?
    };
}

/// A call added in NCCL 2.28: older libraries may export the name before
/// the call works, so it counts only from 2.28 on.
fn new_in_2_28<F>(version: c_int, f: Option<F>) -> Option<F> {
    if version >= 22800 {
        f
    } else {
        None
    }
}

macro_rules! opt_sym {
    ($lib:expr, $name:literal) => {
        $lib.get(concat!($name, "\0").as_bytes()).ok().map(|s| *s)
    };
}

impl Nccl {
    /// Resolves every symbol from an opened library.
    pub fn from_library(lib: Library, version: c_int) -> Result<Nccl, NcclError> {
        // SAFETY: each symbol is read with the C signature NCCL's nccl.h
        // declares for it (the field types above), from a library that
        // stays mapped for the life of the process (ManuallyDrop), so the
        // function pointers never dangle.
        unsafe {
            let n = Nccl {
                get_error_string: sym!(lib, "ncclGetErrorString"),
                get_last_error: opt_sym!(lib, "ncclGetLastError"),
                get_unique_id: sym!(lib, "ncclGetUniqueId"),
                comm_init_rank: sym!(lib, "ncclCommInitRank"),
                comm_init_all: sym!(lib, "ncclCommInitAll"),
                comm_init_rank_config: opt_sym!(lib, "ncclCommInitRankConfig"),
                comm_destroy: sym!(lib, "ncclCommDestroy"),
                comm_abort: sym!(lib, "ncclCommAbort"),
                comm_get_async_error: sym!(lib, "ncclCommGetAsyncError"),
                group_start: sym!(lib, "ncclGroupStart"),
                group_end: sym!(lib, "ncclGroupEnd"),
                all_reduce: sym!(lib, "ncclAllReduce"),
                all_gather: sym!(lib, "ncclAllGather"),
                reduce_scatter: sym!(lib, "ncclReduceScatter"),
                broadcast: sym!(lib, "ncclBroadcast"),
                reduce: sym!(lib, "ncclReduce"),
                send: sym!(lib, "ncclSend"),
                recv: sym!(lib, "ncclRecv"),
                red_op_create_pre_mul_sum: opt_sym!(lib, "ncclRedOpCreatePreMulSum"),
                red_op_destroy: opt_sym!(lib, "ncclRedOpDestroy"),
                alltoall: new_in_2_28(version, opt_sym!(lib, "ncclAlltoAll")),
                gather: new_in_2_28(version, opt_sym!(lib, "ncclGather")),
                scatter: new_in_2_28(version, opt_sym!(lib, "ncclScatter")),
                comm_register: opt_sym!(lib, "ncclCommRegister"),
                comm_deregister: opt_sym!(lib, "ncclCommDeregister"),
                mem_alloc: opt_sym!(lib, "ncclMemAlloc"),
                mem_free: opt_sym!(lib, "ncclMemFree"),
                comm_window_register: opt_sym!(lib, "ncclCommWindowRegister"),
                comm_window_deregister: opt_sym!(lib, "ncclCommWindowDeregister"),
                dev_comm_create: new_in_2_28(version, opt_sym!(lib, "ncclDevCommCreate")),
                dev_comm_destroy: new_in_2_28(version, opt_sym!(lib, "ncclDevCommDestroy")),
                version,
                _lib: std::mem::ManuallyDrop::new(lib),
            };
            Ok(n)
        }
    }
}

/// Reads a NUL-terminated string that C code wrote into a fixed buffer (a
/// CUDA device name, a profiler record's name field). A full buffer without
/// NUL is read to its end, so a truncated name still reads as far as it goes.
pub(crate) fn c_string(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// NCCL's id for a collbench data type.
pub fn dtype_id(t: collbench_core::DataType) -> DataTypeId {
    use collbench_core::DataType::*;
    match t {
        Int8 => 0,
        Uint8 => 1,
        Int32 => 2,
        Uint32 => 3,
        Int64 => 4,
        Uint64 => 5,
        Half => 6,
        Float => 7,
        Double => 8,
        Bfloat16 => 9,
        F8e4m3 => 10,
        F8e5m2 => 11,
    }
}

/// NCCL's id for a built-in reduction (mulsum is created per call).
pub fn redop_id(op: collbench_core::ReduceOp) -> RedOpId {
    use collbench_core::ReduceOp::*;
    match op {
        Sum | MulSum => 0,
        Prod => 1,
        Max => 2,
        Min => 3,
        Avg => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{DataType, ReduceOp};

    #[test]
    fn c_strings_stop_at_nul() {
        let mut buf = [0 as c_char; 8];
        for (d, s) in buf.iter_mut().zip(b"H200\0xy") {
            *d = *s as c_char;
        }
        assert_eq!(c_string(&buf), "H200");
    }

    #[test]
    fn data_type_ids_follow_nccl_h() {
        // ncclInt8 = 0 ... ncclFloat8e5m2 = 11, in DataType::ALL's order.
        let ids: Vec<DataTypeId> = DataType::ALL.into_iter().map(dtype_id).collect();
        assert_eq!(ids, (0..12).collect::<Vec<_>>());
        assert_eq!(dtype_id(DataType::Float), 7);
        assert_eq!(dtype_id(DataType::Bfloat16), 9);
    }

    #[test]
    fn built_in_reductions_follow_nccl_h_and_mulsum_starts_from_sum() {
        let ids: Vec<RedOpId> = ReduceOp::ALL.into_iter().map(redop_id).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 0]);
    }

    #[test]
    fn config_is_nccl_2_28s_layout() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<Config>(), 80);
        assert_eq!(offset_of!(Config, blocking), 16);
        assert_eq!(offset_of!(Config, net_name), 32);
        assert_eq!(offset_of!(Config, comm_name), 48);
        assert_eq!(offset_of!(Config, cta_policy), 60);
        assert_eq!(offset_of!(Config, nvlink_centric_sched), 76);
        let c = Config::new(22803);
        assert_eq!((c.size, c.magic, c.version), (80, 0xcafebeef, 22800));
        assert_eq!(c.cta_policy, i32::MIN);
        let c = Config::new(22703);
        assert_eq!((c.size, c.version), (72, 22700));
    }

    #[test]
    fn unique_ids_round_trip_as_128_bytes() {
        let mut id = UniqueId { internal: [0; 128] };
        id.internal[0] = 7;
        id.internal[127] = -1;
        let b = id.to_bytes();
        assert_eq!(b.len(), 128);
        assert_eq!((b[0], b[127]), (7, 255));
        assert_eq!(UniqueId::from_bytes(&b).unwrap().internal, id.internal);
        assert!(UniqueId::from_bytes(&b[..127]).is_none());
    }
}
