//! Exact verification patterns (see docs/verification.md).
//!
//! Every input element is a function of (seed, rank, index) whose values
//! keep every partial reduction exact in the data type, so the expected
//! output is known by formula whatever order a library reduces in. Every
//! output element of a collective maps to a [`Source`]: one rank's input
//! element, or the reduction over all ranks of one input index. Backends
//! (host or GPU kernels) implement the same formulas.

use crate::alltoallv::PeerCounts;
use crate::{Collective, Counts, DataType, ReduceOp};

/// What one output element must equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `input(rank, index)`
    Input { rank: usize, index: u64 },
    /// The reduction over all ranks of `input(·, index)`.
    Reduced { index: u64 },
    /// Not defined by the collective (e.g. a non-root's reduce output).
    Unchecked,
}

/// Maps output element `j` of `rank`'s receive buffer to its source.
///
/// alltoallv's layout is not in [`Counts`] (it depends on the run's
/// traffic): this returns `Unchecked` for it, and checkers of alltoallv use
/// [`alltoallv_source`] with the case's [`PeerCounts`].
pub fn output_source(
    coll: Collective,
    counts: &Counts,
    world_size: usize,
    rank: usize,
    root: usize,
    j: u64,
) -> Source {
    let n = world_size as u64;
    let base = counts.param_count.max(1);
    match coll {
        Collective::AllReduce => Source::Reduced { index: j },
        Collective::ReduceScatter => Source::Reduced {
            index: rank as u64 * counts.recv_count + j,
        },
        Collective::AllGather | Collective::HyperCube => Source::Input {
            rank: (j / base) as usize,
            index: j % base,
        },
        Collective::AllToAll => Source::Input {
            rank: (j / base) as usize,
            index: rank as u64 * base + j % base,
        },
        Collective::Broadcast => Source::Input {
            rank: root,
            index: j,
        },
        Collective::Reduce if rank == root => Source::Reduced { index: j },
        Collective::Reduce => Source::Unchecked,
        Collective::SendRecv => Source::Input {
            rank: ((rank as u64 + n - 1) % n) as usize,
            index: j,
        },
        Collective::Gather if rank == root => Source::Input {
            rank: (j / base) as usize,
            index: j % base,
        },
        Collective::Gather => Source::Unchecked,
        Collective::Scatter => Source::Input {
            rank: root,
            index: rank as u64 * base + j,
        },
        Collective::AllToAllV => Source::Unchecked,
    }
}

/// Maps output element `j` of `rank`'s alltoallv receive buffer to its
/// source: the segments from ranks 0, 1, ... in order, each the part of
/// the sender's input that it sends to `rank`. Past what `rank` receives
/// (buffers are sized for the busiest rank) nothing is defined.
pub fn alltoallv_source(peers: &PeerCounts, rank: usize, j: u64) -> Source {
    match peers.source(rank, j) {
        Some((src, index)) => Source::Input { rank: src, index },
        None => Source::Unchecked,
    }
}

/// The input pattern of one checked case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    pub seed: u64,
    pub world_size: usize,
    pub dtype: DataType,
    /// The reduction, or `None` for collectives that only move data.
    pub redop: Option<ReduceOp>,
}

