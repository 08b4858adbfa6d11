//! `collbench run` and the `<op>_perf` aliases, in one room (issue #52):
//! the flags here ([`RunArgs`], nccl-tests' short and long names and
//! meanings, plus collbench's own), their one conversion into a typed
//! `RunRequest` (`request.rs`: every check of a flag, once) and the
//! body that runs it (`body.rs`: plan -> backend -> runner -> printers
//! and files).

mod body;
mod memory_words;
mod plan_words;
mod request;

pub use body::run;
pub use request::checked_plan;

use crate::args::{seconds_arg, BackendArgs, Mode, WatchdogArgs};
use crate::cmd::output::Format;
use clap::Args;
use collbench_core::{size::parse_size, Collective, DataType, ReduceOp};
use collbench_runner::PlacementCheck;
use std::sync::Arc;

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// `-n`: a fixed count of timed iterations, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iters {
    /// `-n N`: N timed iterations per placement (nccl-tests' meaning).
    Fixed(u32),
    /// `-n auto`: repeats until the mean time is tight enough (see
    /// `collbench_core::auto_iters::AutoIters`).
    Auto,
}

fn iters_arg(s: &str) -> Result<Iters, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(Iters::Auto);
    }
    match s.parse::<u32>() {
        Ok(0) => Err("the count must be at least 1 (or auto)".into()),
        Ok(n) => Ok(Iters::Fixed(n)),
        Err(_) => Err(format!(
            "-n takes a whole count from 1 to {}, or auto",
            u32::MAX
        )),
    }
}

/// `-R`: nccl-tests' integer, read once here into what it means.
fn registration_arg(s: &str) -> Result<collbench_core::Registration, String> {
    s.parse::<u32>()
        .ok()
        .and_then(collbench_core::Registration::from_flag)
        .ok_or_else(|| "use 0 (off), 1 (ncclCommRegister) or 2 (symmetric windows)".into())
}

/// A count flag (`-w`, `-m`, `-N`): clap's own words ("number too large
/// to fit in target type") named neither the flag's range nor its form.
fn count_arg(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .map_err(|_| format!("expected a whole count from 0 to {}", u32::MAX))
}

/// The one path of an output flag; a second is an error (see [`RunArgs`]).
fn once<'a>(
    flag: &str,
    paths: &'a [std::path::PathBuf],
) -> Result<Option<&'a std::path::Path>, String> {
    match paths {
        [] => Ok(None),
        [p] => Ok(Some(p.as_path())),
        [a, b, ..] => Err(format!(
            "{flag} is given twice ({} and {}): an output flag is given once, as a second would silently drop a file; keep one",
            a.display(),
            b.display()
        )),
    }
}

/// Flags of `collbench run` and of the `<op>_perf` aliases. A flag given
/// twice takes its last value, as nccl-tests' getopt loop does, except
/// the output files (`--output`, `-J`): dropping one would lose results,
/// so they are lists here and [`RunArgs::output_paths`] refuses a second.
#[derive(Args, Debug, Clone)]
#[command(args_override_self = true)]
pub struct RunArgs {
    /// Collectives to run: all_reduce all_gather reduce_scatter alltoall
    /// alltoallv broadcast reduce sendrecv gather scatter hypercube, or
    /// `all`.
    #[arg(value_name = "OP")]
    pub ops: Vec<String>,

