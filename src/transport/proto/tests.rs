//! Unit tests of the record header (`proto.rs`): encoding round trips, the
//! compact eager form, and the checks that refuse hostile headers (lengths,
//! chunks, RMA and atomic records, flags allowed per opcode).

use super::*;

const LIM: Limits = Limits {
    max_payload: 16384,
    max_chunk: 16384,
    max_iov: 8,
};

#[test]
fn lengths_above_max_msg_are_the_cores_to_refuse() {
    // An RTS (FI_VARIABLE_MSG senders know no maximum) and the chunks
    // pushed behind it pass the record check: the endpoint refuses the
    // message with an error ACK and drops the chunks.
    let mut r = WireHdr::new(op::RTS);
    r.len = 4 << 30;
    r.aux = 1;
    r.payload = 16;
    assert_eq!(r.check(&LIM), Ok(()));
    let mut d = WireHdr::new(op::DATA);
    d.flags = flag::PUSH;
    d.len = r.len;
    d.payload = 4096;
    assert_eq!(d.check(&LIM), Ok(()));
    // Eager records stay bounded by the payload limit.
    let mut m = WireHdr::new(op::EAGER);
    m.len = LIM.max_payload as u64 + 1;
    m.payload = m.len as u32;
    assert_eq!(m.check(&LIM), Err(BadRecord::Length));
}

#[test]
fn only_message_records_name_a_receive_context() {
    let mut m = WireHdr::new(op::EAGER);
    m.flags = 15 << flag::LANE_SHIFT | flag::TAGGED;
    m.len = 5;
    m.payload = 5;
    assert_eq!(m.check(&LIM), Ok(()));
    assert_eq!(flag::lane(m.flags), 15);
    let mut r = WireHdr::new(op::RTS);
    r.flags = 3 << flag::LANE_SHIFT;
    r.len = 1 << 20;
    r.aux = 1;
    r.payload = 16;
    assert_eq!(r.check(&LIM), Ok(()));
    assert_eq!(flag::lane(r.flags), 3);
    let mut a = WireHdr::new(op::ACK);
    a.flags = 1 << flag::LANE_SHIFT;
    assert_eq!(a.check(&LIM), Err(BadRecord::Flags));
    // The compact form carries it too, through the shm fast path.
    let mut c = WireHdr::new(op::EAGER);
    c.flags = 9 << flag::LANE_SHIFT | flag::COMPACT;
    c.len = 4;
    c.payload = 4;
    let first = pack_first_word(MAGIC, VERSION, op::EAGER, c.flags);
    let (h, _) = WireHdr::decode_compact_eager(first, &[4, 0, 0, 0], &LIM).expect("compact eager");
    assert_eq!(flag::lane(h.flags), 9);
}

#[test]
fn bytes_round_trip() {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = flag::TAGGED;
    h.len = 5;
    h.payload = 5;
    h.tag = 0xdead_beef_0000_0001;
    h.data = 7;
    h.msg_id = 99;
    assert_eq!(WireHdr::from_bytes(&h.to_bytes()), h);
    assert_eq!(h.check(&LIM), Ok(()));
}

#[test]
fn compact_eager_fast_path_agrees_with_decode_and_check() {
    // Every flag bit pattern of 12 bits and two beyond, every op, head
    // words right and wrong, lengths around the limits: the fast path
    // takes exactly the compact EAGER records that decode + check
    // accept, with the same header and payload offset.
    let heads = [(MAGIC, VERSION), (MAGIC ^ 1, VERSION), (MAGIC, VERSION + 1)];
    let lens = [
        0u64,
        1,
        40,
        48,
        LIM.max_payload as u64,
        LIM.max_payload as u64 + 1,
        1 << 32,
        u64::MAX,
    ];
    let mut fast_taken = 0;
    for &(magic, version) in &heads {
        for opc in 0..=op::MAX + 1 {
            for flags in (0u32..1 << 12).chain([1 << 12, 1 << 31]) {
                for &len in &lens {
                    let first = magic as u64 | (version as u64) << 16 | (opc as u64) << 24 | (flags as u64) << 32;
                    let rest = [len, 0x1111, 0x2222, 0x3333];
                    let mut b = [0xa5u8; HDR_LEN];
                    b[..8].copy_from_slice(&first.to_le_bytes());
                    for (k, w) in rest.iter().enumerate() {
                        b[8 + 8 * k..16 + 8 * k].copy_from_slice(&w.to_le_bytes());
                    }
                    let (h, off) = WireHdr::decode(&b);
                    let general = h.check(&LIM).is_ok().then_some((h, off));
                    let fast = WireHdr::decode_compact_eager(first, &rest, &LIM);
                    let common = opc == op::EAGER && flags & flag::COMPACT != 0;
                    assert_eq!(fast, general.filter(|_| common), "first {first:#x} len {len}");
                    fast_taken += fast.is_some() as usize;
                }
            }
        }
    }
    assert!(fast_taken > 0);
}

