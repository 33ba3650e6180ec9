//! What the tests of a peer that floods an endpoint with requests share
//! (RDM ports' and connected endpoints'): a core that answers, and the
//! flooder's records.

use super::PeerBudget;
use crate::base::error::Result;
use crate::transport::addr::Addr;
use crate::transport::proto::{op, WireHdr};
use crate::transport::{Delivery, Disposition, PayloadIn, Place};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// The flood tests' budget: 64 KiB a peer, 1 MiB in all, cut off after
/// half a second.
pub(crate) const BUDGET: PeerBudget = PeerBudget {
    per_peer: 64 << 10,
    total: 1 << 20,
    timeout: Duration::from_millis(500),
};

/// A core (`core`) that answers every control record as the engine does:
/// the answer (an RMA_ACK) waits in `outbox` for the test to send it
/// through `send_ctl` after the pass.
#[derive(Default)]
pub(crate) struct Answering<D> {
    pub(crate) core: D,
    pub(crate) outbox: Vec<(Addr, WireHdr)>,
}

impl<D: Delivery> Delivery for Answering<D> {
    fn place(&mut self, src: &Addr, pid: i32, hdr: &WireHdr) -> Place {
        self.core.place(src, pid, hdr)
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.core.placed(handle, result)
    }
    fn buffered(&mut self, src: &Addr, pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.core.buffered(src, pid, hdr, data)
    }
    fn control(&mut self, src: &Addr, _pid: i32, hdr: &WireHdr, _payload: &dyn PayloadIn) -> Disposition {
        let mut a = WireHdr::new(op::RMA_ACK);
        a.msg_id = hdr.msg_id;
        self.outbox.push((*src, a));
        Disposition::Consumed
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.core.sent(msg_id, result)
    }
}

/// The flooder's records: 256 READ_REQs (any key), written over and over.
pub(crate) struct Flood {
    batch: Vec<u8>,
    off: usize,
}

impl Flood {
    pub(crate) fn new() -> Flood {
        let mut req = WireHdr::new(op::READ_REQ);
        req.len = 64;
        req.tag = 0xdead_beef;
        let mut batch = Vec::new();
        for i in 0..256u64 {
            req.msg_id = i;
            batch.extend_from_slice(&req.to_bytes());
        }
        Flood { batch, off: 0 }
    }

    /// Writes as many records as the non-blocking socket `f` takes now
    /// (64 writes at most).
    pub(crate) fn write(&mut self, f: &mut TcpStream) {
        for _ in 0..64 {
            match f.write(&self.batch[self.off..]) {
                Ok(n) => self.off = (self.off + n) % self.batch.len(),
                Err(_) => break,
            }
        }
    }
}
