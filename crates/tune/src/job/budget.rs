//! The budget, owned here alone: `--budget` is the whole command's wall
//! time, so the setup already spent and what ending will take are taken
//! from it before the search gets the rest.

use super::error::TuneError;
use super::options::TuneOptions;
use crate::child::Children;
use crate::search::TuneConfig;
use crate::setting::Setting;
use crate::space::CandidateSpace;
use std::time::Duration;

/// The search's configuration for a job of `hosts` hosts and
/// `world_size` ranks, over the candidates of `space`, with the whole
/// budget (before [`charge_setup`]).
pub fn config(
    o: &TuneOptions,
    world_size: usize,
    hosts: usize,
    space: CandidateSpace,
) -> TuneConfig {
    let budget_us = o.budget.as_secs_f64() * 1e6;
    let mut cfg = TuneConfig::new(
        o.plan.ops.clone(),
        o.sizes.clone(),
        world_size,
        hosts,
        budget_us,
    );
    cfg.max_channels = o.plan.max_channels;
    cfg.space = space;
    cfg
}

/// Every candidate of every op (forbidden ones left out).
pub fn all_candidates(cfg: &TuneConfig) -> Vec<Setting> {
    cfg.ops
        .iter()
        .flat_map(|op| crate::space::candidates(&cfg.space, *op, cfg.max_channels).0)
        .collect()
}

/// What destroying one of the parent's communicators may take, held back
/// from the budget: on two emulated hosts (socket transport) a search
/// holding 11 communicators and 28 children per process took 6.4 s from
/// its last repeat to its exit (bench/results/tune.md, session 14).
pub const COMM_TEARDOWN: Duration = Duration::from_millis(500);

/// What ending the search takes (us), held back from the budget: its
/// children's end, when it has any ([`Children::TEARDOWN`]), and
/// destroying its `communicators` ([`COMM_TEARDOWN`] each).
pub fn teardown_us(children: &Children, communicators: usize) -> f64 {
    let children = if children.is_empty() {
        Duration::ZERO
    } else {
        Children::TEARDOWN
    };
    (children + COMM_TEARDOWN * communicators as u32).as_secs_f64() * 1e6
}

/// Takes the setup's wall time (us) and what ending will take
/// (`teardown_us`) from the budget, so that the command ends within it; a
/// setup that took all of it ends the command.
pub fn charge_setup(
    cfg: &mut TuneConfig,
    setup_us: f64,
    teardown_us: f64,
) -> Result<(), TuneError> {
    if setup_us + teardown_us >= cfg.budget_us {
        return Err(TuneError::Failed(format!(
            "creating the communicators took {:.0} s and ending them takes {:.0} s, the whole --budget: raise --budget",
            setup_us / 1e6,
            teardown_us / 1e6
        )));
    }
    cfg.budget_us -= setup_us + teardown_us;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::TuneConfig;

    #[test]
    fn the_setup_and_the_end_come_out_of_the_budget() {
        let mut cfg = TuneConfig::new(Vec::new(), Vec::new(), 2, 1, 10e6);
        charge_setup(&mut cfg, 2e6, 1e6).unwrap();
        assert_eq!(cfg.budget_us, 7e6);
        let e = charge_setup(&mut cfg, 5e6, 2e6).unwrap_err();
        assert!(
            matches!(&e, TuneError::Failed(m) if m.contains("raise --budget")),
            "{e}"
        );
    }
}
