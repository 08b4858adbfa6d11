//! Typed elements: the arithmetic a host-side backend needs for each
//! [`DataType`], and exact conversion of the verification patterns' values.

use crate::f8_tables::{self, F8Tables};
use crate::DataType;

/// A host-side element of one [`DataType`].
///
/// Reductions on the narrow float types go through `f32`, which is exact for
/// the small integer values the verification patterns use.
pub trait Element: Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// The data type this element is.
    const DTYPE: DataType;
    /// Converts a pattern value (a small integer or power of two).
    fn from_value(v: f64) -> Self;
    /// The value as f64.
    fn value(self) -> f64;
    /// The raw bits, for bit-exact comparison.
    fn bits(self) -> u64;
    /// A value no valid result can have (all bits set: NaN for floats,
    /// the largest value for integers).
    fn poison() -> Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn min_with(self, o: Self) -> Self;
    fn max_with(self, o: Self) -> Self;
}

/// Rust's integers and floats: `as` conversions, and the raw bits, poison
/// and the four binary operations (add, mul, min_with, max_with) as given
/// per kind below.
macro_rules! primitive_element {
    ($t:ty, $dt:ident, bits: $bits:expr, poison: $poison:expr, $($op:ident: $f:expr),+) => {
        impl Element for $t {
            const DTYPE: DataType = DataType::$dt;
            #[inline(always)]
            fn from_value(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn value(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn bits(self) -> u64 {
                $bits(self)
            }
            #[inline(always)]
            fn poison() -> Self {
                $poison
            }
            $(
                #[inline(always)]
                fn $op(self, o: Self) -> Self {
                    $f(self, o)
                }
            )+
        }
    };
}

/// Integers: wrapping arithmetic; poison is all bits set.
macro_rules! int_element {
    ($t:ty, $dt:ident) => {
        primitive_element!($t, $dt,
            bits: |x: $t| x as u64,
            poison: <$t>::from_ne_bytes([0xff; std::mem::size_of::<$t>()]),
            add: <$t>::wrapping_add, mul: <$t>::wrapping_mul,
            min_with: Ord::min, max_with: Ord::max);
    };
}

int_element!(i8, Int8);
int_element!(u8, Uint8);
int_element!(i32, Int32);
int_element!(u32, Uint32);
int_element!(i64, Int64);
int_element!(u64, Uint64);

/// f32 and f64: IEEE arithmetic; poison is the all-ones NaN.
macro_rules! float_element {
    ($t:ty, $dt:ident, $bits:ty) => {
        primitive_element!($t, $dt,
            bits: |x: $t| x.to_bits() as u64,
            poison: <$t>::from_bits(<$bits>::MAX),
            add: std::ops::Add::add, mul: std::ops::Mul::mul,
            min_with: <$t>::min, max_with: <$t>::max);
    };
}

float_element!(f32, Float, u32);
float_element!(f64, Double, u64);

/// Narrow floats: arithmetic through f32, then rounded back.
macro_rules! narrow_element {
    ($t:ty, $dt:ident, $from_f32:expr, $to_f32:expr, $to_bits:expr, $poison:expr) => {
        impl Element for $t {
            const DTYPE: DataType = DataType::$dt;
            #[inline(always)]
            fn from_value(v: f64) -> Self {
                $from_f32(v as f32)
            }
            #[inline(always)]
            fn value(self) -> f64 {
                $to_f32(self) as f64
            }
            #[inline(always)]
            fn bits(self) -> u64 {
                $to_bits(self) as u64
            }
            #[inline(always)]
            fn poison() -> Self {
                $poison
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                $from_f32($to_f32(self) + $to_f32(o))
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                $from_f32($to_f32(self) * $to_f32(o))
            }
            #[inline(always)]
            fn min_with(self, o: Self) -> Self {
                if $to_f32(o) < $to_f32(self) {
                    o
                } else {
                    self
                }
            }
            #[inline(always)]
            fn max_with(self, o: Self) -> Self {
                if $to_f32(o) > $to_f32(self) {
                    o
                } else {
                    self
                }
            }
        }
    };
}

narrow_element!(
    f16,
    Half,
    f16::from_f32,
    f16::to_f32,
    f16::to_bits,
    f16::from_bits(0xffff)
);
narrow_element!(
    bf16,
    Bfloat16,
    bf16::from_f32,
    bf16::to_f32,
    bf16::to_bits,
    bf16::from_bits(0xffff)
);
/// 8-bit floats: the same formulas as `narrow_element!`, served from
/// tables filled with those formulas (see [`crate::f8_tables`]).
macro_rules! f8_element {
    ($t:ty, $dt:ident, $tables:path, $from_f32:path) => {
        impl Element for $t {
            const DTYPE: DataType = DataType::$dt;
            #[inline(always)]
            fn from_value(v: f64) -> Self {
                <$t>::from_bits($tables().encode(v as f32, $from_f32))
            }
            #[inline(always)]
            fn value(self) -> f64 {
                $tables().decode[self.to_bits() as usize] as f64
            }
            #[inline(always)]
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline(always)]
            fn poison() -> Self {
                <$t>::from_bits(0xff)
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                <$t>::from_bits($tables().add[F8Tables::pair(self.to_bits(), o.to_bits())])
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                <$t>::from_bits($tables().mul[F8Tables::pair(self.to_bits(), o.to_bits())])
            }
            #[inline(always)]
            fn min_with(self, o: Self) -> Self {
                let d = &$tables().decode;
                if d[o.to_bits() as usize] < d[self.to_bits() as usize] {
                    o
                } else {
                    self
                }
            }
            #[inline(always)]
            fn max_with(self, o: Self) -> Self {
                let d = &$tables().decode;
                if d[o.to_bits() as usize] > d[self.to_bits() as usize] {
                    o
                } else {
                    self
                }
            }
        }
    };
}

f8_element!(F8E4M3, F8e4m3, f8_tables::e4m3, f8_tables::e4m3_from_f32);
f8_element!(F8E5M2, F8e5m2, f8_tables::e5m2, f8_tables::e5m2_from_f32);

/// Calls `$body` with `$T` bound to the element type of a runtime
/// [`DataType`], so generic code can be written once for all twelve types.
#[macro_export]
macro_rules! with_element {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::with_element!(@match $dtype, $T, $body;
            Int8 = i8,
            Uint8 = u8,
            Int32 = i32,
            Uint32 = u32,
            Int64 = i64,
            Uint64 = u64,
            Half = $crate::element::f16,
            Float = f32,
            Double = f64,
            Bfloat16 = $crate::element::bf16,
            F8e4m3 = $crate::element::F8E4M3,
            F8e5m2 = $crate::element::F8E5M2,
        )
    };
    // One arm per data type, each binding `$T` to its element type.
    (@match $dtype:expr, $T:ident, $body:expr; $($variant:ident = $elem:ty,)*) => {
        match $dtype {
            $($crate::DataType::$variant => {
                type $T = $elem;
                $body
            })*
        }
    };
}

// Re-exported for `with_element!`.
pub use float8::{F8E4M3, F8E5M2};
pub use half::{bf16, f16};

#[cfg(test)]
mod tests {
    use super::*;

    fn exact_small_ints<T: Element>(limit: u64) {
        for v in 0..=limit {
            let e = T::from_value(v as f64);
            assert_eq!(e.value(), v as f64, "{:?} {v}", T::DTYPE);
        }
        assert_ne!(T::poison().bits(), T::from_value(0.0).bits());
    }

    #[test]
    fn pattern_ranges_are_exact() {
        for dt in DataType::ALL {
            with_element!(dt, T => exact_small_ints::<T>(dt.exact_limit().min(4096)));
        }
    }

    #[test]
    fn poison_is_never_a_pattern_value() {
        for dt in DataType::ALL {
            with_element!(dt, T => {
                let p = T::poison();
                for v in 0..=dt.exact_limit().min(4096) {
                    assert_ne!(p.bits(), T::from_value(v as f64).bits());
                }
            });
        }
    }
}
