//! NCCL found where collbench looks for it (the same search as the NCCL
//! backend), with its path and version.

use super::{Check, Status};

/// Looks for NCCL; missing is a failure only where GPUs are present.
pub fn nccl_check(have_gpus: bool) -> Check {
    let found = collbench_nccl::loader::open(None)
        .map(|(_lib, f)| (f.path.display().to_string(), f.version_string()))
        .map_err(|e| e.tried.len());
    judge_nccl(found, have_gpus)
}

/// `Ok((path, version))` or `Err(places tried)`.
pub fn judge_nccl(found: Result<(String, String), usize>, have_gpus: bool) -> Check {
    let hint = "install NCCL (libnccl2, or pip install nvidia-nccl-cu12) or point COLLBENCH_NCCL_LIB / --nccl-lib at libnccl.so.2";
    match found {
        Ok((path, version)) => Check::new(
            "nccl",
            Status::Pass,
            format!("NCCL {version} at {path}"),
            "",
        ),
        Err(tried) if have_gpus => Check::new(
            "nccl",
            Status::Fail,
            format!("libnccl.so.2 not found ({tried} places tried)"),
            hint,
        ),
        Err(tried) => Check::new(
            "nccl",
            Status::Skip,
            format!("libnccl.so.2 not found ({tried} places tried); not needed without GPUs"),
            hint,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_missing_with_and_without_gpus() {
        let ok = judge_nccl(Ok(("/usr/lib/libnccl.so.2".into(), "2.28.3".into())), true);
        assert_eq!(ok.status, Status::Pass);
        assert_eq!(ok.message, "NCCL 2.28.3 at /usr/lib/libnccl.so.2");
        assert_eq!(judge_nccl(Err(9), true).status, Status::Fail);
        assert_eq!(judge_nccl(Err(9), false).status, Status::Skip);
    }
}