    /// Smallest size (bytes; K, M, G suffixes are binary). Default sweep:
    /// `run` 8 B to 128M with -f 2; the `<op>_perf` aliases 32M only, as
    /// nccl-tests.
    #[arg(short = 'b', long = "minbytes", value_parser = size_arg)]
    pub minbytes: Option<u64>,
    /// Largest size.
    #[arg(short = 'e', long = "maxbytes", value_parser = size_arg)]
    pub maxbytes: Option<u64>,
    /// Additive size step, used when no -f is given.
    #[arg(short = 'i', long = "stepbytes", value_parser = size_arg)]
    pub stepbytes: Option<u64>,
    /// Multiplicative size step (2 or more).
    #[arg(short = 'f', long = "stepfactor")]
    pub stepfactor: Option<u64>,
    /// Timed iterations per size, or `auto`: per size, repeats of about
    /// 2 ms until the 95% interval of the mean time is within ±1%
    /// (3-20 repeats; per placement at most 20 iterations' worth of time,
    /// 2 ms to 1 s); each row's count is in the JSON record
    /// (`iterations`).
    #[arg(short = 'n', long = "iters", default_value = "20", value_parser = iters_arg)]
    pub iters: Iters,
    /// Operations aggregated per timed iteration.
    #[arg(short = 'm', long = "agg_iters", default_value_t = 1, value_parser = count_arg)]
    pub agg_iters: u32,
    /// Warm-up iterations per size.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 1, value_parser = count_arg)]
    pub warmup_iters: u32,
    /// Repeat the whole sweep this many times (0: until stopped, e.g. by
    /// Ctrl-C, to hunt a hang with -S; then only the last complete cycle
    /// and the one in progress are kept, and written when stopped).
    #[arg(short = 'N', long = "run_cycles", default_value_t = 1, value_parser = count_arg)]
    pub run_cycles: u32,
    /// Parallel init (accepted for compatibility; init is already parallel).
    #[arg(short = 'p', long = "parallel_init", default_value_t = 0)]
    pub parallel_init: u32,
    /// Correctness checks per case (0 = off, printed as N/A).
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u32,
    /// Bitwise repeatability: after the checks, run each placement once
    /// for a reference and this many times more on the same input,
    /// comparing every rank's output bit for bit (#bitdiff columns, the
    /// first repeat, rank, element and bit that differ; 0 = off).
    #[arg(short = 'B', long = "bitwise", default_value_t = 0)]
    pub bitwise: u32,
    /// Reduction: sum prod min max avg mulsum all (comma-separated list allowed).
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Data type: int8 uint8 int32 uint32 int64 uint64 half float double
    /// bfloat16 f8e4m3 f8e5m2 all (comma-separated list allowed).
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub datatype: String,
    /// Root rank for rooted collectives; -1 runs every root.
    #[arg(
        short = 'r',
        long = "root",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub root: i64,
    /// Blocking collectives: 0 off, 1 and 2 wait after each iteration,
    /// 3 wait and barrier after each iteration with the barrier left out
    /// of the time.
    #[arg(short = 'z', long = "blocking", default_value_t = 0)]
    pub blocking: u32,
    /// Use the default (null) CUDA stream.
    #[arg(short = 'y', long = "stream_null", default_value_t = 0)]
    pub stream_null: u32,
    /// Abort a collective that takes longer than this many seconds (0 = never);
    /// given, it replaces --watchdog's deadline.
    #[arg(short = 'T', long = "timeout", default_value_t = 0, value_parser = seconds_arg)]
    pub timeout: u64,
    /// Capture iterations in a CUDA graph and launch it N times (0 = off).
    #[arg(short = 'G', long = "cudagraph", default_value_t = 0)]
    pub cudagraph: u32,
    /// Report CPU-side time instead of completion time.
    #[arg(short = 'C', long = "report_cputime", default_value_t = 0)]
    pub report_cputime: u32,
    /// Time combined over ranks: 0 rank0, 1 mean, 2 min, 3 max.
    #[arg(short = 'a', long = "average", default_value_t = 1)]
    pub average: u32,
    /// Buffer registration: 0 off, 1 ncclCommRegister, 2 symmetric window.
    #[arg(short = 'R', long = "local_register", default_value = "0", value_parser = registration_arg)]
    pub local_register: collbench_core::Registration,
    /// Append a timestamp to every row.
    #[arg(short = 'S', long = "report_timestamps", default_value_t = 0)]
    pub report_timestamps: u32,
    /// Also write nccl-tests' own JSON layout (as nccl-tests 2.19.6 `-J`
    /// writes it) to this file; collbench's richer record is `--output
    /// X.json`.
    #[arg(short = 'J', long = "output_file", value_name = "FILE")]
    pub output_file: Vec<std::path::PathBuf>,
    /// Misalign buffers by this many elements.
    #[arg(short = 'u', long = "unalign", default_value_t = 0)]
    pub unalign: u32,
    /// Per-iteration timing (0/1): adds i_min i_max i_p99 i_cv% after each
    /// placement's #wrong, and every iteration's time to -J.
    #[arg(
        short = 'I',
        long = "per_iter_timing",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub per_iter_timing: i64,
    /// Leading iterations the -I summary leaves out.
    #[arg(
        short = 'K',
        long = "per_iter_skip",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub per_iter_skip: i64,
    /// NCCL CTA policy set at communicator init (ncclConfig_t.CTAPolicy):
    /// 0 default, 1 efficiency (NCCL >= 2.27), 2 zero (NCCL >= 2.28).
    /// Unset: not set. NCCL backend only.
    #[arg(short = 'x', long = "cta_policy", allow_negative_numbers = true)]
    pub cta_policy: Option<i32>,
    /// GPU memory usage report after the results (0/1): NCCL init,
    /// test buffers, collectives. NCCL backend only.
    #[arg(short = 'M', long = "memory", default_value_t = 0)]
    pub memory: u32,
    /// Device-API implementation (NCCL >= 2.28; 0 = NCCL's own
    /// collectives, the default; > 0 needs -R 2).
    #[arg(
        short = 'D',
        long = "device_implementation",
        allow_negative_numbers = true
    )]
    pub device_implementation: Option<i32>,
    /// CTAs for the device-API implementation (1 to 128; default 16).
    #[arg(short = 'V', long = "device_cta_count", allow_negative_numbers = true)]
    pub device_cta_count: Option<i32>,

    /// Format of stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also write results to FILE (.txt .json .csv .md picks the format;
    /// a name without one, such as /dev/stdout, is refused: use --format
    /// for stdout). Given once: a second --output is an error.
    #[arg(long, value_name = "FILE")]
    pub output: Vec<std::path::PathBuf>,
    /// After each row, name the slowest ranks and their host (stragglers).
    #[arg(long)]
    pub per_rank: bool,
    /// Take every rank's entry into each timed iteration on aligned
    /// clocks and say who arrives last: a `#` line under each row (skew,
    /// last rank, time inside, device-time busbw, the straggler and its
    /// host, late rank or slow link) and `arrival` in JSON. Off, the table
    /// is nccl-tests' byte for byte. See docs/arrival.md.
    #[arg(long)]
    pub arrival: bool,
    /// Show which algorithm, protocol and channel count NCCL used for each
    /// row (extra columns after nccl-tests' own), as NCCL reports them
    /// through its profiler interface in a separate, untimed pass. JSON and
    /// CSV outputs always carry them on the NCCL backend.
    #[arg(long)]
    pub explain: bool,
    /// After the rows, print each row's busbw ceiling, its share of it and
    /// the part that sets it (`#` lines; JSON, CSV and HTML always carry
    /// them). See docs/ceiling.md.
    #[arg(long)]
    pub ceiling: bool,
    /// The path NCCL must take, in NCCL's names, comma-separated: ib, roce,
    /// socket, ofi (efa), tcpx, tcpxo, p2p, shm, nvls, collnet, gdr. After
    /// the run, a path that differs is one line each (expected, used, cause
    /// seen) and exit 7. Needs the NCCL backend.
    #[arg(long = "require-transport", value_name = "LIST", value_parser = crate::transport_gate::parse)]
    pub require_transport: Option<crate::transport_gate::RequiredTransports>,
    /// Replace existing --output/-J files (an input is never replaced).
    #[arg(long)]
    pub force: bool,
    /// Print nothing on stdout (files and the exit code still tell), and
    /// no progress lines on stderr in a batch job.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Test hook: corrupt one checked element to prove checking catches it.
    #[arg(long, hide = true)]
    pub test_corrupt: bool,
    /// Test hook: `REPEAT:RANK:ELEMENT:BIT` flips that bit of that rank's
    /// output in that -B repeat, to prove -B names it.
    #[arg(long, hide = true, value_parser = collbench_runner::bitwise::BitFlip::parse)]
    pub test_bitwise_flip: Option<collbench_runner::bitwise::BitFlip>,
    /// Apply a tuner config (the CSV of NCCL's example tuner, as `collbench
    /// tune --csv` writes it) through collbench's tuner plugin (NCCL only).
    #[arg(long, value_name = "FILE")]
    pub tuner_config: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub watch: WatchdogArgs,

    #[command(flatten, next_help_heading = "Launch")]
    pub launch: crate::launch_args::LaunchArgs,

    /// How the command was invoked (not a flag): the `<op>_perf` aliases
    /// set [`Mode::Alias`] for nccl-tests' defaults.
    #[arg(skip)]
    pub mode: Mode,
}

