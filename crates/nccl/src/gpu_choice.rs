//! Which GPUs a process drives, from its local rank.

/// Indices (into the devices this process can see) of the GPUs that the
/// process with `local_rank` drives when each process drives
/// `gpus_per_process` GPUs (`-g N`; 1 under a launcher by default).
///
/// - When `cuda_visible_devices` lists exactly `gpus_per_process` devices,
///   the launcher already gave this process its own GPUs (Slurm
///   `--gpus-per-task`, Kubernetes device plugins): take them all, `0..g`.
/// - Otherwise process `local_rank` takes the `g` devices after the first
///   `local_rank * g`, wrapping around the visible list like nccl-tests
///   (more processes than GPUs share, rather than fail here).
/// - An empty list (`CUDA_VISIBLE_DEVICES=` or starting with an invalid
///   entry such as `-1`) means no GPU is visible: an empty result.
/// - `None` (variable unset): every device is visible but their number is
///   unknown here, so no wrapping; the backend checks against its count.
///
/// CUDA stops reading the list at the first invalid entry, and so does this.
pub fn gpu_for_local_rank(
    local_rank: usize,
    gpus_per_process: usize,
    cuda_visible_devices: Option<&str>,
) -> Vec<usize> {
    let g = gpus_per_process;
    let Some(list) = cuda_visible_devices else {
        return (local_rank * g..local_rank * g + g).collect();
    };
    let visible = visible_count(list);
    if visible == 0 {
        return Vec::new();
    }
    if visible == g {
        return (0..g).collect();
    }
    (0..g).map(|i| (local_rank * g + i) % visible).collect()
}

/// Number of devices a CUDA_VISIBLE_DEVICES value exposes: entries up to
/// the first invalid one (empty, or a negative index).
fn visible_count(list: &str) -> usize {
    list.split(',')
        .map(str::trim)
        .take_while(|e| !e.is_empty() && !e.starts_with('-'))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_visible_devices_counts_from_zero() {
        assert_eq!(gpu_for_local_rank(0, 1, None), [0]);
        assert_eq!(gpu_for_local_rank(3, 1, None), [3]);
        assert_eq!(gpu_for_local_rank(1, 2, None), [2, 3]);
    }

    #[test]
    fn launcher_isolated_gpus_are_taken_whole() {
        // srun --gpus-per-task=1: each task sees only its own GPU.
        assert_eq!(gpu_for_local_rank(5, 1, Some("5")), [0]);
        assert_eq!(gpu_for_local_rank(1, 2, Some("GPU-aa,GPU-bb")), [0, 1]);
    }

    #[test]
    fn shared_visible_list_is_split_by_local_rank() {
        assert_eq!(gpu_for_local_rank(2, 1, Some("0,1,2,3")), [2]);
        assert_eq!(gpu_for_local_rank(1, 2, Some("4,5,6,7")), [2, 3]);
        // More processes than GPUs: wrap around.
        assert_eq!(gpu_for_local_rank(5, 1, Some("0,1,2,3")), [1]);
    }

    #[test]
    fn nothing_visible() {
        assert!(gpu_for_local_rank(0, 1, Some("")).is_empty());
        assert!(gpu_for_local_rank(0, 1, Some("-1")).is_empty());
        // CUDA ignores everything after an invalid entry.
        assert_eq!(gpu_for_local_rank(1, 1, Some("0,-1,2")), [0]);
    }
}
