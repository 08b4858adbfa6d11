//! What each launcher's environment variables say about this process.
//!
//! One function per launcher turns variables into a [`LauncherEnv`]; nothing
//! here reads the real environment (every function takes a lookup closure),
//! so each mapping is unit-tested. [`crate::world`] combines the result with
//! flags and `COLLBENCH_*` variables.
//!
//! | launcher | rank | size | local rank | rank 0's host | job id |
//! |---|---|---|---|---|---|
//! | Slurm `srun` | SLURM_PROCID | SLURM_NTASKS | SLURM_LOCALID | first of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST, SLURM_NODELIST) | SLURM_JOB_ID.SLURM_STEP_ID |
//! | OpenMPI `mpirun` | OMPI_COMM_WORLD_RANK | OMPI_COMM_WORLD_SIZE | OMPI_COMM_WORLD_LOCAL_RANK | - | PMIX_NAMESPACE |
//! | MPICH/Hydra, PMI | PMI_RANK | PMI_SIZE | MPI_LOCALRANKID | - | - |
//! | torchrun style | RANK | WORLD_SIZE | LOCAL_RANK | MASTER_ADDR (port MASTER_PORT) | TORCHELASTIC_RUN_ID |
//! | Kubernetes Indexed Job / JobSet | JOB_COMPLETION_INDEX | COLLBENCH_WORLD_SIZE | 0 | COLLBENCH_RENDEZVOUS | - |
//!
//! Inner launchers win over outer ones: `srun torchrun ...` and `mpirun`
//! inside a Slurm allocation both leave SLURM_* variables behind that
//! describe the outer step, not this process.

use crate::hostlist;
use crate::LaunchError;
use collbench_core::ports::{Port, PortError};
use serde::Serialize;

/// An environment lookup: `Some(value)` when the variable is set.
pub trait Env: Fn(&str) -> Option<String> {}
impl<F: Fn(&str) -> Option<String>> Env for F {}

/// The launcher that started this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    /// No launcher: one process, no sockets.
    Single,
    /// Flags or `COLLBENCH_*` variables only.
    Explicit,
    /// Slurm `srun`.
    Slurm,
    /// OpenMPI `mpirun`.
    OpenMpi,
    /// MPICH/Hydra, Intel MPI or another PMI launcher.
    Pmi,
    /// torchrun or anything setting RANK/WORLD_SIZE/MASTER_ADDR.
    Torchrun,
    /// Kubernetes Indexed Job or JobSet.
    Kubernetes,
}

impl std::fmt::Display for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Launcher::Single => "single process",
            Launcher::Explicit => "explicit",
            Launcher::Slurm => "slurm",
            Launcher::OpenMpi => "openmpi",
            Launcher::Pmi => "pmi",
            Launcher::Torchrun => "torchrun",
            Launcher::Kubernetes => "kubernetes",
        })
    }
}

/// What one launcher's variables say; `None` where it says nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherEnv {
    /// Which launcher set the variables.
    pub launcher: Launcher,
    /// This process's rank.
    pub rank: Option<usize>,
    /// Number of processes in the job.
    pub world_size: Option<usize>,
    /// Rank of this process on its host.
    pub local_rank: Option<usize>,
    /// Number of processes on this host.
    pub local_world_size: Option<usize>,
    /// Where rank 0 runs, when the launcher tells.
    pub rendezvous_host: Option<String>,
    /// Control-plane port, when the launcher names one.
    pub rendezvous_port: Option<Port>,
    /// The launcher's id of this job (token and default port derive from it).
    pub job_id: Option<String>,
}

