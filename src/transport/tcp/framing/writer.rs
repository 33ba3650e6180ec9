//! The send side: queued records written with `sendmsg` as the socket
//! takes them, the answers among them counted for the peer's budget, and
//! send coalescing ([`Cork`]).

use super::reader::iov;
use super::{ByteSink, IOV_BATCH};
use crate::base::error::{Error, Result};
use crate::sys::net::Io;
use crate::transport::iov::IovList;
use crate::transport::proto::HDR_LEN;
use std::collections::VecDeque;

/// The payload of a queued record.
pub(crate) enum Body {
    None,
    /// Copied (inject, or a copy requested).
    Owned(Vec<u8>),
    /// The application's buffer, sent in place (valid until the send's
    /// completion, fi_msg(3)).
    Iov(IovList),
}

/// A record waiting to go out.
pub(crate) struct OutRecord {
    hdr: [u8; HDR_LEN],
    body: Body,
    len: usize,
    /// Bytes of header + payload already written.
    done: usize,
    /// The message to report through `Delivery::sent` once written.
    pub(crate) notify: Option<u64>,
    /// An answer to a peer's request (a control record): counted in its
    /// queue's [`WriteQueue::replies`].
    reply: bool,
}

/// What one queued answer to a peer (an ACK, RMA_ACK, CTS: a control
/// record without payload) holds in memory: the record itself.
pub(crate) const REPLY_COST: usize = core::mem::size_of::<OutRecord>();

impl OutRecord {
    pub(crate) fn new(hdr: [u8; HDR_LEN], body: Body) -> OutRecord {
        let len = match &body {
            Body::None => 0,
            Body::Owned(v) => v.len(),
            Body::Iov(l) => l.total(),
        };
        OutRecord {
            hdr,
            body,
            len,
            done: 0,
            notify: None,
            reply: false,
        }
    }

    fn total(&self) -> usize {
        HDR_LEN + self.len
    }

    /// Replaces an application buffer by a copy (the caller may reuse it).
    pub(crate) fn make_owned(&mut self) {
        if let Body::Iov(l) = &self.body {
            let mut v = Vec::with_capacity(self.len);
            l.for_range(0, self.len, |p, n, _| {
                // SAFETY: application memory named by the send's iov, valid
                // during the send call that asks for the copy.
                v.extend_from_slice(unsafe { core::slice::from_raw_parts(p as *const u8, n) })
            });
            self.body = Body::Owned(v);
        }
    }

    /// Appends iovecs for the unwritten bytes; false if `v` ran out of room.
    fn gather(&self, v: &mut IovBuf) -> bool {
        let cap = IOV_BATCH;
        let mut skip = self.done;
        if skip < HDR_LEN {
            if v.len() == cap {
                return false;
            }
            v.push(iov(self.hdr[skip..].as_ptr(), HDR_LEN - skip));
            skip = 0;
        } else {
            skip -= HDR_LEN;
        }
        match &self.body {
            Body::None => true,
            Body::Owned(b) => {
                if skip < b.len() {
                    if v.len() == cap {
                        return false;
                    }
                    v.push(iov(b[skip..].as_ptr(), b.len() - skip));
                }
                true
            }
            Body::Iov(l) => {
                let mut fit = true;
                l.for_range(skip, self.len - skip.min(self.len), |p, n, _| {
                    if v.len() == cap {
                        fit = false;
                    } else {
                        v.push(iov(p as *const u8, n));
                    }
                });
                fit
            }
        }
    }
}

/// Up to [`IOV_BATCH`] iovecs on the stack (one `sendmsg`'s worth).
struct IovBuf {
    v: [libc::iovec; IOV_BATCH],
    n: usize,
}

impl IovBuf {
    fn new() -> IovBuf {
        IovBuf {
            v: [iov(core::ptr::null(), 0); IOV_BATCH],
            n: 0,
        }
    }
    fn clear(&mut self) {
        self.n = 0;
    }
    fn len(&self) -> usize {
        self.n
    }
    fn push(&mut self, i: libc::iovec) {
        self.v[self.n] = i;
        self.n += 1;
    }
    fn as_slice(&self) -> &[libc::iovec] {
        &self.v[..self.n]
    }
}

/// Send coalescing. The first data record after a progress pass is written
/// at once (a ping-pong pays nothing); the small ones posted behind it
/// before the next pass wait in the queue and go out together, in one
/// `sendmsg`, at that pass — a burst of N small sends then costs about two
/// system calls instead of N, on both sides (the receiver's read-ahead takes
/// them in one read). Nothing waits while somebody sleeps on the engine (a
/// blocked reader, an FD armed by `fi_trywait`, a progress thread): the
/// arming flushes, and records posted meanwhile are written at once.
/// `FI_MORE` on a send makes even the first record of a burst wait.
/// `FI_RUSTFAB_TCP_COALESCE=0` turns the implicit part off (every send is
/// written at once unless it carries `FI_MORE`), for applications that post
/// a burst and then compute for long without calling into libfabric.
pub(crate) struct Cork {
    /// A data record was queued since the last progress pass (or the
    /// application announced more with `FI_MORE`).
    pub(super) burst: bool,
    /// Somebody sleeps on the engine: write everything at once.
    pub(super) sleepers: bool,
    /// `FI_RUSTFAB_TCP_COALESCE` (default on); `FI_MORE` works either way.
    pub(super) implicit: bool,
}

