//! Pinning the calling thread to one CPU (the thread that launches the
//! collectives).

/// The CPU for `slot` (this process's index among the job's processes on
/// its machine) among the `allowed` ones: skip the first (it takes most
/// interrupts) and spread the slots, every other CPU first (hyperthread
/// siblings are often adjacent), then the ones between, the first last;
/// wraps past one slot per CPU. None with fewer than two CPUs.
fn pick_cpu(allowed: &[usize], slot: usize) -> Option<usize> {
    let n = allowed.len();
    if n < 2 {
        return None;
    }
    let order = (1..n).step_by(2).chain((2..n).step_by(2)).chain([0]);
    order.into_iter().nth(slot % n).map(|i| allowed[i])
}

/// Pins the calling thread to the CPU [`pick_cpu`] chooses within its
/// current affinity mask; returns that CPU, or `None` when it left the
/// thread alone.
pub(crate) fn pin_current_thread(slot: usize) -> Option<usize> {
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
        let cpu = pick_cpu(&allowed, slot)?;
        let _ = WIDE.set(Mask(set));
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
        Some(cpu)
    }
}

/// A thread's affinity mask.
#[derive(Clone, Copy)]
struct Mask(libc::cpu_set_t);

/// The launching thread's mask before [`pin_current_thread`] narrowed it.
static WIDE: std::sync::OnceLock<Mask> = std::sync::OnceLock::new();

/// Runs `f` with the calling thread's mask widened again to what it was
/// before pinning, then restores the mask it had. NCCL's proxy and
/// network threads inherit the mask of the thread that creates a
/// communicator: made from the pinned thread, a later communicator's
/// threads would share its one CPU (host tests' pair communicators ran
/// 5-7x slower on sockets). So do the threads of a probe run after the
/// rows (the loopback probe read 3.7 GB/s on one CPU, 22 on sixteen).
pub fn unpinned<T>(f: impl FnOnce() -> T) -> T {
    let Some(wide) = WIDE.get() else {
        return f();
    };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: as in pin_current_thread: plain bit arrays of exactly
    // `size` bytes, read and written for this thread only (pid 0).
    unsafe {
        let mut now: libc::cpu_set_t = std::mem::zeroed();
        let saved = libc::sched_getaffinity(0, size, &mut now) == 0;
        libc::sched_setaffinity(0, size, &wide.0);
        let out = f();
        if saved {
            libc::sched_setaffinity(0, size, &now);
        }
        out
    }
}

/// A CPU mask for child processes: the mask of the thread that made it,
/// given to every process started with [`ChildMask::apply`]. A process
/// inherits the mask of the thread that forks it, for all its threads
/// (NCCL's proxy and socket threads too): started from the pinned
/// launching thread, a child would run everything on one CPU.
#[derive(Clone, Copy)]
pub struct ChildMask(libc::cpu_set_t);

impl ChildMask {
    /// The calling thread's mask, if the system says (take it before
    /// the thread is pinned).
    pub fn of_this_thread() -> Option<ChildMask> {
        // SAFETY: as in pin_current_thread: a plain bit array of exactly
        // its size, written for this thread (pid 0).
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            (libc::sched_getaffinity(0, size, &mut set) == 0).then_some(ChildMask(set))
        }
    }

    /// Makes `cmd`'s process start with this mask.
    pub fn apply(self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the forked child before exec, where
        // only async-signal-safe calls are allowed: sched_setaffinity is a
        // plain system call on a mask copied into the closure. Its failure
        // leaves the inherited mask, no reason to fail the child.
        unsafe {
            cmd.pre_exec(move || {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0);
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_skips_the_first_cpu_and_gives_each_slot_its_own() {
        let allowed = [0, 1, 2, 3, 4, 5, 6, 7];
        let picked: Vec<_> = (0..9).map(|s| pick_cpu(&allowed, s).unwrap()).collect();
        assert_eq!(picked, [1, 3, 5, 7, 2, 4, 6, 0, 1]);
        assert_eq!(pick_cpu(&[2, 9], 0), Some(9));
        assert_eq!(pick_cpu(&[2, 9], 1), Some(2));
        assert_eq!(pick_cpu(&[5], 0), None);
    }

    #[test]
    fn a_child_starts_with_the_mask_taken_before_pinning() {
        let mask = ChildMask::of_this_thread().unwrap();
        let wide = std::thread::spawn(move || {
            let allowed = |s: &str| {
                s.lines()
                    .find(|l| l.starts_with("Cpus_allowed_list"))
                    .map(str::to_string)
            };
            let own = allowed(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
            let pinned_to = pin_current_thread(0);
            let mut cmd = std::process::Command::new("cat");
            cmd.arg("/proc/self/status");
            let pinned = cmd.output().unwrap();
            let mut cmd = std::process::Command::new("cat");
            cmd.arg("/proc/self/status");
            mask.apply(&mut cmd);
            let masked = cmd.output().unwrap();
            (
                own,
                pinned_to.map(|_| allowed(&String::from_utf8_lossy(&pinned.stdout))),
                allowed(&String::from_utf8_lossy(&masked.stdout)),
            )
        })
        .join()
        .unwrap();
        let (own, pinned, masked) = wide;
        assert_eq!(masked, own);
        // With two CPUs or more the thread was pinned, and a child started
        // without the mask inherits the one CPU.
        if let Some(pinned) = pinned {
            assert_ne!(pinned, own);
        }
    }
}
