//! collbench's data types and reduction operators as MPI sees them, and
//! MPI return codes as [`BackendError`]s.
//!
//! The eight types MPI knows (int8 .. uint64, float, double) reduce with
//! MPI's own operators. half, bfloat16, f8e4m3 and f8e5m2 have no MPI type:
//! they travel as MPI_UINT16_T / MPI_UINT8_T and reduce with user-defined
//! operators over collbench's [`Element`] arithmetic (through f32, exact
//! for the verification patterns). avg and mulsum are sums here; the
//! collective code divides or premultiplies around the MPI call.

use collbench_core::element::Element;
use collbench_core::{DataType, ReduceOp};
use collbench_runner::BackendError;
use mpi::ffi;
use std::os::raw::{c_char, c_int, c_void};

extern "C" {
    /// From `in_place.c`: this MPI's MPI_IN_PLACE.
    fn collbench_mpi_in_place() -> *mut c_void;
}

/// MPI_IN_PLACE of the MPI library this crate was built against.
pub fn in_place() -> *mut c_void {
    // SAFETY: the shim only returns a constant.
    unsafe { collbench_mpi_in_place() }
}

/// The MPI datatype that carries `dtype` (narrow floats as raw bits).
pub fn datatype(dtype: DataType) -> ffi::MPI_Datatype {
    // SAFETY: reading MPI's predefined handle constants.
    unsafe {
        match dtype {
            DataType::Int8 => ffi::RSMPI_INT8_T,
            DataType::Uint8 | DataType::F8e4m3 | DataType::F8e5m2 => ffi::RSMPI_UINT8_T,
            DataType::Int32 => ffi::RSMPI_INT32_T,
            DataType::Uint32 => ffi::RSMPI_UINT32_T,
            DataType::Int64 => ffi::RSMPI_INT64_T,
            DataType::Uint64 => ffi::RSMPI_UINT64_T,
            DataType::Float => ffi::RSMPI_FLOAT,
            DataType::Double => ffi::RSMPI_DOUBLE,
            DataType::Half | DataType::Bfloat16 => ffi::RSMPI_UINT16_T,
        }
    }
}

/// True where MPI has a native arithmetic type for `dtype`.
pub fn is_native(dtype: DataType) -> bool {
    !matches!(
        dtype,
        DataType::Half | DataType::Bfloat16 | DataType::F8e4m3 | DataType::F8e5m2
    )
}

/// The combining step of a reduction (avg and mulsum combine by sum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Combine {
    Sum = 0,
    Prod = 1,
    Min = 2,
    Max = 3,
}

fn combine_of(redop: ReduceOp) -> Combine {
    match redop {
        ReduceOp::Sum | ReduceOp::Avg | ReduceOp::MulSum => Combine::Sum,
        ReduceOp::Prod => Combine::Prod,
        ReduceOp::Min => Combine::Min,
        ReduceOp::Max => Combine::Max,
    }
}

/// An MPI reduction operator; user-defined ones are freed on drop.
pub struct Op {
    raw: ffi::MPI_Op,
    user_defined: bool,
}

impl Op {
    /// The operator that combines `T` values as `redop` does.
    pub fn new<T: Element>(redop: ReduceOp) -> Result<Op, BackendError> {
        let combine = combine_of(redop);
        if is_native(T::DTYPE) {
            // SAFETY: reading MPI's predefined handle constants.
            let raw = unsafe {
                match combine {
                    Combine::Sum => ffi::RSMPI_SUM,
                    Combine::Prod => ffi::RSMPI_PROD,
                    Combine::Min => ffi::RSMPI_MIN,
                    Combine::Max => ffi::RSMPI_MAX,
                }
            };
            return Ok(Op {
                raw,
                user_defined: false,
            });
        }
        let function: ffi::MPI_User_function = Some(match combine {
            Combine::Sum => user_combine::<T, { Combine::Sum as u8 }>,
            Combine::Prod => user_combine::<T, { Combine::Prod as u8 }>,
            Combine::Min => user_combine::<T, { Combine::Min as u8 }>,
            Combine::Max => user_combine::<T, { Combine::Max as u8 }>,
        });
        let mut raw = std::mem::MaybeUninit::<ffi::MPI_Op>::uninit();
        check(
            // SAFETY: `function` has MPI's user-function signature; commutative
            // because every combining step of the patterns is.
            unsafe { ffi::MPI_Op_create(function, 1, raw.as_mut_ptr()) },
            "MPI_Op_create",
        )?;
        Ok(Op {
            // SAFETY: MPI_Op_create succeeded, so it wrote the handle.
            raw: unsafe { raw.assume_init() },
            user_defined: true,
        })
    }