/// The variables in which a launcher gives rank, world size, local rank
/// and local world size, in that order.
type PlaceVars = [&'static str; 4];

impl LauncherEnv {
    /// A job started by `launcher` whose place this process reads from
    /// `vars` (each unset one: not known).
    fn placed(launcher: Launcher, env: &impl Env, vars: PlaceVars) -> Result<Self, LaunchError> {
        let [rank, world_size, local_rank, local_world_size] = vars;
        let mut out = LauncherEnv::new(launcher);
        out.rank = number(env, rank)?;
        out.world_size = number(env, world_size)?;
        out.local_rank = number(env, local_rank)?;
        out.local_world_size = number(env, local_world_size)?;
        Ok(out)
    }

    /// Nothing known yet about a job started by `launcher`.
    pub(crate) fn new(launcher: Launcher) -> Self {
        LauncherEnv {
            launcher,
            rank: None,
            world_size: None,
            local_rank: None,
            local_world_size: None,
            rendezvous_host: None,
            rendezvous_port: None,
            job_id: None,
        }
    }
}

/// Detects the launcher that started this process, innermost first:
/// torchrun, OpenMPI, MPICH/PMI, Slurm, Kubernetes. `Ok(None)`: no launcher.
pub fn detect<E: Env>(env: &E) -> Result<Option<LauncherEnv>, LaunchError> {
    type Probe<E> = fn(&E) -> Result<Option<LauncherEnv>, LaunchError>;
    let probes: [Probe<E>; 5] = [torchrun, openmpi, pmi, slurm, kubernetes];
    for probe in probes {
        if let Some(found) = probe(env)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// An unsigned integer a launcher variable holds, with its largest value
/// for the message (`COLLBENCH_PORT=99999` is a number, but no port).
pub trait Unsigned: std::str::FromStr {
    /// The largest value, as text.
    const MAX: u64;
}

impl Unsigned for u16 {
    const MAX: u64 = u16::MAX as u64;
}

impl Unsigned for usize {
    const MAX: u64 = usize::MAX as u64;
}

/// Reads `name` as a number; a set but malformed value is an error naming it.
pub fn number<T: Unsigned>(env: &impl Env, name: &str) -> Result<Option<T>, LaunchError> {
    match env(name) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            LaunchError::Discovery(format!(
                "{name}={v:?} is not a whole number from 0 to {}: fix or unset it",
                T::MAX
            ))
        }),
    }
}

/// Reads `name` as a TCP port (1 to 65535); a set but bad value (0 asks
/// the OS for any port, which no other rank can know) is an error naming
/// it.
pub fn port(env: &impl Env, name: &str) -> Result<Option<Port>, LaunchError> {
    match env(name) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => Ok(Some(Port::parse(name, &v)?)),
    }
}

/// The first variable of `names` that is set and not empty.
fn first_set(env: &impl Env, names: &[&str]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| env(n))
        .find(|v| !v.trim().is_empty())
}

/// The tasks of a Slurm job that `srun` did not start: inside an
/// allocation of SLURM_NTASKS > 1 (SLURM_JOB_ID set) but without a step
/// id, this process is the batch script's one process and runs alone, which
/// [`slurm`] must not mistake for a rank; the CLI says so in one line.
pub fn slurm_tasks_without_step(env: &impl Env) -> Option<usize> {
    first_set(env, &["SLURM_JOB_ID", "SLURM_JOBID"])?;
    if first_set(env, &["SLURM_STEP_ID", "SLURM_STEPID"]).is_some() {
        return None;
    }
    let tasks: usize = env("SLURM_NTASKS")?.trim().parse().ok()?;
    (tasks > 1).then_some(tasks)
}

