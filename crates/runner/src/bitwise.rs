//! Bitwise repeatability (`-B N`, issue #52): one reference run, then `N`
//! runs of the same case on the same input, each rank's output compared
//! bit for bit with the reference's (no tolerance: a float that moved by
//! one ULP is a difference). The backend only fills, runs and reads back
//! ([`Backend::outputs`]); the comparison is here, once, for every
//! backend. Differences are counted as nccl-tests counts them (elements
//! and bits, summed over repeats and ranks) and the first one is named:
//! the earliest repeat, its lowest rank, that rank's lowest element and
//! bit.

use crate::backend::{Backend, BackendError, CaseSpec};
use crate::placement_check::{PlacementCheck, Site};
use collbench_core::record::{BitPosition, Bitwise, Placement, RunSettings};

/// The check `-B N` adds to the plan: `repeats` runs compared with a
/// reference, and the test hook.
#[derive(Debug, Clone, Copy)]
pub struct Repeatability {
    /// Repeats compared with the reference run (at least 1).
    pub repeats: u32,
    /// Test hook: flip one bit of one rank's output in one repeat (the
    /// fault `-B` must name).
    pub flip: Option<BitFlip>,
}

impl Repeatability {
    /// The check for `-B repeats` (with the hook), `None` when 0 (off).
    pub fn from_flag(
        repeats: u32,
        flip: Option<BitFlip>,
    ) -> Option<std::sync::Arc<dyn PlacementCheck>> {
        (repeats > 0).then(|| std::sync::Arc::new(Repeatability { repeats, flip }) as _)
    }
}

impl PlacementCheck for Repeatability {
    fn measure(
        &self,
        backend: &mut dyn Backend,
        case: &CaseSpec,
        at: Site,
        share: &mut Placement,
    ) -> Result<(), BackendError> {
        let total = repeatability(
            backend,
            case,
            at.seed,
            self.repeats,
            at.first_rank,
            self.flip,
        )
        .map_err(|e| match e {
            BackendError::Unsupported(_) => BackendError::Unsupported(
                "bitwise repeatability (-B) is not supported by this backend".into(),
            ),
            e => e,
        })?;
        share.bitwise = Some(total);
        Ok(())
    }

    fn settings(&self, settings: &mut RunSettings) {
        settings.bitwise_repeats = u64::from(self.repeats);
    }
}

/// Test hook (`--test-bitwise-flip REPEAT:RANK:ELEMENT:BIT`): flip one
/// bit of one rank's output in one repeat, as silent corruption would,
/// to prove the comparison finds it and names it exactly. It flips the
/// copy the backend read back, so it works the same on every backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitFlip {
    /// The repeat (from 0; the reference run is not one).
    pub repeat: u64,
    /// The global rank whose output is flipped.
    pub rank: u64,
    /// The element of that rank's output (from 0).
    pub element: u64,
    /// The bit of the element (0: least significant).
    pub bit: u64,
}

impl BitFlip {
    /// Parses `REPEAT:RANK:ELEMENT:BIT` (whole numbers).
    pub fn parse(s: &str) -> Result<BitFlip, String> {
        let usage = || format!("'{s}' is not REPEAT:RANK:ELEMENT:BIT (whole numbers)");
        let n: Vec<u64> = s
            .split(':')
            .map(|t| t.parse().map_err(|_| usage()))
            .collect::<Result<_, _>>()?;
        match n[..] {
            [repeat, rank, element, bit] => Ok(BitFlip {
                repeat,
                rank,
                element,
                bit,
            }),
            _ => Err(usage()),
        }
    }

    /// Flips the bit in `out` (rank `rank`'s output of repeat `repeat`,
    /// elements of `elt` bytes, little-endian) when it is the hooked one;
    /// a position outside the output flips nothing.
    fn apply(self, repeat: u64, rank: u64, out: &mut [u8], elt: usize) {
        if (self.repeat, self.rank) != (repeat, rank) || self.bit >= 8 * elt as u64 {
            return;
        }
        let byte = self.element as usize * elt + self.bit as usize / 8;
        if let Some(b) = out.get_mut(byte) {
            *b ^= 1 << (self.bit % 8);
        }
    }
}

/// `got` against `reference` (one rank's output, elements of `elt` bytes,
/// little-endian): the elements and bits that differ, and the first,
/// named as repeat `repeat` of global rank `rank`.
pub fn compare(reference: &[u8], got: &[u8], elt: usize, repeat: u64, rank: u64) -> Bitwise {
    let mut diff = Bitwise::none_yet(0);
    // The common case, equal outputs, at memcmp's speed.
    if reference == got || elt == 0 {
        return diff;
    }
    let elements = reference.chunks_exact(elt).zip(got.chunks_exact(elt));
    for (element, (a, b)) in elements.enumerate() {
        let delta = a.iter().zip(b).map(|(x, y)| x ^ y);
        // Bits are numbered from the least significant bit of the
        // element's value: byte i holds bits 8i.. (little-endian).
        let mut bits = 0u64;
        let mut lowest = None;
        for (i, d) in delta.enumerate() {
            bits += d.count_ones() as u64;
            if d != 0 && lowest.is_none() {
                lowest = Some(8 * i as u64 + d.trailing_zeros() as u64);
            }
        }
        let Some(bit) = lowest else { continue };
        diff.different_elements += 1;
        diff.different_bits += bits;
        diff.first.get_or_insert(BitPosition {
            repeat,
            rank,
            element: element as u64,
            bit,
        });
    }
    diff
}

