//! `collbench tuner-plugin DIR`: writes the NCCL tuner plugin that travels
//! inside collbench to a file any NCCL program can load, so the CSV that
//! `collbench tune --csv` writes (and `run --tuner-config` measures) is
//! applied in production by the same code that measured it.
//!
//! NCCL 2.28.3's own example plugin, built from its source and loaded by
//! nccl-tests on two emulated hosts with a one-rule CSV, crashed in its
//! getCollInfo on both ranks (docs/tune.md says why); collbench's plugin
//! reads the same CSV format.

use crate::exit::{Failure, Outcome};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `collbench tuner-plugin`'s arguments.
#[derive(clap::Args, Debug)]
pub struct TunerPluginArgs {
    /// Folder to write libnccl-tuner-collbench.so into (made if missing).
    pub dir: PathBuf,
    /// Replace a plugin file already there.
    #[arg(long)]
    pub force: bool,
}

/// Writes the plugin and prints the two variables that load it.
pub fn run(a: &TunerPluginArgs) -> Result<Outcome, Failure> {
    let cannot = |e: std::io::Error| {
        Failure::usage(format!(
            "cannot write the tuner plugin into {}: {e}; choose a writable folder",
            a.dir.display()
        ))
    };
    std::fs::create_dir_all(&a.dir).map_err(cannot)?;
    let path = a.dir.join(collbench_nccl::tuner::PLUGIN_FILE);
    crate::outputs::claim("tuner-plugin", &path, a.force, &[])?;
    write_library(&path, collbench_nccl::tuner::PLUGIN_SO).map_err(cannot)?;
    let shown = path.canonicalize().unwrap_or(path);
    let text = usage_text(&shown);
    std::io::stdout()
        .write_all(text.as_bytes())
        .and_then(|_| std::io::stdout().flush())
        .map_err(|e| {
            Failure::usage(format!(
                "cannot write to standard output: {e} (the plugin was written to {})",
                shown.display()
            ))
        })?;
    Ok(Outcome::Ok)
}

/// Writes `bytes` beside `path` and renames it into place, executable: a
/// program that has the old file mapped keeps its copy intact.
fn write_library(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = path.with_extension(format!("so.tmp{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// What to tell the user: where the plugin is and how NCCL loads it.
fn usage_text(plugin: &Path) -> String {
    format!(
        "wrote {p} (NCCL tuner plugin, interface v5: NCCL 2.28)\n\
         load it in any NCCL program with a tuner CSV (collbench tune --csv FILE):\n\
         \x20 export NCCL_TUNER_PLUGIN={p}\n\
         \x20 export NCCL_TUNER_CONFIG_FILE=/path/to/tuner.csv\n",
        p = plugin.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_library_is_the_embedded_one_and_executable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.so");
        write_library(&p, b"\x7fELF..").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"\x7fELF..");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_text_names_both_variables() {
        let t = usage_text(Path::new("/opt/p/libnccl-tuner-collbench.so"));
        assert!(t.contains("export NCCL_TUNER_PLUGIN=/opt/p/libnccl-tuner-collbench.so"));
        assert!(t.contains("NCCL_TUNER_CONFIG_FILE"));
    }
}
