//! The control plane's messages and their framing.
//!
//! A frame is `u32 header length, u32 payload length` (big endian), the
//! header as JSON (a [`Msg`]), then the payload bytes raw (so gathered
//! timings do not swell fourfold as JSON number arrays). Lengths are bounded
//! so garbage from a stray client cannot make us allocate gigabytes.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Bumped on any incompatible change; a peer with another version is refused.
/// 2: heartbeats carry the sender's progress word; `Stop`.
/// 3: `Stop` carries its failure's kind.
pub(crate) const PROTOCOL_VERSION: u32 = 3;

/// How long a rank waits for one TCP connect to rank 0 before trying
/// again: long enough for two SYN retransmits (1 s, then 3 s), which a
/// connect storm that overflows rank 0's accept queue needs; a shorter
/// wait only adds connections rank 0 must accept and drop.
pub(crate) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

const MAX_HEADER_BYTES: u32 = 1 << 20;
const MAX_PAYLOAD_BYTES: u32 = 256 << 20;

/// Which collective call a message belongs to (checked on arrival, so ranks
/// calling different things fail with a clear message instead of hanging).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
    Barrier,
    Broadcast,
    Gather,
    AllGather,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Barrier => "barrier",
            Op::Broadcast => "broadcast",
            Op::Gather => "gather",
            Op::AllGather => "all_gather",
        })
    }
}

/// One message; the payload (if any) travels next to it in the frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Msg {
    /// First message of a rank to rank 0; payload: the rank's self-description.
    Hello {
        protocol: u32,
        token: String,
        rank: usize,
        world_size: usize,
        local_rank: usize,
        host: String,
        pid: u32,
        /// Random, the same for every attempt of one joining rank: a
        /// second hello with it is that rank retrying, not a duplicate.
        /// (Defaulted so that a protocol-1 hello still parses and is
        /// refused for its version, with a message saying so.)
        #[serde(default)]
        nonce: u64,
    },
    /// Rank 0 accepted the hello.
    Welcome,
    /// Rank 0 refused the hello; the connection closes.
    Refused { reason: String },
    /// Rank 0: every rank has joined.
    Ready,
    /// "Still alive"; silence longer than the timeout is a failure.
    /// Payload: the sender's progress word ([`word_payload`]).
    Heartbeat,
    /// A rank's part of call `seq` (to rank 0); payload: the data.
    Contribute { seq: u64, op: Op },
    /// Rank 0's answer to call `seq`; payload: the data.
    Result { seq: u64, op: Op },
    /// Stop: something failed somewhere. Rank 0 passes on a failure it
    /// saw as "rank 0 stopped the job: {reason}".
    Abort { reason: String },
    /// Stop the job with exactly this reason (`Bootstrap::abort_job`: it
    /// already names who is at fault). From a rank to rank 0, which passes
    /// it on to everyone.
    Stop {
        reason: String,
        /// What the exit code follows (a stuck collective or a peer's
        /// failure), whatever the reason's words.
        #[serde(default)]
        kind: collbench_core::FailureKind,
    },
    /// Orderly goodbye: the connection closing next is not a failure.
    Bye,
}

/// Why reading a frame failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection (cleanly or by dying).
    Closed,
    /// Nothing arrived within the read timeout.
    Silent,
    /// Other socket errors (reset, ...).
    Io(io::Error),
    /// Bytes that are not a frame of ours.
    Malformed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Closed => f.write_str("connection closed"),
            ReadError::Silent => f.write_str("nothing received"),
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Malformed(m) => write!(f, "malformed message: {m}"),
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => ReadError::Closed,
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ReadError::Silent,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => ReadError::Closed,
            _ => ReadError::Io(e),
        }
    }
}

/// One whole frame as bytes (lengths, header, payload).
pub(crate) fn encode(msg: &Msg, payload: &[u8]) -> io::Result<Vec<u8>> {
    if payload.len() > MAX_PAYLOAD_BYTES as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} bytes is more than the control plane carries ({MAX_PAYLOAD_BYTES})",
                payload.len()
            ),
        ));
    }
    let header = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(8 + header.len() + payload.len());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&header);
    frame.extend_from_slice(payload);
    Ok(frame)
}

/// Writes one frame with a single `write_all`, so frames written under one
/// lock never interleave.
pub(crate) fn write_frame(w: &mut impl Write, msg: &Msg, payload: &[u8]) -> io::Result<()> {
    w.write_all(&encode(msg, payload)?)?;
    w.flush()
}

/// The two lengths at the start of a frame, checked.
fn lengths(bytes: [u8; 8]) -> Result<(usize, usize), ReadError> {
    let header_len = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes"));
    let payload_len = u32::from_be_bytes(bytes[4..].try_into().expect("4 bytes"));
    if header_len == 0 || header_len > MAX_HEADER_BYTES || payload_len > MAX_PAYLOAD_BYTES {
        return Err(ReadError::Malformed(format!(
            "frame lengths {header_len}/{payload_len} out of range (not a collbench peer?)"
        )));
    }
    Ok((header_len as usize, payload_len as usize))
}

/// Reads one frame.
pub(crate) fn read_frame(r: &mut impl Read) -> Result<(Msg, Vec<u8>), ReadError> {
    let mut head = [0u8; 8];
    r.read_exact(&mut head)?;
    let (header_len, payload_len) = lengths(head)?;
    let mut header = vec![0u8; header_len];
    r.read_exact(&mut header)?;
    let msg = serde_json::from_slice(&header).map_err(|e| ReadError::Malformed(e.to_string()))?;
    let mut payload = vec![0u8; payload_len];
    r.read_exact(&mut payload)?;
    Ok((msg, payload))
}

