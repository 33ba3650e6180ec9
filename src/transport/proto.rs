//! The one record header both transports put in front of every message or
//! control record: in a shared-memory ring cell (shm) and on a TCP stream
//! (tcp). Versioned, fixed at 64 bytes (one cache line), little-endian on the
//! wire (both ends of a shm ring are on one host; TCP converts explicitly).
//!
//! Nothing read from a peer is trusted: [`WireHdr::check`] validates the magic,
//! version, opcode, flags and every length against the receiver's limits
//! before any other code looks at the record. docs/protocol.md describes the
//! exchanges (eager, rendezvous, acknowledgements).
//!
//! ```text
//!  0      2    3    4         8                16     24     32       40       48      52    56          64
//!  | magic|ver | op | flags   | len (total)    | tag  | data | msg_id | offset | payload| aux | reserved  |
//! ```
//!
//! shm writes EAGER records in a compact form instead (flag `COMPACT`,
//! [`WireHdr::compact`]): the first 16 bytes as above, then only the fields
//! the flags call for — `tag` (TAGGED), `data` (REMOTE_CQ_DATA), `msg_id`
//! (ACK_REQ or ACK_ARRIVE), 8 bytes each, in that order — and the payload
//! right after them ([`compact_len`] bytes in): up to 48 bytes of it ride
//! in the record's first 64-byte cell (40 for a tagged message).

/// "RF": rustfab.
pub(crate) const MAGIC: u16 = 0x5246;
/// Bumped on any incompatible change of this header or of an exchange.
pub(crate) const VERSION: u8 = 1;
pub(crate) const HDR_LEN: usize = 64;
/// Bytes of a compact EAGER header with no optional field (the first word,
/// then `len`).
pub(crate) const COMPACT_MIN: usize = 16;
/// The flags that each add one 8-byte field to a compact header (`tag`,
/// `data`, `msg_id`: the one for both ACK flags).
const COMPACT_TAG: u32 = flag::TAGGED;
const COMPACT_DATA: u32 = flag::REMOTE_CQ_DATA;
const COMPACT_ID: u32 = flag::ACK_REQ | flag::ACK_ARRIVE;

/// Which optional fields a compact header with these flags carries (1 or
/// 0 each: `tag`, `data`, `msg_id`).
#[inline]
pub(crate) const fn compact_slots(flags: u32) -> (usize, usize, usize) {
    (
        (flags & COMPACT_TAG != 0) as usize,
        (flags & COMPACT_DATA != 0) as usize,
        (flags & COMPACT_ID != 0) as usize,
    )
}

/// Where the payload starts in a compact EAGER record with these flags
/// (16 to 40 bytes; the flags need not be valid yet: only three tests).
#[inline]
pub(crate) const fn compact_len(flags: u32) -> usize {
    COMPACT_MIN
        + 8 * ((flags & COMPACT_TAG != 0) as usize
            + (flags & COMPACT_DATA != 0) as usize
            + (flags & COMPACT_ID != 0) as usize)
}

