//! MPI as the bootstrap under `mpirun`: MPI knows every rank, but
//! collbench's TCP control plane needs rank 0's address, which plain
//! `mpirun` does not publish. Rank 0 chooses one and broadcasts it.

use collbench_launch::world::{parse_rendezvous, system_hostname};
use collbench_launch::{LaunchError, LaunchOptions};
use mpi::environment::Universe;
use mpi::traits::{Communicator, Root};

/// MPI for this process: running while this lives, finalised on drop.
/// Keep it until the run is over (after the backend and control plane).
pub struct Session {
    _universe: Universe,
}

/// Starts MPI and returns `args` completed from it: rank and world size
/// from MPI_COMM_WORLD, local rank from the shared-memory split (unless
/// given), and `rendezvous` as rank 0 chose it: `--rendezvous` or
/// COLLBENCH_RENDEZVOUS when set, else rank 0's host name and
/// COLLBENCH_PORT or a free port. Collective: every rank must call it.
pub fn bootstrap(args: &LaunchOptions) -> Result<(Session, LaunchOptions), LaunchError> {
    let universe = mpi::initialize().ok_or_else(|| {
        LaunchError::Discovery("MPI was already initialised in this process".into())
    })?;
    let world = universe.world();
    let rank = world.rank() as usize;
    let local_rank = world.split_shared(world.rank()).rank() as usize;
    let chosen = if rank == 0 {
        Some(choose_rendezvous(args))
    } else {
        None
    };
    // An empty text tells the other ranks that rank 0 failed (it says why).
    let mut text = match &chosen {
        Some(Ok(t)) => t.clone(),
        _ => String::new(),
    };
    broadcast_text(&world, &mut text);
    if let Some(Err(e)) = chosen {
        return Err(e);
    }
    if text.is_empty() {
        return Err(LaunchError::Discovery(
            "MPI rank 0 could not choose a rendezvous address (see its error)".into(),
        ));
    }
    let mut out = args.clone();
    out.rank = Some(rank);
    out.world_size = Some(world.size() as usize);
    out.local_rank = args.local_rank.or(Some(local_rank));
    out.rendezvous = Some(text);
    Ok((
        Session {
            _universe: universe,
        },
        out,
    ))
}

/// Rank 0's choice of `HOST:PORT` for the control plane.
fn choose_rendezvous(args: &LaunchOptions) -> Result<String, LaunchError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    choose_rendezvous_from(args, &env, &system_hostname())
}

fn choose_rendezvous_from(
    args: &LaunchOptions,
    env: &dyn Fn(&str) -> Option<String>,
    host: &str,
) -> Result<String, LaunchError> {
    if let Some(given) = args
        .rendezvous
        .clone()
        .or_else(|| env("COLLBENCH_RENDEZVOUS"))
    {
        parse_rendezvous(&given)?;
        return Ok(given);
    }
    let port = match env("COLLBENCH_PORT") {
        // 0 would be any port, which the other ranks cannot know.
        Some(p) => collbench_core::ports::Port::parse("COLLBENCH_PORT", &p)?.get(),
        None => free_port()?,
    };
    Ok(format!("{host}:{port}"))
}

/// A port that is free now; rank 0 binds it again moments later.
fn free_port() -> Result<u16, LaunchError> {
    std::net::TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| {
            LaunchError::Discovery(format!(
                "cannot find a free port for the control plane ({e}): set COLLBENCH_PORT"
            ))
        })
}

/// Broadcasts rank 0's `text` to every rank (length, then bytes).
fn broadcast_text(world: &impl Communicator, text: &mut String) {
    let root = world.process_at_rank(0);
    let mut len = text.len() as u64;
    root.broadcast_into(&mut len);
    let mut bytes = std::mem::take(text).into_bytes();
    bytes.resize(len as usize, 0);
    root.broadcast_into(&mut bytes[..]);
    *text = String::from_utf8_lossy(&bytes).into_owned();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn explicit_rendezvous_wins() {
        let args = LaunchOptions {
            rendezvous: Some("node7:4000".into()),
            ..Default::default()
        };
        let env = env_of(&[("COLLBENCH_RENDEZVOUS", "other:1")]);
        assert_eq!(
            choose_rendezvous_from(&args, &env, "h").unwrap(),
            "node7:4000"
        );
        let env = env_of(&[("COLLBENCH_RENDEZVOUS", "other:1")]);
        let none = LaunchOptions::default();
        assert_eq!(choose_rendezvous_from(&none, &env, "h").unwrap(), "other:1");
    }

    #[test]
    fn host_and_port_from_rank_0() {
        let args = LaunchOptions::default();
        let env = env_of(&[("COLLBENCH_PORT", "29600")]);
        assert_eq!(
            choose_rendezvous_from(&args, &env, "h0").unwrap(),
            "h0:29600"
        );
        let env = env_of(&[("COLLBENCH_PORT", "nope")]);
        let e = choose_rendezvous_from(&args, &env, "h0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("COLLBENCH_PORT"), "{e}");
        let env = env_of(&[]);
        let free = choose_rendezvous_from(&args, &env, "h0").unwrap();
        let port: u16 = free.strip_prefix("h0:").unwrap().parse().unwrap();
        assert!(port > 0);
    }
}
