//! rccl-tests text output. The table is nccl-tests' (same columns; counts
//! over the error threshold carry a `*`, which the shared reader accepts), so
//! this module only adds the lines rccl-tests prints around it:
//! `rccl-tests: Version develop:33cc4df`, `RCCL version : 2.27.7-...`,
//! `HIP version  : ...`, `ROCm version : ...`, `Hostname     : ...`.

use super::nccl_tests;
use super::{Notes, ParseError};
use collbench_core::Record;

/// Parses rccl-tests text; `origin` (a file name) helps name the op.
pub fn parse(text: &str, origin: &str, notes: &mut Notes) -> Result<Vec<Record>, ParseError> {
    nccl_tests::parse_as(text, origin, "rccl-tests", &version_line, notes)
}

/// Fills the record from one of rccl-tests' own lines; true when it was one.
fn version_line(line: &str, rec: &mut Record) -> bool {
    if let Some(v) = line.strip_prefix("rccl-tests: Version") {
        rec.tool_version = Some(v.trim().to_string());
        return true;
    }
    let Some((key, value)) = line.split_once(':') else {
        return false;
    };
    let value = value.trim().to_string();
    match key.trim() {
        "RCCL version" => rec.library = Some(format!("RCCL {value}")),
        "HIP version" => {
            rec.env.insert("HIP_VERSION".to_string(), value);
        }
        "ROCm version" => {
            rec.env.insert("ROCM_VERSION".to_string(), value);
        }
        "Hostname" => {
            rec.env.insert("HOSTNAME".to_string(), value);
        }
        _ => return false,
    }
    true
}
