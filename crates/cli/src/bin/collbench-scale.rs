//! The control plane's scale bench: `collbench-scale W...` runs the scale
//! harness (rank 0 in a child process, W-1 simulated ranks here) for each
//! W and prints one markdown table row per W (bench/results/scale.md).
//! `collbench-scale root PORT OPTIONS_JSON` is that child.

use collbench_launch::scale::{self, ScaleOptions};
use std::process::ExitCode;

// The binary's console for the control plane's lines, as collbench's.
#[allow(dead_code)]
#[path = "../stdout.rs"]
mod stdout;

fn main() -> ExitCode {
    stdout::install_console();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("root") {
        let [_, port, opts] = args.as_slice() else {
            eprintln!("usage: collbench-scale root PORT OPTIONS_JSON");
            return ExitCode::from(2);
        };
        let (Ok(port), Ok(opts)) = (port.parse(), serde_json::from_str::<ScaleOptions>(opts))
        else {
            eprintln!("collbench-scale root: bad PORT or OPTIONS_JSON");
            return ExitCode::from(2);
        };
        return match scale::serve_as_root(&opts, port, &mut std::io::stdout()) {
            Ok(report) => {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("report serialises")
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("collbench-scale root: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let worlds: Result<Vec<usize>, _> = args.iter().map(|w| w.parse::<usize>()).collect();
    let Some(worlds) = worlds
        .ok()
        .filter(|w| !w.is_empty() && w.iter().all(|&w| w >= 2))
    else {
        eprintln!("usage: collbench-scale W... (world sizes of 2 or more, e.g. 1024 4096 16384)");
        return ExitCode::from(2);
    };
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("collbench-scale: cannot find its own executable");
        return ExitCode::FAILURE;
    };
    println!("| W | Ready (rank 0), s | Ready (last rank), s | connect retries | rank-0 threads (peak) | rank-0 VmHWM, MiB | gather median / max, ms | rank-0 CPU per row, ms | 16 B all_gather / all_max, ms | a rank dies: all others told, ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for w in worlds {
        match scale::run(&ScaleOptions::new(w), &exe) {
            Ok(r) if !r.failure.contains(&format!("rank {} on host", w - 1)) => {
                eprintln!(
                    "collbench-scale: W = {w}: the dead rank was not named: {}",
                    r.failure
                );
                return ExitCode::FAILURE;
            }
            Ok(r) => println!(
                "| {} | {:.2} | {:.2} | {} | {} | {:.1} | {:.2} / {:.2} | {:.2} | {} / {:.2} | {:.1} |",
                r.world_size,
                r.ready_s,
                r.clients_ready_s,
                r.retries,
                r.root_threads,
                r.root_hwm_mib,
                r.gather_median_ms,
                r.gather_max_ms,
                r.row_cpu_ms,
                match r.all_gather_median_ms {
                    0.0 => "not run".to_string(),
                    ms => format!("{ms:.2}"),
                },
                r.all_max_median_ms,
                r.abort_ms
            ),
            Err(e) => {
                eprintln!("collbench-scale: W = {w}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
