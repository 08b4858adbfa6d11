//! Naming who holds a collective up: from every rank's last [`Progress`]
//! and how long it has stayed the same ([`RankProgress`]), the one line
//! every process prints when the job has made no progress for the
//! watchdog's deadline.
//!
//! The rule: a rank's *reach* orders positions within the plan (case,
//! then between cases < before the call of iteration i < inside it <
//! waiting at i < before i+1 ... < checking). When
//! no rank has moved for the deadline and some rank is inside a case,
//! the ranks whose reach is below the furthest are *behind*, and the line
//! names them, grouped by where they are and by host, most behind first;
//! the others are waiting for them. When no rank is behind, every rank is
//! waiting at the same place: the hang is inside the library or a link
//! (or, all between two iterations, the processes stopped calling). A
//! rank whose heartbeats stopped ([`Heard::Silent`]: stopped whole, hung
//! or cut off) is named before anyone behind, since its last word says
//! nothing; seen from another rank, a silent rank 0 is named by
//! [`root_silent`].
//!
//! What a position means (the backends publish it so):
//! - `Idle` in case c: between cases, before case c (exchanging the
//!   results of the one before, printing).
//! - `Issue` at iteration i: has returned from the calls of iterations
//!   before i and has not entered the call of i.
//! - `Call` at iteration i: inside the call of i (entered, not returned).
//! - `Wait` at iteration i: called iteration i and waits for it to
//!   complete (or for its peers).
//! - `Check`: checking results.
//!
//! Pure: no clocks, no I/O; the caller says what each case is called.

use crate::progress::{Heard, Phase, Progress, RankProgress};
use std::collections::BTreeMap;
use std::time::Duration;

/// Every stuck-collective line starts with this, for people and their log
/// searches. Exit codes do not read it: the failure's kind
/// ([`crate::FailureKind`]) travels beside the line.
pub const STUCK: &str = "stuck collective: ";

/// Host groups a line names before summing up the rest.
const MAX_HOSTS: usize = 8;
/// Places (groups of behind ranks) a line names before summing up.
const MAX_PLACES: usize = 4;

/// How far a rank has got; larger is further. `None` (nothing published)
/// is least.
fn reach(p: Option<Progress>) -> (u8, u32, u8, u32, u8) {
    match p {
        None => (0, 0, 0, 0, 0),
        Some(p) => {
            let (stage, iteration, waiting) = match p.phase {
                Phase::Idle => (0, 0, 0),
                Phase::Issue => (1, p.iteration, 0),
                Phase::Call => (1, p.iteration, 1),
                Phase::Wait => (1, p.iteration, 2),
                Phase::Check => (2, 0, 0),
            };
            (1, p.case, stage, iteration, waiting)
        }
    }
}

/// The least advanced of some positions (`None` if any is unpublished):
/// what a process whose ranks are at these positions publishes for all
/// of them.
pub fn least(positions: impl IntoIterator<Item = Option<Progress>>) -> Option<Progress> {
    positions.into_iter().min_by_key(|p| reach(*p)).flatten()
}

/// Whether a rank's heartbeats stopped (see [`Heard`]).
fn silent(r: &RankProgress) -> bool {
    matches!(r.heard, Heard::Silent(_))
}

/// Whether a rank is inside a case (calling, waiting or checking).
fn busy(p: Option<Progress>) -> bool {
    matches!(p, Some(p) if p.phase != Phase::Idle)
}

