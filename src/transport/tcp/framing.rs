//! Record framing on a TCP stream: the receive state machine ([`Reader`])
//! and the per-peer send queue ([`WriteQueue`]). Both are pure: they move
//! bytes through the [`ByteSource`] / [`ByteSink`] traits, which the port
//! implements with `recv`/`recvmsg` and `sendmsg` and the tests with scripted streams
//! cut into arbitrary pieces.
//!
//! Receiving a record (docs/protocol.md):
//! 1. read the 64-byte header into the reader's own buffer, decode it and
//!    validate everything with `WireHdr::check` against the endpoint's
//!    limits, then the ops a TCP stream may carry;
//! 2. EAGER, DATA, and the RMA chunks WRITE and READ_RESP (`op::placed`):
//!    ask the endpoint core where the payload goes (`place`) and read
//!    it **straight into the matched receive buffer** (scatter read over the
//!    application's iov; the bytes beyond a truncated receive go to a
//!    scratch buffer and are dropped), or into a vector sized exactly to the
//!    message for an unexpected one (the core checked its budget first), or
//!    nowhere (`Stall`: the header stays, the socket is not read again until
//!    a later pass accepts it);
//! 3. control records (ACK) are at most `CTL_MAX` bytes, read into the
//!    reader's fixed buffer; handshake records go back to the port.
//!
//! A read that fetches a header reads it into the read-ahead buffer with up
//! to [`reader::READ_AHEAD`] bytes behind it (one buffer: a plain `recv`),
//! and a read that finishes a payload asks for that much more in the same
//! system call (the following records): a record of up to 8 KiB costs one
//! read, and a stream of small messages about one read per read-ahead
//! buffer instead of two per message, for one copy of those small payloads
//! out of the read-ahead buffer. The bulk of a large payload is still read
//! straight into the matched receive buffer (no copy).
//!
//! Memory per connection: the 64-byte header, `CTL_MAX` control bytes and
//! the read-ahead buffer; nothing a peer says can make the reader allocate
//! beyond what the core's placement allows.

use crate::sys::net::Io;
use crate::transport::proto::{flag, op, WireHdr};

mod reader;
mod writer;

pub(crate) use reader::{Broken, Outcome, Reader, Stage};
pub(crate) use writer::{Body, Cork, OutRecord, WriteQueue, REPLY_COST};

/// Largest control payload (HELLO: an address; `WireHdr::check` caps it).
pub(crate) const CTL_MAX: usize = 256;
/// Most iovecs one read or write uses.
const IOV_BATCH: usize = 128;

/// A control payload as it goes on a stream. An RTS names the sender's
/// buffers for a pull by cross-memory attach, which no TCP peer can do:
/// their addresses are zeroed (the message is known to the peer by its
/// `msg_id` alone; only the lengths stay) and `CMA_OK` is cleared, so no
/// address of ours ever reaches the network.
pub(crate) fn outgoing_payload(h: &mut WireHdr, b: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    if h.op == op::RTS {
        h.flags &= !flag::CMA_OK;
        for e in v.chunks_exact_mut(16) {
            e[..8].fill(0);
        }
    }
    v
}

/// Where stream bytes come from.
pub(crate) trait ByteSource {
    /// Scatters available bytes into `iov` in order.
    ///
    /// # Safety
    /// Every iovec must describe writable memory.
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> Io;
}

/// Where stream bytes go.
pub(crate) trait ByteSink {
    /// Gathers bytes from `iov` onto the stream.
    ///
    /// # Safety
    /// Every iovec must describe readable memory.
    unsafe fn write(&mut self, iov: &[libc::iovec]) -> Io;
}

#[cfg(test)]
mod tests;
