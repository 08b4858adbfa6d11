//! Collectives as data: one table holds each collective's buffer counts,
//! busbw factor, root and in-place facts. Runner, printers and parsers all
//! read this table, so the facts live in one place (as nccl-tests keeps them
//! in one short file per collective).

use crate::ParseError;
use serde::{Deserialize, Serialize};

/// A collective operation collbench can run.
///
/// The discriminants are a contract with the GPU verification kernels
/// (`crates/nccl/kernels/verify.cu` receives `collective as i32`); a test
/// in collbench-nccl checks them against the .cu file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce = 0,
    AllGather = 1,
    ReduceScatter = 2,
    #[serde(rename = "alltoall")]
    AllToAll = 3,
    Broadcast = 4,
    Reduce = 5,
    #[serde(rename = "sendrecv")]
    SendRecv = 6,
    Gather = 7,
    Scatter = 8,
    #[serde(rename = "hypercube")]
    HyperCube = 9,
    #[serde(rename = "alltoallv")]
    AllToAllV = 10,
}

/// How a collective treats the reduction operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedopUse {
    /// The collective reduces: `-o` applies and its name is printed.
    Reduces,
    /// No reduction; the redop column says `none`.
    NoneColumn,
    /// No reduction, but nccl-tests prints `sum` in the column (sendrecv).
    PrintsSum,
}

/// How the busbw/algbw byte count is formed from the parameter count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Volume {
    /// param_count * elt_size
    Param,
    /// param_count * elt_size * world_size
    ParamTimesRanks,
    /// param_count * elt_size * (world_size - 1) (hypercube)
    ParamTimesPeers,
    /// The larger of the send and receive buffers: the busiest rank's
    /// bytes (alltoallv).
    LargerBuffer,
}

/// How buffers are sized from the requested element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// send = recv = param = count (all_reduce, broadcast, reduce, sendrecv).
    Full,
    /// Each rank contributes a 16-byte aligned chunk and receives all of them
    /// (all_gather, gather, hypercube).
    Gathers,
    /// Each rank sends all chunks and receives one (reduce_scatter, scatter).
    Scatters,
    /// Each rank sends and receives one chunk per peer (alltoall).
    Exchange,
    /// Per-peer counts from the alltoallv traffic (see [`crate::alltoallv`]).
    Traffic,
}

/// The facts about one collective.
#[derive(Debug, Clone, Copy)]
pub struct CollectiveSpec {
    /// Name as collbench and nccl-tests' JSON spell it (`all_reduce`).
    pub name: &'static str,
    /// nccl-tests binary name, used for the `<op>_perf` alias.
    pub perf_name: &'static str,
    /// Use of the reduction operator.
    pub redop: RedopUse,
    /// True when the collective has a root rank (`-r`).
    pub has_root: bool,
    /// True when the in-place variant is run and checked (else `N/A`).
    pub in_place_checked: bool,
    /// True when the collective only works on power-of-two world sizes.
    pub needs_power_of_two: bool,
    layout: Layout,
    volume: Volume,
    /// busbw = algbw * factor; this says which factor.
    busbw: BusBw,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BusBw {
    /// 2 (n-1) / n
    AllReduce,
    /// (n-1) / n
    NMinusOneOverN,
    /// 1
    One,
}

/// Element counts for one case, as nccl-tests' `GetCollByteCount` defines
/// them. Offsets are per rank: the in-place send buffer of rank r starts at
/// `send_inplace_offset * r` elements into its receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub send_count: u64,
    pub recv_count: u64,
    /// The count passed to the library call (printed in the `count` column).
    pub param_count: u64,
    pub send_inplace_offset: u64,
    pub recv_inplace_offset: u64,
}

impl Counts {
    /// The size printed in nccl-tests' `size` column: the larger buffer.
    pub fn size_bytes(&self, elt_size: usize) -> u64 {
        self.send_count.max(self.recv_count) * elt_size as u64
    }
}

