//! A scripted, noisy [`Measurer`] for tests without a GPU: the true time
//! of every (setting, case) is a function the test writes, and each repeat
//! adds seeded noise, so a test knows the right answer and can check that
//! the search finds it through the noise.
//!
//! Noise model: each repeat's time is `truth * drift * exp(noise * z)`
//! with `z` standard normal (timing noise is multiplicative), and `drift`
//! a slow random walk shared by all settings (clock and temperature), the
//! effect interleaving exists to cancel.

use crate::measure::{MeasureError, Measured, Measurer, Sample};
use crate::setting::{AlgoProto, Algorithm, Case, Protocol, Setting};

/// The true time per iteration (us) of a setting on a case; `None` when
/// the setting is not supported there.
pub type Truth = Box<dyn Fn(&Setting, &Case) -> Option<f64>>;

/// A small seeded generator (xorshift64*), enough for test noise.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// Seeded generator (a zero seed is moved off zero).
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// The scripted measurer.
pub struct FakeMeasurer {
    truth: Truth,
    noise: f64,
    drift: f64,
    overhead_us: f64,
    rng: XorShift,
    drift_log: f64,
    /// Every call, in order: what was measured and with how many iterations.
    pub calls: Vec<(Setting, Case, u32)>,
    /// Sum of the costs of all samples given out (us).
    pub spent_us: f64,
}

impl FakeMeasurer {
    /// A measurer whose true times come from `truth`, with 3% noise per
    /// repeat, a 0.5% drift step and 50 us overhead per call.
    pub fn new(seed: u64, truth: Truth) -> FakeMeasurer {
        FakeMeasurer {
            truth,
            noise: 0.03,
            drift: 0.005,
            overhead_us: 50.0,
            rng: XorShift::new(seed),
            drift_log: 0.0,
            calls: Vec::new(),
            spent_us: 0.0,
        }
    }

    /// Sets the sigma of the per-repeat multiplicative noise.
    pub fn noise(mut self, sigma: f64) -> FakeMeasurer {
        self.noise = sigma;
        self
    }

    /// Sets the sigma of the drift's random-walk step.
    pub fn drift(mut self, sigma: f64) -> FakeMeasurer {
        self.drift = sigma;
        self
    }
}

impl Measurer for FakeMeasurer {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        self.calls.push((setting.clone(), *case, iters));
        let Some(truth) = (self.truth)(setting, case) else {
            return Err(MeasureError::Unsupported(format!(
                "{setting} on {}",
                case.op.name()
            )));
        };
        self.drift_log += self.drift * self.rng.normal();
        let time_us = truth * self.drift_log.exp() * (self.noise * self.rng.normal()).exp();
        let cost_us = time_us * f64::from(iters.max(1)) + self.overhead_us;
        self.spent_us += cost_us;
        Ok(Sample {
            time_us,
            cost_us,
            algo_proto: Some(AlgoProto {
                algorithm: setting.algorithm.unwrap_or(Algorithm::Ring),
                protocol: setting.protocol.unwrap_or(Protocol::Simple),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::Collective;

    #[test]
    fn noise_is_seeded_and_centred() {
        let truth: Truth = Box::new(|_, _| Some(100.0));
        let case = Case {
            op: Collective::AllReduce,
            bytes: 1 << 20,
        };
        let run = |seed| {
            let mut m = FakeMeasurer::new(seed, Box::new(|_, _| Some(100.0))).drift(0.0);
            (0..400)
                .map(|_| {
                    m.measure(&Setting::default(), &case, 10)
                        .unwrap()
                        .time_us
                        .ln()
                })
                .sum::<f64>()
                / 400.0
        };
        assert_eq!(run(7), run(7));
        assert!((run(7).exp() - 100.0).abs() < 1.0);
        let mut m = FakeMeasurer::new(1, truth);
        assert_eq!(
            m.measure(&Setting::default(), &case, 3)
                .unwrap()
                .algo_proto
                .unwrap()
                .to_string(),
            "ring/simple"
        );
        assert_eq!(m.calls.len(), 1);
    }
}
