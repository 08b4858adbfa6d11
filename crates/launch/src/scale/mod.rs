//! The scale harness: the real rank 0 ([`Control`]) in a child process,
//! W-1 simulated ranks ([`swarm`]) in this one, over loopback TCP. Rank 0
//! joins the job (with a preflight-sized attachment on every hello), then
//! runs rows like the runner: each row, a gather of every rank's report.
//! Then rounds in which every process learns the largest of 16 bytes'
//! worth of figures (what `run -n auto` does once per repeat), first as an
//! all_max (a gather and a broadcast), then as an all_gather.
//! The harness releases each row's parts when rank 0 starts the row (the
//! collective that ends a row syncs a real job's ranks, outside the
//! control plane). Then the last rank dies: rank 0's next call must fail
//! naming it, and every other rank must get rank 0's Abort. What it costs
//! rank 0 (threads, memory) is read from /proc, outside rank 0, while it
//! runs.
//!
//! Not part of collbench's interface: used by collbench-cli's `tests/scale.rs` (W = 1024
//! in CI) and its `collbench-scale` bench binary.

pub mod swarm;

use crate::{Control, LaunchOptions, Launcher, World};
use collbench_core::Bootstrap;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// What to simulate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleOptions {
    /// Ranks in the job, rank 0 included.
    pub world_size: usize,
    /// Rows (broadcast + gather rounds).
    pub rows: usize,
    /// Bytes attached to every hello (preflight's `RankInfo` is about this).
    pub hello_bytes: usize,
    /// Bytes of every rank's part of a row's gather (a runner report).
    pub report_bytes: usize,
    /// Threads driving the simulated ranks.
    pub client_threads: usize,
    /// Rounds of all_max of two f64 per rank.
    pub all_max_rounds: usize,
    /// Then rounds of all_gather of two f64 per rank (rank 0 sends every
    /// rank every part: W x W x 20 bytes a round), and one more all_max
    /// that waits until every rank has read them (so the death after it
    /// is measured on quiet connections).
    pub all_gather_rounds: usize,
    /// The job's `--timeout-s`.
    pub timeout_s: u64,
    /// The job token.
    pub token: String,
}

impl ScaleOptions {
    /// W ranks, 100 rows of realistic size.
    pub fn new(world_size: usize) -> ScaleOptions {
        ScaleOptions {
            world_size,
            rows: 100,
            hello_bytes: 2048,
            report_bytes: 400,
            client_threads: 4,
            all_max_rounds: 10,
            // 16384 ranks' all_gather is 5 GB a round: not run.
            all_gather_rounds: if world_size <= 4096 { 10 } else { 0 },
            timeout_s: 60,
            token: "scale".into(),
        }
    }
}

/// What rank 0 measured of itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RootReport {
    /// From calling `connect` until every rank joined.
    pub ready_s: f64,
    /// Per row: from releasing the row until every part is in, ms.
    pub gather_ms: Vec<f64>,
    /// Peak resident memory (VmHWM), KiB, read at the end.
    pub hwm_kib: u64,
    /// CPU time rank 0's process spent on the rows (all its threads), s:
    /// what a row costs rank 0 whatever else runs on the machine.
    pub rows_cpu_s: f64,
    /// Per round: an all_gather of 16 bytes per rank, ms.
    pub all_gather_ms: Vec<f64>,
    /// Per round: an all_max of two f64 per rank, ms.
    pub all_max_ms: Vec<f64>,
    /// How the barrier after the last rank's death failed.
    pub failure: String,
}

/// The harness's figures for one W.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ScaleReport {
    /// Ranks, rank 0 included.
    pub world_size: usize,
    /// Rank 0: from `connect` until every rank joined, s.
    pub ready_s: f64,
    /// Simulated ranks: from the first attempt until the last heard Ready, s.
    pub clients_ready_s: f64,
    /// Connect attempts beyond the first.
    pub retries: u64,
    /// Rank 0's most threads at once (sampled every 5 ms).
    pub root_threads: u64,
    /// Rank 0's peak resident memory, MiB.
    pub root_hwm_mib: f64,
    /// Per-row gather: median and max, ms.
    pub gather_median_ms: f64,
    /// See `gather_median_ms`.
    pub gather_max_ms: f64,
    /// Rank 0's CPU time per row (all threads), ms.
    pub row_cpu_ms: f64,
    /// Median of the all_gather rounds, ms.
    pub all_gather_median_ms: f64,
    /// Median of the all_max rounds, ms.
    pub all_max_median_ms: f64,
    /// After the rows the last rank dies: how rank 0's barrier failed.
    pub failure: String,
    /// From that death until every other rank had rank 0's Abort, ms.
    pub abort_ms: f64,
}

