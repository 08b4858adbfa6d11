//! This process's place in the job: flags first, then `COLLBENCH_*`
//! variables, then the launcher's variables ([`crate::env`]).
//!
//! Explicit variables (each overridden by the flag of the same name):
//! `COLLBENCH_RANK`, `COLLBENCH_WORLD_SIZE`, `COLLBENCH_LOCAL_RANK`,
//! `COLLBENCH_RENDEZVOUS` (HOST:PORT, or HOST), `COLLBENCH_PORT`,
//! `COLLBENCH_TOKEN`, `COLLBENCH_BIND`.
//!
//! Port, first that applies: the port in `--rendezvous`/COLLBENCH_RENDEZVOUS,
//! COLLBENCH_PORT, the launcher's (MASTER_PORT), then
//! `20000 + fnv1a(job id) % 20000` when the launcher has a job id (two jobs
//! sharing a host get different ports), else [`DEFAULT_PORT`].

pub use crate::env::Launcher;
use crate::env::{self, Env, LauncherEnv};
use crate::LaunchError;
use crate::LaunchOptions;
use collbench_core::ports::Port;

/// Control-plane port when neither flags, variables nor a job id give one.
pub const DEFAULT_PORT: u16 = 29517;

/// Token of a job whose launcher has no job id and where none was given.
pub const DEFAULT_TOKEN: &str = "collbench";

/// The most ranks a job may have. Rank 0 keeps a few words per rank, so
/// a mistyped `--world-size 99999999999` asked for 800 GB before any
/// check; a million ranks is ten times today's largest jobs.
pub const MAX_WORLD_SIZE: usize = collbench_core::bounds::MAX_RANKS as usize;

/// This process's place in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// Number of processes.
    pub world_size: usize,
    /// Rank of this process among those on its host.
    pub local_rank: usize,
    /// Number of processes on this host (at least `local_rank + 1` when the
    /// launcher does not say).
    pub local_world_size: usize,
    /// Name shown for this host: SLURMD_NODENAME when set (a Slurm node
    /// name, which tells emulated nodes apart), else the system host name.
    pub hostname: String,
    /// Rank 0's host; `None` on rank 0 when nobody named it.
    pub rendezvous_host: Option<String>,
    /// Port rank 0 listens on.
    pub rendezvous_port: u16,
    /// Address rank 0 binds (default `0.0.0.0`).
    pub bind: String,
    /// Shared secret-ish job identity; a peer with another token is refused.
    pub token: String,
    /// Who started us.
    pub launcher: Launcher,
}

impl World {
    /// A loopback port that was free a moment ago, outside the OS's
    /// ephemeral range ([`collbench_core::ports`]), for such a world's rank 0 to
    /// listen on; another process may still take it first, if rarely.
    pub fn free_loopback_port() -> std::io::Result<u16> {
        Ok(collbench_core::ports::free_ports("127.0.0.1", 1)?[0])
    }

    /// Rank `rank` of `world_size` ranks that all run on this host as
    /// hosts `host0`, `host1`, ... (one per rank), rank 0 listening on
    /// 127.0.0.1:`port`, job token `token`: what tests and the scale
    /// harness join with.
    pub fn on_loopback(rank: usize, world_size: usize, port: u16, token: &str) -> World {
        World {
            rank,
            world_size,
            local_rank: 0,
            local_world_size: 1,
            hostname: format!("host{rank}"),
            rendezvous_host: Some("127.0.0.1".into()),
            rendezvous_port: port,
            bind: "127.0.0.1".into(),
            token: token.into(),
            launcher: Launcher::Explicit,
        }
    }

    /// Reads the flags and the real environment; see [`World::discover_from`].
    pub fn discover(args: &LaunchOptions) -> Result<World, LaunchError> {
        World::discover_from(args, &|k: &str| std::env::var(k).ok(), &system_hostname())
    }