/// The line to print when the job is stuck, or `None` while it is not:
/// some rank has moved within `deadline`, no rank is inside a case nor
/// silent (between cases the control plane's own deadlines apply), or
/// some rank is late with its heartbeats (a verdict then waits, at most
/// three heartbeat periods or 2 s, until it is heard again or falls
/// silent).
/// Silent ranks are named first: a stopped process keeps its last word,
/// so where it seems to be says nothing about why the others wait.
/// `case_name(c)` names case c of the plan ("all_reduce 64 MiB"); `None`
/// prints "case c".
pub fn diagnose(
    table: &[RankProgress],
    deadline: Duration,
    case_name: &dyn Fn(u32) -> Option<String>,
) -> Option<String> {
    if table.is_empty()
        || table.iter().any(|r| r.unchanged_for < deadline)
        || !table.iter().any(|r| busy(r.progress) || silent(r))
        || table.iter().any(|r| r.heard == Heard::Late)
    {
        return None;
    }
    let name = |c: u32| case_name(c).unwrap_or_else(|| format!("case {c}"));
    let waited = format!("no progress for {} s", seconds(deadline));
    let (silent, heard): (Vec<&RankProgress>, Vec<&RankProgress>) =
        table.iter().partition(|r| silent(r));
    let furthest = heard.iter().map(|r| reach(r.progress)).max();
    let mut places: BTreeMap<_, Vec<&RankProgress>> = BTreeMap::new();
    for r in heard.iter().filter(|r| Some(reach(r.progress)) < furthest) {
        places.entry(reach(r.progress)).or_default().push(r);
    }
    let behind: usize = places.values().map(Vec::len).sum();
    if silent.is_empty() && behind == 0 {
        let at = table.iter().find_map(|r| r.progress);
        return Some(format!(
            "{STUCK}{}: {} ({waited})",
            place(at, &name),
            all_there(at, table.len())
        ));
    }
    let mut parts: Vec<String> = Vec::new();
    if !silent.is_empty() {
        parts.push(silent_part(&silent, &name));
    }
    parts.extend(places.values().take(MAX_PLACES).map(|group| {
        let p = group[0].progress;
        let at = place(p, &name);
        let sep = if at.is_empty() { "" } else { ": " };
        format!(
            "{at}{sep}{} {}",
            who(&hosts_of(group.iter().copied())),
            state(p)
        )
    }));
    if places.len() > MAX_PLACES {
        let rest: usize = places.values().skip(MAX_PLACES).map(Vec::len).sum();
        parts.push(format!("{} behind at other places", count(rest)));
    }
    let waiting = heard.len() - behind;
    Some(format!(
        "{STUCK}{}; {} waiting ({waited})",
        parts.join("; "),
        count(waiting)
    ))
}

/// Seen from a rank other than 0, which knows only rank 0's heartbeats
/// and its own ranks (`mine`): the line when rank 0 has fallen silent
/// while `mine` made no progress for `deadline` (rank 0, stopped, cannot
/// name anyone, so each waiting process says it). `None` otherwise: while
/// rank 0 is heard, rank 0's watchdog decides.
pub fn root_silent(
    root: &RankProgress,
    mine: &[RankProgress],
    deadline: Duration,
    case_name: &dyn Fn(u32) -> Option<String>,
) -> Option<String> {
    if !silent(root) || mine.is_empty() || mine.iter().any(|r| r.unchanged_for < deadline) {
        return None;
    }
    let name = |c: u32| case_name(c).unwrap_or_else(|| format!("case {c}"));
    // Where the waiting ranks are, when that differs from rank 0's word.
    let whereabouts = match least(mine.iter().map(|r| r.progress)) {
        Some(p) if Some(p) != root.progress => format!(" at {}", place(Some(p), &name)),
        _ => " for it".into(),
    };
    let verb = if mine.len() == 1 { "waits" } else { "wait" };
    Some(format!(
        "{STUCK}{}; {} {verb}{whereabouts} (no progress for {} s)",
        silent_part(&[root], &name),
        who(&hosts_of(mine.iter())),
        seconds(deadline)
    ))
}