/// Slurm, only for tasks that `srun` started: a batch script also has
/// SLURM_PROCID=0 and SLURM_NTASKS=N, but no step id, and must not wait for
/// N-1 peers that will never come.
pub fn slurm(env: &impl Env) -> Result<Option<LauncherEnv>, LaunchError> {
    let step = first_set(env, &["SLURM_STEP_ID", "SLURM_STEPID"]);
    let (Some(_), Some(step)) = (env("SLURM_PROCID"), step) else {
        return Ok(None);
    };
    let mut out = LauncherEnv::new(Launcher::Slurm);
    out.rank = number(env, "SLURM_PROCID")?;
    out.world_size = match number(env, "SLURM_STEP_NUM_TASKS")? {
        Some(n) => Some(n),
        None => number(env, "SLURM_NTASKS")?,
    };
    out.local_rank = number(env, "SLURM_LOCALID")?;
    let node: Option<usize> = number(env, "SLURM_NODEID")?;
    let per_node = first_set(env, &["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]);
    if let (Some(node), Some(per_node)) = (node, per_node) {
        out.local_world_size = tasks_on_node(&per_node, node);
    }
    if let Some(list) = first_set(
        env,
        &[
            "SLURM_STEP_NODELIST",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
        ],
    ) {
        let host = hostlist::first(&list)
            .map_err(|e| LaunchError::Discovery(format!("Slurm node list: {e}")))?;
        out.rendezvous_host = Some(host);
    }
    out.job_id =
        first_set(env, &["SLURM_JOB_ID", "SLURM_JOBID"]).map(|job| format!("{job}.{step}"));
    Ok(Some(out))
}

/// Reads Slurm's compressed tasks-per-node list (`2(x3),1`) at `node`.
pub fn tasks_on_node(expr: &str, node: usize) -> Option<usize> {
    let mut index = 0usize;
    for part in expr.split(',') {
        let part = part.trim();
        let (count, repeat) = match part.split_once("(x") {
            Some((c, r)) => (c, r.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (part, 1),
        };
        let count: usize = count.parse().ok()?;
        if node < index + repeat {
            return Some(count);
        }
        index += repeat;
    }
    None
}

/// OpenMPI's `mpirun` (and `srun --mpi=pmix` with OpenMPI built for it).
pub fn openmpi(env: &impl Env) -> Result<Option<LauncherEnv>, LaunchError> {
    if env("OMPI_COMM_WORLD_RANK").is_none() {
        return Ok(None);
    }
    let mut out = LauncherEnv::placed(
        Launcher::OpenMpi,
        env,
        [
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ],
    )?;
    out.job_id = first_set(
        env,
        &[
            "PMIX_NAMESPACE",
            "OMPI_MCA_ess_base_jobid",
            "OMPI_MCA_orte_ess_jobid",
        ],
    );
    Ok(Some(out))
}

/// MPICH's Hydra `mpiexec`, Intel MPI and other PMI-1 launchers.
pub fn pmi(env: &impl Env) -> Result<Option<LauncherEnv>, LaunchError> {
    if env("PMI_RANK").is_none() {
        return Ok(None);
    }
    let vars = ["PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"];
    LauncherEnv::placed(Launcher::Pmi, env, vars).map(Some)
}

/// torchrun and anything that sets its variables (RANK and WORLD_SIZE both
/// set, so a stray RANK alone does not count).
///
/// Under a real torchrun agent (TORCHELASTIC_USE_AGENT_STORE=True) the agent
/// already listens on MASTER_PORT, so rank 0 takes MASTER_PORT + 1.
pub fn torchrun(env: &impl Env) -> Result<Option<LauncherEnv>, LaunchError> {
    if env("RANK").is_none() || env("WORLD_SIZE").is_none() {
        return Ok(None);
    }
    let vars = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"];
    let mut out = LauncherEnv::placed(Launcher::Torchrun, env, vars)?;
    out.rendezvous_host = first_set(env, &["MASTER_ADDR"]);
    let agent_store =
        env("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    out.rendezvous_port = match port(env, "MASTER_PORT")? {
        // 65535 + 1 wrapped to port 0: any port, which no rank can know.
        Some(p) if agent_store => Some(p.checked_add(1).ok_or_else(|| PortError::NoRoom {
            name: "MASTER_PORT".into(),
            port: p.get(),
            offset: 1,
            why: "with TORCHELASTIC_USE_AGENT_STORE=True (torchrun's agent holds MASTER_PORT), collbench's rank 0".into(),
        })?),
        p => p,
    };
    out.job_id = first_set(env, &["TORCHELASTIC_RUN_ID"]).filter(|id| id != "none");
    Ok(Some(out))
}

/// Kubernetes Indexed Job or JobSet: one process per pod, the completion
/// index is the rank. Kubernetes tells neither the size nor rank 0's
/// address, so the manifests set COLLBENCH_WORLD_SIZE and
/// COLLBENCH_RENDEZVOUS (rank 0's pod through the headless service).
pub fn kubernetes(env: &impl Env) -> Result<Option<LauncherEnv>, LaunchError> {
    if env("JOB_COMPLETION_INDEX").is_none() {
        return Ok(None);
    }
    let mut out = LauncherEnv::new(Launcher::Kubernetes);
    out.rank = number(env, "JOB_COMPLETION_INDEX")?;
    out.local_rank = Some(0);
    out.local_world_size = Some(1);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    /// Where `got` puts this process: rank, world size, local rank and
    /// local world size.
    fn place(got: &LauncherEnv) -> [Option<usize>; 4] {
        [
            got.rank,
            got.world_size,
            got.local_rank,
            got.local_world_size,
        ]
    }

    #[test]
    fn slurm_srun_task() {
        let env = env_of(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_STEP_NODELIST", "gpu-[07-08]"),
            ("SLURM_NODELIST", "gpu-[01-08]"),
            ("SLURM_JOB_ID", "1234"),
            ("SLURM_STEP_ID", "0"),
        ]);
        let got = detect(&env).unwrap().unwrap();
        assert_eq!(got.launcher, Launcher::Slurm);
        assert_eq!(place(&got), [Some(3), Some(4), Some(1), Some(2)]);
        assert_eq!(
            got.rendezvous_host.as_deref(),
            Some("gpu-07"),
            "step node list wins"
        );
        assert_eq!(got.job_id.as_deref(), Some("1234.0"));
        assert_eq!(got.rendezvous_port, None);
    }

    #[test]
    fn slurm_falls_back_to_job_node_list() {
        let env = env_of(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_STEPID", "5"),
            ("SLURM_JOBID", "9"),
            ("SLURM_NODELIST", "n[1-2]"),
        ]);
        let got = slurm(&env).unwrap().unwrap();
        assert_eq!(got.rendezvous_host.as_deref(), Some("n1"));
        assert_eq!(got.job_id.as_deref(), Some("9.5"));
    }

    #[test]
    fn slurm_batch_script_is_not_a_task_launch() {
        let env = env_of(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_JOB_ID", "2"),
            ("SLURM_NODELIST", "n1"),
        ]);
        assert_eq!(detect(&env).unwrap(), None);
        // ... but the CLI is told of the 4 tasks srun would have started.
        assert_eq!(slurm_tasks_without_step(&env), Some(4));
        let step = env_of(&[
            ("SLURM_JOB_ID", "2"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_STEP_ID", "0"),
        ]);
        assert_eq!(slurm_tasks_without_step(&step), None);
        let one = env_of(&[("SLURM_JOB_ID", "2"), ("SLURM_NTASKS", "1")]);
        assert_eq!(slurm_tasks_without_step(&one), None);
    }

    #[test]
    fn slurm_bad_node_list_is_an_error() {
        let env = env_of(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_NODELIST", "n[1-"),
        ]);
        let e = detect(&env).unwrap_err().to_string();
        assert!(e.contains("n[1-"), "{e}");
    }

    #[test]
    fn tasks_per_node_expressions() {
        assert_eq!(tasks_on_node("2(x3),1", 0), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 2), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 3), Some(1));
        assert_eq!(tasks_on_node("2(x3),1", 4), None);
        assert_eq!(tasks_on_node("4", 0), Some(4));
        assert_eq!(tasks_on_node("x", 0), None);
    }

    #[test]
    fn openmpi_mpirun() {
        let env = env_of(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("PMIX_NAMESPACE", "prterun-host-1234@1"),
            // mpirun inside a Slurm allocation: the OpenMPI view wins.
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_ID", "0"),
        ]);
        let got = detect(&env).unwrap().unwrap();
        assert_eq!(got.launcher, Launcher::OpenMpi);
        assert_eq!(place(&got), [Some(5), Some(8), Some(1), Some(4)]);
        assert_eq!(got.rendezvous_host, None);
        assert_eq!(got.job_id.as_deref(), Some("prterun-host-1234@1"));
    }

    #[test]
    fn mpich_hydra_pmi() {
        let env = env_of(&[
            ("PMI_RANK", "2"),
            ("PMI_SIZE", "4"),
            ("MPI_LOCALRANKID", "0"),
            ("MPI_LOCALNRANKS", "2"),
        ]);
        let got = detect(&env).unwrap().unwrap();
        assert_eq!(got.launcher, Launcher::Pmi);
        assert_eq!(place(&got), [Some(2), Some(4), Some(0), Some(2)]);
        assert_eq!(got.rendezvous_host, None);
    }

    #[test]
    fn torchrun_style() {
        let env = env_of(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
            // srun torchrun: torchrun's view wins.
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_ID", "0"),
        ]);
        let got = detect(&env).unwrap().unwrap();
        assert_eq!(got.launcher, Launcher::Torchrun);
        assert_eq!(place(&got), [Some(1), Some(4), Some(1), Some(2)]);
        assert_eq!(got.rendezvous_host.as_deref(), Some("node0"));
        assert_eq!(got.rendezvous_port, Port::new(29500));
    }

    #[test]
    fn torchrun_agent_store_takes_master_port() {
        let env = env_of(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
            ("TORCHELASTIC_RUN_ID", "job7"),
        ]);
        let got = torchrun(&env).unwrap().unwrap();
        assert_eq!(got.rendezvous_port, Port::new(29501));
        assert_eq!(got.job_id.as_deref(), Some("job7"));
    }

    #[test]
    fn master_port_0_and_65535_under_the_agent_store_are_refused() {
        let torch = |port: &str, agent: bool| {
            let mut vars = vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", port)];
            if agent {
                vars.push(("TORCHELASTIC_USE_AGENT_STORE", "True"));
            }
            torchrun(&env_of(&vars)).map(|t| t.unwrap().rendezvous_port)
        };
        let e = torch("0", false).unwrap_err();
        assert!(matches!(e, LaunchError::Port(_)), "{e}");
        assert!(e.to_string().contains("from 1 to 65535"), "{e}");
        let e = torch("65535", true).unwrap_err().to_string();
        assert!(e.contains("set MASTER_PORT to 65534 or less"), "{e}");
        assert_eq!(torch("65535", false).unwrap(), Port::new(65535));
        assert_eq!(torch("65534", true).unwrap(), Port::new(65535));
    }

    #[test]
    fn rank_alone_is_not_torchrun() {
        assert_eq!(detect(&env_of(&[("RANK", "1")])).unwrap(), None);
    }

    #[test]
    fn kubernetes_indexed_job() {
        let env = env_of(&[("JOB_COMPLETION_INDEX", "3")]);
        let got = detect(&env).unwrap().unwrap();
        assert_eq!(got.launcher, Launcher::Kubernetes);
        assert_eq!(
            (got.rank, got.world_size, got.local_rank),
            (Some(3), None, Some(0))
        );
    }

    #[test]
    fn malformed_numbers_name_the_variable() {
        let e = detect(&env_of(&[("OMPI_COMM_WORLD_RANK", "x1")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("OMPI_COMM_WORLD_RANK=\"x1\""), "{e}");
    }

    #[test]
    fn no_launcher() {
        assert_eq!(detect(&env_of(&[("HOME", "/root")])).unwrap(), None);
    }
}