/// Record types.
pub(crate) mod op {
    /// An eager message: `payload` bytes of data follow (`payload == len`).
    pub(crate) const EAGER: u8 = 1;
    /// Rendezvous request: the message (`len` bytes) stays in the sender's
    /// memory; `aux` iov entries (16 bytes each: address, length) follow.
    pub(crate) const RTS: u8 = 2;
    /// The receiver is done with message `msg_id` (`aux` = 0 or an FI_E*
    /// code; `offset` = bytes it took). Completes rendezvous sends and
    /// delivery-complete eager sends.
    pub(crate) const ACK: u8 = 3;
    /// The receiver cannot pull `msg_id` by itself (no CMA): please stream it.
    /// `aux` = the receiver's handle for the transfer, echoed in DATA.
    pub(crate) const CTS: u8 = 4;
    /// A chunk of a streamed rendezvous message: `payload` bytes at `offset`.
    pub(crate) const DATA: u8 = 5;
    /// Connection handshake (tcp): the payload is the sender's address.
    pub(crate) const HELLO: u8 = 6;
    /// Orderly close of a connection / ring slot.
    pub(crate) const BYE: u8 = 7;
    /// RMA records (docs/rma.md). In all of them `msg_id` is the
    /// initiator's operation and `aux` the index of the target segment
    /// (`fi_rma_iov` entry) the record is about.
    ///
    /// A chunk of an RMA write: `payload` bytes for bytes `reserved ..` of
    /// the target segment `offset` (address or offset, per the target's
    /// `mr_mode`), `len` bytes long, key `tag`; `LAST` on the segment's last
    /// chunk, `FINAL` on every record of the operation's last segment.
    pub(crate) const WRITE: u8 = 8;
    /// An RMA write the target is to pull itself (shm, cross-memory
    /// attach): segment as in `WRITE`; `reserved` (address, length) entries
    /// of the initiator's buffer follow (16 bytes each); `CMA_OK` set.
    pub(crate) const WRITE_REQ: u8 = 9;
    /// An RMA read of target segment (`offset`, `len`, key `tag`). With
    /// `CMA_OK` the target writes straight into the `reserved` (address,
    /// length) entries that follow; else it answers `READ_RESP` chunks.
    pub(crate) const READ_REQ: u8 = 10;
    /// A chunk of read data: `payload` bytes for bytes `reserved ..` of the
    /// segment (`len` long); `LAST` on the last.
    pub(crate) const READ_RESP: u8 = 11;
    /// The target is done with segment `aux` of operation `msg_id`:
    /// `data` = 0 or an FI_E* code (FI_EOPNOTSUPP on a `WRITE_REQ`: "cannot
    /// pull, push it").
    pub(crate) const RMA_ACK: u8 = 12;
    /// An atomic operation on target segment (`offset`, `len` bytes, key
    /// `tag`): `reserved` = fi_op | fi_datatype << 8 | kind << 16 (kind 0
    /// atomic, 1 fetch, 2 compare); the operand (`len` bytes, none for
    /// `FI_ATOMIC_READ`) follows, then for compare the compare values
    /// (`len` bytes). `FINAL` (+ `REMOTE_CQ_DATA`, `data`) on the
    /// operation's last segment. The target executes it once, as it takes
    /// the record.
    pub(crate) const ATOMIC: u8 = 13;
    /// The target did `ATOMIC` segment `aux` of operation `msg_id`: `data`
    /// = 0 or an FI_E* code; a fetch or compare that succeeded carries the
    /// segment's former bytes (`len`, `payload == len`).
    pub(crate) const ATOMIC_RESP: u8 = 14;
    /// The sender's answer to a `CTS|SPLIT`: it wrote bytes `offset .. len`
    /// into the receiver's buffer (`reserved` 0) or could not (`reserved` =
    /// an FI_E* code: the receiver copies them itself); `aux` = the
    /// receiver's handle.
    pub(crate) const PUSHED: u8 = 15;
    pub(crate) const MAX: u8 = 15;

    /// Whether the endpoint core places this record's payload (two-phase
    /// delivery: `Delivery::place` / `placed`): messages, rendezvous
    /// chunks, RMA write chunks and read responses, atomic requests (staged
    /// by the target) and responses (fetched values). Every other record goes
    /// to `Delivery::control` with its payload.
    pub(crate) const fn placed(op: u8) -> bool {
        matches!(op, EAGER | DATA | WRITE | READ_RESP | ATOMIC | ATOMIC_RESP)
    }

    /// Whether the record belongs to the RMA protocol (`core/engine/rma.rs`).
    pub(crate) const fn is_rma(op: u8) -> bool {
        op >= WRITE && op <= ATOMIC_RESP
    }
}