/// Defaults the table entries below override: a non-rooted, in-place
/// checked collective over the full buffer.
const BASE: CollectiveSpec = CollectiveSpec {
    name: "",
    perf_name: "",
    redop: RedopUse::NoneColumn,
    has_root: false,
    in_place_checked: true,
    needs_power_of_two: false,
    layout: Layout::Full,
    volume: Volume::Param,
    busbw: BusBw::One,
};

static ALL_REDUCE: CollectiveSpec = CollectiveSpec {
    name: "all_reduce",
    perf_name: "all_reduce_perf",
    redop: RedopUse::Reduces,
    busbw: BusBw::AllReduce,
    ..BASE
};
static ALL_GATHER: CollectiveSpec = CollectiveSpec {
    name: "all_gather",
    perf_name: "all_gather_perf",
    layout: Layout::Gathers,
    volume: Volume::ParamTimesRanks,
    busbw: BusBw::NMinusOneOverN,
    ..BASE
};
static REDUCE_SCATTER: CollectiveSpec = CollectiveSpec {
    name: "reduce_scatter",
    perf_name: "reduce_scatter_perf",
    redop: RedopUse::Reduces,
    layout: Layout::Scatters,
    volume: Volume::ParamTimesRanks,
    busbw: BusBw::NMinusOneOverN,
    ..BASE
};
static ALLTOALL: CollectiveSpec = CollectiveSpec {
    name: "alltoall",
    perf_name: "alltoall_perf",
    in_place_checked: false,
    layout: Layout::Exchange,
    volume: Volume::ParamTimesRanks,
    busbw: BusBw::NMinusOneOverN,
    ..BASE
};
static BROADCAST: CollectiveSpec = CollectiveSpec {
    name: "broadcast",
    perf_name: "broadcast_perf",
    has_root: true,
    ..BASE
};
static REDUCE: CollectiveSpec = CollectiveSpec {
    name: "reduce",
    perf_name: "reduce_perf",
    redop: RedopUse::Reduces,
    has_root: true,
    ..BASE
};
static SENDRECV: CollectiveSpec = CollectiveSpec {
    name: "sendrecv",
    perf_name: "sendrecv_perf",
    redop: RedopUse::PrintsSum,
    in_place_checked: false,
    ..BASE
};
static GATHER: CollectiveSpec = CollectiveSpec {
    name: "gather",
    perf_name: "gather_perf",
    has_root: true,
    layout: Layout::Gathers,
    volume: Volume::ParamTimesRanks,
    busbw: BusBw::NMinusOneOverN,
    ..BASE
};
static SCATTER: CollectiveSpec = CollectiveSpec {
    name: "scatter",
    perf_name: "scatter_perf",
    has_root: true,
    layout: Layout::Scatters,
    volume: Volume::ParamTimesRanks,
    busbw: BusBw::NMinusOneOverN,
    ..BASE
};
static HYPERCUBE: CollectiveSpec = CollectiveSpec {
    name: "hypercube",
    perf_name: "hypercube_perf",
    needs_power_of_two: true,
    layout: Layout::Gathers,
    volume: Volume::ParamTimesPeers,
    ..BASE
};

static ALLTOALLV: CollectiveSpec = CollectiveSpec {
    name: "alltoallv",
    perf_name: "alltoallv_perf",
    in_place_checked: false,
    layout: Layout::Traffic,
    volume: Volume::LargerBuffer,
    busbw: BusBw::NMinusOneOverN,
    ..BASE
};

/// Words that tools and packagers put around a collective's name in a
/// binary's name (`all_reduce_perf_mpi`, `rccl_all_reduce_perf`); they
/// never name a collective themselves.
const TOOL_WORDS: [&str; 10] = [
    "perf", "mpi", "nccl", "rccl", "cuda", "hip", "rocm", "test", "tests", "bench",
];

