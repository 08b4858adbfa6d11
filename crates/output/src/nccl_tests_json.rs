//! nccl-tests' own `-J` JSON (file version 3, as nccl-tests 2.19.6 writes
//! it), so `tools/analyze_perf_json.py` and dashboards built on `-J` read
//! collbench's runs unchanged.
//!
//! Layout and spelling follow nccl-tests byte for byte: one line, no
//! spaces; doubles as `%lf` (six decimals, NaN as the string `"nan"`);
//! booleans as the strings `"true"`/`"false"`; `root` as a `%6i` string;
//! `nwrong` a double or `null` when unchecked; `devices` one entry per
//! process (its first rank), inside `config`. Where collbench knows less or
//! differently: `env` holds the recorded variables only (never the whole
//! environment), times are UTC, `nccl_version` is 0 without NCCL, and one
//! file may hold several collectives (`run all`). A partial run (Ctrl-C)
//! names why in `errors`, the list where nccl-tests puts NCCL's last error.
//! Placement extensions (`collbench_core::extension`) add their keys:
//! one in `config` after `validation`, an object in each placement they
//! checked and a top-level `{count, okay}` of the placements that failed.

use crate::Exporter;
use collbench_core::extension_list::extensions;
use collbench_core::{nccl_version, Placement, Record};

/// nccl-tests' `JSON_FILE_VERSION`.
const FILE_VERSION: i64 = 3;

/// Writes a [`Record`] as nccl-tests' `-J` file.
#[derive(Debug, Clone, Default)]
pub struct NcclTestsJsonExporter {
    /// `end_time` as `YYYY-MM-DD HH:MM:SS`; `None` = the time of writing.
    pub end_time: Option<String>,
}

impl Exporter for NcclTestsJsonExporter {
    fn serialize(&self, record: &Record) -> Vec<u8> {
        let end = self.end_time.clone().unwrap_or_else(utc_now_stamp);
        document(record, &end).into_bytes()
    }
}

/// The whole document; top-level keys in nccl-tests' order.
fn document(r: &Record, end_time: &str) -> String {
    let start = r
        .start_time
        .as_deref()
        .map(stamp_from_rfc3339)
        .unwrap_or_else(|| end_time.to_string());
    let placements = || {
        r.results
            .iter()
            .flat_map(|c| c.placements().map(|(_, p)| p))
    };
    let failed = placements().filter(|p| p.wrong.unwrap_or(0) > 0).count();
    let busbw: Vec<f64> = placements().map(|p| p.busbw_gbps).collect();
    let avg_busbw = busbw.iter().sum::<f64>() / busbw.len() as f64;
    // NCCL_TESTS_MIN_BW: nccl-tests fails below 90% of it.
    let bw_okay = match r.env.get("NCCL_TESTS_MIN_BW") {
        Some(min) => boolean(avg_busbw >= min.trim().parse::<f64>().unwrap_or(0.0) * 0.9),
        None => string("unchecked"),
    };
    let mut top = vec![
        ("version", FILE_VERSION.to_string()),
        ("start_time", string(&start)),
        ("args", list(r.command_line.iter().map(|a| string(a)))),
        (
            "env",
            list(r.env.iter().map(|(k, v)| string(&format!("{k}={v}")))),
        ),
        (
            "nccl_version",
            nccl_version::code_of_library(r.library.as_deref()).to_string(),
        ),
        ("config", config(r)),
        ("results", list(r.results.iter().map(|c| result(r, c)))),
        (
            "out_of_bounds",
            object(&[
                ("count", failed.to_string()),
                ("okay", boolean(failed == 0)),
            ]),
        ),
    ];
    for ext in extensions() {
        if let Some(n) = ext.failures(&r.results) {
            top.push((
                ext.json_failures_key(),
                object(&[("count", n.to_string()), ("okay", boolean(n == 0))]),
            ));
        }
    }
    top.extend([
        (
            "average_bus_bandwidth",
            object(&[("bandwidth", double(avg_busbw)), ("okay", bw_okay)]),
        ),
        // nccl-tests lists NCCL's last error here; a partial run says why
        // it stopped, so a reader of the file sees it is not the whole
        // sweep.
        (
            "errors",
            list(
                r.partial
                    .iter()
                    .map(|why| string(&format!("partial: {why}"))),
            ),
        ),
        ("end_time", string(end_time)),
    ]);
    object(&top)
}

fn config(r: &Record) -> String {
    let s = &r.settings;
    let step = match (s.step_factor, s.step_bytes) {
        (Some(f), _) if f > 1 => ("step_factor", f.to_string()),
        (_, b) => ("step_bytes", b.unwrap_or(0).to_string()),
    };
    let mut fields = vec![
        ("nthreads", s.threads_per_process.max(1).to_string()),
        ("ngpus", s.gpus_per_thread.to_string()),
        ("minimum_bytes", s.min_bytes.to_string()),
        ("maximum_bytes", s.max_bytes.to_string()),
        step,
        ("warmup_iters", s.warmup_iters.to_string()),
        ("iterations", s.iters.to_string()),
        ("aggregated_iterations", s.agg_iters.to_string()),
        ("validation", (s.check as u8).to_string()),
    ];
    fields.extend(
        extensions()
            .iter()
            .filter_map(|e| e.json_config(s))
            .map(|(k, v)| (k, v.to_string())),
    );
    fields.extend([
        ("graph", s.graph.to_string()),
        ("blocking_collectives", boolean(s.blocking)),
        ("per_iter_timing", boolean(s.per_iter_timing)),
        ("per_iter_skip", s.per_iter_skip.to_string()),
        ("parallel_init", boolean(false)),
        ("devices", devices(r)),
    ]);
    object(&fields)
}