    /// World discovery as a pure function of the flags, an environment lookup
    /// and the system host name.
    ///
    /// Errors name what to set: e.g. a rank > 0 under plain `mpirun` cannot
    /// know where rank 0 is, and is told to set COLLBENCH_RENDEZVOUS.
    pub fn discover_from<E: Env>(
        args: &LaunchOptions,
        env: &E,
        system_hostname: &str,
    ) -> Result<World, LaunchError> {
        let found = env::detect(env)?;
        let launched = found
            .clone()
            .unwrap_or_else(|| LauncherEnv::new(Launcher::Explicit));

        let (rank, world_size, launcher) = place(args, env, found.as_ref(), &launched)?;
        let local_rank = args
            .local_rank
            .or(env::number(env, "COLLBENCH_LOCAL_RANK")?)
            .or(launched.local_rank)
            .unwrap_or(0);
        // A host holds no more ranks than the job (`local_rank + 1` wrapped).
        if local_rank >= world_size {
            return Err(WorldError::LocalRankOutside {
                local_rank,
                world_size,
                launcher,
            }
            .into());
        }
        let local_world_size = launched.local_world_size.unwrap_or(1).max(local_rank + 1);

        let (rendezvous_host, rendezvous_port) =
            rendezvous(args, env, &launched, (rank, world_size), launcher)?;

        let token = args
            .token
            .clone()
            .or_else(|| env("COLLBENCH_TOKEN"))
            .or_else(|| {
                launched
                    .job_id
                    .as_ref()
                    .map(|id| format!("{launcher}-{id}"))
            })
            .unwrap_or_else(|| DEFAULT_TOKEN.to_string());
        let bind = args
            .bind
            .clone()
            .or_else(|| env("COLLBENCH_BIND"))
            .unwrap_or_else(|| "0.0.0.0".into());
        let hostname = shown_hostname(env, system_hostname);

        Ok(World {
            rank,
            world_size,
            local_rank,
            local_world_size,
            hostname,
            rendezvous_host,
            rendezvous_port,
            bind,
            token,
            launcher,
        })
    }

    /// `HOST:PORT` of rank 0 as this process sees it (`?` when unknown).
    pub fn rendezvous(&self) -> String {
        format!(
            "{}:{}",
            self.rendezvous_host.as_deref().unwrap_or("?"),
            self.rendezvous_port
        )
    }
}

/// This process's rank, the world size and the launcher to name in
/// errors: the flags, then COLLBENCH_RANK and COLLBENCH_WORLD_SIZE, then
/// what the launcher `found` says (`launched`, its variables or none).
/// Neither known is a single process; one without the other, or a rank
/// outside the world, is an error naming what to set.
fn place<E: Env>(
    args: &LaunchOptions,
    env: &E,
    found: Option<&LauncherEnv>,
    launched: &LauncherEnv,
) -> Result<(usize, usize, Launcher), LaunchError> {
    let explicit_rank = args.rank.or(env::number(env, "COLLBENCH_RANK")?);
    let explicit_size = args
        .world_size
        .or(env::number(env, "COLLBENCH_WORLD_SIZE")?);
    let rank = explicit_rank.or(launched.rank);
    let world_size = explicit_size.or(launched.world_size);

    let launcher = match (found, rank, world_size) {
        (Some(f), _, _) => f.launcher,
        (None, None, None | Some(1)) => Launcher::Single,
        (None, _, _) => Launcher::Explicit,
    };
    let (rank, world_size) = match (rank, world_size) {
        (Some(r), Some(n)) => (r, n),
        (None, None) | (None, Some(1)) => (0, 1),
        (Some(r), None) => return Err(WorldError::NoWorldSize { rank: r, launcher }.into()),
        (None, Some(n)) => {
            return Err(WorldError::NoRank {
                world_size: n,
                launcher,
            }
            .into())
        }
    };
    if world_size > MAX_WORLD_SIZE {
        return Err(WorldError::TooLarge {
            world_size,
            launcher,
        }
        .into());
    }
    if world_size == 0 || rank >= world_size {
        return Err(WorldError::RankOutside {
            rank,
            world_size,
            launcher,
        }
        .into());
    }
    Ok((rank, world_size, launcher))
}