impl Collective {
    /// Every collective, in the order `collbench run all` runs them: the
    /// seven that nccl-tests users run most first.
    pub const ALL: [Collective; 11] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::SendRecv,
        Collective::Gather,
        Collective::Scatter,
        Collective::HyperCube,
        Collective::AllToAllV,
    ];

    /// NCCL's seven collectives (the first seven of [`Collective::ALL`]),
    /// which nccl-tests' published figures and `expect` cover; the rest
    /// are built of sends and receives.
    pub const MAIN: [Collective; 7] = {
        let mut main = [Collective::AllReduce; 7];
        let mut i = 0;
        while i < main.len() {
            main[i] = Collective::ALL[i];
            i += 1;
        }
        main
    };

    /// The facts table entry for this collective.
    pub fn spec(self) -> &'static CollectiveSpec {
        match self {
            Collective::AllReduce => &ALL_REDUCE,
            Collective::AllGather => &ALL_GATHER,
            Collective::ReduceScatter => &REDUCE_SCATTER,
            Collective::AllToAll => &ALLTOALL,
            Collective::Broadcast => &BROADCAST,
            Collective::Reduce => &REDUCE,
            Collective::SendRecv => &SENDRECV,
            Collective::Gather => &GATHER,
            Collective::Scatter => &SCATTER,
            Collective::HyperCube => &HYPERCUBE,
            Collective::AllToAllV => &ALLTOALLV,
        }
    }

    /// Short name (`all_reduce`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses a collective's name in any spelling [`Collective::from_tool_name`]
    /// reads: `all_reduce`, `allreduce`, `all-reduce`, `all_reduce_perf`, ...
    /// The error names the collectives only: a baseline's `op` takes one
    /// (`all` is a command line's word, see [`Collective::parse_or_all`]).
    pub fn parse(s: &str) -> Result<Collective, ParseError> {
        Collective::from_tool_name(s).ok_or_else(|| ParseError::Unknown {
            what: "collective",
            value: s.to_string(),
            expected: Collective::ALL.map(|c| c.name()).join(", "),
        })
    }

    /// One op of a command line, where `all` means `all` (what the command
    /// runs for it: `run` every collective, `expect` the main ones, `tune`
    /// those NCCL's tuner covers). Its error lists `all` as well, since
    /// it is taken: `expect all` was refused while the line listed it.
    pub fn parse_or_all(s: &str, all: &[Collective]) -> Result<Vec<Collective>, ParseError> {
        if s.trim().eq_ignore_ascii_case("all") {
            return Ok(all.to_vec());
        }
        Collective::parse(s)
            .map(|c| vec![c])
            .map_err(ParseError::or_all)
    }

    /// The collective a benchmark binary or log names, in any tool's
    /// spelling: nccl-tests' and rccl-tests' binaries (`all_reduce_perf`,
    /// also with a path), packagers' renames (`all_reduce_perf_mpi`,
    /// `all_reduce_perf_nccl`, `nccl_all_reduce_perf`), dashes, underscores
    /// or none (`all-reduce`, `allreduce`, `send_recv`), any case
    /// (`AllReduce`, as NCCL Inspector writes it). The one place where
    /// such names become a collective: parsers, `compare` and the CLI's
    /// `argv[0]` alias agree because they all come here.
    pub fn from_tool_name(name: &str) -> Option<Collective> {
        let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
        let lower = base.trim().to_ascii_lowercase();
        let words: Vec<&str> = lower.split(['_', '-']).filter(|w| !w.is_empty()).collect();
        let tool_word = |w: &&&str| TOOL_WORDS.contains(*w);
        let start = words.iter().take_while(tool_word).count();
        let end = words.len() - words[start..].iter().rev().take_while(tool_word).count();
        let compact: String = words[start..end].concat();
        Collective::ALL
            .into_iter()
            .find(|c| c.name().replace('_', "") == compact)
    }

    /// The collective whose benchmark binary is `perf_name`, in any
    /// spelling of [`Collective::from_tool_name`] that has the `perf` word
    /// (`all_reduce_perf`, `all_reduce_perf_mpi`), for the `argv[0]` alias:
    /// a program merely called `reduce` is not nccl-tests' binary.
    pub fn from_perf_name(perf_name: &str) -> Option<Collective> {
        let has_perf = perf_name
            .to_ascii_lowercase()
            .split(['_', '-', '/', '\\'])
            .any(|w| w == "perf");
        has_perf
            .then(|| Collective::from_tool_name(perf_name))
            .flatten()
    }

    /// Buffer counts for a requested size in bytes, rounded down as
    /// nccl-tests rounds them (chunks of 16 bytes per rank where the
    /// buffer is split between ranks). alltoallv's counts depend on its
    /// traffic: this gives the default generated pattern's; use
    /// [`crate::alltoallv::Traffic::counts`] for the run's own traffic.
    pub fn counts(self, size_bytes: u64, elt_size: usize, world_size: usize) -> Counts {
        let elt = elt_size as u64;
        let n = world_size.max(1) as u64;
        let count = size_bytes / elt;
        // Round each rank's chunk down to a whole number of 16-byte units
        // (at least one element for wide types), like nccl-tests 2.19.
        let align = (16 / elt).max(1);
        let base = (count / n) / align * align;
        match self.spec().layout {
            Layout::Full => Counts {
                send_count: count,
                recv_count: count,
                param_count: count,
                send_inplace_offset: 0,
                recv_inplace_offset: 0,
            },
            Layout::Gathers => Counts {
                send_count: base,
                recv_count: base * n,
                param_count: base,
                send_inplace_offset: base,
                recv_inplace_offset: 0,
            },
            Layout::Scatters => Counts {
                send_count: base * n,
                recv_count: base,
                param_count: base,
                send_inplace_offset: 0,
                recv_inplace_offset: base,
            },
            Layout::Exchange => Counts {
                send_count: base * n,
                recv_count: base * n,
                param_count: base,
                send_inplace_offset: 0,
                recv_inplace_offset: 0,
            },
            Layout::Traffic => {
                crate::alltoallv::Traffic::default().counts(size_bytes, elt_size, world_size)
            }
        }
    }

    /// Algorithm bandwidth in GB/s (1e9 B/s) for one iteration of `time_s`
    /// of a case with `counts`.
    pub fn algbw_gbps(
        self,
        counts: &Counts,
        elt_size: usize,
        world_size: usize,
        time_s: f64,
    ) -> f64 {
        if time_s <= 0.0 {
            return 0.0;
        }
        let bytes = counts.param_count as f64 * elt_size as f64;
        let bytes = match self.spec().volume {
            Volume::Param => bytes,
            Volume::ParamTimesRanks => bytes * world_size as f64,
            Volume::ParamTimesPeers => bytes * (world_size.max(1) - 1) as f64,
            Volume::LargerBuffer => counts.size_bytes(elt_size) as f64,
        };
        bytes / 1.0e9 / time_s
    }

    /// The factor that turns algbw into busbw for `world_size` ranks.
    pub fn busbw_factor(self, world_size: usize) -> f64 {
        let n = world_size.max(1) as f64;
        match self.spec().busbw {
            BusBw::AllReduce => 2.0 * (n - 1.0) / n,
            BusBw::NMinusOneOverN => (n - 1.0) / n,
            BusBw::One => 1.0,
        }
    }

    /// The text nccl-tests prints in the redop column for this collective.
    pub fn redop_column(self, op: crate::ReduceOp) -> &'static str {
        match self.spec().redop {
            RedopUse::Reduces => op.name(),
            RedopUse::NoneColumn => "none",
            RedopUse::PrintsSum => "sum",
        }
    }
}

