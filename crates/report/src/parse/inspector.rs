//! JSON written by NCCL's Inspector profiler plugin
//! (`NCCL_PROFILER_PLUGIN=libnccl-profiler-inspector.so`,
//! `NCCL_INSPECTOR_ENABLE=1`): one object per collective per communicator,
//! written one after the other,
//!
//! ```text
//! {"header": {"id": "0x7f8c...", "rank": 2, "n_ranks": 8, "nnodes": 1},
//!  "metadata": {"inspector_output_format_version": "v4.0", "hostname": "h", "pid": 1639453, ...},
//!  "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
//!                "coll_exec_time_us": 61974, "coll_algobw_gbs": 277.21, "coll_busbw_gbs": 485.12}}
//! ```
//!
//! Records are summarised per op and message size: `time_us`, algbw and
//! busbw are means over the calls, `stats` holds the spread of the times and
//! `iterations` the number of calls. Objects without `coll_perf` (other
//! event kinds) are counted in a warning and left out. The data type is not
//! in the record, so `dtype` is empty and `count` 0.

use super::{Notes, ParseError};
use collbench_core::{CaseResult, Collective, DeviceInfo, Placement, Record, TimeStats};
use serde_json::Value;

/// A case: its op and message size.
type Key = (String, u64);

/// Calls of one (op, size): times, algbw and busbw.
type Calls = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Parses Inspector output (one file, any number of ranks) into one record.
pub fn parse(text: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    let mut rec = Record::new("nccl-inspector");
    let mut cases: Vec<(Key, Calls)> = Vec::new();
    let mut other = 0usize;
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut index = 0usize;
    loop {
        let offset = stream.byte_offset();
        let doc = match stream.next() {
            None => break,
            Some(Ok(v)) => v,
            Some(Err(e)) if e.is_eof() && !cases.is_empty() => {
                // The plugin was writing when the job ended.
                let line = text[..offset].lines().count() + 1;
                notes.cut_short(
                    line,
                    format!(
                        "partial: the log ends inside a record; the {index} complete record(s) before it are kept"
                    ),
                );
                break;
            }
            Some(Err(e)) => {
                return Err(ParseError::at(
                    e.line().max(1),
                    format!("expected NCCL Inspector JSON objects: {e}"),
                ))
            }
        };
        index += 1;
        let Some(perf) = doc.get("coll_perf") else {
            other += 1;
            continue;
        };
        let (key, (t, a, b)) = call(perf, index)?;
        match cases.iter_mut().find(|(k, _)| *k == key) {
            Some((_, calls)) => {
                calls.0.push(t);
                calls.1.push(a);
                calls.2.push(b);
            }
            None => cases.push((key, (vec![t], vec![a], vec![b]))),
        }
        header(&doc, &mut rec);
    }
    if other > 0 {
        notes.warn(
            0,
            format!("{other} Inspector record(s) without coll_perf were left out"),
        );
    }
    if cases.is_empty() {
        return Err(ParseError::whole(
            "no NCCL Inspector collective records found (expected JSON objects with a 'coll_perf' key)",
        ));
    }
    rec.results.extend(summaries(cases));
    rec.devices.sort_by_key(|d| d.rank);
    Ok(vec![rec])
}

/// One call of record `index` (1-based) from its `coll_perf` object: its
/// (op, size), and its time, algbw and busbw.
fn call(perf: &Value, index: usize) -> Result<(Key, (f64, f64, f64)), ParseError> {
    let path = format!("record {index}: coll_perf");
    let num = |k: &str| {
        perf.get(k)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| ParseError::whole(format!("{path}.{k}: expected a number")))
    };
    let coll = perf
        .get("coll")
        .and_then(Value::as_str)
        .ok_or_else(|| ParseError::whole(format!("{path}.coll: expected a string")))?;
    let size = perf
        .get("coll_msg_size_bytes")
        .and_then(Value::as_u64)
        .ok_or_else(|| {
            ParseError::whole(format!("{path}.coll_msg_size_bytes: expected an integer"))
        })?;
    let (t, a, b) = (
        num("coll_exec_time_us")?,
        num("coll_algobw_gbs")?,
        num("coll_busbw_gbs")?,
    );
    Ok(((op_name(coll), size), (t, a, b)))
}

/// One case per (op, size), in that order: the mean time, algbw and
/// busbw of its calls, the spread of the times and the number of calls.
fn summaries(mut cases: Vec<(Key, Calls)>) -> Vec<CaseResult> {
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    cases
        .into_iter()
        .map(|((op, size), (times, algbw, busbw))| CaseResult {
            op,
            size_bytes: size,
            root: -1,
            out_of_place: Some(Placement {
                time_us: mean(&times),
                algbw_gbps: mean(&algbw),
                busbw_gbps: mean(&busbw),
                wrong: None,
                iterations: times.len() as u64,
                stats: TimeStats::from_samples(&times),
                ..Placement::default()
            }),
            ..CaseResult::default()
        })
        .collect()
}

/// Ranks, hosts and the format version from a record's header and metadata.
fn header(doc: &Value, rec: &mut Record) {
    let h = &doc["header"];
    let m = &doc["metadata"];
    if let Some(n) = h["n_ranks"].as_u64() {
        rec.settings.world_size = rec.settings.world_size.max(n);
    }
    if rec.tool_version.is_none() {
        rec.tool_version = m["inspector_output_format_version"]
            .as_str()
            .map(str::to_string);
    }
    let Some(rank) = h["rank"].as_u64() else {
        return;
    };
    if rec.devices.iter().any(|d| d.rank == rank) {
        return;
    }
    rec.devices.push(DeviceInfo {
        rank,
        pid: m["pid"].as_u64().unwrap_or(0),
        host: m["hostname"].as_str().unwrap_or("").to_string(),
        ..DeviceInfo::default()
    });
}

/// `AllReduce` -> `all_reduce`; names collbench does not know are kept in
/// lower case.
fn op_name(coll: &str) -> String {
    Collective::from_tool_name(coll)
        .map_or_else(|| coll.to_ascii_lowercase(), |c| c.name().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_summarised_per_op_and_size() {
        let one = |rank: u64, sn: u64, t: f64, bw: f64| {
            format!(
                r#"{{"header":{{"id":"0x1","rank":{rank},"n_ranks":2,"nnodes":1}},"metadata":{{"inspector_output_format_version":"v4.0","hostname":"h{rank}","pid":7}},"coll_perf":{{"coll":"AllReduce","coll_sn":{sn},"coll_msg_size_bytes":1048576,"coll_exec_time_us":{t},"coll_algobw_gbs":{bw},"coll_busbw_gbs":{bw}}}}}"#
            )
        };
        let text = format!(
            "{}\n{}\n{}",
            one(0, 1, 10.0, 100.0),
            one(1, 1, 30.0, 50.0),
            "{\"header\":"
        );
        let mut notes = Notes::default();
        let recs = parse(&text, &mut notes).unwrap();
        let r = &recs[0];
        assert_eq!(r.results.len(), 1);
        let p = r.results[0].out_of_place.as_ref().unwrap();
        assert_eq!(r.results[0].op, "all_reduce");
        assert_eq!(p.time_us, 20.0);
        assert_eq!(p.busbw_gbps, 75.0);
        assert_eq!(p.iterations, 2);
        assert_eq!(r.settings.world_size, 2);
        assert_eq!(r.devices.len(), 2);
        assert!(notes.warnings[0].message.starts_with("partial"));
    }
}