/// Where rank 0 listens: the host and port of `--rendezvous` or
/// COLLBENCH_RENDEZVOUS, then COLLBENCH_PORT, then the launcher's, then a
/// port derived from the job id; loopback when the launcher says every
/// rank runs on this host. A rank above 0 that cannot know rank 0's host
/// is told what to set.
fn rendezvous<E: Env>(
    args: &LaunchOptions,
    env: &E,
    launched: &LauncherEnv,
    (rank, world_size): (usize, usize),
    launcher: Launcher,
) -> Result<(Option<String>, u16), LaunchError> {
    let (rv_host, rv_port) = match args
        .rendezvous
        .clone()
        .or_else(|| env("COLLBENCH_RENDEZVOUS"))
    {
        Some(text) => parse_rendezvous(&text)?,
        None => (None, None),
    };
    let env_port = env::port(env, "COLLBENCH_PORT")?.map(Port::get);
    let rendezvous_port = rv_port
        .or(env_port)
        .or(launched.rendezvous_port.map(Port::get))
        .or(launched.job_id.as_deref().map(port_for_job))
        .unwrap_or(DEFAULT_PORT);
    // A launcher that says every rank runs on this host (OpenMPI's
    // OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS, torchrun's
    // LOCAL_WORLD_SIZE equal to the world size) puts rank 0 here too:
    // meet on loopback, so `mpirun -np 2 all_reduce_perf` on one host
    // needs no COLLBENCH_RENDEZVOUS.
    let one_host = launched.local_world_size == Some(world_size);
    let rendezvous_host = rv_host
        .or_else(|| launched.rendezvous_host.clone())
        .or_else(|| one_host.then(|| "127.0.0.1".to_string()));
    if rank > 0 && rendezvous_host.is_none() {
        return Err(WorldError::NoRendezvous {
            rank,
            world_size,
            launcher,
        }
        .into());
    }
    Ok((rendezvous_host, rendezvous_port))
}

/// Why the rank, the world size or the rendezvous make no world. The
/// words name the launcher's variables and `COLLBENCH_*`; the flags that
/// override them are the CLI's to name (its `launch_words`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// A rank but no world size.
    #[error("rank is {rank} but the world size is unknown ({launcher}): set COLLBENCH_WORLD_SIZE")]
    NoWorldSize { rank: usize, launcher: Launcher },
    /// A world size but no rank.
    #[error("world size is {world_size} but this process's rank is unknown ({launcher}): set COLLBENCH_RANK")]
    NoRank {
        world_size: usize,
        launcher: Launcher,
    },
    /// More ranks than [`MAX_WORLD_SIZE`].
    #[error("world size {world_size} ({launcher}) is more than collbench's limit of {MAX_WORLD_SIZE} ranks: check the launcher's variables")]
    TooLarge {
        world_size: usize,
        launcher: Launcher,
    },
    /// A rank at or past the world size (or a world of 0).
    #[error("rank {rank} is not below the world size {world_size} ({launcher}): check the launcher's variables")]
    RankOutside {
        rank: usize,
        world_size: usize,
        launcher: Launcher,
    },
    /// A local rank at or past the world size.
    #[error("local rank {local_rank} is not below the world size {world_size} ({launcher}): check the launcher's variables")]
    LocalRankOutside {
        local_rank: usize,
        world_size: usize,
        launcher: Launcher,
    },
    /// A rank other than 0 that is not told where rank 0 listens.
    #[error("rank {rank} of {world_size} does not know where rank 0 listens ({launcher} does not tell): set COLLBENCH_RENDEZVOUS=HOST:PORT (rank 0's host)")]
    NoRendezvous {
        rank: usize,
        world_size: usize,
        launcher: Launcher,
    },
}

/// Parses `HOST:PORT`, `HOST`, `[V6ADDR]:PORT` or `:PORT`.
pub fn parse_rendezvous(text: &str) -> Result<(Option<String>, Option<u16>), LaunchError> {
    let bad = |why: &str| {
        LaunchError::Discovery(format!(
            "rendezvous {text:?} {why}: expected HOST:PORT, e.g. node0:29517"
        ))
    };
    let text = text.trim();
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("has `[` without `]`"))?;
        (h, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((_, _)) if text.matches(':').count() > 1 => {
                return Err(bad("looks like an IPv6 address without [brackets]"))
            }
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("has a bad port"))?,
        ),
        None => None,
    };
    let host = (!host.is_empty()).then(|| host.to_string());
    Ok((host, port))
}