/// Parses a comma/space separated list where `all` means every value.
fn list<T: Copy>(
    s: &str,
    all: &[T],
    parse: impl Fn(&str) -> Result<T, collbench_core::ParseError>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for part in s.split([',', ' ']).filter(|p| !p.is_empty()) {
        if part.eq_ignore_ascii_case("all") {
            out.extend_from_slice(all);
        } else {
            out.push(parse(part).map_err(|e| e.or_all().to_string())?);
        }
    }
    if out.is_empty() {
        return Err(format!("empty list '{s}'"));
    }
    Ok(out)
}

impl RunArgs {
    /// The flags that act on NCCL itself, typed once here: the NCCL
    /// backend applies them, the others say which they ignore.
    pub fn nccl_only(&self) -> collbench_core::NcclOnlyFlags {
        collbench_core::NcclOnlyFlags {
            cudagraph: self.cudagraph > 0,
            registration: self.local_register,
            cta_policy: self.cta_policy,
            memory: self.memory != 0,
            explain: self.explain,
            device_implementation: self.device_implementation,
            device_cta_count: self.device_cta_count,
        }
    }

    /// The checks run on every placement after `-c` (placement
    /// extensions: `collbench_runner::placement_check`), typed once here.
    pub fn placement_checks(&self) -> Vec<Arc<dyn PlacementCheck>> {
        let bitwise = collbench_runner::bitwise::Repeatability::from_flag(
            self.bitwise,
            self.test_bitwise_flip,
        );
        bitwise.into_iter().collect()
    }

    /// `--output` and `-J`, each given at most once (see [`RunArgs`]).
    pub fn output_paths(
        &self,
    ) -> Result<(Option<&std::path::Path>, Option<&std::path::Path>), String> {
        Ok((
            once("--output", &self.output)?,
            once("-J", &self.output_file)?,
        ))
    }

    /// The collectives named on the command line (`all` when none).
    pub fn collectives(&self) -> Result<Vec<Collective>, String> {
        if self.ops.is_empty() {
            return Ok(Collective::ALL.to_vec());
        }
        let mut out = Vec::new();
        for op in &self.ops {
            for c in list(op, &Collective::ALL, Collective::parse)? {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        Ok(out)
    }

    /// Data types (`-d`).
    pub fn dtypes(&self) -> Result<Vec<DataType>, String> {
        list(&self.datatype, &DataType::ALL, DataType::parse)
    }

    /// Reduction operators (`-o`).
    pub fn redops(&self) -> Result<Vec<ReduceOp>, String> {
        list(&self.op, &ReduceOp::ALL, ReduceOp::parse)
    }
}
