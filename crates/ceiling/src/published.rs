//! Published busbw figures of described machines
//! (`topologies/published/figures.toml`): what vendors and the anchors
//! measured, for the tests that hold the ceiling model to them
//! (every figure at or below its ceiling, `check` never warning on one)
//! and for the table in bench/results/ceiling.md.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One published large-size figure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// Topology file name under `topologies/`, without `.toml`.
    pub topology: String,
    /// The table's node count.
    pub hosts: u64,
    /// The collective, as collbench names it.
    pub op: String,
    /// nccl-tests' NCCL_TESTS_SPLIT_MASK, where the figure is of a split job.
    #[serde(default)]
    pub split_mask: Option<u64>,
    /// The published busbw, GB/s.
    pub busbw_gbps: f64,
    /// Where it was published.
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FigureFile {
    figures: Vec<Figure>,
}

/// The repository's `topologies/` folder, from a crate's manifest folder.
pub fn topologies_dir(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("../../topologies")
}

/// Reads `topologies/published/figures.toml` under `topologies`.
pub fn figures(topologies: &Path) -> Result<Vec<Figure>, String> {
    let path = topologies.join("published/figures.toml");
    let text = collbench_core::read_limit::read_to_string(&path, 1 << 20, "published figures")
        .map_err(|e| e.to_string())?;
    toml::from_str::<FigureFile>(&text)
        .map(|f| f.figures)
        .map_err(|e| format!("{}: {}", path.display(), e.message()))
}