/// "all_reduce 64 MiB iteration 7: rank 1 (host n0) silent for 12 s, last
/// seen inside the call (stopped, hung or cut off)".
fn silent_part(silent: &[&RankProgress], name: &dyn Fn(u32) -> String) -> String {
    let at = least(silent.iter().map(|r| r.progress));
    let longest = silent
        .iter()
        .filter_map(|r| match r.heard {
            Heard::Silent(d) => Some(d),
            _ => None,
        })
        .max()
        .unwrap_or_default();
    let place = place(at, name);
    let sep = if place.is_empty() { "" } else { ": " };
    format!(
        "{place}{sep}{} silent for {:.0} s, last seen {} (stopped, hung or cut off)",
        who(&hosts_of(silent.iter().copied())),
        longest.as_secs_f64(),
        seen(at)
    )
}

/// Every rank at the same place, none behind: where the hang must be.
fn all_there(at: Option<Progress>, n: usize) -> String {
    let entered_none = matches!(at, Some(p) if p.phase == Phase::Issue && p.iteration > 0);
    match (n, entered_none) {
        // Between two iterations, outside any library call: the
        // processes stopped calling (a backend that reports no
        // iterations stays at iteration 0, where that cannot be told).
        (1, true) => "its only rank never entered it: the process stopped calling, nothing is inside the library".into(),
        (n, true) => format!("all {n} ranks are there and none entered it: the processes stopped calling, nothing is inside the library"),
        (1, false) => "its only rank is there: the hang is inside the library or a link".into(),
        (n, false) => format!("all {n} ranks are there and none is behind: the hang is inside the library or a link"),
    }
}

fn hosts_of<'a>(ranks: impl IntoIterator<Item = &'a RankProgress>) -> Vec<(usize, &'a str)> {
    ranks
        .into_iter()
        .map(|r| (r.rank, r.host.as_str()))
        .collect()
}

/// "1 rank" or "N ranks".
fn count(n: usize) -> String {
    if n == 1 {
        "1 rank".into()
    } else {
        format!("{n} ranks")
    }
}

/// Whole seconds where the deadline is whole, else one decimal.
fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

/// Where a position is: "all_reduce 64 MiB iteration 7", or the case
/// alone where the iteration does not matter.
fn place(p: Option<Progress>, name: &dyn Fn(u32) -> String) -> String {
    match p {
        None => String::new(),
        Some(p) => match p.phase {
            Phase::Issue | Phase::Call | Phase::Wait => {
                format!("{} iteration {}", name(p.case), p.iteration)
            }
            Phase::Idle | Phase::Check => name(p.case),
        },
    }
}

/// How the line words a position, one row per phase: what ranks there
/// are doing, and where a silent rank was when last heard of.
fn phrases(p: Option<Progress>) -> (&'static str, &'static str) {
    match p.map(|p| p.phase) {
        None => ("never reported progress", "before it reported progress"),
        Some(Phase::Idle) => ("did not start it", "between cases"),
        Some(Phase::Issue) => ("never entered", "before the call"),
        Some(Phase::Call) => ("stuck inside the call", "inside the call"),
        Some(Phase::Wait) => (
            "still waiting for it to complete",
            "waiting for it to complete",
        ),
        Some(Phase::Check) => ("still checking results", "checking results"),
    }
}

/// What ranks at a position are doing, as the line says it.
fn state(p: Option<Progress>) -> &'static str {
    phrases(p).0
}

/// Where a silent rank was when last heard of.
fn seen(p: Option<Progress>) -> &'static str {
    phrases(p).1
}

/// "rank 3 (host n2)", "ranks 3, 12 (host n2)", "ranks 0-3 (host n1),
/// 4-7 (host n2)": ranks grouped by host in rank order, runs written as
/// ranges, at most 8 hosts named (`MAX_HOSTS`).
pub fn who(ranks: &[(usize, &str)]) -> String {
    let mut hosts: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    for (rank, host) in sorted {
        match hosts.iter_mut().find(|(h, _)| *h == host) {
            Some((_, list)) => list.push(rank),
            None => hosts.push((host, vec![rank])),
        }
    }
    let mut groups: Vec<String> = hosts
        .iter()
        .take(MAX_HOSTS)
        .map(|(host, list)| format!("{} (host {host})", rank_list(list)))
        .collect();
    if hosts.len() > MAX_HOSTS {
        let rest = &hosts[MAX_HOSTS..];
        let n: usize = rest.iter().map(|(_, l)| l.len()).sum();
        groups.push(format!("and {} on {} more hosts", count(n), rest.len()));
    }
    let noun = if ranks.len() == 1 { "rank" } else { "ranks" };
    format!("{noun} {}", groups.join(", "))
}