#[test]
fn compact_eager_headers() {
    let mut h = WireHdr::new(op::EAGER);
    h.len = 5;
    h.tag = 0x1111;
    h.data = 0x2222;
    h.msg_id = 0x3333;
    h.offset = 9; // not carried
    let cell = |w: [u64; 5]| {
        let mut b = [0xeeu8; HDR_LEN];
        for (i, x) in w.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
        }
        b
    };
    // Each optional field present only with its flag, in order.
    for (flags, off) in [
        (0, 16),
        (flag::TAGGED, 24),
        (flag::REMOTE_CQ_DATA, 24),
        (flag::ACK_REQ, 24),
        (flag::ACK_ARRIVE, 24),
        (flag::TAGGED | flag::REMOTE_CQ_DATA, 32),
        (flag::TAGGED | flag::REMOTE_CQ_DATA | flag::ACK_REQ, 40),
    ] {
        h.flags = flags;
        let (w, at) = h.compact(5);
        assert_eq!(at, off, "flags {flags:#x}");
        assert_eq!(at, compact_len(flags | flag::COMPACT));
        let (d, at2) = WireHdr::decode(&cell(w));
        assert_eq!(at2, off);
        assert_eq!(d.flags, flags | flag::COMPACT);
        assert_eq!((d.len, d.payload), (5, 5));
        assert_eq!(d.tag, if flags & flag::TAGGED != 0 { 0x1111 } else { 0 });
        assert_eq!(d.data, if flags & flag::REMOTE_CQ_DATA != 0 { 0x2222 } else { 0 });
        let id = flags & (flag::ACK_REQ | flag::ACK_ARRIVE) != 0;
        assert_eq!(d.msg_id, if id { 0x3333 } else { 0 });
        assert_eq!((d.offset, d.aux, d.reserved), (0, 0, 0));
        assert_eq!(d.check(&LIM), Ok(()));
        // The same bytes as `to_bytes` where both forms agree.
        assert_eq!(
            &cell(w)[..16],
            &{
                let mut f = h;
                f.flags |= flag::COMPACT;
                f.len = 5;
                f.to_bytes()
            }[..16]
        );
    }
    // A full header decodes as itself, its payload after the cell.
    h.flags = flag::TAGGED;
    h.payload = 5;
    assert_eq!(WireHdr::decode(&h.to_bytes()), (h, HDR_LEN));
    // Hostile lengths: above the limit, or beyond 32 bits (`payload`
    // saturates and no longer equals `len`).
    h.flags = 0;
    for bad in [LIM.max_payload as u64 + 1, 1 << 32, u64::MAX] {
        let (mut w, _) = h.compact(0);
        w[1] = bad;
        let (d, _) = WireHdr::decode(&cell(w));
        assert_eq!(d.check(&LIM), Err(BadRecord::Length), "len {bad}");
    }
    // Compact is an EAGER form only.
    let mut ack = WireHdr::new(op::ACK);
    ack.flags = flag::COMPACT;
    assert_eq!(ack.check(&LIM), Err(BadRecord::Flags));
}