/// Record flags.
pub(crate) mod flag {
    pub(crate) const TAGGED: u32 = 1 << 0;
    pub(crate) const REMOTE_CQ_DATA: u32 = 1 << 1;
    /// The sender wants an ACK once the message is placed (delivery complete).
    pub(crate) const ACK_REQ: u32 = 1 << 2;
    /// RTS: the sender allows cross-memory attach (process_vm_readv).
    pub(crate) const CMA_OK: u32 = 1 << 3;
    /// DATA: last chunk of the message (of the requested range).
    pub(crate) const LAST: u32 = 1 << 4;
    /// CTS: stream only bytes `offset .. len` of the message (a buffered
    /// receiver fetching a prefix); without it, the whole message.
    pub(crate) const RANGE: u32 = 1 << 5;
    /// RTS: the message's first `offset` bytes follow at once in DATA
    /// records with this flag (and `aux` 0), as the receiver asked
    /// (`Hints::rts_prefix`); DATA: such a pushed chunk.
    pub(crate) const PUSH: u32 = 1 << 6;
    /// EAGER over shm: the compact header (module doc, [`compact_len`]);
    /// the payload follows its last field, in the record's first cell as
    /// far as it fits.
    pub(crate) const COMPACT: u32 = 1 << 7;
    /// RMA: the record belongs to the operation's last target segment (the
    /// target reports remote events when that segment is done).
    pub(crate) const FINAL: u32 = 1 << 8;
    /// RMA `WRITE` (the operation's last chunk) and `ATOMIC` (its last
    /// segment, no fetch): the initiator completed the operation when the
    /// record was in the target's queue (transmit complete, shm): the
    /// target sends no `RMA_ACK`/`ATOMIC_RESP`, and logs a refusal instead
    /// of answering it (docs/rma.md, Completions).
    pub(crate) const NO_ANSWER: u32 = 1 << 9;
    /// EAGER only: the sender named `FI_TRANSMIT_COMPLETE` (tcp) and waits
    /// for an `ACK` sent as soon as the whole record is off the socket,
    /// matched or not (unlike `ACK_REQ`, answered once a receive took the
    /// data: an application that waits for the send before posting its
    /// receives must not hang). docs/protocol.md.
    pub(crate) const ACK_ARRIVE: u32 = 1 << 10;
    /// CTS only: split rendezvous (shm CMA). The receiver copies bytes
    /// `0 .. offset` itself and asks the sender to write bytes `offset ..
    /// len` into its buffer, whose `reserved` (address, length) entries
    /// (at most `SPLIT_IOV_MAX`) are the payload; answered by `PUSHED`.
    pub(crate) const SPLIT: u32 = 1 << 11;
    /// EAGER and RTS: the receive context of a scalable endpoint the
    /// message is for (bits 12..16: contexts 0 to 15; 0 on every other
    /// endpoint). docs/protocol.md, "Receive contexts". Not in `ALL`: only
    /// those two ops may carry it (`check`). Flag bits 16..32 are the shm
    /// ring's lap tag (`shm/outbound.rs`), so the field stops below them.
    pub(crate) const LANE: u32 = 0xf << LANE_SHIFT;
    pub(crate) const LANE_SHIFT: u32 = 12;
    /// Receive contexts a record can name.
    pub(crate) const LANES: usize = 16;

    /// The receive context a message record names.
    #[inline(always)]
    pub(crate) const fn lane(flags: u32) -> usize {
        ((flags & LANE) >> LANE_SHIFT) as usize
    }
    pub(crate) const ALL: u32 = TAGGED
        | REMOTE_CQ_DATA
        | ACK_REQ
        | CMA_OK
        | LAST
        | RANGE
        | PUSH
        | COMPACT
        | FINAL
        | NO_ANSWER
        | ACK_ARRIVE
        | SPLIT;
}

/// A record's first word: magic, version, op and flags, as a compact
/// header's first word carries them (the word a shm consumer polls).
#[inline(always)]
pub(crate) const fn pack_first_word(magic: u16, version: u8, op: u8, flags: u32) -> u64 {
    magic as u64 | (version as u64) << 16 | (op as u64) << 24 | (flags as u64) << 32
}

/// The header. Plain data: copied out of shared memory / the socket before
/// it is looked at, never referenced in place.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WireHdr {
    pub magic: u16,
    pub version: u8,
    pub op: u8,
    pub flags: u32,
    /// Total message length (MSG, RTS, DATA), or bytes taken (ACK).
    pub len: u64,
    pub tag: u64,
    pub data: u64,
    /// The sender's identifier of the message (correlates RTS/ACK/CTS/DATA).
    pub msg_id: u64,
    /// DATA: byte offset of the chunk in the message.
    pub offset: u64,
    /// Bytes following the header in this record.
    pub payload: u32,
    /// RTS: iov count; ACK: status; CTS/DATA: receiver handle.
    pub aux: u32,
    pub reserved: u64,
}