    /// The raw handle for MPI calls.
    pub fn raw(&self) -> ffi::MPI_Op {
        self.raw
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if self.user_defined {
            // SAFETY: a handle from MPI_Op_create, freed once.
            unsafe { ffi::MPI_Op_free(&mut self.raw) };
        }
    }
}

/// MPI user function: `inout[i] = in[i] (op) inout[i]` over `T` values.
///
/// # Safety
/// Called by MPI only, as `MPI_Op_create` registered it: `len` points to
/// the element count, and `input` and `inout` to that many `T`s that do
/// not overlap.
unsafe extern "C" fn user_combine<T: Element, const COMBINE: u8>(
    input: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _datatype: *mut ffi::MPI_Datatype,
) {
    // SAFETY: MPI's contract for a user function (# Safety above).
    let (x, acc) = unsafe {
        let len = *len as usize;
        (
            std::slice::from_raw_parts(input as *const T, len),
            std::slice::from_raw_parts_mut(inout as *mut T, len),
        )
    };
    for (a, &v) in acc.iter_mut().zip(x) {
        *a = match COMBINE {
            0 => v.add(*a),
            1 => v.mul(*a),
            2 => v.min_with(*a),
            _ => v.max_with(*a),
        };
    }
}

/// Turns an MPI return code into a one-line error naming the call.
pub fn check(code: c_int, call: &str) -> Result<(), BackendError> {
    if code == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    let mut text = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters.
    unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr() as *mut c_char, &mut len) };
    text.truncate(len.max(0) as usize);
    Err(BackendError::Library(format!(
        "{call} failed: {} (MPI error {code})",
        String::from_utf8_lossy(&text).trim()
    )))
}

/// An element count as MPI's 32-bit `int`.
pub fn count(n: u64) -> Result<c_int, BackendError> {
    c_int::try_from(n).map_err(|_| {
        BackendError::Unsupported(format!(
            "{n} elements do not fit MPI's 32-bit counts: lower -e (maximum size) for --backend mpi"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::element::{bf16, f16, F8E4M3};

    fn combine<T: Element, const C: u8>(a: &[T], b: &mut [T]) {
        let mut len = a.len() as c_int;
        // SAFETY: equal-length slices; the datatype is not read.
        unsafe {
            user_combine::<T, C>(
                a.as_ptr() as *mut c_void,
                b.as_mut_ptr() as *mut c_void,
                &mut len,
                std::ptr::null_mut(),
            )
        };
    }

    #[test]
    fn user_operators_use_element_arithmetic() {
        let a = [f16::from_f32(3.0), f16::from_f32(1.0)];
        let mut b = [f16::from_f32(4.0), f16::from_f32(2.0)];
        combine::<f16, 0>(&a, &mut b);
        assert_eq!(b, [f16::from_f32(7.0), f16::from_f32(3.0)]);
        let a = [bf16::from_f32(2.0)];
        let mut b = [bf16::from_f32(4.0)];
        combine::<bf16, 1>(&a, &mut b);
        assert_eq!(b, [bf16::from_f32(8.0)]);
        let a = [F8E4M3::from_f32(2.0), F8E4M3::from_f32(5.0)];
        let mut b = [F8E4M3::from_f32(3.0), F8E4M3::from_f32(1.0)];
        combine::<F8E4M3, 2>(&a, &mut b);
        assert_eq!(b, [F8E4M3::from_f32(2.0), F8E4M3::from_f32(1.0)]);
        let mut b = [F8E4M3::from_f32(3.0), F8E4M3::from_f32(1.0)];
        combine::<F8E4M3, 3>(&a, &mut b);
        assert_eq!(b, [F8E4M3::from_f32(3.0), F8E4M3::from_f32(5.0)]);
    }

    #[test]
    fn types_and_counts() {
        assert!(is_native(DataType::Double) && !is_native(DataType::Bfloat16));
        assert_eq!(count(7).unwrap(), 7);
        assert!(matches!(count(1 << 31), Err(BackendError::Unsupported(_))));
        assert!(combine_of(ReduceOp::MulSum) == Combine::Sum);
    }
}