/// 64-bit mix (splitmix64's finaliser): cheap on CPUs and GPUs, and
/// neighbouring indices get unrelated values, so shifted chunks show up.
#[inline(always)]
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Pattern {
    /// Values are drawn from `0..modulus()`, chosen so that the sum (or
    /// premultiplied sum) over all ranks stays exact in the type.
    pub fn modulus(&self) -> u64 {
        let limit = self.dtype.exact_limit();
        let n = self.world_size.max(1) as u64;
        match self.redop {
            None | Some(ReduceOp::Min) | Some(ReduceOp::Max) => (limit + 1).min(1 << 16),
            Some(ReduceOp::Sum) | Some(ReduceOp::Avg) => limit / n + 1,
            Some(ReduceOp::MulSum) => limit / (2 * n) + 1,
            // Products use 1s and 2s, see `input`.
            Some(ReduceOp::Prod) => 2,
        }
    }

    /// Input element `index` of `rank`.
    #[inline(always)]
    pub fn input(&self, rank: usize, index: u64) -> f64 {
        let h = mix(index ^ ((rank as u64) << 40) ^ self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        match self.redop {
            // At most four ranks contribute a 2, so every partial product
            // is a power of two no larger than 16: exact in every type.
            Some(ReduceOp::Prod) => {
                if rank < 4 && h & 1 == 1 {
                    2.0
                } else {
                    1.0
                }
            }
            _ => (h % self.modulus()) as f64,
        }
    }

    /// The per-rank scalar of `mulsum` (premultiplied sum).
    #[inline(always)]
    pub fn scalar(&self, rank: usize) -> f64 {
        (1 + rank % 2) as f64
    }

    /// The exact reduction over all ranks of `input(·, index)`, before any
    /// rounding to the data type (for avg: the exact quotient).
    pub fn reduced(&self, index: u64) -> f64 {
        let n = self.world_size;
        let op = self.redop.unwrap_or(ReduceOp::Sum);
        let mut acc = match op {
            ReduceOp::Prod => 1.0,
            ReduceOp::Min => f64::INFINITY,
            ReduceOp::Max => f64::NEG_INFINITY,
            _ => 0.0,
        };
        for r in 0..n {
            let v = self.input(r, index);
            acc = match op {
                ReduceOp::Sum | ReduceOp::Avg => acc + v,
                ReduceOp::Prod => acc * v,
                ReduceOp::Min => acc.min(v),
                ReduceOp::Max => acc.max(v),
                ReduceOp::MulSum => acc + v * self.scalar(r),
            };
        }
        if op == ReduceOp::Avg {
            if self.dtype.is_float() {
                acc / n as f64
            } else {
                (acc / n as f64).trunc()
            }
        } else {
            acc
        }
    }

    /// The value output element `j` must hold (f64, before rounding to the
    /// type), or `None` where the collective leaves it undefined.
    pub fn expected(&self, source: Source) -> Option<f64> {
        match source {
            Source::Input { rank, index } => Some(self.input(rank, index)),
            Source::Reduced { index } => Some(self.reduced(index)),
            Source::Unchecked => None,
        }
    }

    /// ULPs of tolerance for this case: 2 for floating avg (libraries may
    /// pre-multiply by 1/n), 0 otherwise.
    pub fn tolerance_ulps(&self) -> u64 {
        if self.redop == Some(ReduceOp::Avg) && self.dtype.is_float() {
            2
        } else {
            0
        }
    }
}

/// Whether an output element is wrong: its bits `got` differ from `want`
/// by more than `tolerance_ulps` units in the last place (0: any
/// difference), both raw bits of `size_bytes` width. Every backend's
/// check counts with this.
pub fn is_wrong(got: u64, want: u64, tolerance_ulps: u64, size_bytes: usize) -> bool {
    got != want && (tolerance_ulps == 0 || ulp_distance(got, want, size_bytes) > tolerance_ulps)
}

/// Distance in units in the last place between two values of the same
/// float type given as raw bits of `size_bytes` width (sign-magnitude
/// ordering). Identical bits are 0 apart.
pub fn ulp_distance(a: u64, b: u64, size_bytes: usize) -> u64 {
    if a == b {
        return 0;
    }
    let bits = size_bytes as u32 * 8;
    let sign = 1u64 << (bits - 1);
    let key = |x: u64| -> i128 {
        if x & sign != 0 {
            -((x & (sign - 1)) as i128)
        } else {
            x as i128
        }
    };
    (key(a) - key(b)).unsigned_abs() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::Element;
    use crate::with_element;

    fn pattern(n: usize, dtype: DataType, redop: Option<ReduceOp>) -> Pattern {
        Pattern {
            seed: 7,
            world_size: n,
            dtype,
            redop,
        }
    }

    /// Reducing in any order gives the same bits in the type itself.
    #[test]
    fn reductions_are_order_independent_and_exact() {
        for dt in DataType::ALL {
            for op in ReduceOp::ALL {
                for n in [1usize, 2, 3, 5, 8] {
                    let p = pattern(n, dt, Some(op));
                    with_element!(dt, T => {
                        for i in 0..200u64 {
                            let fold = |order: &mut dyn Iterator<Item = usize>| -> T {
                                let mut acc: Option<T> = None;
                                for r in order {
                                    let mut v = T::from_value(p.input(r, i));
                                    if op == ReduceOp::MulSum {
                                        v = v.mul(T::from_value(p.scalar(r)));
                                    }
                                    acc = Some(match (acc, op) {
                                        (None, _) => v,
                                        (Some(a), ReduceOp::Prod) => a.mul(v),
                                        (Some(a), ReduceOp::Min) => a.min_with(v),
                                        (Some(a), ReduceOp::Max) => a.max_with(v),
                                        (Some(a), _) => a.add(v),
                                    });
                                }
                                acc.unwrap()
                            };
                            let fwd = fold(&mut (0..n));
                            let rev = fold(&mut (0..n).rev());
                            assert_eq!(fwd.bits(), rev.bits(), "{dt} {op} n={n} i={i}");
                            if op != ReduceOp::Avg {
                                assert_eq!(fwd.value(), p.reduced(i), "{dt} {op} n={n} i={i}");
                            }
                        }
                    });
                }
            }
        }
    }

    #[test]
    fn values_vary_by_rank_and_index() {
        let p = pattern(8, DataType::Float, None);
        let row: Vec<f64> = (0..64).map(|i| p.input(0, i)).collect();
        let other: Vec<f64> = (0..64).map(|i| p.input(1, i)).collect();
        assert_ne!(row, other);
        assert!(row.windows(2).filter(|w| w[0] == w[1]).count() < 4);
        let reseeded = Pattern { seed: 8, ..p };
        assert_ne!(
            row,
            (0..64).map(|i| reseeded.input(0, i)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn sources_cover_every_collective() {
        let counts = Collective::AllToAll.counts(64, 4, 2);
        assert_eq!(
            output_source(Collective::AllToAll, &counts, 2, 1, 0, 0),
            Source::Input { rank: 0, index: 8 }
        );
        let counts = Collective::SendRecv.counts(64, 4, 4);
        assert_eq!(
            output_source(Collective::SendRecv, &counts, 4, 0, 0, 3),
            Source::Input { rank: 3, index: 3 }
        );
        assert_eq!(
            output_source(Collective::Reduce, &counts, 4, 1, 0, 3),
            Source::Unchecked
        );
        // alltoallv, 2 ranks, 1024 B each, fully distance-weighted: each
        // rank sends all 1024 B (256 floats) to the other.
        let peers = crate::alltoallv::Traffic::default().peer_counts(128, 4, 2);
        assert_eq!(
            alltoallv_source(&peers, 1, 5),
            Source::Input { rank: 0, index: 5 }
        );
        assert_eq!(alltoallv_source(&peers, 1, 256), Source::Unchecked);
    }

    #[test]
    fn ulps() {
        assert_eq!(
            ulp_distance(1.0f32.to_bits() as u64, 1.0f32.to_bits() as u64, 4),
            0
        );
        let next = (1.0f32.to_bits() + 2) as u64;
        assert_eq!(ulp_distance(1.0f32.to_bits() as u64, next, 4), 2);
        assert_eq!(ulp_distance(0x8000_0001, 0x0000_0001, 4), 2);
    }
}
