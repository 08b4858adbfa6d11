//! Pinning the calling thread to one CPU (the thread that launches the
//! collectives).

/// The CPU for `local_rank` among the `allowed` ones: skip the first (it
/// takes most interrupts) and spread local ranks; none with fewer than two.
fn pick_cpu(allowed: &[usize], local_rank: usize) -> Option<usize> {
    (allowed.len() >= 2).then(|| allowed[(1 + 2 * local_rank) % allowed.len()])
}

/// Pins the calling thread to the CPU [`pick_cpu`] chooses within its
/// current affinity mask; returns that CPU, or `None` when it left the
/// thread alone.
pub(crate) fn pin_current_thread(local_rank: usize) -> Option<usize> {
    // SAFETY: cpu_set_t is a plain bit array (all zeroes is the empty
    // set); sched_getaffinity/sched_setaffinity read and write exactly
    // size_of::<cpu_set_t>() bytes of these locals, for this thread (pid
    // 0), and CPU_ISSET/CPU_SET index below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        let cpu = pick_cpu(&allowed, local_rank)?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
        Some(cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_skips_the_first_cpu_and_spreads_local_ranks() {
        let allowed = [0, 1, 2, 3, 4, 5, 6, 7];
        assert_eq!(pick_cpu(&allowed, 0), Some(1));
        assert_eq!(pick_cpu(&allowed, 1), Some(3));
        assert_eq!(pick_cpu(&allowed, 4), Some(1));
        assert_eq!(pick_cpu(&[2, 9], 0), Some(9));
        assert_eq!(pick_cpu(&[5], 0), None);
    }
}
