//! The launch flags shared by every multi-process command (`run`,
//! `preflight`, `check`), turned into collbench-launch's plain
//! [`LaunchOptions`].

use collbench_launch::world::{WorldError, MAX_WORLD_SIZE};
use collbench_launch::{LaunchError, LaunchOptions};

/// Launch flags shared by every multi-process command. Each overrides what
/// the launcher's environment says (see `collbench_launch::World::discover`).
#[derive(clap::Args, Debug, Clone)]
pub struct LaunchArgs {
    /// This process's rank (overrides launcher variables).
    #[arg(long)]
    pub rank: Option<usize>,
    /// Number of processes (overrides launcher variables).
    #[arg(long)]
    pub world_size: Option<usize>,
    /// Rank of this process on its host.
    #[arg(long)]
    pub local_rank: Option<usize>,
    /// HOST:PORT where rank 0 listens (HOST alone keeps the default port).
    #[arg(long)]
    pub rendezvous: Option<String>,
    /// Job token every rank must share (default: COLLBENCH_TOKEN, else the
    /// launcher's job id), so two jobs or a stray process never join.
    #[arg(long)]
    pub token: Option<String>,
    /// Address rank 0 listens on (default 0.0.0.0, every interface).
    #[arg(long)]
    pub bind: Option<String>,
    /// Seconds before a missing or silent peer is an error (1 to 31536000,
    /// a year).
    #[arg(long, default_value_t = 60, value_parser = seconds)]
    pub timeout_s: u64,
}

/// `--timeout-s`: 1 second to a year ([`collbench_core::bounds`]); 2^64-1
/// panicked in `Instant + Duration` once the control plane started.
fn seconds(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1 second".into()),
        _ => collbench_core::bounds::seconds_from(s, 1),
    }
}

impl LaunchArgs {
    /// The flags as collbench-launch takes them.
    pub fn options(&self) -> LaunchOptions {
        LaunchOptions {
            rank: self.rank,
            world_size: self.world_size,
            local_rank: self.local_rank,
            rendezvous: self.rendezvous.clone(),
            token: self.token.clone(),
            bind: self.bind.clone(),
            timeout_s: self.timeout_s,
            watchdog_s: None,
        }
    }
}

/// A launch error's one line, naming the flags above beside the
/// variables collbench-launch names (a flag overrides the launcher's
/// variables, so either is the fix).
pub fn launch_words(e: &LaunchError) -> String {
    let LaunchError::World(w) = e else {
        return e.to_string();
    };
    match w {
        WorldError::NoWorldSize { rank, launcher } => format!(
            "rank is {rank} but the world size is unknown ({launcher}): set COLLBENCH_WORLD_SIZE or pass --world-size"
        ),
        WorldError::NoRank {
            world_size,
            launcher,
        } => format!(
            "world size is {world_size} but this process's rank is unknown ({launcher}): set COLLBENCH_RANK or pass --rank"
        ),
        WorldError::TooLarge {
            world_size,
            launcher,
        } => format!(
            "world size {world_size} ({launcher}) is more than collbench's limit of {MAX_WORLD_SIZE} ranks: check --world-size and the launcher's variables"
        ),
        WorldError::RankOutside {
            rank,
            world_size,
            launcher,
        } => format!(
            "rank {rank} is not below the world size {world_size} ({launcher}): check --rank/--world-size and the launcher's variables"
        ),
        WorldError::LocalRankOutside {
            local_rank,
            world_size,
            launcher,
        } => format!(
            "local rank {local_rank} is not below the world size {world_size} ({launcher}): check --local-rank and the launcher's variables"
        ),
        WorldError::NoRendezvous {
            rank,
            world_size,
            launcher,
        } => format!(
            "rank {rank} of {world_size} does not know where rank 0 listens ({launcher} does not tell): \
             set COLLBENCH_RENDEZVOUS=HOST:PORT (rank 0's host) or pass --rendezvous HOST:PORT"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// collbench-launch names the variables only; the CLI adds the flag
    /// that overrides them, for every kind of world error.
    #[test]
    fn world_errors_name_the_flag_only_here() {
        use collbench_launch::Launcher;
        let l = Launcher::Explicit;
        let cases = [
            (
                WorldError::NoWorldSize {
                    rank: 1,
                    launcher: l,
                },
                "--world-size",
            ),
            (
                WorldError::NoRank {
                    world_size: 2,
                    launcher: l,
                },
                "--rank",
            ),
            (
                WorldError::TooLarge {
                    world_size: usize::MAX,
                    launcher: l,
                },
                "--world-size",
            ),
            (
                WorldError::RankOutside {
                    rank: 2,
                    world_size: 2,
                    launcher: l,
                },
                "--rank",
            ),
            (
                WorldError::LocalRankOutside {
                    local_rank: 2,
                    world_size: 2,
                    launcher: l,
                },
                "--local-rank",
            ),
            (
                WorldError::NoRendezvous {
                    rank: 1,
                    world_size: 2,
                    launcher: l,
                },
                "--rendezvous",
            ),
        ];
        for (w, flag) in cases {
            let library = w.to_string();
            assert!(!library.contains("--"), "{library}");
            let words = launch_words(&LaunchError::World(w));
            assert!(words.contains(flag), "{words}");
            assert!(words.starts_with(&library[..20]), "{words} / {library}");
        }
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        launch: LaunchArgs,
    }

    #[test]
    fn flags_become_options_and_the_default_timeout_is_60_s() {
        let cli = Cli::parse_from([
            "x",
            "--rank",
            "2",
            "--world-size",
            "4",
            "--rendezvous",
            "h:1",
        ]);
        let options = cli.launch.options();
        assert_eq!(options.rank, Some(2));
        assert_eq!(options.world_size, Some(4));
        assert_eq!(options.rendezvous.as_deref(), Some("h:1"));
        assert_eq!(options.timeout_s, 60);
        assert_eq!(
            Cli::parse_from(["x"]).launch.options(),
            LaunchOptions::default()
        );
    }
}
