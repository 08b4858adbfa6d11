//! Joining the job. Rank 0 listens, checks every hello (protocol version,
//! token, world size, rank range, duplicates) and refuses strangers with a
//! reason; the others connect with retries until the deadline. When all
//! have joined, rank 0 says Ready.

use super::liveness::{spawn_heartbeat, spawn_reader};
use super::progress::Board;
use super::shared::{lock, new_state, Event, Link, Peer, Shared};
use super::{call::absorb, PeerHello};
use crate::wire::{self, Msg, PROTOCOL_VERSION};
use crate::{LaunchError, World};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A validated hello waiting for rank 0's duplicate check.
struct Joiner {
    hello: PeerHello,
    stream: TcpStream,
    addr: SocketAddr,
}

pub(super) fn join_as_root(
    world: &World,
    timeout: Duration,
    own: PeerHello,
    board: Arc<Board>,
) -> Result<Link, LaunchError> {
    let n = world.world_size;
    let listen = format!("{}:{}", world.bind, world.rendezvous_port);
    let listener = TcpListener::bind((world.bind.as_str(), world.rendezvous_port)).map_err(|e| {
        LaunchError::Control(format!(
            "rank 0 cannot listen on {listen}: {e}; if another job uses this port, set COLLBENCH_PORT or --rendezvous HOST:PORT to a free one"
        ))
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| LaunchError::Control(format!("listen on {listen}: {e}")))?;

    let (events_tx, events_rx) = mpsc::channel();
    let shared = Arc::new(Shared::new(world, timeout, events_tx, board));
    let (join_tx, join_rx) = mpsc::channel();
    spawn_acceptor(listener, Arc::clone(&shared), join_tx);
    spawn_heartbeat(Arc::clone(&shared));

    let deadline = Instant::now() + timeout;
    let mut hellos: Vec<Option<PeerHello>> = vec![None; n];
    hellos[0] = Some(own);
    while hellos.iter().any(Option::is_none) {
        if let Some(failure) = shared.failure() {
            shared.close();
            return Err(LaunchError::Control(failure));
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
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
        let Ok(joiner) = join_rx.recv_timeout(left.min(Duration::from_millis(100))) else {
            continue;
        };
        let Joiner {
            hello,
            stream,
            addr,
        } = joiner;
        if let Some(first) = &hellos[hello.rank] {
            let reason = format!(
                "rank {} already joined from host {} (pid {}): two processes were given the same rank",
                hello.rank, first.host, first.pid
            );
            refuse(stream, addr, &hello.host, &reason);
            continue;
        }
        let rank = hello.rank;
        if admit(&shared, &hello, stream) {
            hellos[rank] = Some(hello);
        }
    }
    shared.complete.store(true, Ordering::SeqCst);
    for peer in shared.peers() {
        if peer.send(&Msg::Ready, &[]).is_err() {
            let error = shared.fail(
                format!("{} disconnected while the job started", peer.name()),
                Some(peer.rank),
            );
            shared.close();
            return Err(error);
        }
    }
    let hellos = hellos.into_iter().flatten().collect();
    Ok(Link {
        shared,
        state: Mutex::new(new_state(events_rx, n)),
        hellos,
    })
}

/// Welcomes a rank and starts reading from it; false if it vanished.
fn admit(shared: &Arc<Shared>, hello: &PeerHello, stream: TcpStream) -> bool {
    let Ok(writer) = stream.try_clone() else {
        return false;
    };
    let peer = Arc::new(Peer {
        rank: hello.rank,
        host: hello.host.clone(),
        writer: Mutex::new(writer),
        left: AtomicBool::new(false),
        reader_done: AtomicBool::new(false),
    });
    if peer.send(&Msg::Welcome, &[]).is_err() {
        return false;
    }
    lock(&shared.peers)[hello.rank] = Some(Arc::clone(&peer));
    spawn_reader(Arc::clone(shared), peer, stream);
    true
}

/// Rank 0: accepts connections until closing; each hello is checked on its
/// own thread so a silent stray client cannot hold up the others.
fn spawn_acceptor(listener: TcpListener, shared: Arc<Shared>, join_tx: Sender<Joiner>) {
    let _ = thread::Builder::new()
        .name("collbench-accept".into())
        .spawn(move || {
            while !shared.closing.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, addr)) => {
                        let shared = Arc::clone(&shared);
                        let join_tx = join_tx.clone();
                        let _ = thread::Builder::new()
                            .name("collbench-hello".into())
                            .spawn(move || check_hello(&shared, stream, addr, &join_tx));
                    }
                    // Non-blocking accept: poll, so closing is noticed.
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
}

/// Reads and validates one hello; passes it on or refuses it.
fn check_hello(shared: &Shared, stream: TcpStream, addr: SocketAddr, join_tx: &Sender<Joiner>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(shared.timeout.min(Duration::from_secs(10))));
    let _ = stream.set_write_timeout(Some(shared.timeout));
    let mut reader = match stream.try_clone() {
        Ok(r) => r,
        Err(_) => return,
    };
    let (msg, info) = match wire::read_frame(&mut reader) {
        Ok(frame) => frame,
        Err(e) => {
            eprintln!("collbench: rank 0 dropped a connection from {addr}: {e} before a hello (not a collbench rank?)");
            return;
        }
    };
    let Msg::Hello {
        protocol,
        token,
        rank,
        world_size,
        local_rank,
        host,
        pid,
    } = msg
    else {
        refuse(
            stream,
            addr,
            "?",
            "the first message was not a hello (not a collbench rank?)",
        );
        return;
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
    } else if shared.complete.load(Ordering::SeqCst) {
        Some(format!(
            "all {n} ranks already joined (a second process with rank {rank}?)"
        ))
    } else {
        None
    };
    match problem {
        Some(reason) => refuse(stream, addr, &host, &format!("rank {rank}: {reason}")),
        None => {
            let hello = PeerHello {
                rank,
                local_rank,
                host,
                pid,
                info,
            };
            let _ = join_tx.send(Joiner {
                hello,
                stream,
                addr,
            });
        }
    }
}

/// Refuses a connection with a reason the client prints, and logs one line.
fn refuse(stream: TcpStream, addr: SocketAddr, host: &str, reason: &str) {
    eprintln!("collbench: rank 0 refused a connection from {addr} (host {host}): {reason}");
    let mut stream = stream;
    let _ = wire::write_frame(
        &mut stream,
        &Msg::Refused {
            reason: reason.to_string(),
        },
        &[],
    );
    let _ = stream.shutdown(Shutdown::Both);
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
            "rank {} does not know where rank 0 listens: set COLLBENCH_RENDEZVOUS=HOST:PORT or pass --rendezvous",
            world.rank
        ))
    })?;
    let port = world.rendezvous_port;
    let hello = Msg::Hello {
        protocol: PROTOCOL_VERSION,
        token: world.token.clone(),
        rank: world.rank,
        world_size: world.world_size,
        local_rank: world.local_rank,
        host: world.hostname.clone(),
        pid: own.pid,
    };
    let start = Instant::now();
    let deadline = start + timeout;
    let mut last_problem = String::from("not tried");
    let stream = loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Err(LaunchError::Control(format!(
                "rank {} could not join rank 0 at {host}:{port} within {} s (last: {last_problem}): check that rank 0 runs and that {host}:{port} is reachable from {}",
                world.rank,
                timeout.as_secs(),
                world.hostname
            )));
        };
        match try_join(&host, port, &hello, &own.info, left) {
            Ok(stream) => break stream,
            Err(Attempt::Refused(reason)) => {
                return Err(LaunchError::Control(format!(
                    "rank 0 at {host}:{port} refused this process: {reason}"
                )))
            }
            Err(Attempt::Retry(problem)) => {
                last_problem = problem;
                thread::sleep(Duration::from_millis(100).min(left));
            }
        }
    };

    let (events_tx, events_rx) = mpsc::channel();
    let shared = Arc::new(Shared::new(world, timeout, events_tx, board));
    let Ok(writer) = stream.try_clone() else {
        return Err(LaunchError::Control(
            "cannot clone the socket to rank 0".into(),
        ));
    };
    let root = Arc::new(Peer {
        rank: 0,
        host: host.clone(),
        writer: Mutex::new(writer),
        left: AtomicBool::new(false),
        reader_done: AtomicBool::new(false),
    });
    lock(&shared.peers)[0] = Some(Arc::clone(&root));
    spawn_reader(Arc::clone(&shared), root, stream);
    spawn_heartbeat(Arc::clone(&shared));

    // Rank 0 decides (at its own deadline) whether everyone came; it stays
    // audible through heartbeats, so waiting for Ready is bounded either way.
    let mut state = new_state(events_rx, world.world_size);
    let ready_deadline = start + timeout * 2 + Duration::from_secs(5);
    loop {
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
        match state.events.recv_timeout(left) {
            Ok(Event::Frame {
                msg: Msg::Ready, ..
            }) => break,
            Ok(Event::Left(_)) => {
                shared.close();
                return Err(LaunchError::Control(format!(
                    "rank 0 on host {host} closed before the job started"
                )));
            }
            Ok(event) => absorb(&mut state, event),
            Err(_) => {}
        }
    }
    Ok(Link {
        shared,
        state: Mutex::new(state),
        hellos: Vec::new(),
    })
}

/// One attempt: connect, say hello, read the answer.
pub(super) fn try_join(
    host: &str,
    port: u16,
    hello: &Msg,
    info: &[u8],
    left: Duration,
) -> Result<TcpStream, Attempt> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| Attempt::Retry(format!("cannot resolve {host}: {e}")))?
        .collect();
    let mut problem = format!("{host} resolves to no address");
    for addr in addrs {
        let mut stream = match TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(2))) {
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
            Ok((Msg::Welcome, _)) => return Ok(stream),
            Ok((Msg::Refused { reason }, _)) => return Err(Attempt::Refused(reason)),
            Ok((other, _)) => problem = format!("{addr} answered {other:?} instead of a welcome"),
            Err(e) => problem = format!("{addr} answered no welcome: {e}"),
        }
    }
    Err(Attempt::Retry(problem))
}
