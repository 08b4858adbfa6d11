//! What every process knows, joined on rank 0 through the control plane:
//! JSON parts gathered ([`gather_json`]), and the path NCCL took, which
//! each process's NCCL prints only for its own ranks ([`nccl_path`]).

use crate::error::RunError;
use collbench_core::nccl_path::NcclPath;
use collbench_core::Bootstrap;
use serde::Serialize;

/// Every process's `mine` on rank 0 (`None` elsewhere), as JSON through
/// the control plane; a part that does not parse names its process and
/// `what` it should have been.
pub(crate) fn gather_json<T: Serialize + serde::de::DeserializeOwned>(
    control: &dyn Bootstrap,
    what: &str,
    mine: &T,
) -> Result<Option<Vec<T>>, RunError> {
    let bytes = serde_json::to_vec(mine).expect("plain data serialises");
    let Some(all) = control.gather(bytes)? else {
        return Ok(None);
    };
    let parts = all.iter().enumerate().map(|(proc_rank, b)| {
        serde_json::from_slice(b)
            .map_err(|e| RunError::Control(format!("bad {what} from process {proc_rank}: {e}")))
    });
    parts.collect::<Result<Vec<T>, _>>().map(Some)
}

/// The joined path on rank 0 (`None` elsewhere, or where no process knew).
pub(crate) fn nccl_path(
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