/// Ascending ranks written short: "3", "3, 12", "0-3, 8-11".
pub fn rank_list(ranks: &[usize]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for r in sorted {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == r => *end = r,
            _ => runs.push((r, r)),
        }
    }
    runs.iter()
        .map(|&(a, b)| match b - a {
            0 => a.to_string(),
            1 => format!("{a}, {b}"),
            _ => format!("{a}-{b}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(300);

    fn at(case: u32, iteration: u32, phase: Phase) -> Option<Progress> {
        Some(Progress {
            case,
            iteration,
            phase,
        })
    }

    /// `n` ranks, 8 per host `n0`, `n1`, ..., all at `p`, unchanged for `T`.
    fn ranks(n: usize, p: Option<Progress>) -> Vec<RankProgress> {
        (0..n)
            .map(|rank| RankProgress {
                rank,
                host: format!("n{}", rank / 8),
                progress: p,
                unchanged_for: T,
                heard: Heard::InTime,
            })
            .collect()
    }

    fn names(c: u32) -> Option<String> {
        ["all_reduce 64 MiB", "all_gather 1 KiB"]
            .get(c as usize)
            .map(|s| s.to_string())
    }

    #[test]
    fn the_issue_example_names_the_two_ranks_and_their_host() {
        let mut t = ranks(4096, at(0, 19, Phase::Wait));
        t[3].progress = at(0, 7, Phase::Issue);
        t[12].progress = at(0, 7, Phase::Issue);
        t[3].host = "n2".into();
        t[12].host = "n2".into();
        assert_eq!(
            diagnose(&t, T, &names).unwrap(),
            "stuck collective: all_reduce 64 MiB iteration 7: ranks 3, 12 (host n2) never entered; 4094 ranks waiting (no progress for 300 s)"
        );
    }

    #[test]
    fn nothing_while_any_rank_moves_or_no_rank_is_inside_a_case() {
        let mut t = ranks(4, at(0, 3, Phase::Wait));
        t[2].progress = at(0, 1, Phase::Issue);
        t[1].unchanged_for = T - Duration::from_millis(1);
        assert_eq!(diagnose(&t, T, &names), None);
        // Between cases (result exchange): the control plane's deadlines.
        assert_eq!(diagnose(&ranks(4, at(1, 0, Phase::Idle)), T, &names), None);
        assert_eq!(diagnose(&ranks(4, None), T, &names), None);
        assert_eq!(diagnose(&[], T, &names), None);
    }

    #[test]
    fn everyone_at_the_same_place_is_a_hang_inside_the_library() {
        let line = diagnose(&ranks(16, at(1, 5, Phase::Wait)), T, &names).unwrap();
        assert_eq!(
            line,
            "stuck collective: all_gather 1 KiB iteration 5: all 16 ranks are there and none is behind: the hang is inside the library or a link (no progress for 300 s)"
        );
    }

    #[test]
    fn ranks_behind_in_several_places_most_behind_first() {
        // Ranks 8-15 finished case 0 and wait in the result exchange;
        // rank 2 sleeps inside case 0 iteration 4 while 0, 1, 3-7 wait
        // there.
        let mut t = ranks(16, at(2, 0, Phase::Idle));
        for r in &mut t[..8] {
            r.progress = at(0, 4, Phase::Wait);
        }
        t[2].progress = at(0, 4, Phase::Call);
        let line = diagnose(&t, T, &names).unwrap();
        assert_eq!(
            line,
            "stuck collective: all_reduce 64 MiB iteration 4: rank 2 (host n0) stuck inside the call; all_reduce 64 MiB iteration 4: ranks 0, 1, 3-7 (host n0) still waiting for it to complete; 8 ranks waiting (no progress for 300 s)"
        );
    }

    #[test]
    fn a_4096_rank_line_stays_short() {
        // Every odd rank behind, on 512 hosts: ranges cannot shorten the
        // list, the host cap does.
        let mut t = ranks(4096, at(0, 9, Phase::Wait));
        for r in (1..4096).step_by(2) {
            t[r].progress = at(0, 3, Phase::Issue);
        }
        let line = diagnose(&t, T, &names).unwrap();
        assert!(line.len() < 400, "{} chars: {line}", line.len());
        assert!(
            line.contains("ranks 1, 3, 5, 7 (host n0), 9, 11, 13, 15 (host n1)"),
            "{line}"
        );
        assert!(line.contains("and 2016 ranks on 504 more hosts"), "{line}");
        assert!(
            line.ends_with("; 2048 ranks waiting (no progress for 300 s)"),
            "{line}"
        );
        // Contiguous ranks collapse into ranges.
        let mut t = ranks(4096, at(0, 9, Phase::Wait));
        for r in &mut t[8..24] {
            r.progress = None;
        }
        let line = diagnose(&t, T, &names).unwrap();
        assert!(
            line.starts_with(
                "stuck collective: ranks 8-15 (host n1), 16-23 (host n2) never reported progress; 4080 ranks waiting"
            ),
            "{line}"
        );
    }

    #[test]
    fn at_most_four_places_then_a_count() {
        // Ranks 0-5 each stopped at another iteration; 6 and 7 are ahead.
        let mut t = ranks(8, at(0, 9, Phase::Wait));
        for (r, rp) in t[..6].iter_mut().enumerate() {
            rp.progress = at(0, r as u32, Phase::Issue);
        }
        let line = diagnose(&t, T, &names).unwrap();
        assert_eq!(line.matches("never entered").count(), 4, "{line}");
        assert!(
            line.starts_with("stuck collective: all_reduce 64 MiB iteration 0: rank 0 (host n0)"),
            "{line}"
        );
        assert!(
            line.ends_with(
                "; 2 ranks behind at other places; 2 ranks waiting (no progress for 300 s)"
            ),
            "{line}"
        );
    }

    #[test]
    fn rank_lists_use_ranges_from_three() {
        assert_eq!(rank_list(&[3]), "3");
        assert_eq!(rank_list(&[12, 3]), "3, 12");
        assert_eq!(rank_list(&[3, 4]), "3, 4");
        assert_eq!(rank_list(&[3, 4, 5, 6, 7, 12]), "3-7, 12");
        assert_eq!(who(&[(5, "h")]), "rank 5 (host h)");
    }

    #[test]
    fn unknown_cases_and_sub_second_deadlines_still_read() {
        let mut t = ranks(2, at(7, 2, Phase::Wait));
        t[1].progress = at(7, 0, Phase::Check);
        let d = Duration::from_millis(1500);
        for r in &mut t {
            r.unchanged_for = d;
        }
        let line = diagnose(&t, d, &|_| None).unwrap();
        assert_eq!(
            line,
            "stuck collective: case 7 iteration 2: rank 0 (host n0) still waiting for it to complete; 1 rank waiting (no progress for 1.5 s)"
        );
        assert!(line.starts_with(STUCK));
        assert_eq!(
            least([at(1, 0, Phase::Check), at(1, 3, Phase::Wait)]),
            at(1, 3, Phase::Wait)
        );
        assert_eq!(least([at(1, 0, Phase::Check), None]), None);
    }

    #[test]
    fn a_silent_rank_is_named_even_where_the_others_wait() {
        // Rank 1 was stopped (SIGSTOP) inside iteration 7: its word is
        // where everyone else is, only its silence gives it away.
        let mut t = ranks(2, at(0, 7, Phase::Wait));
        t[1].heard = Heard::Silent(Duration::from_millis(9600));
        assert_eq!(
            diagnose(&t, T, &names).unwrap(),
            "stuck collective: all_reduce 64 MiB iteration 7: rank 1 (host n0) silent for 10 s, last seen waiting for it to complete (stopped, hung or cut off); 1 rank waiting (no progress for 300 s)"
        );
        // One beat late: maybe stopped, maybe slow; no verdict yet.
        t[1].heard = Heard::Late;
        assert_eq!(diagnose(&t, T, &names), None);
        // Stopped between cases: named as well (the others wait for it
        // in the exchange of results, and nothing else will move).
        let mut t = ranks(4, at(1, 0, Phase::Idle));
        t[3].heard = Heard::Silent(Duration::from_secs(6));
        assert!(diagnose(&t, T, &names).unwrap().starts_with("stuck collective: all_gather 1 KiB: rank 3 (host n0) silent for 6 s, last seen between cases"));
    }

    #[test]
    fn silent_ranks_come_first_and_ranks_behind_after_them() {
        let mut t = ranks(16, at(0, 9, Phase::Wait));
        t[12].heard = Heard::Silent(Duration::from_secs(40));
        t[13].heard = Heard::Silent(Duration::from_secs(31));
        t[13].progress = at(0, 8, Phase::Call);
        t[3].progress = at(0, 9, Phase::Issue);
        assert_eq!(
            diagnose(&t, T, &names).unwrap(),
            "stuck collective: all_reduce 64 MiB iteration 8: ranks 12, 13 (host n1) silent for 40 s, last seen inside the call (stopped, hung or cut off); all_reduce 64 MiB iteration 9: rank 3 (host n0) never entered; 13 ranks waiting (no progress for 300 s)"
        );
    }

    #[test]
    fn everyone_between_iterations_stopped_calling() {
        let line = diagnose(&ranks(1, at(0, 7, Phase::Issue)), T, &names).unwrap();
        assert_eq!(
            line,
            "stuck collective: all_reduce 64 MiB iteration 7: its only rank never entered it: the process stopped calling, nothing is inside the library (no progress for 300 s)"
        );
        let line = diagnose(&ranks(4, at(0, 7, Phase::Issue)), T, &names).unwrap();
        assert!(
            line.contains(
                ": all 4 ranks are there and none entered it: the processes stopped calling"
            ),
            "{line}"
        );
        // Iteration 0 is also where a backend that reports no iterations
        // stays for the whole loop: that cannot be told apart.
        let line = diagnose(&ranks(1, at(0, 0, Phase::Issue)), T, &names).unwrap();
        assert!(line.contains("inside the library or a link"), "{line}");
    }

    #[test]
    fn another_rank_names_a_silent_rank_0() {
        let mut root = ranks(1, at(0, 7, Phase::Call)).remove(0);
        let mut mine = ranks(4, at(0, 7, Phase::Wait));
        mine.drain(..2);
        // Heard in time: rank 0's own watchdog decides.
        assert_eq!(root_silent(&root, &mine, T, &names), None);
        root.heard = Heard::Silent(Duration::from_secs(7));
        assert_eq!(
            root_silent(&root, &mine, T, &names).unwrap(),
            "stuck collective: all_reduce 64 MiB iteration 7: rank 0 (host n0) silent for 7 s, last seen inside the call (stopped, hung or cut off); ranks 2, 3 (host n0) wait at all_reduce 64 MiB iteration 7 (no progress for 300 s)"
        );
        // Between cases too: a stopped rank 0 holds the next call up.
        let between = ranks(1, at(1, 0, Phase::Idle));
        assert!(root_silent(&root, &between, T, &names)
            .unwrap()
            .contains("; rank 0 (host n0) waits at all_gather 1 KiB (no"));
        mine[0].unchanged_for = T / 2;
        assert_eq!(
            root_silent(&root, &mine, T, &names),
            None,
            "a rank still moves"
        );
    }
}