/// Takes one frame off the front of `bytes` (what a non-blocking socket
/// delivered so far): `Ok(None)` while the frame is incomplete, else the
/// frame and how many bytes it used. Malformed lengths fail at once, so a
/// stray client cannot make the reader buffer gigabytes.
pub(crate) fn decode(bytes: &[u8]) -> Result<Option<(Msg, Vec<u8>, usize)>, ReadError> {
    let Some((head, rest)) = bytes.split_first_chunk::<8>() else {
        return Ok(None);
    };
    let (header_len, payload_len) = lengths(*head)?;
    if rest.len() < header_len + payload_len {
        return Ok(None);
    }
    let (header, rest) = rest.split_at(header_len);
    let msg = serde_json::from_slice(header).map_err(|e| ReadError::Malformed(e.to_string()))?;
    let payload = rest[..payload_len].to_vec();
    Ok(Some((msg, payload, 8 + header_len + payload_len)))
}

/// A heartbeat's payload: the progress word, 8 bytes big endian.
pub(crate) fn word_payload(word: u64) -> [u8; 8] {
    word.to_be_bytes()
}

/// The progress word in a heartbeat's payload (0, "nothing published",
/// when the payload is not 8 bytes).
pub(crate) fn payload_word(payload: &[u8]) -> u64 {
    payload.try_into().map(u64::from_be_bytes).unwrap_or(0)
}

/// Packs a list of byte strings into one payload (`u32 count`, then
/// `u32 length` + bytes each).
pub(crate) fn pack(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + parts.iter().map(|p| 4 + p.len()).sum::<usize>());
    out.extend_from_slice(&(parts.len() as u32).to_be_bytes());
    for part in parts {
        out.extend_from_slice(&(part.len() as u32).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// Inverse of [`pack`]; `None` on truncated or inconsistent input.
pub(crate) fn unpack(mut bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    fn take_u32(bytes: &mut &[u8]) -> Option<usize> {
        let (head, rest) = bytes.split_first_chunk::<4>()?;
        *bytes = rest;
        Some(u32::from_be_bytes(*head) as usize)
    }
    let count = take_u32(&mut bytes)?;
    let mut parts = Vec::with_capacity(count.min(bytes.len() / 4));
    for _ in 0..count {
        let len = take_u32(&mut bytes)?;
        let (part, rest) = bytes.split_at_checked(len)?;
        parts.push(part.to_vec());
        bytes = rest;
    }
    bytes.is_empty().then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        let msg = Msg::Contribute {
            seq: 7,
            op: Op::AllGather,
        };
        write_frame(&mut buf, &msg, b"abc").unwrap();
        write_frame(&mut buf, &Msg::Bye, b"").unwrap();
        let mut r = buf.as_slice();
        assert_eq!(read_frame(&mut r).unwrap(), (msg, b"abc".to_vec()));
        assert_eq!(read_frame(&mut r).unwrap(), (Msg::Bye, vec![]));
        assert!(matches!(read_frame(&mut r), Err(ReadError::Closed)));
    }

    #[test]
    fn garbage_is_malformed_not_a_panic_or_a_huge_allocation() {
        let mut http = &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..];
        assert!(matches!(
            read_frame(&mut http),
            Err(ReadError::Malformed(_))
        ));
        let mut bad_json = Vec::new();
        bad_json.extend_from_slice(&3u32.to_be_bytes());
        bad_json.extend_from_slice(&0u32.to_be_bytes());
        bad_json.extend_from_slice(b"{{{");
        assert!(matches!(
            read_frame(&mut bad_json.as_slice()),
            Err(ReadError::Malformed(_))
        ));
    }

    #[test]
    fn pack_round_trips_and_rejects_truncation() {
        let parts = vec![b"a".to_vec(), vec![], b"hello".to_vec()];
        let packed = pack(&parts);
        assert_eq!(unpack(&packed).unwrap(), parts);
        assert_eq!(unpack(&packed[..packed.len() - 1]), None);
        assert_eq!(unpack(&[0, 0, 0, 9]), None);
    }

    #[test]
    fn an_older_hello_still_parses_so_its_version_can_be_refused() {
        let v1 = br#"{"type":"hello","protocol":1,"token":"t","rank":1,"world_size":2,"local_rank":0,"host":"h","pid":9}"#;
        let msg: Msg = serde_json::from_slice(v1).unwrap();
        assert!(matches!(
            msg,
            Msg::Hello {
                protocol: 1,
                nonce: 0,
                ..
            }
        ));
    }

    #[test]
    fn decode_waits_for_a_whole_frame_then_takes_exactly_it() {
        let mut bytes = encode(&Msg::Heartbeat, &word_payload(42)).unwrap();
        let one = bytes.len();
        bytes.extend(encode(&Msg::Bye, &[]).unwrap());
        for cut in 0..one {
            assert!(decode(&bytes[..cut]).unwrap().is_none(), "cut {cut}");
        }
        let (msg, payload, used) = decode(&bytes).unwrap().unwrap();
        assert_eq!(
            (msg, payload_word(&payload), used),
            (Msg::Heartbeat, 42, one)
        );
        assert_eq!(decode(&bytes[used..]).unwrap().unwrap().0, Msg::Bye);
        assert!(matches!(decode(&[0xff; 8]), Err(ReadError::Malformed(_))));
    }

    proptest! {
        #[test]
        fn read_frame_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = read_frame(&mut bytes.as_slice());
            let _ = decode(&bytes);
            let _ = unpack(&bytes);
        }
    }
}
