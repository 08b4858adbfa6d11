//! The check-in: join the control plane with this rank's [`RankInfo`]
//! attached, make sure everyone who joined is still there, and let rank 0
//! print the report and tell everyone the verdict.

use super::report::Report;
use super::{Outcome, PreflightFormat, RankInfo};
use crate::exit::Failure;
use crate::stdout::print;
use collbench_launch::{Control, LaunchError, LaunchOptions, World};

/// Test-only: the rank named here exits abruptly right after joining, to
/// test that the others notice and name it.
const DIE_AFTER_CONNECT: &str = "COLLBENCH_TEST_DIE_AFTER_CONNECT";

/// Verdict byte rank 0 sends: 0 pass, else fail (3, what earlier releases
/// sent and used as the exit code, so a mixed job still agrees).
const VERDICT_FAIL: u8 = 3;

/// The test hook [`DIE_AFTER_CONNECT`]: the rank it names dies once it
/// has joined.
fn die_after_connect_if_asked(rank: usize) {
    if std::env::var(DIE_AFTER_CONNECT)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        == Some(rank)
    {
        std::process::exit(1);
    }
}

/// Runs the preflight check on this rank. Launch and peer failures are
/// reported here (one line on stderr, or rank 0's report) and are a
/// [`Outcome::Fail`] rather than an error; the errors are a port that is
/// none (the user's input, exit 2, before any rank waits) and stdout that
/// did not take the report (after rank 0 has told everyone the verdict).
pub fn run(
    launch: &LaunchOptions,
    format: PreflightFormat,
    mut info: RankInfo,
) -> Result<Outcome, Failure> {
    let world = match World::discover(launch) {
        Ok(world) => world,
        Err(e @ LaunchError::Port(_)) => return Err(e.into()),
        Err(e) => {
            let e = crate::launch_args::launch_words(&e);
            crate::stdout::say(format!("collbench preflight: {e}"));
            return Ok(Outcome::Fail);
        }
    };
    info.host = world.hostname.clone();
    info.pid = std::process::id();
    let said = |e: &LaunchError| {
        crate::stdout::say(format!(
            "collbench preflight: rank {} on host {}: {}",
            world.rank,
            world.hostname,
            crate::launch_args::launch_words(e)
        ))
    };

    let attached = serde_json::to_vec(&info).expect("rank info serialises");
    let control = match Control::connect_with_info(&world, launch, attached) {
        Ok(control) => control,
        Err(LaunchError::MissingRanks {
            missing,
            joined,
            timeout_s,
            listen,
        }) => {
            let problem = LaunchError::MissingRanks {
                missing: missing.clone(),
                timeout_s,
                listen,
                joined: vec![],
            };
            let report = Report::new(&world, &joined, &missing, vec![problem.to_string()]);
            print(&report.render(format))?;
            return Ok(Outcome::Fail);
        }
        Err(e) => {
            said(&e);
            return Ok(Outcome::Fail);
        }
    };
    die_after_connect_if_asked(world.rank);

    // Everyone who joined must still be there: a rank that died since is
    // named here rather than reported as PASS.
    if let Err(e) = control.barrier() {
        said(&e);
        return Ok(Outcome::Fail);
    }
    let mut printed = Ok(());
    let verdict = if world.rank == 0 {
        let report = Report::new(&world, &control.hellos(), &[], vec![]);
        printed = print(&report.render(format));
        let byte = match report.outcome() {
            Outcome::Pass => 0,
            Outcome::Fail => VERDICT_FAIL,
        };
        control.broadcast(Some(vec![byte]))
    } else {
        control.broadcast(None)
    };
    printed?;
    Ok(match verdict {
        Ok(byte) if byte.first() == Some(&0) => Outcome::Pass,
        Ok(_) => Outcome::Fail,
        Err(e) => {
            said(&e);
            Outcome::Fail
        }
    })
}