impl std::fmt::Display for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_seven_open_the_full_list() {
        assert_eq!(Collective::MAIN, Collective::ALL[..7]);
    }

    #[test]
    fn parse_spellings() {
        use Collective::{AllReduce, AllToAll, SendRecv};
        for (spelling, want) in [
            ("allreduce", AllReduce),
            ("all_reduce_perf", AllReduce),
            ("all-to-all", AllToAll),
            ("send_recv", SendRecv),
        ] {
            assert_eq!(Collective::parse(spelling).unwrap(), want, "{spelling}");
        }
        assert!(Collective::parse("allscatter").is_err());
        assert_eq!(
            Collective::from_perf_name("alltoall_perf"),
            Some(Collective::AllToAll)
        );
    }

    #[test]
    fn tool_names_map_to_one_collective() {
        use Collective::*;
        for (name, want) in [
            ("all_reduce_perf", AllReduce),
            ("all_reduce_perf_mpi", AllReduce),
            ("all_reduce_perf_nccl", AllReduce),
            ("./build/all_reduce_perf", AllReduce),
            ("/opt/rccl-tests/bin/all_reduce_perf", AllReduce),
            ("nccl_all_reduce_perf", AllReduce),
            ("all-reduce", AllReduce),
            ("AllReduce", AllReduce),
            ("all_gather_perf_mpi", AllGather),
            ("reduce-scatter", ReduceScatter),
            ("reduce_scatter_perf_nccl", ReduceScatter),
            ("alltoall_perf_mpi", AllToAll),
            ("all_to_all", AllToAll),
            ("alltoallv_perf", AllToAllV),
            ("broadcast_perf_mpi", Broadcast),
            ("reduce_perf", Reduce),
            ("sendrecv_perf_mpi", SendRecv),
            ("send-recv", SendRecv),
            ("gather_perf", Gather),
            ("scatter_perf_mpi", Scatter),
            ("hypercube_perf", HyperCube),
        ] {
            assert_eq!(Collective::from_tool_name(name), Some(want), "{name}");
        }
        for name in ["perf", "nccl-tests", "", "all_reduce_x", "allscatter"] {
            assert_eq!(Collective::from_tool_name(name), None, "{name}");
        }
        // The argv[0] alias wants nccl-tests' binary, not a bare name.
        assert_eq!(
            Collective::from_perf_name("all_reduce_perf_mpi"),
            Some(AllReduce)
        );
        assert_eq!(Collective::from_perf_name("reduce"), None);
        assert_eq!(Collective::from_perf_name("collbench"), None);
    }

    #[test]
    fn counts_match_nccl_tests_anchor_rows() {
        // ../shared/anchors/h200x2/all_gather.txt: 8 and 16 B round to 0;
        // 32 B -> count 4 on 2 ranks.
        let c = Collective::AllGather.counts(16, 4, 2);
        assert_eq!(c.size_bytes(4), 0);
        let c = Collective::AllGather.counts(32, 4, 2);
        assert_eq!((c.size_bytes(4), c.param_count), (32, 4));
        let c = Collective::AllToAll.counts(64, 4, 2);
        assert_eq!((c.size_bytes(4), c.param_count), (64, 8));
        let c = Collective::AllReduce.counts(8, 4, 2);
        assert_eq!((c.size_bytes(4), c.param_count), (8, 2));
    }

    #[test]
    fn busbw_matches_anchor() {
        // all_reduce 8 GiB on 2 GPUs in 24571.9 us -> 349.58 GB/s.
        let c = Collective::AllReduce;
        let algbw = c.algbw_gbps(&c.counts(8 << 30, 4, 2), 4, 2, 24571.9e-6);
        assert!((algbw * c.busbw_factor(2) - 349.58).abs() < 0.01);
        let c = Collective::AllGather;
        assert!((c.busbw_factor(8) - 0.875).abs() < 1e-12);
        // alltoallv: the busiest rank's bytes over time, times (n-1)/n.
        let c = Collective::AllToAllV;
        let counts = c.counts(4096, 4, 4);
        let algbw = c.algbw_gbps(&counts, 4, 4, 1e-6);
        assert!((algbw - 4080.0 / 1e3).abs() < 1e-9);
        assert!((c.busbw_factor(4) - 0.75).abs() < 1e-12);
    }

    #[test]
    fn alltoallv_is_its_own_collective() {
        assert_eq!(
            Collective::parse("alltoallv").unwrap(),
            Collective::AllToAllV
        );
        assert_eq!(Collective::parse("alltoall").unwrap(), Collective::AllToAll);
        assert_eq!(
            Collective::from_perf_name("alltoallv_perf"),
            Some(Collective::AllToAllV)
        );
        assert_eq!(Collective::ALL.last(), Some(&Collective::AllToAllV));
        assert!(!Collective::AllToAllV.spec().in_place_checked);
    }
}
