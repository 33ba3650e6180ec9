//! The limits of a TCP stream and the options of its data connections,
//! shared by the port, its connections and the handshakes.

use crate::sys::net::Tuning;
use std::time::Duration;

/// Idle time before keepalive probes; 3 unanswered probes end a connection.
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// Unacknowledged data older than this ends a connection (TCP_USER_TIMEOUT).
pub(crate) const USER_TIMEOUT: Duration = Duration::from_secs(15);
/// Kernel send buffer per connection (asked for; the kernel caps it at
/// `net.core.wmem_max` and doubles it: 8 MiB where that cap is 4 MiB, as on
/// the machines measured, twice what `tcp_wmem` autotuning reaches; where
/// the cap would leave less than autotuning — a stock kernel's 212,992
/// bytes — nothing is asked and the connection autotunes:
/// `sys::net::send_buffer_request`): several 1 MiB chunks
/// ([`CHUNK_MAX`]) fit while the reader is busy, so a sender of large
/// messages is not left waiting for `EPOLLOUT` (256 KiB, before, cost half
/// the 1 MiB bandwidth; 2 MiB measured below 4: docs/performance-history.md
/// "tcpbw"); still bounded, so a stalled receiver pushes back on the
/// sender's posts.
pub(crate) const SNDBUF: usize = 4 << 20;
/// The options of every data connection, dialed or accepted.
pub(crate) const TUNING: Tuning = Tuning {
    sndbuf: SNDBUF,
    keepalive: KEEPALIVE_IDLE,
    user_timeout: USER_TIMEOUT,
};

/// Largest eager message on a TCP stream.
pub(crate) const EAGER_MAX: usize = 64 << 10;
/// Largest chunk of an accepted transfer on a TCP stream (`DATA`, `WRITE`,
/// `READ_RESP`): the receiver places it straight into its destination, so
/// its size costs no memory; a large one is one `sendmsg` (continued as the
/// socket drains) and a few `readv`s instead of one pair per 64 KiB.
pub(crate) const CHUNK_MAX: usize = 1 << 20;
