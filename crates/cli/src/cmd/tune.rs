//! `collbench tune` flags (clap), converted once into
//! [`collbench_tune::job::TuneRequest`]: every flag is validated here,
//! into typed options (the ops, the sweep, a `Duration` budget, enums for
//! the modes) that nothing parses again.

use crate::args::BackendArgs;
use crate::launch_args::LaunchArgs;
use collbench_core::size::{parse_size, sweep, Step};
use collbench_core::Collective;
use collbench_tune::job::{
    FakeMode, FakeOptions, PlanOptions, TransportChoice, TuneError, TuneOptions, TuneRequest,
};
use collbench_tune::plan::{Transport, UserEnv};
use collbench_tune::setting::tuner_coll_name;
use std::path::PathBuf;
use std::time::Duration;

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// `--env NAME=A,B`, checked as clap parses it.
fn env_arg(s: &str) -> Result<UserEnv, String> {
    s.parse()
}

/// How `tune` prints its table on stdout.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuneFormat {
    Text,
    Json,
    Md,
}

/// `--transport`: how the hosts talk, when collbench's guess is wrong.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportArg {
    /// Decide from the hosts in the job, NCCL_NET, NCCL_IB_DISABLE and
    /// /sys/class/infiniband.
    Auto,
    /// One host: no network knob.
    SingleHost,
    /// NCCL's socket transport: socket knobs.
    Socket,
    /// NCCL's InfiniBand/RoCE transport: IB knobs.
    Ib,
}

impl From<TransportArg> for TransportChoice {
    fn from(t: TransportArg) -> TransportChoice {
        match t {
            TransportArg::Auto => TransportChoice::Auto,
            TransportArg::SingleHost => TransportChoice::Given(Transport::SingleHost),
            TransportArg::Socket => TransportChoice::Given(Transport::Socket),
            TransportArg::Ib => TransportChoice::Given(Transport::Ib),
        }
    }
}

/// Flags of `collbench tune`. The backend flags are `run`'s, but `tune`
/// measures with NCCL only: their help says what they do here.
#[derive(clap::Args, Debug, Clone)]
#[command(
    mut_arg("name", |a| a.help("nccl (auto: nccl where a GPU is seen); tune measures NCCL settings, so cpu and mpi are refused (exit 2), except with --list-candidates, which measures nothing")),
    mut_arg("ranks", |a| a.help("Ranks to plan for with --list-candidates on a machine without GPUs; a measuring tune drives one rank per GPU (-g)"))
)]
pub struct TuneArgs {
    /// Ops to tune (all_reduce all_gather reduce_scatter broadcast reduce;
    /// default: the first three).
    #[arg(value_name = "OP")]
    pub ops: Vec<String>,
    /// Smallest size (nccl-tests' size column).
    #[arg(short = 'b', long = "minbytes", value_parser = size_arg, required_unless_present = "list_candidates")]
    pub minbytes: Option<u64>,
    /// Largest size.
    #[arg(short = 'e', long = "maxbytes", value_parser = size_arg, required_unless_present = "list_candidates")]
    pub maxbytes: Option<u64>,
    /// Size factor between probes; one band per probe size.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    pub stepfactor: u64,
    /// Wall time the whole command may take, setup and end included (e.g. 90s, 10m, 1h).
    #[arg(long, default_value = "10m")]
    pub budget: String,
    /// Never try a setting that fixes more channels (SMs) than this.
    #[arg(long)]
    pub max_channels: Option<u32>,
    /// Table format on stdout.
    #[arg(long, value_enum, default_value_t = TuneFormat::Text)]
    pub format: TuneFormat,
    /// Write the winning per-band settings as a tuner config (the CSV of
    /// NCCL's example tuner; `run --tuner-config` loads it).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the whole report as JSON (what `--format json` prints)
    /// to this file, whatever stdout shows.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Replace an existing --csv or --json file (refused otherwise).
    #[arg(long)]
    pub force: bool,
    /// Also print `export NAME=VALUE` lines for the best setting that
    /// environment variables can set (a comment when the defaults win).
    #[arg(long)]
    pub shell: bool,
    /// Print the candidates for this job (knob, values, ops, why) and exit
    /// without measuring.
    #[arg(long)]
    pub list_candidates: bool,
    /// Also try these values of an NCCL environment variable, each as a
    /// candidate measured in child processes (repeatable).
    #[arg(long, value_name = "NAME=A,B,..", value_parser = env_arg)]
    pub env: Vec<UserEnv>,
    /// How the hosts talk (picks the network knobs to try).
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Run as a child process of `tune` (`crate::tune::child`): answer
    /// measure requests on stdin.
    #[arg(long, hide = true)]
    pub serve_measure: bool,
    /// Test hook: the scripted fake instead of NCCL (ok, die, hang, die1,
    /// hang1, renew1, aging, flat, spread).
    #[arg(long, hide = true)]
    pub test_fake: Option<String>,
    /// Test hook: milliseconds the fake takes per repeat (several
    /// processes), so a test can kill one mid-search.
    #[arg(long, hide = true)]
    pub test_repeat_ms: Option<u64>,
    /// Test hook: seconds a child process may take per answer (1 to a
    /// year, as every timeout).
    #[arg(long, hide = true, value_parser = |s: &str| collbench_core::bounds::seconds_from(s, 1))]
    pub test_child_timeout_s: Option<u64>,
}

