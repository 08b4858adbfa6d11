//! Failure detection with ranks as threads and hand-made bad clients.

use super::rendezvous::try_join;
use super::Control;
use crate::wire::{Msg, PROTOCOL_VERSION};
use crate::{LaunchOptions, World};
use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

fn world(rank: usize, n: usize, port: u16) -> World {
    World::on_loopback(rank, n, port, "job")
}

fn options(timeout_s: u64) -> LaunchOptions {
    LaunchOptions {
        timeout_s,
        ..LaunchOptions::default()
    }
}

fn free_port() -> u16 {
    World::free_loopback_port().unwrap()
}

/// A rank that joins properly and then stops talking, like a process
/// under SIGSTOP: its socket stays open but heartbeats stop.
fn silent_rank(port: u16, rank: usize, n: usize) -> TcpStream {
    let hello = Msg::Hello {
        protocol: PROTOCOL_VERSION,
        token: "job".into(),
        rank,
        world_size: n,
        local_rank: 0,
        host: "frozen".into(),
        pid: 1,
        nonce: 7,
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match try_join("127.0.0.1", port, &hello, &[], Duration::from_secs(5)) {
            Ok((stream, _)) => return stream,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Err(_) => panic!("could not join"),
        }
    }
}

#[test]
fn a_silent_rank_is_detected_within_the_timeout() {
    let port = free_port();
    let root = thread::spawn(move || {
        let control = Control::connect(&world(0, 3, port), &options(2)).unwrap();
        let start = Instant::now();
        (control.barrier().unwrap_err().to_string(), start.elapsed())
    });
    let live = thread::spawn(move || {
        let control = Control::connect(&world(1, 3, port), &options(2)).unwrap();
        control.barrier().unwrap_err().to_string()
    });
    let _frozen = silent_rank(port, 2, 3);
    let (root_error, waited) = root.join().unwrap();
    assert!(
        root_error.contains("rank 2 on host frozen sent nothing for 2 s"),
        "{root_error}"
    );
    assert!(waited < Duration::from_secs(2 + 5), "{waited:?}");
    let live_error = live.join().unwrap();
    assert!(live_error.contains("rank 2 on host frozen"), "{live_error}");
}

#[test]
fn garbage_clients_are_dropped_and_the_job_goes_on() {
    let port = free_port();
    let root = thread::spawn(move || {
        Control::connect(&world(0, 2, port), &options(5)).map(|c| c.all_gather(vec![7]))
    });
    thread::sleep(Duration::from_millis(200));
    let mut http = TcpStream::connect(("127.0.0.1", port)).unwrap();
    http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut huge = TcpStream::connect(("127.0.0.1", port)).unwrap();
    huge.write_all(&[0xff; 8]).unwrap();
    let peer = Control::connect(&world(1, 2, port), &options(5)).unwrap();
    assert_eq!(peer.all_gather(vec![8]).unwrap(), vec![vec![7], vec![8]]);
    assert_eq!(
        root.join().unwrap().unwrap().unwrap(),
        vec![vec![7], vec![8]]
    );
}

fn hello(rank: usize, n: usize, nonce: u64) -> Msg {
    Msg::Hello {
        protocol: PROTOCOL_VERSION,
        token: "job".into(),
        rank,
        world_size: n,
        local_rank: 0,
        host: "retrying".into(),
        pid: 1,
        nonce,
    }
}

#[test]
fn a_rank_that_retries_its_join_replaces_itself_and_a_stranger_is_still_refused() {
    let port = free_port();
    let root = thread::spawn(move || Control::connect(&world(0, 3, port), &options(10)).is_ok());
    let join = |nonce| {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match try_join(
                "127.0.0.1",
                port,
                &hello(1, 3, nonce),
                &[],
                Duration::from_secs(5),
            ) {
                Ok((stream, _)) => return Ok(stream),
                Err(super::rendezvous::Attempt::Refused(reason)) => return Err(reason),
                Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
                Err(_) => panic!("could not join"),
            }
        }
    };
    let _first = join(5).unwrap();
    // The same rank again (it gave up on a slow welcome): welcomed.
    let _again = join(5).unwrap();
    // Another process claiming rank 1: refused.
    let stranger = join(6).unwrap_err();
    assert!(stranger.contains("already joined"), "{stranger}");
    let _last = Control::connect(&world(2, 3, port), &options(10)).unwrap();
    assert!(root.join().unwrap());
}

#[test]
fn a_rank_that_stops_reading_is_named_by_rank_0() {
    let port = free_port();
    let root = thread::spawn(move || {
        let control = Control::connect(&world(0, 2, port), &options(2)).unwrap();
        // Answers pile up in the rank's socket, then in rank 0's queue.
        for _ in 0..8 {
            let _ = control.broadcast(Some(vec![0; 8 << 20]));
        }
        control.barrier().unwrap_err().to_string()
    });
    let stream = silent_rank(port, 1, 2);
    // It keeps its heartbeat going but never reads.
    let mut beating = stream.try_clone().unwrap();
    thread::spawn(move || loop {
        let word = crate::wire::word_payload(0);
        if crate::wire::write_frame(&mut beating, &Msg::Heartbeat, &word).is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    });
    let error = root.join().unwrap();
    assert!(
        error.contains("rank 1 on host frozen read nothing for 2 s"),
        "{error}"
    );
    drop(stream);
}

#[test]
fn a_rank_lost_before_ready_may_join_again() {
    let port = free_port();
    let root = thread::spawn(move || Control::connect(&world(0, 3, port), &options(10)).is_ok());
    // Rank 1 joins, then its connection closes before the job starts
    // (it gave up on a slow welcome, or its first process died).
    drop(silent_rank(port, 1, 3));
    thread::sleep(Duration::from_millis(200));
    let again = thread::spawn(move || Control::connect(&world(1, 3, port), &options(10)).is_ok());
    let last = Control::connect(&world(2, 3, port), &options(10));
    assert!(last.is_ok());
    assert!(again.join().unwrap());
    assert!(root.join().unwrap());
}
