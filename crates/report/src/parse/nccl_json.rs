//! nccl-tests `-J` JSON (file version 3; 1 and 2 lack only the
//! per-iteration keys, which are optional here). Placement extensions
//! (`collbench_core::extension`) read their own keys, where present.
//!
//! Quirks handled: booleans are the strings `"true"`/`"false"`, `root` is a
//! `%6i`-formatted string (`"    -1"`), NaN is the string `"nan"`, the time
//! key is `cpu_time` with `-C 1`, and `nwrong` is `null` when unchecked.
//! With `-I`, `<placement>_per_iter` gives the statistics, and
//! `per_process_max_times_us` the per-process times (their means fill
//! `rank_time_us`); skipped iterations are reported as a warning.
//! The op comes from `args[0]` (`./build/all_reduce_perf`).
//! Errors name the JSON path (`results[3].out_of_place.bus_bw`); syntax
//! errors name the line.

use super::nccl_tests::op_name;
use super::{Notes, ParseError};
use collbench_core::extension_list::extensions;
use collbench_core::{CaseResult, DeviceInfo, Placement, Record, TimeStats};
use serde_json::Value;

/// Parses one nccl-tests JSON file into one record.
pub fn parse(text: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| ParseError::at(e.line().max(1), format!("expected nccl-tests JSON: {e}")))?;
    let mut rec = Record::new("nccl-tests");
    let op = run(&doc, &mut rec);
    if let Some(config) = doc.get("config") {
        settings(config, &mut rec)?;
    }
    let results = get(&doc, "results", "")?
        .as_array()
        .ok_or_else(|| ParseError::whole("results: expected an array"))?;
    let iters = rec.settings.iters * rec.settings.agg_iters.max(1) * rec.settings.graph.max(1);
    for (i, r) in results.iter().enumerate() {
        rec.results
            .push(case(r, &format!("results[{i}]"), &op, iters, notes)?);
    }
    rec.avg_busbw_gbps = doc
        .get("average_bus_bandwidth")
        .and_then(|a| a.get("bandwidth"))
        .and_then(number);
    out_of_bounds(&doc, notes);
    Ok(vec![rec])
}

/// What ran, from the file's top-level keys: the command line, the start
/// time, the NCCL version and the NCCL, CUDA, NVSHMEM and NVIDIA
/// environment, into `rec`. Returns the op, named from `args[0]`
/// (`unknown` without one).
fn run(doc: &Value, rec: &mut Record) -> String {
    let args: Vec<String> = get(doc, "args", "")
        .ok()
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let op = args
        .first()
        .map(|a| op_name(a))
        .unwrap_or_else(|| "unknown".to_string());
    rec.command_line = args;
    rec.start_time = doc
        .get("start_time")
        .and_then(Value::as_str)
        .map(|t| t.replacen(' ', "T", 1));
    if let Some(code) = doc.get("nccl_version").and_then(Value::as_u64) {
        rec.library = Some(format!(
            "NCCL {}.{}.{}",
            code / 10000,
            code % 10000 / 100,
            code % 100
        ));
    }
    for kv in doc
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if let Some((k, v)) = kv.split_once('=') {
            if ["NCCL_", "CUDA_", "NVSHMEM_", "NVIDIA_"]
                .iter()
                .any(|p| k.starts_with(p))
            {
                rec.env.insert(k.to_string(), v.to_string());
            }
        }
    }
    op
}

/// One entry of `results` (at `path`, `results[3]`) as a case of `op`;
/// `iters` is the iteration count where the entry does not give its own.
fn case(
    r: &Value,
    path: &str,
    op: &str,
    iters: u64,
    notes: &mut Notes,
) -> Result<CaseResult, ParseError> {
    let root = match get(r, "root", path)? {
        Value::String(s) => s.trim().parse::<i64>().ok(),
        v => v.as_i64(),
    }
    .ok_or_else(|| ParseError::whole(format!("{path}.root: expected an integer")))?;
    let mut case = CaseResult {
        op: op.to_string(),
        size_bytes: uint(r, "size", path)?,
        count: uint(r, "count", path)?,
        dtype: string(r, "type", path)?,
        redop: string(r, "redop", path)?,
        root,
        out_of_place: None,
        in_place: None,
    };
    case.out_of_place = placement(r, "out_of_place", path, iters, notes)?;
    case.in_place = placement(r, "in_place", path, iters, notes)?;
    Ok(case)
}

