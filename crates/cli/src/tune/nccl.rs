//! NCCL for `tune`: the one line when there is none, the NCCL options of
//! its measurers (parent and children alike), and the factory the job
//! opens the parent's measurer with (the tune crate does not talk to
//! NCCL).

use crate::args::{BackendArgs, BackendName, Mode};
use crate::cmd::tune::TuneArgs;
use collbench_core::Bootstrap;
use collbench_nccl::tune::NcclMeasurer;
use collbench_nccl::tuner::{TunerError, TunerPlugin};
use collbench_tune::job::{Measurers, Opened, TuneError};
use collbench_tune::Setting;

/// Seconds before a stuck collective aborts its communicator (`-T`).
const TIMEOUT_S: u64 = 60;

/// The one line for a command that needs NCCL on another backend.
pub fn not_nccl(what: &str, b: &BackendArgs) -> Option<String> {
    let why = match b.name {
        BackendName::Nccl => return None,
        BackendName::Auto => match collbench_nccl::gpu_count() {
            Ok(n) if n > 0 => return None,
            Ok(_) => "no GPU found".to_string(),
            Err(e) => format!("no GPU found ({e})"),
        },
        BackendName::Cpu => "--backend cpu".to_string(),
        BackendName::Mpi => "--backend mpi".to_string(),
    };
    Some(format!(
        "{what} ({why}): use --backend nccl on a machine with NVIDIA GPUs"
    ))
}

/// Ranks a one-process `tune` would drive, without opening a backend:
/// `-g`, `--ranks`, else the GPUs CUDA sees (1 where it sees none).
pub fn local_ranks(b: &BackendArgs) -> usize {
    b.ngpus
        .map(|g| g * b.nthreads.max(1))
        .or(b.ranks)
        .or_else(|| collbench_nccl::gpu_count().ok().filter(|n| *n > 0))
        .unwrap_or(1)
}

/// Where a measuring process sits: its host's name and its rank among the
/// processes on that host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub host: String,
    pub local_rank: usize,
}

impl Place {
    /// The place of a process of `world`.
    pub fn of(world: &collbench_launch::World) -> Place {
        Place {
            host: world.hostname.clone(),
            local_rank: world.local_rank,
        }
    }
}

/// NCCL options of `tune`'s measurers, parent and children alike.
pub fn nccl_options(b: &BackendArgs, place: Place) -> collbench_nccl::NcclOptions {
    collbench_nccl::NcclOptions {
        // Picks this process's GPUs among the host's, as in `run`: with
        // eight processes per host, eight GPUs, not GPU 0 eight times.
        local_rank: place.local_rank,
        host: place.host,
        // A repeat takes milliseconds: a stuck collective is aborted and
        // reported instead of hanging the search.
        timeout_s: TIMEOUT_S,
        ..b.nccl_options(Mode::Native)
    }
}

/// Installs collbench's tuner plugin; the user's own one is a refusal.
pub fn install_plugin() -> Result<TunerPlugin, TuneError> {
    TunerPlugin::install().map_err(|e| match e {
        TunerError::UserPlugin(_) => TuneError::Refused(e.to_string()),
        e => TuneError::Failed(e.to_string()),
    })
}

/// Opens NCCL's measurer for the job (the parent's, or a child's with the
/// default setting only).
pub struct NcclMeasurers {
    opts: collbench_nccl::NcclOptions,
    plugin: Option<TunerPlugin>,
    /// Whether to say that the candidates' communicators are being made.
    say: bool,
}

impl NcclMeasurers {
    /// The parent's, at `place`.
    pub fn new(a: &TuneArgs, place: Place) -> NcclMeasurers {
        NcclMeasurers {
            opts: nccl_options(&a.backend, place),
            plugin: None,
            say: true,
        }
    }

    /// A child's, at `place` (it says nothing).
    pub fn child(b: &BackendArgs, place: Place) -> NcclMeasurers {
        NcclMeasurers {
            opts: nccl_options(b, place),
            plugin: None,
            say: false,
        }
    }
}

impl Measurers for NcclMeasurers {
    fn install(&mut self) -> Result<(), TuneError> {
        self.plugin = Some(install_plugin()?);
        Ok(())
    }

    fn open<'c>(
        &'c mut self,
        control: &'c dyn Bootstrap,
        candidates: &dyn Fn(usize) -> Vec<Setting>,
    ) -> Result<Opened<'c>, TuneError> {
        let plugin = match self.plugin.take() {
            Some(p) => p,
            None => install_plugin()?,
        };
        let mut measurer = NcclMeasurer::new(&self.opts, control, plugin)
            .map_err(|e| TuneError::Failed(e.to_string()))?;
        let world_size = measurer.world_size();
        if self.say && control.rank() == 0 {
            crate::stdout::say("collbench tune: creating the candidates' communicators");
        }
        // Every communicator up front, charged to the budget as setup.
        measurer.prepare(&candidates(world_size));
        let communicators = measurer.communicators();
        Ok(Opened {
            measurer: Box::new(measurer),
            world_size,
            communicators,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_backend_is_refused_in_one_line() {
        let b = BackendArgs {
            nthreads: 1,
            ngpus: None,
            name: BackendName::Cpu,
            ranks: None,
            nccl_lib: None,
            test_slow_rank: None,
            test_late_entry: None,
        };
        let line = not_nccl("tune tunes NCCL", &b).unwrap();
        assert_eq!(
            line,
            "tune tunes NCCL (--backend cpu): use --backend nccl on a machine with NVIDIA GPUs"
        );
        assert!(!line.contains('\n'));
    }
}
