//! Device communicators for NCCL's device API (`-D`): ncclDevCommCreate and
//! ncclDevCommDestroy (NCCL >= 2.28).

use super::{missing, Communicator};
use crate::dev_comm::{DevComm, DevCommRequirements};
use crate::error::NcclError;
use crate::ffi::Nccl;
use crate::group::Group;

impl Nccl {
    /// ncclDevCommCreate and ncclDevCommDestroy are there.
    pub fn has_dev_comm(&self) -> bool {
        self.dev_comm_create.is_some() && self.dev_comm_destroy.is_some()
    }

    /// ncclDevCommCreate on each communicator with `reqs`, in one group
    /// (creation is collective, as nccl-tests groups it). Every creation is
    /// issued even after one fails; the first error is returned.
    pub fn dev_comm_create_all(
        &self,
        comms: &[&Communicator],
        reqs: &DevCommRequirements,
    ) -> Result<Vec<DevComm>, NcclError> {
        let create = self
            .dev_comm_create
            .ok_or_else(|| missing("ncclDevCommCreate"))?;
        // As in `comm_init_ranks`: the out-slots outlive the group.
        let mut out = vec![DevComm::zeroed(); comms.len()];
        let slots = out.as_mut_ptr();
        let mut result = Ok(());
        let group = Group::start(self)?;
        for (i, comm) in comms.iter().enumerate() {
            // SAFETY: a live communicator; `reqs` is a repr(C)
            // ncclDevCommRequirements of NCCL 2.28 (empty lists, so NCCL
            // follows no pointer in it) read during the call;
            // `slots.add(i)` is inside `out`, a repr(C) ncclDevComm of
            // 2.28's layout, untouched until the group has ended.
            let r = unsafe { create(comm.0, reqs, slots.add(i)) };
            result = result.and(self.check("ncclDevCommCreate", r));
        }
        let end = group.end();
        result.and(end)?;
        Ok(out)
    }

    /// ncclDevCommDestroy of a device communicator made on `comm`.
    pub fn dev_comm_destroy(&self, comm: &Communicator, dev_comm: &DevComm) {
        if let Some(destroy) = self.dev_comm_destroy {
            // SAFETY: `dev_comm` came from ncclDevCommCreate on this live
            // communicator; NCCL reads it during the call.
            unsafe { destroy(comm.0, dev_comm) };
        }
    }
}