#[test]
fn hostile_headers_rejected() {
    let good = {
        let mut h = WireHdr::new(op::EAGER);
        h.len = 10;
        h.payload = 10;
        h
    };
    let mut h = good;
    h.magic = 0;
    assert_eq!(h.check(&LIM), Err(BadRecord::Magic));
    let mut h = good;
    h.version = 9;
    assert_eq!(h.check(&LIM), Err(BadRecord::Version));
    for bad_op in [0u8, op::MAX + 1, 255] {
        let mut h = good;
        h.op = bad_op;
        assert_eq!(h.check(&LIM), Err(BadRecord::Op));
    }
    let mut h = good;
    h.flags = 1 << 31;
    assert_eq!(h.check(&LIM), Err(BadRecord::Flags));
    let mut h = good;
    h.payload = 11; // payload != len
    assert_eq!(h.check(&LIM), Err(BadRecord::Length));
    let mut h = good;
    h.len = 1 << 20;
    h.payload = 1 << 20; // above max_payload
    assert_eq!(h.check(&LIM), Err(BadRecord::Length));
    // RTS with too many iovs, zero iovs, or iov bytes not matching
    let mut r = WireHdr::new(op::RTS);
    r.len = 1 << 20;
    r.aux = 9;
    r.payload = 9 * 16;
    assert!(r.check(&LIM).is_err());
    r.aux = 0;
    r.payload = 0;
    assert!(r.check(&LIM).is_err());
    r.aux = 2;
    r.payload = 16;
    assert!(r.check(&LIM).is_err());
    r.payload = 32;
    assert!(r.check(&LIM).is_ok());
    // DATA beyond the message end, and offset overflow
    let mut d = WireHdr::new(op::DATA);
    d.len = 100;
    d.offset = 90;
    d.payload = 20;
    assert!(d.check(&LIM).is_err());
    d.offset = u64::MAX - 5;
    assert!(d.check(&LIM).is_err());
    d.offset = 80;
    assert!(d.check(&LIM).is_ok());
    // RTS: a pushed prefix cannot claim more than the message
    r.flags = flag::PUSH;
    r.offset = r.len + 1;
    assert!(r.check(&LIM).is_err());
    r.offset = 4096;
    assert!(r.check(&LIM).is_ok());
    // Control records carry no payload
    let mut a = WireHdr::new(op::ACK);
    a.payload = 1;
    assert!(a.check(&LIM).is_err());
}

#[test]
fn chunks_are_bounded_by_max_chunk_and_eager_payloads_by_max_payload() {
    // A stream transport (tcp) takes chunks of accepted transfers
    // larger than its eager payloads: they are placed, never buffered.
    let lim = Limits {
        max_payload: 65536,
        max_chunk: 1 << 20,
        max_iov: 8,
    };
    for o in [op::DATA, op::WRITE, op::READ_RESP] {
        let mut c = WireHdr::new(o);
        c.len = 4 << 20;
        c.offset = 0;
        c.reserved = 0;
        c.payload = 1 << 20;
        assert_eq!(c.check(&lim), Ok(()), "op {o}: a chunk of max_chunk");
        c.payload = (1 << 20) + 1;
        assert_eq!(c.check(&lim), Err(BadRecord::Length), "op {o}: above max_chunk");
        // Still inside the transfer.
        c.payload = 1 << 20;
        c.len = (1 << 20) - 1;
        assert_eq!(c.check(&lim), Err(BadRecord::Length), "op {o}: beyond its transfer");
    }
    // Eager payloads and atomic operands stay at max_payload.
    let mut e = WireHdr::new(op::EAGER);
    e.len = 65537;
    e.payload = 65537;
    assert_eq!(e.check(&lim), Err(BadRecord::Length));
    let mut a = WireHdr::new(op::ATOMIC_RESP);
    a.len = 65537;
    a.payload = 65537;
    assert_eq!(a.check(&lim), Err(BadRecord::Length));
}

#[test]
fn rma_records_stay_inside_their_segment() {
    // A write chunk names its place in the segment: it must fit.
    let mut w = WireHdr::new(op::WRITE);
    w.len = 100;
    w.reserved = 90;
    w.payload = 10;
    assert_eq!(w.check(&LIM), Ok(()));
    w.payload = 11;
    assert_eq!(w.check(&LIM), Err(BadRecord::Length));
    w.reserved = u64::MAX - 4;
    w.payload = 8;
    assert_eq!(w.check(&LIM), Err(BadRecord::Length), "offset overflow");
    let mut big = WireHdr::new(op::READ_RESP);
    big.len = 1 << 40;
    big.payload = LIM.max_chunk as u32 + 1;
    assert_eq!(big.check(&LIM), Err(BadRecord::Length), "chunk above the limit");
    big.payload = LIM.max_chunk as u32;
    assert_eq!(big.check(&LIM), Ok(()));
    // A zero-length write is one empty chunk.
    let z = WireHdr::new(op::WRITE);
    assert_eq!(z.check(&LIM), Ok(()));
    // Requests: the iov table is what `reserved` says, CMA only with it.
    let mut r = WireHdr::new(op::READ_REQ);
    r.len = 1 << 20;
    assert_eq!(r.check(&LIM), Ok(()), "a streamed read carries nothing");
    r.flags = flag::CMA_OK;
    assert_eq!(r.check(&LIM), Err(BadRecord::Length), "CMA without a table");
    r.reserved = 2;
    r.payload = 32;
    assert_eq!(r.check(&LIM), Ok(()));
    r.flags = 0;
    assert_eq!(r.check(&LIM), Err(BadRecord::Length), "a table without CMA");
    let mut q = WireHdr::new(op::WRITE_REQ);
    q.len = 1 << 20;
    q.flags = flag::CMA_OK | flag::FINAL;
    q.reserved = 1;
    q.payload = 16;
    assert_eq!(q.check(&LIM), Ok(()));
    q.reserved = LIM.max_iov as u64 + 1;
    q.payload = 16 * q.reserved as u32;
    assert_eq!(q.check(&LIM), Err(BadRecord::Length), "too many entries");
    q.reserved = 1;
    q.payload = 16;
    q.len = 0;
    assert_eq!(q.check(&LIM), Err(BadRecord::Length), "nothing to pull");
    let mut a = WireHdr::new(op::RMA_ACK);
    assert_eq!(a.check(&LIM), Ok(()));
    a.payload = 4;
    assert_eq!(a.check(&LIM), Err(BadRecord::Length));
    // The placed records are exactly the data-carrying ones.
    let placed: Vec<u8> = (1..=op::MAX).filter(|&o| op::placed(o)).collect();
    assert_eq!(
        placed,
        vec![
            op::EAGER,
            op::DATA,
            op::WRITE,
            op::READ_RESP,
            op::ATOMIC,
            op::ATOMIC_RESP
        ]
    );
    assert!((1..=op::MAX).filter(|&o| op::is_rma(o)).eq(op::WRITE..=op::ATOMIC_RESP));
}