/// One entry per process, its first rank, as nccl-tests gathers them
/// (analyze_perf_json.py maps process rows to hosts through these).
fn devices(r: &Record) -> String {
    let mut firsts: Vec<&collbench_core::DeviceInfo> = Vec::new();
    for d in &r.devices {
        if !firsts.iter().any(|f| f.host == d.host && f.pid == d.pid) {
            firsts.push(d);
        }
    }
    list(firsts.into_iter().map(|d| {
        object(&[
            ("rank", d.rank.to_string()),
            ("group", d.group.to_string()),
            ("pid", d.pid.to_string()),
            ("hostname", string(&d.host)),
            ("device", d.device.to_string()),
            ("device_hex", string(&device_hex(d.bus_id.as_deref()))),
            ("device_info", string(&d.name)),
        ])
    }))
}

/// `%04x:%02x:%02x` (domain, bus, device) from a PCI bus id such as
/// `00000000:19:00.0`; `cpu` for rank threads.
fn device_hex(bus_id: Option<&str>) -> String {
    let Some(id) = bus_id else {
        return "cpu".to_string();
    };
    let parts: Vec<&str> = id.split(':').collect();
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    match parts.as_slice() {
        [dom, bus, dev] => match (hex(dom), hex(bus), hex(dev.split('.').next().unwrap_or(""))) {
            (Some(a), Some(b), Some(c)) => format!("{a:04x}:{b:02x}:{c:02x}"),
            _ => id.to_string(),
        },
        _ => id.to_string(),
    }
}

fn result(r: &Record, c: &collbench_core::CaseResult) -> String {
    let mut fields = vec![
        ("size", c.size_bytes.to_string()),
        ("count", c.count.to_string()),
        ("type", string(&c.dtype)),
        ("redop", string(&c.redop)),
        ("root", string(&format!("{:6}", c.root))),
    ];
    for (key, per_iter_key, p) in [
        ("out_of_place", "out_of_place_per_iter", &c.out_of_place),
        ("in_place", "in_place_per_iter", &c.in_place),
    ] {
        let Some(p) = p else {
            fields.push((key, "null".to_string()));
            continue;
        };
        fields.push((key, placement(p)));
        if r.settings.per_iter_timing && !p.iter_times_us.is_empty() {
            fields.push((per_iter_key, per_iter(p, r.settings.per_iter_skip as usize)));
        }
    }
    fields.push(("actual_iterations", r.settings.iters.to_string()));
    fields.push(("experiment_name", string("")));
    object(&fields)
}

fn placement(p: &Placement) -> String {
    let mut fields = vec![
        ("time", double(p.time_us)),
        ("alg_bw", double(p.algbw_gbps)),
        ("bus_bw", double(p.busbw_gbps)),
        (
            "nwrong",
            p.wrong.map_or("null".to_string(), |w| double(w as f64)),
        ),
    ];
    for (key, values) in extensions().iter().filter_map(|e| e.json_placement(p)) {
        let values: Vec<(&str, String)> = values
            .into_iter()
            .map(|(k, v)| (k, v.map_or("null".to_string(), |v| v.to_string())))
            .collect();
        fields.push((key, object(&values)));
    }
    object(&fields)
}

/// `-I 1`: nccl-tests' summary of the iterations after the first `skip`
/// (its percentile rule and population deviation), then every time.
fn per_iter(p: &Placement, skip: usize) -> String {
    let times = &p.iter_times_us;
    let skip = skip.min(times.len().saturating_sub(1));
    let st = crate::text::per_iter::summarize(times, skip).expect("times are not empty");
    let mut fields = vec![
        ("skipped_iterations", skip.to_string()),
        ("min_us", double(st.min)),
        ("max_us", double(st.max)),
        ("avg_us", double(st.avg)),
        ("p50_us", double(st.p50)),
        ("p95_us", double(st.p95)),
        ("p99_us", double(st.p99)),
        ("stdev_us", double(st.stdev)),
        ("cv_pct", double(st.cv_pct)),
        ("times_us", list(times.iter().map(|t| double(*t)))),
    ];
    if p.process_iter_times_us.len() > 1 {
        let rows = p
            .process_iter_times_us
            .iter()
            .map(|row| list(row.iter().map(|t| double(*t))));
        fields.push(("per_process_max_times_us", list(rows)));
    }
    object(&fields)
}

/// NCCL's version code (22803) from `NCCL 2.28.3`; 0 without NCCL.
fn object(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", string(k)))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn list(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(","))
}

/// A string with nccl-tests' escapes (`"` `\` `/` tab, newline); other
/// control and non-ASCII characters, where nccl-tests would cut the
/// string short, as `\uXXXX` so the file stays valid JSON.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' | '\\' | '/' => {
                out.push('\\');
                out.push(ch);
            }
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || (c as u32) >= 0x7f => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `%lf`, with NaN (and, to stay JSON, infinities) as strings.
fn double(v: f64) -> String {
    if v.is_nan() {
        "\"nan\"".to_string()
    } else if v.is_infinite() {
        string(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        format!("{v:.6}")
    }
}

fn boolean(b: bool) -> String {
    string(if b { "true" } else { "false" })
}

/// `2026-12-01T03:08:39Z` -> `2026-12-01 03:08:39`.
fn stamp_from_rfc3339(t: &str) -> String {
    let t = t.replacen('T', " ", 1);
    t.get(..19).unwrap_or(&t).to_string()
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS`.
fn utc_now_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (date, time) = collbench_core::clock::utc_parts(secs);
    format!("{date} {time}")
}

#[cfg(test)]
#[path = "nccl_tests_json_tests.rs"]
mod tests;