/// Rank 0's side, in the child process: joins as rank 0 on `port`, runs
/// the rows, then sees the last rank die (its next call must fail naming
/// it) and says goodbye. Each row is announced on `stdout` (`row N`, the
/// harness's cue), flushed at once.
pub fn serve_as_root(
    opts: &ScaleOptions,
    port: u16,
    stdout: &mut dyn Write,
) -> Result<RootReport, String> {
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let launch = LaunchOptions {
        timeout_s: opts.timeout_s,
        ..LaunchOptions::default()
    };
    let start = Instant::now();
    let control = Control::connect_with_info(
        &root_world(opts, port),
        &launch,
        vec![b'i'; opts.hello_bytes],
    )
    .map_err(|e| e.to_string())?;
    let mut report = RootReport {
        ready_s: start.elapsed().as_secs_f64(),
        ..RootReport::default()
    };
    let cpu_before = cpu_seconds();
    gather_rows(opts, &control, stdout, &mut report)?;
    report.rows_cpu_s = cpu_seconds() - cpu_before;
    agree_rounds(opts, &control, stdout, &mut report)?;
    // The last rank dies now (the harness drops its connection): the next
    // call must fail naming it, and every other rank must hear of it.
    cue(stdout, "kill")?;
    report.failure = match control.barrier() {
        Ok(()) => return Err("a barrier with a dead rank succeeded".into()),
        Err(e) => e.to_string(),
    };
    report.hwm_kib = proc_status(std::process::id(), "VmHWM").unwrap_or(0);
    drop(control);
    Ok(report)
}

/// Rank 0's world: a loopback job of `opts.world_size` ranks on `port`.
fn root_world(opts: &ScaleOptions, port: u16) -> World {
    World {
        rank: 0,
        world_size: opts.world_size,
        local_rank: 0,
        local_world_size: 8,
        hostname: "sim0".into(),
        rendezvous_host: Some("127.0.0.1".into()),
        rendezvous_port: port,
        bind: "127.0.0.1".into(),
        token: opts.token.clone(),
        launcher: Launcher::Explicit,
    }
}

/// Tells the harness `line` (its cue), flushed at once.
fn cue(stdout: &mut dyn Write, line: &str) -> Result<(), String> {
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| e.to_string())
}

/// The rows: each a gather of every rank's report, timed.
fn gather_rows(
    opts: &ScaleOptions,
    control: &Control,
    stdout: &mut dyn Write,
    report: &mut RootReport,
) -> Result<(), String> {
    let own = vec![b'r'; opts.report_bytes];
    for row in 0..opts.rows {
        // The row's collective is over everywhere: the harness releases
        // the simulated ranks' parts (a real job's ranks learn it from
        // NCCL, not from rank 0).
        cue(stdout, &format!("row {row}"))?;
        let t0 = Instant::now();
        let parts = control.gather(own.clone()).map_err(|e| e.to_string())?;
        report.gather_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        let parts = parts.ok_or("rank 0 got no parts")?;
        if parts.len() != opts.world_size || parts.iter().any(|p| p.len() != opts.report_bytes) {
            return Err(format!("row {row}: wrong parts"));
        }
    }
    Ok(())
}

