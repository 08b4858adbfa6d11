//! The confirmation loop both procedures share (the plain one in
//! [`super::run`], the grouped one in [`super::groups`]): while the
//! verdict has suspects, rounds that retest them, and a new verdict.

use super::matrix::PairResult;
use super::schedule::{confirmation_rounds, Round};
use super::types::{HostVerdict, JudgeConfig};
use super::verdict::judge;

/// Judges `results`, then confirms suspects in rounds numbered from
/// `*rounds` while any remain, until `*rounds` reaches `last`; each
/// round measured is added to `results` and counted in `*rounds`.
pub fn judge_and_confirm<E>(
    cfg: &JudgeConfig,
    results: &mut Vec<PairResult>,
    rounds: &mut usize,
    last: usize,
    measure: &mut impl FnMut(&Round) -> Result<Vec<PairResult>, E>,
) -> Result<HostVerdict, E> {
    let mut verdict = judge(results, cfg);
    while verdict.has_suspects() && *rounds < last {
        let confirm = confirmation_rounds(&verdict, cfg, *rounds);
        if confirm.is_empty() {
            break;
        }
        for round in confirm.iter().take(last - *rounds) {
            results.extend(measure(round)?);
            *rounds += 1;
        }
        verdict = judge(results, cfg);
    }
    Ok(verdict)
}
