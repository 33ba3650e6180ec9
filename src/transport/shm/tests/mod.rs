use super::*;
use super::{cma::*, doorbell::*, inbound::*, outbound::*, peer::*, peers::*, port::*, rare, tombs::*};
use super::{ring, segment};
use crate::base::error::{Error, Result};
use crate::sys;
use crate::sys::doorbell::{DoorbellAddr, Ringer};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::op;
use crate::transport::proto::{self, Limits, WireHdr, HDR_LEN};
use crate::transport::{Disposition, Payload, PeerEvent, PullJob, SingleCopy};
use segment::{Segment, SlotSender, NSLOTS, SLOT_ACTIVE, SLOT_CLOSED, SLOT_FREE};
use std::time::{Duration, Instant};

mod budget;
mod peers;
mod rings;
mod senders;

const LIM: Limits = Limits {
    max_payload: EAGER_MAX,
    max_chunk: EAGER_MAX,
    max_iov: 8,
};

fn port() -> ShmPort {
    ShmPort::new(crate::transport::addr::shm_token_random(), LIM).unwrap()
}

/// Fills `a`'s ring towards `b` with eager records.
fn fill(a: &mut ShmPort, b: &ShmPort) -> (WireHdr, Vec<u8>) {
    let msg = vec![5u8; EAGER_MAX];
    let mut h = WireHdr::new(op::EAGER);
    h.len = msg.len() as u64;
    let mut sent = 0;
    while a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).is_ok() {
        sent += 1;
        assert!(sent < 1000);
    }
    (h, msg)
}

/// Mappings of the segment of `token` in this process (/proc/self/maps
/// lines naming it; a removed one's end in " (deleted)").
fn maps_of(token: u64) -> usize {
    let name = segment::seg_name(token).into_string().unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().filter(|l| l.contains(name.as_str())).count()
}

/// A tagged EAGER header for `b` (the tests tell records apart by tag;
/// a compact header carries the tag only with TAGGED).
fn eager(b: &[u8]) -> WireHdr {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = proto::flag::TAGGED;
    h.len = b.len() as u64;
    h
}

/// The op of every record `b` has now.
fn ops(b: &mut ShmPort) -> Vec<u8> {
    let mut v = Vec::new();
    b.poll_records(&mut |r| {
        v.push(r.hdr.op);
        Disposition::Consumed
    });
    v
}

/// (source, pid reported) of every record `b` has now.
fn sources(b: &mut ShmPort) -> Vec<(Addr, i32)> {
    let mut v = Vec::new();
    b.poll_records(&mut |r| {
        v.push((r.src, r.src_pid));
        Disposition::Consumed
    });
    v
}

/// Polls `b` until its rings have gone idle (unwatched), however few.
fn idle_out(b: &mut ShmPort) {
    b.hot_keep = 0;
    for _ in 0..2 * EVICT_PERIOD {
        b.poll_records(&mut |_| panic!("nothing was sent"));
    }
}
