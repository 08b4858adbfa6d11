//! Joining the job. Rank 0 listens (an accept queue sized for the world)
//! and its event loop checks every hello (protocol version, token, world
//! size, rank range, duplicates: `hub::hello`), refusing strangers with a
//! reason; the others connect with retries, backing off with jitter, until
//! the deadline. When all have joined, rank 0 says Ready.

use super::hub;
use super::liveness::{spawn_heartbeat, spawn_reader};
use super::progress::Board;
use super::shared::{new_state, Event, Link, Outbox, Peer, Shared, State};
use super::{call::absorb, lock, PeerHello};
use crate::wire::{self, Msg, PROTOCOL_VERSION};
use crate::{LaunchError, World};
use socket2::{Domain, Socket, Type};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub(super) fn join_as_root(
    world: &World,
    timeout: Duration,
    own: PeerHello,
    board: Arc<Board>,
) -> Result<Link, LaunchError> {
    let n = world.world_size;
    let listen = format!("{}:{}", world.bind, world.rendezvous_port);
    let listener = listen_for(world).map_err(|e| {
        LaunchError::Control(format!(
            "rank 0 cannot listen on {listen}: {e}; if another job uses this port, set COLLBENCH_PORT or --rendezvous HOST:PORT to a free one"
        ))
    })?;
    let cannot_start = |e: std::io::Error| {
        LaunchError::Control(format!("rank 0 cannot start its event loop: {e}"))
    };
    let (poll, handle, commands) = hub::handle(n, own).map_err(cannot_start)?;
    let (shared, events_rx) = Shared::new(world, timeout, board, Outbox::Hub(handle));
    hub::spawn(poll, listener, Arc::clone(&shared), commands).map_err(cannot_start)?;

    let deadline = Instant::now() + timeout;
    let mut early = Vec::new();
    'joining: loop {
        // Joined first: the loop sends it before anything a rank does after
        // Ready, so a rank that aborts at once fails the first call, not
        // the join.
        while let Ok(event) = events_rx.try_recv() {
            match event {
                Event::Joined => break 'joining,
                event => early.push(event),
            }
        }
        if let Some(failure) = shared.failure() {
            shared.close();
            return Err(LaunchError::Control(failure));
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            let hellos = lock(&shared.hub().hellos).clone();
            let missing: Vec<usize> = (0..n).filter(|&r| hellos[r].is_none()).collect();
            let joined: Vec<PeerHello> = hellos.into_iter().flatten().collect();
            let error = LaunchError::MissingRanks {
                missing,
                timeout_s: timeout.as_secs(),
                listen,
                joined,
            };
            shared.fail(error.to_string(), None);
            shared.close();
            return Err(error);
        };
        match events_rx.recv_timeout(left) {
            Ok(Event::Joined) => break,
            Ok(event) => early.push(event),
            Err(_) => {}
        }
    }
    let mut state = new_state(events_rx, n);
    for event in early {
        absorb(&mut state, event, &mut Vec::new());
    }
    // Taken, not copied (they hold each rank's preflight attachment): after
    // Ready the loop refuses every hello before it would look at them.
    let hellos = std::mem::take(&mut *lock(&shared.hub().hellos))
        .into_iter()
        .flatten()
        .collect();
    Ok(Link {
        shared,
        state: Mutex::new(state),
        hellos,
    })
}

/// Rank 0's listening socket, its accept queue sized for the world (std's
/// `TcpListener` asks for 128; Linux caps the request at
/// net.core.somaxconn). A queue too short for a connect storm drops SYNs,
/// and each dropped one costs its rank a 1 s retransmit.
fn listen_for(world: &World) -> std::io::Result<mio::net::TcpListener> {
    let addr = (world.bind.as_str(), world.rendezvous_port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("the address resolves to nothing"))?;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(world.world_size.clamp(128, 65535) as i32)?;
    socket.set_nonblocking(true)?;
    Ok(mio::net::TcpListener::from_std(socket.into()))
}

/// Why one attempt to join failed.
pub(super) enum Attempt {
    Refused(String),
    Retry(String),
}

pub(super) fn join_as_peer(
    world: &World,
    timeout: Duration,
    own: PeerHello,
    board: Arc<Board>,
) -> Result<Link, LaunchError> {
    let host = world.rendezvous_host.clone().ok_or_else(|| {
        LaunchError::Discovery(format!(
            "rank {} does not know where rank 0 listens: set COLLBENCH_RENDEZVOUS=HOST:PORT (rank 0's host)",
            world.rank
        ))
    })?;
    let hello = Msg::Hello {
        protocol: PROTOCOL_VERSION,
        token: world.token.clone(),
        rank: world.rank,
        world_size: world.world_size,
        local_rank: world.local_rank,
        host: world.hostname.clone(),
        pid: own.pid,
        nonce: RandomState::new().build_hasher().finish(),
    };
    let start = Instant::now();
    let (stream, root_host) = connect(world, &host, &hello, &own.info, start, timeout)?;
    let Ok(writer) = stream.try_clone() else {
        return Err(LaunchError::Control(
            "cannot clone the socket to rank 0".into(),
        ));
    };
    let root = Arc::new(Peer {
        rank: 0,
        host: root_host,
        writer: Mutex::new(writer),
        left: AtomicBool::new(false),
        reader_done: AtomicBool::new(false),
    });
    let (shared, events_rx) = Shared::new(world, timeout, board, Outbox::Root(Arc::clone(&root)));
    spawn_reader(Arc::clone(&shared), Arc::clone(&root), stream);
    spawn_heartbeat(Arc::clone(&shared), root);

    // Rank 0 decides (at its own deadline) whether everyone came; it stays
    // audible through heartbeats, so waiting for Ready is bounded either way.
    let mut state = new_state(events_rx, world.world_size);
    let ready_deadline = start + timeout * 2 + Duration::from_secs(5);
    wait_for_ready(&shared, &mut state, &host, ready_deadline, timeout)?;
    Ok(Link {
        shared,
        state: Mutex::new(state),
        hellos: Vec::new(),
    })
}

