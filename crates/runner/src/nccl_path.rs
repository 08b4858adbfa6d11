//! Every process's view of the path NCCL took, joined on rank 0: each
//! process's NCCL prints only its own ranks' connections.

use crate::run::gather_json;
use crate::RunError;
use collbench_core::nccl_path::NcclPath;
use collbench_core::Bootstrap;

/// The joined path on rank 0 (`None` elsewhere, or where no process knew).
pub(crate) fn gather(
    control: &dyn Bootstrap,
    mine: Option<NcclPath>,
) -> Result<Option<NcclPath>, RunError> {
    let Some(all) = gather_json(control, "NCCL path", &mine)? else {
        return Ok(None);
    };
    Ok(all.into_iter().flatten().reduce(|mut a, b| {
        a.merge(b);
        a
    }))
}
