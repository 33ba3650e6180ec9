//! Receive contexts (`lanes.rs`) as an endpoint without any sees them: a
//! message naming a context is refused whichever way it arrives (whole,
//! as shm hands it over, or placed in two steps, as tcp does), and the
//! messages around it are received as usual.

use super::*;
use crate::transport::proto::{flag, op, WireHdr};

#[test]
fn a_message_naming_a_context_is_refused_by_an_endpoint_without_contexts() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        let (net, mut a, mut b) = pair(sim);
        let mut buf = vec![0u8; 64];
        b.recv(rargs(&mut buf, 7)).unwrap();
        // An EAGER record for receive context 3, asking to be answered.
        let mut h = WireHdr::new(op::EAGER);
        h.flags = 3 << flag::LANE_SHIFT | flag::ACK_REQ;
        h.msg_id = 99;
        h.len = 16;
        net.forge(&a.addr, &b.addr, h, &[5u8; 16]);
        run(&mut [&mut a, &mut b], 4);
        assert_eq!(b.rx_ok(), vec![], "{sim:?}: the posted receive does not take it");
        assert_eq!(b.recv_count(), (0, 0), "{sim:?}");
        let acks: Vec<_> = net
            .log()
            .into_iter()
            .filter(|r| r.hdr.op == op::ACK && r.from == b.addr)
            .collect();
        assert_eq!(acks.len(), 1, "{sim:?}: one answer");
        assert_eq!(
            (acks[0].hdr.msg_id, acks[0].hdr.aux),
            (99, Error::ADDRNOTAVAIL.0 as u32),
            "{sim:?}: refused"
        );
        // A message naming no context takes the receive.
        let m = pattern(40, 3);
        a.send(sargs(B, &m, 1)).unwrap();
        run(&mut [&mut a, &mut b], 4);
        assert_eq!(
            b.rx_ok(),
            vec![Comp::recv(7, MRECV, 40, buf.as_ptr() as usize)],
            "{sim:?}"
        );
        assert_eq!(&buf[..40], &m[..]);
        assert_eq!(b.recv_count(), (1, 0), "{sim:?}");
    }
}