/// Says hello to rank 0 until it answers, backing off with jitter, until
/// `timeout` after `start`: the connection and rank 0's host.
fn connect(
    world: &World,
    host: &str,
    hello: &Msg,
    info: &[u8],
    start: Instant,
    timeout: Duration,
) -> Result<(TcpStream, String), LaunchError> {
    let port = world.rendezvous_port;
    let deadline = start + timeout;
    let mut last_problem = String::from("not tried");
    let mut backoff = Duration::from_millis(50);
    let joined = loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Err(LaunchError::Control(format!(
                "rank {} could not join rank 0 at {host}:{port} within {} s (last: {last_problem}): check that rank 0 runs and that {host}:{port} is reachable from {}",
                world.rank,
                timeout.as_secs(),
                world.hostname
            )));
        };
        match try_join(host, port, hello, info, left) {
            Ok(joined) => break joined,
            Err(Attempt::Refused(reason)) => {
                return Err(LaunchError::Control(format!(
                    "rank 0 at {host}:{port} refused this process: {reason}"
                )))
            }
            Err(Attempt::Retry(problem)) => {
                last_problem = problem;
                thread::sleep(jittered(backoff).min(left));
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    };
    Ok(joined)
}

/// Waits for rank 0's Ready, absorbing what comes before it; fails when the
/// job fails, rank 0 closes, or `ready_deadline` passes.
fn wait_for_ready(
    shared: &Shared,
    state: &mut State,
    host: &str,
    ready_deadline: Instant,
    timeout: Duration,
) -> Result<(), LaunchError> {
    loop {
        // What arrived first: a Ready that came before a failure (another
        // rank aborting right after Ready) still starts this rank, whose
        // first call then reports the failure.
        let event = match state.events.try_recv() {
            Ok(event) => Some(event),
            Err(_) => {
                if let Some(failure) = shared.failure() {
                    shared.close();
                    return Err(LaunchError::Control(failure));
                }
                let Some(left) = ready_deadline.checked_duration_since(Instant::now()) else {
                    let error = shared.fail(
                        format!(
                            "rank 0 on host {host} did not start the job within {} s",
                            (timeout * 2).as_secs()
                        ),
                        None,
                    );
                    shared.close();
                    return Err(error);
                };
                state.events.recv_timeout(left).ok()
            }
        };
        match event {
            Some(Event::Frame {
                msg: Msg::Ready, ..
            }) => break,
            Some(Event::Left(_)) => {
                shared.close();
                return Err(LaunchError::Control(format!(
                    "rank 0 on host {host} closed before the job started"
                )));
            }
            Some(event) => absorb(state, event, &mut Vec::new()),
            None => {}
        }
    }
    Ok(())
}

/// `backoff` times a random factor in [0.5, 1.5): thousands of ranks that
/// found rank 0 not yet listening do not all come back at the same moment.
fn jittered(backoff: Duration) -> Duration {
    let random = RandomState::new().build_hasher().finish();
    backoff.mul_f64(0.5 + (random % 1024) as f64 / 1024.0)
}

/// One attempt: connect, say hello, read the answer; the connection and
/// rank 0's host, once welcomed.
pub(super) fn try_join(
    host: &str,
    port: u16,
    hello: &Msg,
    info: &[u8],
    left: Duration,
) -> Result<(TcpStream, String), Attempt> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| Attempt::Retry(format!("cannot resolve {host}: {e}")))?
        .collect();
    let mut problem = format!("{host} resolves to no address");
    for addr in addrs {
        let mut stream = match TcpStream::connect_timeout(&addr, left.min(wire::CONNECT_TIMEOUT)) {
            Ok(s) => s,
            Err(e) => {
                problem = format!("connect to {addr}: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(
            left.clamp(Duration::from_millis(10), Duration::from_secs(10)),
        ));
        let _ = stream.set_write_timeout(Some(left.max(Duration::from_millis(10))));
        if let Err(e) = wire::write_frame(&mut stream, hello, info) {
            problem = format!("hello to {addr}: {e}");
            continue;
        }
        match wire::read_frame(&mut stream) {
            // The payload names rank 0's host as rank 0 names itself (an
            // older rank 0 sends none: then its address names it).
            Ok((Msg::Welcome, payload)) => {
                let named = String::from_utf8(payload).ok().filter(|h| !h.is_empty());
                return Ok((stream, named.unwrap_or_else(|| host.to_string())));
            }
            Ok((Msg::Refused { reason }, _)) => return Err(Attempt::Refused(reason)),
            Ok((other, _)) => problem = format!("{addr} answered {other:?} instead of a welcome"),
            Err(e) => problem = format!("{addr} answered no welcome: {e}"),
        }
    }
    Err(Attempt::Retry(problem))
}