/// This process's ranks' repeatability of `case`: a reference run on the
/// input of `seed`, then `repeats` runs on the same input compared with
/// it. `first_rank` is the global rank of this process's first rank;
/// `flip` is the test hook.
fn repeatability(
    backend: &mut dyn Backend,
    case: &CaseSpec,
    seed: u64,
    repeats: u32,
    first_rank: usize,
    flip: Option<BitFlip>,
) -> Result<Bitwise, BackendError> {
    let elt = case.dtype.size_bytes();
    let reference = backend.outputs(case, seed)?;
    let mut total = Bitwise::none_yet(repeats as u64);
    for repeat in 0..repeats as u64 {
        let mut got = backend.outputs(case, seed)?;
        for (local, (want, out)) in reference.iter().zip(got.iter_mut()).enumerate() {
            let rank = (first_rank + local) as u64;
            if let Some(f) = flip {
                f.apply(repeat, rank, out, elt);
            }
            total.add(&compare(want, out, elt, repeat, rank));
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_outputs_differ_nowhere() {
        let a = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(compare(&a, &a, 4, 0, 0), Bitwise::none_yet(0));
    }

    #[test]
    fn bits_are_counted_and_the_first_is_named_from_the_least_significant() {
        // Two u32 elements; element 1 differs in bits 3 and 9 (bytes 0
        // and 1 of it), element 0 not at all.
        let a = [0u8; 8];
        let mut b = a;
        b[4] = 1 << 3;
        b[5] = 1 << 1;
        let d = compare(&a, &b, 4, 2, 5);
        assert_eq!((d.different_elements, d.different_bits), (1, 2));
        let first = d.first.unwrap();
        assert_eq!(
            (first.repeat, first.rank, first.element, first.bit),
            (2, 5, 1, 3)
        );
        // A float's sign bit is bit 31; a double's is 63.
        let mut neg = [0u8; 8];
        neg[7] = 0x80;
        let d = compare(&[0u8; 8], &neg, 8, 0, 0);
        assert_eq!(d.first.unwrap().bit, 63);
        assert_eq!(compare(&[0u8; 8], &neg, 4, 0, 0).first.unwrap().element, 1);
    }

    #[test]
    fn the_hook_flips_one_bit_of_one_rank_in_one_repeat() {
        let f = BitFlip::parse("3:1:2:9").unwrap();
        assert_eq!((f.repeat, f.rank, f.element, f.bit), (3, 1, 2, 9));
        let mut out = vec![0u8; 16];
        f.apply(2, 1, &mut out, 4);
        f.apply(3, 0, &mut out, 4);
        assert!(out.iter().all(|b| *b == 0), "other repeats and ranks");
        f.apply(3, 1, &mut out, 4);
        assert_eq!(out[9], 1 << 1);
        let d = compare(&[0u8; 16], &out, 4, 3, 1);
        let p = d.first.unwrap();
        assert_eq!((p.element, p.bit, d.different_bits), (2, 9, 1));
        // Outside the output: nothing.
        let mut small = vec![0u8; 4];
        BitFlip::parse("0:0:7:0")
            .unwrap()
            .apply(0, 0, &mut small, 4);
        BitFlip::parse("0:0:0:32")
            .unwrap()
            .apply(0, 0, &mut small, 4);
        assert_eq!(small, [0; 4]);
        for bad in ["1:2:3", "a:1:2:3", "1:2:3:4:5", "-1:0:0:0"] {
            assert_eq!(
                BitFlip::parse(bad).unwrap_err(),
                format!("'{bad}' is not REPEAT:RANK:ELEMENT:BIT (whole numbers)")
            );
        }
    }

    #[test]
    fn the_earliest_repeat_then_the_lowest_rank_comes_first() {
        let at = |repeat, rank, element| Bitwise {
            repeats: 0,
            different_elements: 1,
            different_bits: 1,
            first: Some(BitPosition {
                repeat,
                rank,
                element,
                bit: 0,
            }),
        };
        let mut total = Bitwise::none_yet(4);
        for d in [at(2, 0, 0), at(1, 3, 9), at(1, 2, 50), at(3, 0, 0)] {
            total.add(&d);
        }
        let p = total.first.unwrap();
        assert_eq!((p.repeat, p.rank, p.element), (1, 2, 50));
        assert_eq!((total.repeats, total.different_bits), (4, 4));
    }
}