const _: () = assert!(core::mem::size_of::<WireHdr>() == HDR_LEN);
const _: () = assert!(core::mem::align_of::<WireHdr>() == 8);

/// Why a record was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadRecord {
    Magic,
    Version,
    Op,
    Flags,
    Length,
}

/// Limits the receiver enforces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Largest eager (and atomic) payload.
    pub max_payload: usize,
    /// Largest chunk of a transfer the receiver accepted (`DATA`, `WRITE`,
    /// `READ_RESP`): placed straight into the matched receive, registered
    /// memory or the reader's buffer, or read past, never buffered, so a
    /// stream transport may take larger ones than `max_payload` (tcp).
    pub max_chunk: usize,
    /// Largest RTS iov count.
    pub max_iov: usize,
}

/// Size of one RTS iov entry (address, length as two u64).
pub(crate) const IOV_ENTRY: usize = 16;

/// Flags only some ops may carry (`WireHdr::check`).
const OP_BOUND: u32 = flag::COMPACT | flag::NO_ANSWER | flag::ACK_ARRIVE | flag::SPLIT;

/// Most entries of a `CTS|SPLIT` table (the receiver's buffer for the
/// part the sender writes).
pub(crate) const SPLIT_IOV_MAX: usize = 64;

impl WireHdr {
    pub(crate) fn new(op: u8) -> WireHdr {
        WireHdr {
            magic: MAGIC,
            version: VERSION,
            op,
            ..Default::default()
        }
    }

    /// Validates everything a peer controls. After `Ok`, `payload` is within
    /// the limits and consistent with `op`, `len` and `aux`.
    #[inline(always)]
    pub(crate) fn check(&self, lim: &Limits) -> Result<(), BadRecord> {
        if self.magic != MAGIC {
            return Err(BadRecord::Magic);
        }
        if self.version != VERSION {
            return Err(BadRecord::Version);
        }
        if self.op == 0 || self.op > op::MAX {
            return Err(BadRecord::Op);
        }
        // Known bits only, and the flags some ops alone carry (COMPACT and
        // ACK_ARRIVE: EAGER; NO_ANSWER: WRITE, ATOMIC; SPLIT: CTS) on
        // those ops only: one test.
        let own = match self.op {
            op::EAGER => flag::COMPACT | flag::ACK_ARRIVE | flag::LANE,
            op::RTS => flag::LANE,
            op::WRITE | op::ATOMIC => flag::NO_ANSWER,
            op::CTS => flag::SPLIT,
            _ => 0,
        };
        if self.flags & !(flag::ALL & !OP_BOUND | own) != 0 {
            return Err(BadRecord::Flags);
        }
        let payload = self.payload as usize;
        let len = usize::try_from(self.len).map_err(|_| BadRecord::Length)?;
        let ok = match self.op {
            op::EAGER => payload == len && payload <= lim.max_payload,
            op::RTS => {
                let n = self.aux as usize;
                // A length above the receiver's maximum is the receiver's
                // to refuse (an error ACK), not a broken record: the data
                // stays at the sender, and a sender with FI_VARIABLE_MSG
                // knows no maximum.
                n >= 1 && n <= lim.max_iov && payload == n * IOV_ENTRY && len > 0 && self.offset <= self.len
            }
            // A split CTS: the receiver's table for bytes `offset .. len`
            // (which the sender compares with its message).
            op::CTS if self.flags & flag::SPLIT != 0 => self.split_cts_ok(),
            op::ACK | op::CTS | op::BYE | op::PUSHED => payload == 0,
            // A chunk only lands in a transfer the receiver accepted, whose
            // length it compares (a chunk pushed behind a refused RTS is
            // dropped, not a broken record).
            op::DATA => {
                payload <= lim.max_chunk
                    && self
                        .offset
                        .checked_add(payload as u64)
                        .is_some_and(|end| end <= self.len)
            }
            op::HELLO => payload <= 256,
            // RMA chunks: inside the segment they name, within the limit.
            op::WRITE | op::READ_RESP => {
                payload <= lim.max_chunk
                    && self
                        .reserved
                        .checked_add(payload as u64)
                        .is_some_and(|end| end <= self.len)
            }
            // An iov table of the initiator's buffer for a CMA transfer
            // (required for WRITE_REQ, optional for READ_REQ).
            op::WRITE_REQ | op::READ_REQ => {
                let n = self.reserved;
                let cma = self.flags & flag::CMA_OK != 0;
                let table = n <= lim.max_iov as u64 && payload as u64 == n * IOV_ENTRY as u64;
                match self.op {
                    op::WRITE_REQ => cma && n >= 1 && table && self.len > 0,
                    _ => table && (n >= 1) == cma,
                }
            }
            op::RMA_ACK => payload == 0,
            op::ATOMIC | op::ATOMIC_RESP => self.atomic_ok(lim),
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(BadRecord::Length)
        }
    }

