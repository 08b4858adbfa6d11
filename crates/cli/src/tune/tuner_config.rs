//! `run --tuner-config FILE`: the file checked, collbench's tuner plugin
//! installed before the first communicator, and one line afterwards on
//! whether NCCL followed it.

use super::nccl::not_nccl;
use crate::args::BackendArgs;
use crate::exit::{Failure, Outcome};
use collbench_core::read_limit;
use collbench_nccl::tuner::{TunerError, TunerPlugin};
use collbench_tune::TunerConfig;
use std::path::Path;

/// The most malformed lines of a tuner config named one by one (1 GiB
/// of junk once printed 7.1 million).
const MAX_ERROR_LINES: usize = 5;

/// `run --tuner-config FILE`: checks the file and the backend, installs
/// the tuner plugin (before the first communicator) and loads the file.
/// Every mistake is a usage failure, one line per malformed line.
pub fn apply_tuner_config(path: &Path, b: &BackendArgs) -> Result<TunerPlugin, Failure> {
    // Bounded: `--tuner-config /dev/zero` once grew without end.
    let what = "a tuner config";
    let text = read_limit::read_to_string(path, read_limit::SETTINGS_BYTES, what)
        .map_err(|e| Failure::usage(format!("--tuner-config: {e}")))?;
    TunerConfig::parse(&text).map_err(|errors| {
        let lines = errors.first_lines(&path.display().to_string(), MAX_ERROR_LINES);
        Failure::usage(lines.join("\ncollbench: "))
    })?;
    if let Some(line) = not_nccl("--tuner-config applies to NCCL", b) {
        return Err(Failure::usage(line));
    }
    let plugin = TunerPlugin::install().map_err(|e| match e {
        TunerError::UserPlugin(_) => Failure::usage(e.to_string()),
        e => Failure::new(Outcome::Backend, e.to_string()),
    })?;
    // A pipe (`<(...)`, /dev/stdin, a FIFO) gives its text once, and it
    // was read above: the plugin, which reads its rules from a path, gets
    // that text from a private copy instead of an empty second read.
    let copy = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => None,
        _ => Some(private_copy(&text)?),
    };
    plugin
        .load_config(copy.as_ref().map_or(path, |c| c.path()))
        .map_err(|e| Failure::usage(e.to_string()))?;
    Ok(plugin)
}

/// `text` in a new file of the temporary folder, removed when dropped
/// (the plugin copies the rules it keeps as it loads them).
fn private_copy(text: &str) -> Result<tempfile::NamedTempFile, Failure> {
    use std::io::Write;
    let fail = |e: std::io::Error| {
        Failure::usage(format!(
            "--tuner-config: cannot keep a copy of the rules read from a pipe in the temporary folder: {e}; name a regular file instead"
        ))
    };
    let mut file = tempfile::Builder::new()
        .prefix("collbench-tuner-")
        .suffix(".csv")
        .tempfile()
        .map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.flush().map_err(fail)?;
    Ok(file)
}

/// After a run with `--tuner-config`: whether NCCL asked the plugin and
/// followed the file, in one line.
pub fn tuner_config_note(path: &Path, plugin: &TunerPlugin) -> String {
    let c = plugin.counters();
    if c.calls == 0 {
        return format!(
            "collbench: warning: --tuner-config {}: NCCL never called collbench's tuner plugin (a one-rank communicator asks no tuner; otherwise an NCCL without the tuner interface); the file had no effect",
            path.display()
        );
    }
    format!(
        "collbench: --tuner-config {}: NCCL asked the tuner {} times; a rule applied {} times",
        path.display(),
        c.calls,
        c.applied
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_copy_holds_the_checked_text_and_goes_away() {
        let text = "allreduce,0,65536,ring,simple,-1,-1,-1,-1\n";
        let copy = private_copy(text).unwrap();
        let path = copy.path().to_path_buf();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("collbench-tuner-"));
        drop(copy);
        assert!(!path.exists());
    }
}