/// Atomic records: the payload is exactly what the kind and op say.
#[test]
fn atomic_records() {
    let mut a = WireHdr::new(op::ATOMIC);
    a.len = 64;
    a.payload = 64;
    a.reserved = 2 | 4 << 8; // FI_SUM on int32, atomic
    assert_eq!(a.check(&LIM), Ok(()));
    a.reserved |= 1 << 16; // fetch
    assert_eq!(a.check(&LIM), Ok(()));
    a.reserved = 10 | 1 << 16; // FI_ATOMIC_READ: no operand
    assert_eq!(a.check(&LIM), Err(BadRecord::Length));
    a.payload = 0;
    assert_eq!(a.check(&LIM), Ok(()));
    a.reserved = 12 | 2 << 16; // compare: operand and compare values
    a.payload = 128;
    assert_eq!(a.check(&LIM), Ok(()));
    a.payload = 64;
    assert_eq!(a.check(&LIM), Err(BadRecord::Length));
    a.reserved = 3 << 16;
    assert_eq!(a.check(&LIM), Err(BadRecord::Length), "no such kind");
    a.reserved = 1 << 24;
    assert_eq!(a.check(&LIM), Err(BadRecord::Length), "stray bits");
    a.reserved = 0;
    a.len = u64::MAX;
    a.payload = 0;
    assert_eq!(a.check(&LIM), Err(BadRecord::Length));
    let mut r = WireHdr::new(op::ATOMIC_RESP);
    r.len = 16;
    assert_eq!(r.check(&LIM), Ok(()));
    r.payload = 16;
    assert_eq!(r.check(&LIM), Ok(()));
    r.payload = 8;
    assert_eq!(r.check(&LIM), Err(BadRecord::Length));
}

#[test]
fn no_answer_only_on_writes_and_atomics() {
    let mut w = WireHdr::new(op::WRITE);
    w.len = 8;
    w.payload = 8;
    w.flags = flag::LAST | flag::FINAL | flag::NO_ANSWER;
    assert_eq!(w.check(&LIM), Ok(()));
    let mut a = WireHdr::new(op::ATOMIC);
    a.len = 8;
    a.payload = 8;
    a.reserved = 2 | 10 << 8;
    a.flags = flag::FINAL | flag::NO_ANSWER;
    assert_eq!(a.check(&LIM), Ok(()));
    for o in [
        op::EAGER,
        op::WRITE_REQ,
        op::READ_REQ,
        op::READ_RESP,
        op::RMA_ACK,
        op::ATOMIC_RESP,
    ] {
        let mut h = WireHdr::new(o);
        h.flags = flag::NO_ANSWER;
        assert_eq!(h.check(&LIM), Err(BadRecord::Flags), "op {o}");
    }
}

#[test]
fn ack_arrive_only_on_eager() {
    let mut e = WireHdr::new(op::EAGER);
    e.len = 8;
    e.payload = 8;
    e.flags = flag::ACK_ARRIVE | flag::TAGGED;
    assert_eq!(e.check(&LIM), Ok(()));
    for o in [op::RTS, op::ACK, op::DATA, op::WRITE, op::ATOMIC, op::RMA_ACK] {
        let mut h = WireHdr::new(o);
        h.flags = flag::ACK_ARRIVE;
        assert_eq!(h.check(&LIM), Err(BadRecord::Flags), "op {o}");
    }
}