impl TuneArgs {
    /// The test fake asked for (`--test-fake`, `--test-repeat-ms`), if any.
    pub fn fake(&self) -> Result<Option<FakeOptions>, String> {
        let Some(mode) = &self.test_fake else {
            return Ok(None);
        };
        Ok(Some(FakeOptions {
            mode: mode.parse::<FakeMode>()?,
            repeat_pause: Duration::from_millis(self.test_repeat_ms.unwrap_or(0)),
        }))
    }
}

/// Ops named on the command line, each one NCCL's tuner covers.
pub fn tune_ops(names: &[String]) -> Result<Vec<Collective>, String> {
    if names.is_empty() {
        return Ok(vec![
            Collective::AllReduce,
            Collective::AllGather,
            Collective::ReduceScatter,
        ]);
    }
    // `all`: every collective NCCL's tuner covers.
    let tunable: Vec<Collective> = Collective::ALL
        .into_iter()
        .filter(|&c| tuner_coll_name(c).is_some())
        .collect();
    let mut out = Vec::new();
    for part in names
        .iter()
        .flat_map(|n| n.split([',', ' ']))
        .filter(|p| !p.is_empty())
    {
        for op in Collective::parse_or_all(part, &tunable).map_err(|e| e.to_string())? {
            if tuner_coll_name(op).is_none() {
                return Err(format!(
                "collbench tune tunes all_reduce, all_gather, reduce_scatter, broadcast and reduce (what NCCL's tuner interface covers): drop {op}"
            ));
            }
            if !out.contains(&op) {
                out.push(op);
            }
        }
    }
    Ok(out)
}

/// The flags as typed options: the one place they are checked.
impl TryFrom<&TuneArgs> for TuneRequest {
    type Error = TuneError;

    fn try_from(a: &TuneArgs) -> Result<TuneRequest, TuneError> {
        let refused = TuneError::Refused;
        if a.max_channels == Some(0) {
            return Err(refused("--max-channels must be at least 1".into()));
        }
        let plan = PlanOptions {
            ops: tune_ops(&a.ops).map_err(refused)?,
            max_channels: a.max_channels,
            env: a.env.clone(),
            transport: a.transport.into(),
        };
        if a.list_candidates {
            return Ok(TuneRequest::ListCandidates(plan));
        }
        let (Some(min), Some(max)) = (a.minbytes, a.maxbytes) else {
            return Err(refused(
                "tune needs -b MIN and -e MAX (or --list-candidates)".into(),
            ));
        };
        let sizes =
            sweep(min, max, Step::Factor(a.stepfactor)).map_err(|e| refused(e.to_string()))?;
        let budget_us =
            collbench_tune::parse_budget(&a.budget).map_err(|e| refused(e.to_string()))?;
        if a.shell && a.format == TuneFormat::Json {
            return Err(refused(
                "--shell prints shell lines, which would break --format json: drop one".into(),
            ));
        }
        Ok(TuneRequest::Search(TuneOptions {
            plan,
            sizes,
            budget: Duration::from_secs_f64(budget_us / 1e6),
            child_timeout: a.test_child_timeout_s.map(Duration::from_secs),
            fake: a.fake().map_err(refused)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tune: TuneArgs,
    }

    fn request(args: &[&str]) -> Result<TuneRequest, TuneError> {
        let cli = Cli::try_parse_from(std::iter::once("tune").chain(args.iter().copied())).unwrap();
        TuneRequest::try_from(&cli.tune)
    }

    #[test]
    fn default_ops_are_the_three_of_the_issue() {
        assert_eq!(
            tune_ops(&[]).unwrap(),
            [
                Collective::AllReduce,
                Collective::AllGather,
                Collective::ReduceScatter
            ]
        );
        assert_eq!(
            tune_ops(&["all_gather,all_gather".into()]).unwrap(),
            [Collective::AllGather]
        );
        let e = tune_ops(&["alltoall".into()]).unwrap_err();
        assert!(e.contains("drop alltoall"), "{e}");
    }

    #[test]
    fn flags_become_typed_options_once() {
        let Ok(TuneRequest::Search(o)) = request(&[
            "all_gather",
            "-b",
            "1M",
            "-e",
            "4M",
            "--budget",
            "90s",
            "--test-fake",
            "flat",
            "--test-repeat-ms",
            "5",
            "--transport",
            "socket",
        ]) else {
            panic!("a search");
        };
        assert_eq!(o.plan.ops, [Collective::AllGather]);
        assert_eq!(o.sizes, [1 << 20, 4 << 20]);
        assert_eq!(o.budget, Duration::from_secs(90));
        assert_eq!(o.plan.transport, TransportChoice::Given(Transport::Socket));
        assert_eq!(
            o.fake,
            Some(FakeOptions {
                mode: FakeMode::Flat,
                repeat_pause: Duration::from_millis(5)
            })
        );
    }

    #[test]
    fn a_list_needs_no_sweep_and_a_mistake_is_refused() {
        assert!(matches!(
            request(&["--list-candidates"]),
            Ok(TuneRequest::ListCandidates(_))
        ));
        for (args, want) in [
            (
                &["-b", "1M", "-e", "4M", "--budget", "5x"][..],
                "--budget '5x'",
            ),
            (
                &["-b", "1M", "-e", "4M", "--test-fake", "boom"],
                "--test-fake must be one of",
            ),
            (
                &["-b", "1M", "-e", "4M", "--shell", "--format", "json"],
                "--shell prints",
            ),
        ] {
            let e = request(args).unwrap_err();
            assert!(
                matches!(&e, TuneError::Refused(m) if m.contains(want)),
                "{args:?}: {e}"
            );
        }
    }
}
