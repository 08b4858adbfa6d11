//! Lookup tables that make the 8-bit float types cheap on the host.
//!
//! The `float8` crate converts in software, and the CPU backend's reductions
//! and checks convert every element several times; at 64 MiB and 8 ranks that
//! dominated whole sweeps. Every table here is filled by calling the crate's
//! own conversions once per entry, so results are bit-identical to the direct
//! formulas (`from_f32(to_f32(a) + to_f32(b))` and so on): only faster.

use float8::{F8E4M3, F8E5M2};
use half::f16;
use std::sync::OnceLock;

/// Decode, encode and arithmetic tables for one 8-bit float format.
pub struct F8Tables {
    /// bits -> value.
    pub decode: [f32; 256],
    /// `(a << 8) | b` -> bits of `a + b`, rounded as `from_f32` rounds.
    pub add: Box<[u8]>,
    /// `(a << 8) | b` -> bits of `a * b`.
    pub mul: Box<[u8]>,
    /// f16 bits -> f8 bits of the same value, for values f16 holds exactly.
    from_f16: Box<[u8]>,
}

impl F8Tables {
    fn build(from_f32: fn(f32) -> u8, to_f32: fn(u8) -> f32) -> Self {
        let decode: [f32; 256] = std::array::from_fn(|b| to_f32(b as u8));
        let pairs = |f: &dyn Fn(f32, f32) -> f32| -> Box<[u8]> {
            (0..1usize << 16)
                .map(|i| from_f32(f(decode[i >> 8], decode[i & 0xff])))
                .collect()
        };
        let from_f16 = (0..=u16::MAX)
            .map(|h| from_f32(f16::from_bits(h).to_f32()))
            .collect();
        F8Tables {
            add: pairs(&|a, b| a + b),
            mul: pairs(&|a, b| a * b),
            decode,
            from_f16,
        }
    }

    /// The f8 bits nearest `x`, exactly as the crate's `from_f32` rounds.
    #[inline(always)]
    pub fn encode(&self, x: f32, slow: fn(f32) -> u8) -> u8 {
        // Every f16 value converts through the table; the pattern values are
        // small integers, which f16 always holds exactly.
        let h = f16::from_f32(x);
        if h.to_f32() == x {
            self.from_f16[h.to_bits() as usize]
        } else {
            slow(x)
        }
    }

    /// Index of the pair `(a, b)` in `add` and `mul`.
    #[inline(always)]
    pub fn pair(a: u8, b: u8) -> usize {
        ((a as usize) << 8) | b as usize
    }
}

/// The tables for [`F8E4M3`], built on first use.
pub fn e4m3() -> &'static F8Tables {
    static T: OnceLock<F8Tables> = OnceLock::new();
    T.get_or_init(|| F8Tables::build(e4m3_from_f32, |b| F8E4M3::from_bits(b).to_f32()))
}

/// The tables for [`F8E5M2`], built on first use.
pub fn e5m2() -> &'static F8Tables {
    static T: OnceLock<F8Tables> = OnceLock::new();
    T.get_or_init(|| F8Tables::build(e5m2_from_f32, |b| F8E5M2::from_bits(b).to_f32()))
}

/// The crate's conversion, as bits (the tables' slow path).
pub fn e4m3_from_f32(x: f32) -> u8 {
    F8E4M3::from_f32(x).to_bits()
}

/// The crate's conversion, as bits (the tables' slow path).
pub fn e5m2_from_f32(x: f32) -> u8 {
    F8E5M2::from_f32(x).to_bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables agree with the crate's formulas on every input pair.
    #[test]
    fn tables_match_direct_conversions() {
        for (t, from, to) in [
            (
                e4m3(),
                e4m3_from_f32 as fn(f32) -> u8,
                (|b| F8E4M3::from_bits(b).to_f32()) as fn(u8) -> f32,
            ),
            (e5m2(), e5m2_from_f32, |b| F8E5M2::from_bits(b).to_f32()),
        ] {
            for a in 0..=255u8 {
                assert_eq!(t.decode[a as usize].to_bits(), to(a).to_bits());
                for b in 0..=255u8 {
                    let (x, y) = (to(a), to(b));
                    assert_eq!(t.add[F8Tables::pair(a, b)], from(x + y), "{a} + {b}");
                    assert_eq!(t.mul[F8Tables::pair(a, b)], from(x * y), "{a} * {b}");
                }
            }
            for x in [
                0.0f32,
                -0.0,
                1.0,
                3.0,
                17.0,
                240.0,
                448.0,
                1e6,
                0.1,
                -2.5,
                f32::NAN,
                f32::INFINITY,
            ] {
                assert_eq!(t.encode(x, from), from(x), "{x}");
            }
        }
    }
}