/// The default port of a job: `20000 + fnv1a(job id) % 20000`, so two jobs
/// on one host do not collide while all ranks of one job agree.
pub fn port_for_job(job_id: &str) -> u16 {
    // FNV-1a: stable across Rust versions and machines, unlike DefaultHasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in job_id.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    20000 + (hash % 20000) as u16
}

/// The name collbench shows for this host: SLURMD_NODENAME when set (a
/// Slurm node name, which tells emulated nodes apart), else `system`.
pub fn shown_hostname(env: &impl Env, system: &str) -> String {
    env("SLURMD_NODENAME")
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| system.to_string())
}

/// The system host name (Linux: /proc; elsewhere $HOSTNAME), `localhost` if
/// neither is there.
pub fn system_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn discover(args: &LaunchOptions, pairs: &[(&str, &str)]) -> Result<World, LaunchError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        World::discover_from(args, &move |k: &str| map.get(k).cloned(), "sys-host")
    }

    /// [`discover`] with default options.
    fn from_env(pairs: &[(&str, &str)]) -> Result<World, LaunchError> {
        discover(&LaunchOptions::default(), pairs)
    }

    /// The error line [`from_env`] gives.
    fn refused(pairs: &[(&str, &str)]) -> String {
        from_env(pairs).unwrap_err().to_string()
    }

    fn ok(pairs: &[(&str, &str)]) -> World {
        from_env(pairs).unwrap()
    }

    /// Rank, world size and launcher: where the variables put a process.
    fn placed(w: &World) -> (usize, usize, Launcher) {
        (w.rank, w.world_size, w.launcher)
    }

    #[test]
    fn no_launcher_is_a_single_process() {
        let w = ok(&[]);
        assert_eq!(
            (w.rank, w.world_size, w.local_rank, w.launcher),
            (0, 1, 0, Launcher::Single)
        );
        assert_eq!(w.hostname, "sys-host");
        assert_eq!(w.rendezvous_port, DEFAULT_PORT);
        assert_eq!(w.token, DEFAULT_TOKEN);
    }

    #[test]
    fn slurm_world() {
        let w = ok(&[
            ("SLURM_PROCID", "2"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_STEP_NODELIST", "n[1-2]"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
            ("SLURMD_NODENAME", "n2"),
        ]);
        assert_eq!(
            (w.rank, w.world_size, w.local_rank, w.local_world_size),
            (2, 4, 0, 2)
        );
        assert_eq!(w.launcher, Launcher::Slurm);
        assert_eq!(
            w.hostname, "n2",
            "Slurm node name wins over the system name"
        );
        assert_eq!(w.rendezvous_host.as_deref(), Some("n1"));
        assert_eq!(w.rendezvous_port, port_for_job("77.0"));
        assert_eq!(w.token, "slurm-77.0");
    }

    #[test]
    fn job_ports_differ_between_jobs_and_stay_in_range() {
        assert_ne!(port_for_job("77.0"), port_for_job("78.0"));
        for id in ["", "1", "123456.0", "prterun-x@1"] {
            assert!((20000..40000).contains(&port_for_job(id)));
        }
    }

    #[test]
    fn flags_beat_collbench_variables_beat_the_launcher() {
        let vars = [
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "m0"),
            ("MASTER_PORT", "1000"),
            ("COLLBENCH_RANK", "2"),
            ("COLLBENCH_PORT", "2000"),
            ("COLLBENCH_TOKEN", "env-token"),
        ];
        let w = from_env(&vars).unwrap();
        assert_eq!(
            (w.rank, w.rendezvous_port, w.token.as_str()),
            (2, 2000, "env-token")
        );
        let args = LaunchOptions {
            rank: Some(3),
            rendezvous: Some("h9:3000".into()),
            token: Some("flag-token".into()),
            ..LaunchOptions::default()
        };
        let w = discover(&args, &vars).unwrap();
        assert_eq!(w.rank, 3);
        assert_eq!(
            (w.rendezvous_host.as_deref(), w.rendezvous_port),
            (Some("h9"), 3000)
        );
        assert_eq!(w.token, "flag-token");
        assert_eq!(w.launcher, Launcher::Torchrun);
    }

    #[test]
    fn collbench_port_0_is_refused_as_no_port_rather_than_waited_on() {
        for port in ["0", "65536"] {
            let e = discover(
                &LaunchOptions::default(),
                &[
                    ("COLLBENCH_RANK", "1"),
                    ("COLLBENCH_WORLD_SIZE", "2"),
                    ("COLLBENCH_RENDEZVOUS", "10.0.0.1"),
                    ("COLLBENCH_PORT", port),
                ],
            )
            .unwrap_err();
            assert!(matches!(e, LaunchError::Port(_)), "{port}: {e}");
            assert!(e.to_string().contains("COLLBENCH_PORT"), "{e}");
        }
    }

    #[test]
    fn explicit_variables_alone() {
        let w = ok(&[
            ("COLLBENCH_RANK", "1"),
            ("COLLBENCH_WORLD_SIZE", "2"),
            ("COLLBENCH_RENDEZVOUS", "10.0.0.1"),
        ]);
        assert_eq!(placed(&w), (1, 2, Launcher::Explicit));
        assert_eq!(
            (w.rendezvous_host.as_deref(), w.rendezvous_port),
            (Some("10.0.0.1"), DEFAULT_PORT)
        );
    }

    #[test]
    fn plain_mpirun_rank_above_zero_is_told_what_to_set() {
        let e = refused(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]);
        // The variable here; the CLI adds `--rendezvous` (its
        // `launch_args::launch_words`, tested there and end to end).
        assert!(
            e.contains("set COLLBENCH_RENDEZVOUS=HOST:PORT") && !e.contains("--"),
            "{e}"
        );
        // Rank 0 needs no host: it listens.
        let w = ok(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")]);
        assert_eq!(
            (w.rank, w.launcher, w.rendezvous_host),
            (0, Launcher::OpenMpi, None)
        );
    }

    #[test]
    fn kubernetes_needs_size_and_rendezvous_from_the_manifest() {
        let e = refused(&[("JOB_COMPLETION_INDEX", "1")]);
        assert!(e.contains("COLLBENCH_WORLD_SIZE"), "{e}");
        let w = ok(&[
            ("JOB_COMPLETION_INDEX", "1"),
            ("COLLBENCH_WORLD_SIZE", "4"),
            ("COLLBENCH_RENDEZVOUS", "bench-0.bench:29517"),
        ]);
        assert_eq!(placed(&w), (1, 4, Launcher::Kubernetes));
        assert_eq!(w.rendezvous_host.as_deref(), Some("bench-0.bench"));
    }

    #[test]
    fn inconsistent_worlds_are_errors() {
        assert!(from_env(&[("COLLBENCH_RANK", "4"), ("COLLBENCH_WORLD_SIZE", "4")]).is_err());
        assert!(from_env(&[("COLLBENCH_WORLD_SIZE", "4")]).is_err());
        assert!(from_env(&[("COLLBENCH_WORLD_SIZE", "0")]).is_err());
        let e = refused(&[("COLLBENCH_RANK", "zero")]);
        assert!(e.contains("COLLBENCH_RANK"), "{e}");
    }

    #[test]
    fn one_host_openmpi_jobs_meet_on_loopback() {
        let w = ok(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ]);
        assert_eq!(w.rendezvous(), format!("127.0.0.1:{}", w.rendezvous_port));
        // Two hosts: rank 1 still has to be told where rank 0 is.
        let e = discover(
            &LaunchOptions::default(),
            &[
                ("OMPI_COMM_WORLD_RANK", "1"),
                ("OMPI_COMM_WORLD_SIZE", "4"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("does not know where rank 0 listens"), "{e}");
    }

    #[test]
    fn rendezvous_forms() {
        assert_eq!(
            parse_rendezvous("h:1").unwrap(),
            (Some("h".into()), Some(1))
        );
        assert_eq!(parse_rendezvous("h").unwrap(), (Some("h".into()), None));
        assert_eq!(
            parse_rendezvous("[::1]:9").unwrap(),
            (Some("::1".into()), Some(9))
        );
        assert_eq!(parse_rendezvous(":9").unwrap(), (None, Some(9)));
        for bad in ["h:", "h:0", "h:70000", "::1", "[::1"] {
            assert!(parse_rendezvous(bad).is_err(), "{bad}");
        }
    }
}