/// Agreeing on the slowest figures, the old way and the new, timed.
fn agree_rounds(
    opts: &ScaleOptions,
    control: &Control,
    stdout: &mut dyn Write,
    report: &mut RootReport,
) -> Result<(), String> {
    let mine = [1.0f64, 2.0];
    let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
    for (round, agree) in agreement(opts).into_iter().enumerate() {
        cue(stdout, &format!("row {}", opts.rows + round))?;
        let t0 = Instant::now();
        if let Agree::Max { timed } = agree {
            let max = Bootstrap::all_max(control, &mine).map_err(|e| e.to_string())?;
            if max != mine {
                return Err(format!("all_max round {round}: {max:?}"));
            }
            if timed {
                report.all_max_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        } else {
            let all = control
                .all_gather(bytes.clone())
                .map_err(|e| e.to_string())?;
            if all.len() != opts.world_size {
                return Err(format!("all_gather round {round}: {} parts", all.len()));
            }
            report.all_gather_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(())
}

/// Runs the harness: `root_exe root <port> <options as JSON>` is rank 0
/// (a child process), the simulated ranks run here.
pub fn run(opts: &ScaleOptions, root_exe: &Path) -> Result<ScaleReport, String> {
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let port = World::free_loopback_port().map_err(|e| e.to_string())?;
    let mut child = Command::new(root_exe)
        .arg("root")
        .arg(port.to_string())
        .arg(serde_json::to_string(opts).expect("options serialise"))
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", root_exe.display()))?;
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = Arc::clone(&done);
        thread::spawn(move || {
            let mut most = 0;
            while !done.load(Ordering::SeqCst) {
                most = most.max(proc_status(pid, "Threads").unwrap_or(0));
                thread::sleep(Duration::from_millis(5));
            }
            most
        })
    };
    // Rank 0's stdout: "row K" when row K starts (release its parts),
    // "kill" when the last rank is to die, then its report as one JSON
    // line.
    let rows = Arc::new(swarm::Rows::default());
    let stdout = child.stdout.take().expect("piped");
    let reader = {
        let rows = Arc::clone(&rows);
        thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match line.strip_prefix("row ").map(str::parse::<usize>) {
                    Some(Ok(row)) => rows.release(row + 1),
                    _ if line == "kill" => rows.kill_last(),
                    _ => last = Some(line),
                }
            }
            rows.root_gone();
            last
        })
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let swarm = swarm::run(opts, addr, &rows);
    if swarm.is_err() {
        // Its stderr (inherited) says why, if it failed first.
        let _ = child.kill();
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let line = reader.join().unwrap_or(None);
    done.store(true, Ordering::SeqCst);
    let root_threads = sampler.join().unwrap_or(0);
    // Rank 0's own error, if it had one, is on the inherited stderr.
    let swarm = swarm.map_err(|e| format!("{e} (rank 0's process: {status})"))?;
    let root: RootReport = match (status.success(), line) {
        (true, Some(line)) => serde_json::from_str(&line).map_err(|e| e.to_string())?,
        _ => return Err(format!("rank 0 failed ({status})")),
    };
    let (gather_median_ms, gather_max_ms) = median_max(&root.gather_ms);
    let (all_gather_median_ms, _) = median_max(&root.all_gather_ms);
    let (all_max_median_ms, _) = median_max(&root.all_max_ms);
    Ok(ScaleReport {
        world_size: opts.world_size,
        ready_s: root.ready_s,
        clients_ready_s: swarm.ready_s,
        retries: swarm.retries,
        root_threads,
        root_hwm_mib: root.hwm_kib as f64 / 1024.0,
        gather_median_ms,
        gather_max_ms,
        row_cpu_ms: root.rows_cpu_s * 1e3 / opts.rows.max(1) as f64,
        all_gather_median_ms,
        all_max_median_ms,
        failure: root.failure,
        abort_ms: swarm.abort_s * 1e3,
    })
}

/// One agreement round after the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agree {
    /// An all_max: a gather (each rank's part) and a broadcast.
    Max {
        /// Counted in the figures (the last one only drains).
        timed: bool,
    },
    /// An all_gather (each rank's part, and every part back to each).
    Gather,
}

/// The agreement rounds after the rows, in order.
pub fn agreement(opts: &ScaleOptions) -> Vec<Agree> {
    let mut rounds = vec![Agree::Max { timed: true }; opts.all_max_rounds];
    rounds.extend(vec![Agree::Gather; opts.all_gather_rounds]);
    if opts.all_gather_rounds > 0 {
        rounds.push(Agree::Max { timed: false });
    }
    rounds
}

/// This process's CPU time (user + system, every thread), s, from
/// /proc/self/stat (fields 14 and 15, in clock ticks of 1/100 s).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The command name (field 2) may hold spaces: count after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn median_max(xs: &[f64]) -> (f64, f64) {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => (0.0, 0.0),
        n => (sorted[n / 2], sorted[n - 1]),
    }
}

/// A number field of `/proc/PID/status` (`Threads`, `VmHWM` in KiB).
fn proc_status(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}