/// `"out_of_bounds": {"count": 3, "okay": "false"}` (a string in version
/// 3; a bool is read too): result values outside tolerance.
fn out_of_bounds(doc: &Value, notes: &mut Notes) {
    let Some(oob) = doc.get("out_of_bounds") else {
        return;
    };
    let okay = match oob.get("okay") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s != "false",
        _ => true,
    };
    let count = oob.get("count").and_then(Value::as_u64).unwrap_or(0);
    if !okay || count > 0 {
        notes.out_of_bounds(
            0,
            count,
            format!(
                "nccl-tests found {count} result value(s) outside tolerance (out_of_bounds.okay {okay}): \
                 the run produced wrong results"
            ),
        );
    }
}

fn settings(c: &Value, rec: &mut Record) -> Result<(), ParseError> {
    let u = |k: &str| c.get(k).and_then(Value::as_u64).unwrap_or(0);
    let s = &mut rec.settings;
    s.threads_per_process = u("nthreads");
    s.gpus_per_thread = u("ngpus");
    s.min_bytes = u("minimum_bytes");
    s.max_bytes = u("maximum_bytes");
    s.step_factor = c.get("step_factor").and_then(Value::as_u64);
    s.step_bytes = c.get("step_bytes").and_then(Value::as_u64);
    s.warmup_iters = u("warmup_iters");
    s.iters = u("iterations");
    s.agg_iters = u("aggregated_iterations");
    s.check = u("validation") > 0;
    s.graph = u("graph");
    for ext in extensions() {
        ext.read_json_config(c, s);
    }
    s.blocking = c.get("blocking_collectives").and_then(Value::as_str) == Some("true");
    for (i, d) in c
        .get("devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("config.devices[{i}]");
        rec.devices.push(DeviceInfo {
            rank: uint(d, "rank", &path)?,
            group: d.get("group").and_then(Value::as_u64).unwrap_or(0),
            pid: d.get("pid").and_then(Value::as_u64).unwrap_or(0),
            host: d
                .get("hostname")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            device: d.get("device").and_then(Value::as_u64).unwrap_or(0),
            bus_id: d
                .get("device_hex")
                .and_then(Value::as_str)
                .map(str::to_string),
            name: d
                .get("device_info")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        });
    }
    // The JSON may list one device per process only (2.19 with -g 2 lists
    // one of the two): each process drives nthreads x ngpus ranks.
    let pids: std::collections::BTreeSet<u64> = rec.devices.iter().map(|d| d.pid).collect();
    rec.settings.processes = pids.len() as u64;
    let per_process = rec.settings.threads_per_process.max(1) * rec.settings.gpus_per_thread.max(1);
    rec.settings.world_size = (rec.devices.len() as u64).max(pids.len() as u64 * per_process);
    Ok(())
}

/// The `key` placement (`out_of_place`, `in_place`) of result `r` at
/// `path`, with its `-I` statistics where the file has them; `None` where
/// the result has no such placement. `iters` is the iteration count where
/// the result does not give its own.
fn placement(
    r: &Value,
    key: &str,
    path: &str,
    iters: u64,
    notes: &mut Notes,
) -> Result<Option<Placement>, ParseError> {
    let Some(p) = r.get(key) else { return Ok(None) };
    let path = format!("{path}.{key}");
    let time = p.get("time").or_else(|| p.get("cpu_time"));
    let time_us = time
        .and_then(number)
        .ok_or_else(|| ParseError::whole(format!("{path}.time: expected a number")))?;
    let wrong = nwrong(p, &path)?;
    let per_iter = r.get(format!("{key}_per_iter"));
    skipped(per_iter, &path, notes);
    let mut placement = Placement {
        time_us,
        algbw_gbps: float(p, "alg_bw", &path)?,
        busbw_gbps: float(p, "bus_bw", &path)?,
        wrong,
        iterations: r
            .get("actual_iterations")
            .and_then(Value::as_u64)
            .unwrap_or(iters),
        stats: per_iter.map(iteration_stats),
        rank_time_us: per_iter.map(process_times).unwrap_or_default(),
        ..Placement::default()
    };
    for ext in extensions() {
        ext.read_json_placement(p, &mut placement, &path)
            .map_err(ParseError::whole)?;
    }
    Ok(Some(placement))
}

