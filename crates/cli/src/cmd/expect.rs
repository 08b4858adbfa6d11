//! `collbench expect`: its flags, converted into
//! [`collbench_ceiling::expect::ExpectOptions`], and its body.

use collbench_ceiling::expect::{ExpectFormat as Format, ExpectOptions};
use collbench_core::bounds::MAX_RANKS;
use collbench_core::size::{parse_size, sweep, Step};
use collbench_core::Collective;

/// `collbench expect` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ExpectArgs {
    /// TOML description of the machine (see topologies/*.toml), or the name
    /// of a built-in one: gke-a3-high, gke-a3-mega, gke-a3-ultra, gke-a4,
    /// gke-a4x, h200x2, volcengine-ebmhpcpni2, volcengine-ebmhpcpni2l,
    /// volcengine-ebmhpcpni3l, volcengine-hpcpni3ln.
    #[arg(long, value_name = "FILE")]
    pub topology: std::path::PathBuf,
    /// Collectives (all_reduce, all_gather, ...); all the main ones when
    /// none is given.
    #[arg(value_name = "OP")]
    pub ops: Vec<String>,
    /// Smallest size (bytes; K, M, G suffixes are binary).
    #[arg(short = 'b', long = "minbytes", value_parser = size_arg, default_value = "1G")]
    pub minbytes: u64,
    /// Largest size.
    #[arg(short = 'e', long = "maxbytes", value_parser = size_arg, default_value = "1G")]
    pub maxbytes: u64,
    /// Multiplicative size step (2 or more).
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub stepfactor: u64,
    /// Hosts in the job, instead of the file's `hosts`.
    #[arg(long)]
    pub hosts: Option<u64>,
    /// nccl-tests' NCCL_TESTS_SPLIT_MASK (hexadecimal, as nccl-tests reads
    /// it): rank r joins communicator r & MASK, all at once; the ceiling
    /// is one communicator's, sharing the NICs with the others.
    #[arg(long, value_name = "MASK", value_parser = hex_arg)]
    pub split_mask: Option<u64>,
    /// Format of stdout.
    #[arg(long, value_enum, default_value_t = ExpectFormat::Text)]
    pub format: ExpectFormat,
}

fn hex_arg(s: &str) -> Result<u64, String> {
    let digits = s.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(digits, 16)
        .map_err(|_| format!("'{s}' is not a hexadecimal mask (nccl-tests reads 7 or 0x7)"))
}

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

value_enum! {
    /// What `expect` prints.
    pub enum ExpectFormat => Format {
        /// One line per op and size, the reasons below.
        Text,
        /// The topology and every row as JSON.
        Json,
    }
}

impl ExpectArgs {
    /// The options, or the one line that says what is wrong.
    pub fn options(&self) -> Result<ExpectOptions, String> {
        // `all` is what no op means here: the main collectives.
        let mut ops = Vec::new();
        for o in &self.ops {
            for c in Collective::parse_or_all(o, &Collective::MAIN).map_err(|e| e.to_string())? {
                if !ops.contains(&c) {
                    ops.push(c);
                }
            }
        }
        if ops.is_empty() {
            ops = Collective::MAIN.to_vec();
        }
        match self.hosts {
            Some(0) => return Err("--hosts 0 describes no machine: give 1 or more".into()),
            Some(h) if h > MAX_RANKS => {
                return Err(format!(
                    "--hosts {h} is more than collbench's limit of {MAX_RANKS} ranks in a job: give the job's real host count"
                ))
            }
            _ => {}
        }
        let sizes = sweep(self.minbytes, self.maxbytes, Step::Factor(self.stepfactor))
            .map_err(|e| e.to_string())?;
        Ok(ExpectOptions {
            topology: self.topology.clone(),
            ops,
            sizes,
            hosts: self.hosts,
            split_mask: self.split_mask,
            format: self.format.into(),
        })
    }
}

/// `collbench expect`: the ceilings of the described machine printed.
pub fn run(a: &ExpectArgs) -> Result<crate::exit::Outcome, crate::exit::Failure> {
    use crate::exit::Failure;
    let opts = a.options().map_err(Failure::usage)?;
    let text =
        collbench_ceiling::expect::expect_main(&opts).map_err(|e| Failure::usage(e.to_string()))?;
    crate::stdout::print(&text)?;
    Ok(crate::exit::Outcome::Ok)
}
