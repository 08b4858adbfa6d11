//! Typed errors of the NCCL and CUDA layers. Each reads as one line naming
//! the failing call, and converts into the runner's [`BackendError`] so
//! backend code can use `?` on library calls.

use collbench_runner::BackendError;

/// A failed NCCL call, or an NCCL library collbench cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NcclError {
    /// An NCCL call returned a result other than `ncclSuccess`.
    #[error("{call} failed: {text}{}", detail(text, last.as_deref()))]
    Call {
        /// The call that failed (`ncclAllReduce`), or what failed.
        call: String,
        /// The `ncclResult_t` it returned.
        code: i32,
        /// `ncclGetErrorString` of `code`.
        text: String,
        /// `ncclGetLastError`, where the library has it and it says something.
        last: Option<String>,
    },
    /// A symbol every supported NCCL exports is missing from the library.
    #[error("{symbol} is missing from the NCCL library: {reason}")]
    MissingSymbol {
        /// The C symbol (`ncclAllReduce`).
        symbol: &'static str,
        /// The loader's words.
        reason: String,
    },
}

/// What follows NCCL's own error text: its last error when it has one,
/// else the hint to rerun with NCCL_DEBUG=WARN unless NCCL's text already
/// gives it ("invalid argument (run with NCCL_DEBUG=WARN for details)").
fn detail(text: &str, last: Option<&str>) -> String {
    match last {
        Some(l) => format!(" ({l})"),
        None if text.contains("NCCL_DEBUG") => String::new(),
        None => " (set NCCL_DEBUG=WARN for details)".into(),
    }
}

impl NcclError {
    /// The `ncclResult_t` of a failed call (`None` for a missing symbol).
    pub fn code(&self) -> Option<i32> {
        match self {
            NcclError::Call { code, .. } => Some(*code),
            NcclError::MissingSymbol { .. } => None,
        }
    }
}

/// A failed CUDA driver call, or no usable driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    /// libcuda.so.1 could not be loaded.
    #[error("no CUDA driver found (libcuda.so.1 is not loadable)")]
    NoDriver,
    /// A driver call returned a result other than `CUDA_SUCCESS`.
    #[error("{call} failed: {text}")]
    Call {
        /// The call that failed (`cuMemAlloc`).
        call: String,
        /// The `CUresult` it returned, as a number.
        code: u32,
        /// `cuGetErrorString` of `code` (or the result's name).
        text: String,
    },
    /// PTX text handed to the driver contains a NUL byte.
    #[error("PTX contains a NUL byte")]
    PtxNul,
    /// A device-API kernel the embedded PTX does not have.
    #[error("the embedded device-API PTX has no kernel {0}")]
    NoKernel(String),
}

impl From<NcclError> for BackendError {
    fn from(e: NcclError) -> BackendError {
        BackendError::Library(e.to_string())
    }
}

impl From<CudaError> for BackendError {
    fn from(e: CudaError) -> BackendError {
        BackendError::Library(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(last: Option<&str>) -> NcclError {
        NcclError::Call {
            call: "ncclAllReduce".into(),
            code: 3,
            text: "internal error - please report this issue to the NCCL developers".into(),
            last: last.map(str::to_string),
        }
    }

    #[test]
    fn nccl_call_names_the_call_and_nccl_words() {
        assert_eq!(
            call(Some("NET/IB : Got completion with error")).to_string(),
            "ncclAllReduce failed: internal error - please report this issue to the NCCL developers (NET/IB : Got completion with error)"
        );
        assert_eq!(call(None).code(), Some(3));
    }

    #[test]
    fn nccl_call_without_last_error_says_how_to_see_more() {
        assert_eq!(
            call(None).to_string(),
            "ncclAllReduce failed: internal error - please report this issue to the NCCL developers (set NCCL_DEBUG=WARN for details)"
        );
    }

    #[test]
    fn the_hint_is_not_given_twice() {
        let e = NcclError::Call {
            call: "ncclAllReduce".into(),
            code: 4,
            text: "invalid argument (run with NCCL_DEBUG=WARN for details)".into(),
            last: None,
        };
        assert_eq!(
            e.to_string(),
            "ncclAllReduce failed: invalid argument (run with NCCL_DEBUG=WARN for details)"
        );
    }

    #[test]
    fn missing_symbol_is_one_line() {
        let e = NcclError::MissingSymbol {
            symbol: "ncclSend",
            reason: "undefined symbol: ncclSend".into(),
        };
        assert_eq!(
            e.to_string(),
            "ncclSend is missing from the NCCL library: undefined symbol: ncclSend"
        );
        assert_eq!(e.code(), None);
    }

    #[test]
    fn cuda_errors_read_as_before() {
        let e = CudaError::Call {
            call: "cuMemAlloc".into(),
            code: 2,
            text: "out of memory".into(),
        };
        assert_eq!(e.to_string(), "cuMemAlloc failed: out of memory");
        assert_eq!(
            CudaError::NoDriver.to_string(),
            "no CUDA driver found (libcuda.so.1 is not loadable)"
        );
    }

    #[test]
    fn both_convert_into_library_errors_with_question_mark() {
        fn nccl() -> Result<(), BackendError> {
            Err(call(None))?
        }
        fn cuda() -> Result<(), BackendError> {
            Err(CudaError::NoDriver)?
        }
        match nccl().unwrap_err() {
            BackendError::Library(m) => assert!(m.starts_with("ncclAllReduce failed: "), "{m}"),
            other => panic!("{other:?}"),
        }
        match cuda().unwrap_err() {
            BackendError::Library(m) => assert!(m.contains("libcuda.so.1"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