/// Largest payload a record may have to wait in a burst.
pub(crate) const CORK_RECORD_MAX: usize = 4096;
/// A burst is written once this many bytes wait.
pub(crate) const CORK_BYTES: usize = 32 << 10;

impl Cork {
    /// Coalesces bursts without `FI_MORE` when `coalesce` is set (the
    /// settings' `FI_RUSTFAB_TCP_COALESCE`).
    pub(crate) fn new(coalesce: bool) -> Cork {
        Cork {
            burst: false,
            sleepers: false,
            implicit: coalesce,
        }
    }

    /// A data record with `payload` bytes was just queued, leaving
    /// `unsent` bytes in its queue: may it wait for the next pass?
    pub(crate) fn defer(&mut self, payload: usize, unsent: usize) -> bool {
        let wait = self.burst && !self.sleepers && payload <= CORK_RECORD_MAX && unsent < CORK_BYTES;
        self.burst = self.implicit;
        wait
    }

    /// `FI_MORE`: the application posts more at once.
    pub(crate) fn more(&mut self) {
        self.burst = true;
    }

    /// A progress pass (which writes what waits) ends the burst.
    pub(crate) fn end_burst(&mut self) {
        self.burst = false;
    }

    pub(crate) fn set_sleepers(&mut self, n: usize) {
        self.sleepers = n > 0;
    }
}

/// A peer's queue of records (FIFO: FI_ORDER_SAS).
#[derive(Default)]
pub(crate) struct WriteQueue {
    q: VecDeque<OutRecord>,
    unsent: usize,
    /// Bytes of memory the queued answers to the peer's requests hold
    /// ([`REPLY_COST`] each): what the peer's budget bounds.
    replies: usize,
}

/// A queue that emptied with room for more than this many records gives
/// the memory back (a flood's answers, drained, leave nothing behind).
const KEEP_CAPACITY: usize = 256;

impl WriteQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Bytes queued and not yet written.
    pub(crate) fn unsent(&self) -> usize {
        self.unsent
    }

    pub(crate) fn push(&mut self, r: OutRecord) {
        self.unsent += r.total() - r.done;
        self.q.push_back(r);
    }

    /// Queues an answer to one of the peer's requests (counted in
    /// [`WriteQueue::replies`]).
    pub(crate) fn push_reply(&mut self, mut r: OutRecord) {
        r.reply = true;
        self.replies += REPLY_COST;
        self.push(r);
    }

    /// Bytes of memory the queued answers to the peer's requests hold.
    pub(crate) fn replies(&self) -> usize {
        self.replies
    }

    pub(crate) fn back_mut(&mut self) -> Option<&mut OutRecord> {
        self.q.back_mut()
    }

    /// Moves every record of `other` behind ours (a connection taking the
    /// records that waited for it).
    pub(crate) fn append(&mut self, other: &mut WriteQueue) {
        self.unsent += std::mem::take(&mut other.unsent);
        self.replies += std::mem::take(&mut other.replies);
        self.q.append(&mut other.q);
    }

    /// Writes as much as the stream takes. Records finished meanwhile
    /// that asked for it are appended to `sent`. `Ok(true)`: queue empty.
    pub(crate) fn flush(&mut self, out: &mut dyn ByteSink, sent: &mut Vec<u64>) -> Result<bool> {
        // On the stack: a send that writes at once allocates nothing here.
        let mut v = IovBuf::new();
        while !self.q.is_empty() {
            v.clear();
            let mut want = 0;
            for r in &self.q {
                let before = v.len();
                let fit = r.gather(&mut v);
                want += v.as_slice()[before..].iter().map(|i| i.iov_len).sum::<usize>();
                if !fit {
                    break;
                }
            }
            // SAFETY: the iovecs describe our records' headers and owned
            // payloads, or application buffers that stay valid until the
            // send completes (reported below, after they are written).
            let n = match unsafe { out.write(v.as_slice()) } {
                Io::Done(n) => n.min(want),
                Io::Blocked => return Ok(false),
                Io::Eof => return Err(Error::CONNRESET),
                Io::Failed(e) => return Err(e),
            };
            self.advance(n, sent);
            if n < want {
                return Ok(self.q.is_empty());
            }
        }
        Ok(true)
    }

    fn advance(&mut self, mut n: usize, sent: &mut Vec<u64>) {
        self.unsent -= n.min(self.unsent);
        while n > 0 {
            let Some(r) = self.q.front_mut() else { break };
            let left = r.total() - r.done;
            if n < left {
                r.done += n;
                return;
            }
            n -= left;
            if let Some(id) = r.notify {
                sent.push(id);
            }
            if r.reply {
                self.replies -= REPLY_COST.min(self.replies);
            }
            self.q.pop_front();
        }
        // Zero-length leftovers (never produced: every record has a header).
        if self.q.is_empty() && self.q.capacity() > KEEP_CAPACITY {
            self.q.shrink_to(KEEP_CAPACITY);
        }
    }

    /// Empties the queue; returns the messages that wanted a report.
    pub(crate) fn take_notifications(&mut self) -> Vec<u64> {
        self.unsent = 0;
        self.replies = 0;
        self.q.drain(..).filter_map(|r| r.notify).collect()
    }
}
