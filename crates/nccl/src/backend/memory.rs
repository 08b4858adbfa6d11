//! `-M 1`: GPU memory the run took, as nccl-tests measures it: free
//! memory (cuMemGetInfo) before and after communicator creation
//! ("Initialization"), around buffer allocation and registration
//! ("User-Allocated"), and from then to the report ("Collective": what
//! NCCL allocated while running). Each figure is the largest over this
//! process's GPUs.

use collbench_runner::MemoryUsage;

/// The running figures; arithmetic only, so it is tested without a GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct MemoryWatch {
    initialization: i64,
    user_allocated: i64,
    /// Free bytes per GPU once the buffers were in place (or, before any
    /// buffer, once the communicators were).
    baseline: Vec<i64>,
}

fn largest_drop(before: &[i64], after: &[i64]) -> i64 {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| b - a)
        .max()
        .unwrap_or(0)
}

impl MemoryWatch {
    /// Free memory per GPU before and after communicator creation.
    pub(crate) fn after_init(before: &[i64], after: &[i64]) -> MemoryWatch {
        MemoryWatch {
            initialization: largest_drop(before, after),
            user_allocated: 0,
            baseline: after.to_vec(),
        }
    }

    /// Free memory per GPU around a buffer (re)allocation: buffers grow
    /// with the sizes, so the largest drop stands.
    pub(crate) fn buffers(&mut self, before: &[i64], after: &[i64]) {
        self.user_allocated = self.user_allocated.max(largest_drop(before, after));
        self.baseline = after.to_vec();
    }

    /// The three figures, with free memory per GPU now.
    pub(crate) fn usage(&self, now: &[i64]) -> MemoryUsage {
        MemoryUsage {
            initialization: self.initialization,
            user_allocated: self.user_allocated,
            collective: largest_drop(&self.baseline, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_the_largest_drop_over_gpus() {
        let mut w = MemoryWatch::after_init(&[1000, 1000], &[900, 800]);
        w.buffers(&[800, 800], &[500, 600]);
        w.buffers(&[900, 900], &[850, 850]);
        let u = w.usage(&[840, 800]);
        assert_eq!(
            u,
            MemoryUsage {
                initialization: 200,
                user_allocated: 300,
                collective: 50,
            }
        );
    }
}