    /// A split CTS's part of [`WireHdr::check`] (out of line, as atomics).
    #[inline(never)]
    fn split_cts_ok(&self) -> bool {
        let n = self.reserved;
        n >= 1 && n <= SPLIT_IOV_MAX as u64 && self.payload as u64 == n * IOV_ENTRY as u64 && self.offset < self.len
    }

    /// The atomic records' part of [`WireHdr::check`] (out of line: the
    /// messaging records' path stays as short as it was).
    #[inline(never)]
    fn atomic_ok(&self, lim: &Limits) -> bool {
        let payload = self.payload as usize;
        if payload > lim.max_payload {
            return false;
        }
        if self.op == op::ATOMIC_RESP {
            return payload == 0 || payload as u64 == self.len;
        }
        // `reserved`: fi_op | datatype << 8 | kind << 16; FI_ATOMIC_READ
        // (10) carries no operand, compare (kind 2) a compare value each.
        let (kind, aop) = (self.reserved >> 16, self.reserved & 0xff);
        let operand = if aop == 10 { 0 } else { self.len };
        let want = match kind {
            0 | 1 => Some(operand),
            2 => self.len.checked_add(operand),
            _ => None,
        };
        self.reserved >> 24 == 0 && want == Some(payload as u64)
    }

    pub(crate) fn to_bytes(self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0..2].copy_from_slice(&self.magic.to_le_bytes());
        b[2] = self.version;
        b[3] = self.op;
        b[4..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.tag.to_le_bytes());
        b[24..32].copy_from_slice(&self.data.to_le_bytes());
        b[32..40].copy_from_slice(&self.msg_id.to_le_bytes());
        b[40..48].copy_from_slice(&self.offset.to_le_bytes());
        b[48..52].copy_from_slice(&self.payload.to_le_bytes());
        b[52..56].copy_from_slice(&self.aux.to_le_bytes());
        b[56..64].copy_from_slice(&self.reserved.to_le_bytes());
        b
    }

    /// The compact form of this EAGER header for a payload of `n` bytes
    /// (flag `COMPACT` added): its words (the first, `len`, then the
    /// fields the flags call for; the rest zero) and where the payload
    /// starts. A writer may store all five words and then the payload from
    /// the returned offset over the unused ones.
    #[inline]
    pub(crate) fn compact(&self, n: usize) -> ([u64; 5], usize) {
        let flags = self.flags | flag::COMPACT;
        let (t, d, i) = compact_slots(flags);
        // Branch-free: each field goes to its slot; an absent one is
        // overwritten by the next present one or lies past the header.
        let mut w = [0u64; 5];
        w[0] = pack_first_word(self.magic, self.version, self.op, flags);
        w[1] = n as u64;
        w[2] = self.tag;
        w[2 + t] = self.data;
        w[2 + t + d] = self.msg_id;
        let off = COMPACT_MIN + 8 * (t + d + i);
        debug_assert_eq!(off, compact_len(flags));
        // Zero what lies past the header (the writer's payload goes there).
        for (k, x) in w.iter_mut().enumerate() {
            if k * 8 >= off {
                *x = 0;
            }
        }
        (w, off)
    }

    /// Reads a record's first cell: a compact EAGER header (flag
    /// `COMPACT`; the fields it leaves out read as zero, `payload` as
    /// `len`, saturated) or a full one. Returns the header and where the
    /// payload starts in the record. Nothing is validated: [`check`]
    /// follows.
    ///
    /// [`check`]: WireHdr::check
    #[inline]
    pub(crate) fn decode(b: &[u8; HDR_LEN]) -> (WireHdr, usize) {
        let h = WireHdr::from_bytes(b);
        if h.flags & flag::COMPACT == 0 {
            return (h, HDR_LEN);
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let mut c = WireHdr {
            magic: h.magic,
            version: h.version,
            op: h.op,
            flags: h.flags,
            len: h.len,
            payload: u32::try_from(h.len).unwrap_or(u32::MAX),
            ..Default::default()
        };
        if h.flags & (COMPACT_TAG | COMPACT_DATA | COMPACT_ID) == 0 {
            // The plain send: nothing after `len`.
            return (c, COMPACT_MIN);
        }
        let mut at = COMPACT_MIN;
        if h.flags & COMPACT_TAG != 0 {
            c.tag = u64_at(at);
            at += 8;
        }
        if h.flags & COMPACT_DATA != 0 {
            c.data = u64_at(at);
            at += 8;
        }
        if h.flags & COMPACT_ID != 0 {
            c.msg_id = u64_at(at);
            at += 8;
        }
        (c, at)
    }

    /// [`decode`] and [`check`] in one for the common record, a compact
    /// EAGER header whose first word is `first` and whose next four words
    /// (bytes 8 to 40 of the record, as read) are `rest`: the header and
    /// where the payload starts when the record is that and passes every
    /// test `check` makes of it; None for anything else, valid or not
    /// (the caller then decodes and checks it the general way, which
    /// decides). It accepts only what `decode` + `check` accept and gives
    /// the same header (`compact_eager_fast_path_agrees_with_decode_and_check`).
    ///
    /// [`decode`]: WireHdr::decode
    /// [`check`]: WireHdr::check
    #[inline(always)]
    pub(crate) fn decode_compact_eager(first: u64, rest: &[u64; 4], lim: &Limits) -> Option<(WireHdr, usize)> {
        const HEAD: u64 = pack_first_word(MAGIC, VERSION, op::EAGER, 0);
        // What `check` allows an EAGER record (COMPACT, ACK_ARRIVE and
        // the flags any op may carry).
        const EAGER_FLAGS: u32 = flag::ALL & !OP_BOUND | flag::COMPACT | flag::ACK_ARRIVE | flag::LANE;
        let flags = (first >> 32) as u32;
        if first & 0xffff_ffff != HEAD || flags & flag::COMPACT == 0 || flags & !EAGER_FLAGS != 0 {
            return None;
        }
        let len = rest[0];
        // `check`: payload == len (`decode` saturates payload to u32) and
        // within the limit.
        if len > u32::MAX as u64 || len > lim.max_payload as u64 {
            return None;
        }
        let (t, d, i) = compact_slots(flags);
        let mut h = WireHdr {
            magic: MAGIC,
            version: VERSION,
            op: op::EAGER,
            flags,
            len,
            payload: len as u32,
            ..Default::default()
        };
        if t + d + i != 0 {
            if t != 0 {
                h.tag = rest[1];
            }
            if d != 0 {
                h.data = rest[1 + t];
            }
            if i != 0 {
                h.msg_id = rest[1 + t + d];
            }
        }
        Some((h, COMPACT_MIN + 8 * (t + d + i)))
    }

    pub(crate) fn from_bytes(b: &[u8; HDR_LEN]) -> WireHdr {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        WireHdr {
            magic: u16::from_le_bytes([b[0], b[1]]),
            version: b[2],
            op: b[3],
            flags: u32_at(4),
            len: u64_at(8),
            tag: u64_at(16),
            data: u64_at(24),
            msg_id: u64_at(32),
            offset: u64_at(40),
            payload: u32_at(48),
            aux: u32_at(52),
            reserved: u64_at(56),
        }
    }
}

#[cfg(test)]
mod tests;