/// A placement's `nwrong` at `path`: `None` when the results were not
/// checked (`null` or absent), else the count of wrong values.
fn nwrong(p: &Value, path: &str) -> Result<Option<u64>, ParseError> {
    match p.get("nwrong") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => Ok(Some(
            number(v)
                .filter(|w| *w >= 0.0)
                .map(|w| w as u64)
                .ok_or_else(|| {
                    ParseError::whole(format!("{path}.nwrong: expected a count or null"))
                })?,
        )),
    }
}

/// A warning for iterations `-I` skipped before its statistics
/// (`skipped_iterations` of the placement's `_per_iter` object).
fn skipped(per_iter: Option<&Value>, path: &str, notes: &mut Notes) {
    let skipped = per_iter
        .and_then(|s| s.get("skipped_iterations"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if skipped > 0 {
        notes.warn(
            0,
            format!(
                "{path}: {skipped} iteration(s) skipped before the per-iteration statistics (-I)"
            ),
        );
    }
}

/// `-I` with several processes: each process's per-iteration times; their
/// means are the per-process times (one entry per process, NaN for one
/// without times).
fn process_times(per_iter: &Value) -> Vec<f64> {
    per_iter
        .get("per_process_max_times_us")
        .and_then(Value::as_array)
        .map(|procs| {
            procs
                .iter()
                .map(|t| {
                    let v: Vec<f64> = t
                        .as_array()
                        .map(|a| a.iter().filter_map(number).collect())
                        .unwrap_or_default();
                    if v.is_empty() {
                        f64::NAN
                    } else {
                        v.iter().sum::<f64>() / v.len() as f64
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The time statistics of a placement's `_per_iter` object (0 for a
/// figure it lacks).
fn iteration_stats(s: &Value) -> TimeStats {
    let f = |k: &str| s.get(k).and_then(number).unwrap_or(0.0);
    TimeStats {
        mean_us: f("avg_us"),
        min_us: f("min_us"),
        p50_us: f("p50_us"),
        p99_us: f("p99_us"),
        max_us: f("max_us"),
        stdev_us: f("stdev_us"),
        samples: s
            .get("times_us")
            .and_then(Value::as_array)
            .map_or(0, |t| t.len() as u64),
    }
}

/// A JSON number, or the string `"nan"` nccl-tests writes for NaN.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) if s == "nan" => Some(f64::NAN),
        v => v.as_f64(),
    }
}

fn get<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a Value, ParseError> {
    v.get(key).ok_or_else(|| {
        ParseError::whole(format!(
            "{path}{}{key}: missing",
            if path.is_empty() { "" } else { "." }
        ))
    })
}

fn uint(v: &Value, key: &str, path: &str) -> Result<u64, ParseError> {
    get(v, key, path)?
        .as_u64()
        .ok_or_else(|| ParseError::whole(format!("{path}.{key}: expected a non-negative integer")))
}

fn float(v: &Value, key: &str, path: &str) -> Result<f64, ParseError> {
    get(v, key, path).and_then(|x| {
        number(x).ok_or_else(|| ParseError::whole(format!("{path}.{key}: expected a number")))
    })
}

fn string(v: &Value, key: &str, path: &str) -> Result<String, ParseError> {
    Ok(get(v, key, path)?
        .as_str()
        .ok_or_else(|| ParseError::whole(format!("{path}.{key}: expected a string")))?
        .to_string())
}
