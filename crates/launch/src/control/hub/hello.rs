//! Admitting a rank: rank 0's event loop checks each connection's first
//! message against this job before the rank counts as joined.

use crate::control::shared::Shared;
use crate::control::PeerHello;
use crate::wire::{Msg, PROTOCOL_VERSION};

/// Checks a connection's first message: a hello of this job, for a rank
/// that has not joined (`complete`: every rank already did). Gives the
/// hello, or the host it named and why it is refused.
pub(super) fn judge_hello(
    shared: &Shared,
    msg: Msg,
    complete: bool,
) -> Result<PeerHello, (String, String)> {
    let Msg::Hello {
        protocol,
        token,
        rank,
        world_size,
        local_rank,
        host,
        pid,
        ..
    } = msg
    else {
        return Err((
            "?".into(),
            "the first message was not a hello (not a collbench rank?)".into(),
        ));
    };
    let n = shared.world_size;
    let problem = if protocol != PROTOCOL_VERSION {
        Some(format!("it speaks control protocol {protocol}, rank 0 speaks {PROTOCOL_VERSION}: run the same collbench on every rank"))
    } else if token != shared.token {
        Some("wrong job token: it belongs to another job or is a stray process (every rank needs the same COLLBENCH_TOKEN / --token)".to_string())
    } else if world_size != n {
        Some(format!(
            "it expects a world of {world_size} ranks but this job has {n}"
        ))
    } else if rank == 0 || rank >= n {
        Some(format!("rank {rank} is not in 1..{n}"))
    } else if complete {
        Some(format!(
            "all {n} ranks already joined (a second process with rank {rank}?)"
        ))
    } else {
        None
    };
    match problem {
        Some(reason) => Err((host, format!("rank {rank}: {reason}"))),
        None => Ok(PeerHello {
            rank,
            local_rank,
            host,
            pid,
            info: Vec::new(),
        }),
    }
}
