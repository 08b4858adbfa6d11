//! The events the profiler plugin records, as C lays them out
//! ([`RawEvent`], mirroring `struct collbench_event` in
//! `profiler/collbench_profiler.c`) and as the rest of collbench reads them
//! ([`ProfilerEvent`]).

use crate::ffi::c_string;
use std::ffi::c_char;

/// Length of each name field in [`RawEvent`] (`CB_NAME_LEN`).
pub const NAME_LEN: usize = 32;

/// `CB_KIND_COLL`: a collective.
pub const KIND_COLL: i32 = 1;
/// `CB_KIND_P2P`: one send or receive.
pub const KIND_P2P: i32 = 2;

/// `struct collbench_event`, byte for byte.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawEvent {
    pub comm_hash: u64,
    pub seq_number: u64,
    pub count: u64,
    pub kind: i32,
    pub rank: i32,
    pub nranks: i32,
    pub peer: i32,
    pub root: i32,
    pub n_channels: i32,
    pub n_warps: i32,
    pub interface_version: i32,
    pub func: [c_char; NAME_LEN],
    pub algo: [c_char; NAME_LEN],
    pub proto: [c_char; NAME_LEN],
    pub datatype: [c_char; NAME_LEN],
}

impl Default for RawEvent {
    fn default() -> RawEvent {
        RawEvent {
            comm_hash: 0,
            seq_number: 0,
            count: 0,
            kind: 0,
            rank: 0,
            nranks: 0,
            peer: 0,
            root: 0,
            n_channels: 0,
            n_warps: 0,
            interface_version: 0,
            func: [0; NAME_LEN],
            algo: [0; NAME_LEN],
            proto: [0; NAME_LEN],
            datatype: [0; NAME_LEN],
        }
    }
}

/// Whether NCCL reported a collective or one side of a send/recv.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Coll,
    P2p,
}

/// One collective or send/recv NCCL reported: what it ran, on which rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfilerEvent {
    pub kind: EventKind,
    /// Rank in the communicator.
    pub rank: i64,
    /// Ranks in the communicator; `None` before profiler interface v4.
    pub nranks: Option<u64>,
    /// Communicator id (0 where NCCL gives none).
    pub comm_hash: u64,
    /// `AllReduce`, `Send`, ...
    pub func: String,
    /// `RING`, `TREE`, ...; empty for send/recv.
    pub algo: String,
    /// `LL`, `LL128`, `SIMPLE`; empty for send/recv.
    pub proto: String,
    /// Channels (`None` where NCCL reported none: send/recv before v4).
    pub channels: Option<u64>,
    /// Warps per block, for collectives.
    pub warps: Option<u64>,
    /// Elements.
    pub count: u64,
    /// NCCL's type name (`ncclFloat32`).
    pub datatype: String,
    /// Sequence number of the collective in its communicator.
    pub seq_number: u64,
    /// The other rank of a send/recv.
    pub peer: Option<i64>,
    /// The `ncclProfiler_vN` interface NCCL used.
    pub interface_version: u32,
}

fn non_negative(v: i32) -> Option<u64> {
    (v >= 0).then_some(v as u64)
}

impl ProfilerEvent {
    /// Reads a record; `None` for a kind this version does not know.
    pub fn from_raw(r: &RawEvent) -> Option<ProfilerEvent> {
        let kind = match r.kind {
            KIND_COLL => EventKind::Coll,
            KIND_P2P => EventKind::P2p,
            _ => return None,
        };
        Some(ProfilerEvent {
            kind,
            rank: r.rank as i64,
            nranks: non_negative(r.nranks),
            comm_hash: r.comm_hash,
            // The plugin always NUL-terminates its name fields; a full
            // field would still read to its end.
            func: c_string(&r.func),
            algo: c_string(&r.algo),
            proto: c_string(&r.proto),
            channels: non_negative(r.n_channels),
            warps: non_negative(r.n_warps),
            count: r.count,
            datatype: c_string(&r.datatype),
            seq_number: r.seq_number,
            peer: (kind == EventKind::P2p).then_some(r.peer as i64),
            interface_version: r.interface_version.max(0) as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(s: &str) -> [c_char; NAME_LEN] {
        let mut f = [0 as c_char; NAME_LEN];
        for (d, b) in f.iter_mut().zip(s.bytes()) {
            *d = b as c_char;
        }
        f
    }

    #[test]
    fn layout_matches_the_c_struct() {
        // 3 x u64, 8 x i32, 4 names of 32 bytes.
        assert_eq!(std::mem::size_of::<RawEvent>(), 24 + 32 + 4 * NAME_LEN);
        assert_eq!(std::mem::offset_of!(RawEvent, kind), 24);
        assert_eq!(std::mem::offset_of!(RawEvent, func), 56);
    }

    #[test]
    fn reads_a_collective_and_a_send() {
        let coll = RawEvent {
            kind: KIND_COLL,
            rank: 1,
            nranks: 2,
            n_channels: 24,
            n_warps: 16,
            count: 1024,
            peer: -1,
            func: field("AllReduce"),
            algo: field("RING"),
            proto: field("SIMPLE"),
            datatype: field("ncclFloat32"),
            interface_version: 5,
            ..RawEvent::default()
        };
        let e = ProfilerEvent::from_raw(&coll).unwrap();
        assert_eq!(e.kind, EventKind::Coll);
        assert_eq!((e.func.as_str(), e.algo.as_str()), ("AllReduce", "RING"));
        assert_eq!(e.channels, Some(24));
        assert_eq!(e.peer, None);
        let send = RawEvent {
            kind: KIND_P2P,
            peer: 0,
            n_channels: -1,
            nranks: -1,
            func: field("Send"),
            ..RawEvent::default()
        };
        let e = ProfilerEvent::from_raw(&send).unwrap();
        assert_eq!(e.kind, EventKind::P2p);
        assert_eq!((e.channels, e.nranks, e.peer), (None, None, Some(0)));
        assert!(ProfilerEvent::from_raw(&RawEvent::default()).is_none());
    }

    #[test]
    fn a_full_name_field_is_read_to_its_end() {
        let mut f = [b'x' as c_char; NAME_LEN];
        assert_eq!(c_string(&f).len(), NAME_LEN);
        f[3] = 0;
        assert_eq!(c_string(&f), "xxx");
    }
}
