//! The noise rule shared by the host verdict and in-process localisation:
//! a figure is slow only when it sits below the job's median by more than
//! the job's own measured noise, and by at least a minimum effect.
//!
//! Noise is measured robustly, as the median absolute deviation (MAD) of
//! log ratios: logs because busbw noise is multiplicative, MAD because one
//! slow host must not inflate the noise that is meant to expose it.

use serde::Serialize;

/// MAD x this estimates the standard deviation of normal noise.
const MAD_TO_SIGMA: f64 = 1.4826;

/// When a figure counts as slow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NoiseRule {
    /// Smallest slowdown ever named, as a fraction (0.2: below 0.8x).
    pub min_effect: f64,
    /// A slowdown must also exceed this many noise sigmas.
    pub noise_multiple: f64,
    /// When the noise alone spreads figures by more than this fraction, a
    /// host at half speed would hide in it: the job is hard to judge.
    pub max_spread: f64,
}

impl Default for NoiseRule {
    fn default() -> Self {
        NoiseRule {
            min_effect: 0.2,
            noise_multiple: 4.0,
            max_spread: 0.5,
        }
    }
}

/// What the rule makes of a job's noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Threshold {
    /// Figures below `cut` (a ratio to the median) are slow; `spread` is
    /// the noise alone as a fraction (1 - exp(-multiple x sigma)).
    Judgeable { cut: f64, spread: f64 },
    /// The noise spreads figures by more than `max_spread`: only a figure
    /// below `cut` stands out from it.
    TooNoisy { cut: f64, spread: f64 },
}

impl NoiseRule {
    /// The threshold for noise `sigma` (standard deviation of log ratios).
    /// The margin is taken in logs, as the noise is multiplicative.
    pub fn threshold(&self, sigma: f64) -> Threshold {
        let noise = self.noise_multiple * sigma;
        let spread = 1.0 - (-noise).exp();
        if !spread.is_finite() || spread > self.max_spread {
            let cut = if noise.is_finite() {
                (-noise).exp()
            } else {
                0.0
            };
            return Threshold::TooNoisy { cut, spread };
        }
        Threshold::Judgeable {
            cut: 1.0 - spread.max(self.min_effect),
            spread,
        }
    }
}

/// Median of `v` (0 when empty); sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Robust sigma of `values` (1.4826 x their MAD); 0 for fewer than two.
pub fn mad_sigma(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let mut v = values.to_vec();
    let mid = median(&mut v);
    let mut dev: Vec<f64> = values.iter().map(|x| (x - mid).abs()).collect();
    MAD_TO_SIGMA * median(&mut dev)
}

/// Upper bound of the noise behind `values` (log ratios): their robust
/// sigma plus one standard error of it (about 1.2 sigma / sqrt(n) for the
/// MAD). A handful of figures can agree by chance; this keeps three
/// quiet-looking figures from passing for a quiet machine.
pub fn noise_bound(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    mad_sigma(values) * (1.0 + 1.2 / (values.len() as f64).sqrt())
}

/// Natural logs of the positive ratios (a zero figure is a failure, not
/// noise: it is left out of the noise estimate).
pub fn log_ratios(ratios: impl IntoIterator<Item = f64>) -> Vec<f64> {
    ratios
        .into_iter()
        .filter(|r| *r > 0.0 && r.is_finite())
        .map(f64::ln)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mad_ignores_one_outlier() {
        let quiet = log_ratios([1.0, 1.01, 0.99, 1.02, 0.98]);
        let with_slow = log_ratios([1.0, 1.01, 0.99, 1.02, 0.2]);
        assert!(mad_sigma(&quiet) < 0.03);
        assert!(mad_sigma(&with_slow) < 0.03, "{}", mad_sigma(&with_slow));
    }

    #[test]
    fn few_figures_give_a_wider_bound() {
        let few = log_ratios([1.0, 1.1, 0.9]);
        let many: Vec<f64> = (0..300).map(|i| few[i % 3]).collect();
        assert!(noise_bound(&few) > 1.6 * mad_sigma(&few));
        assert!(noise_bound(&many) < 1.1 * mad_sigma(&many));
    }

    #[test]
    fn threshold_is_the_larger_of_effect_and_noise() {
        let rule = NoiseRule::default();
        match rule.threshold(0.01) {
            Threshold::Judgeable { cut, spread } => {
                assert_eq!(cut, 0.8);
                assert!((spread - 0.039).abs() < 1e-3, "{spread}");
            }
            t => panic!("{t:?}"),
        }
        match rule.threshold(0.1) {
            Threshold::Judgeable { cut, .. } => assert!((cut - (-0.4f64).exp()).abs() < 1e-9),
            t => panic!("{t:?}"),
        }
        match rule.threshold(0.3) {
            Threshold::TooNoisy { cut, .. } => assert!((cut - (-1.2f64).exp()).abs() < 1e-9),
            t => panic!("{t:?}"),
        }
        assert!(matches!(
            rule.threshold(f64::NAN),
            Threshold::TooNoisy { .. }
        ));
    }
}
