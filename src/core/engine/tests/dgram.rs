//! The engine configured for a datagram endpoint (`EpConfig::dgram`,
//! core/dgram.rs): no completion level waits for the peer's answer.

use super::*;
use crate::transport::proto::{flag, op};

fn dgram_spec(sim: SimOpts) -> Spec {
    let mut s = Spec::new(sim);
    s.cfg.dgram = true;
    s
}

#[test]
fn completion_levels_complete_at_transmit_without_an_ack() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        for level in [FI_DELIVERY_COMPLETE, FI_TRANSMIT_COMPLETE, FI_MATCH_COMPLETE] {
            let (net, mut a, mut b) = pair_of(dgram_spec(sim), dgram_spec(sim));
            let m = pattern(300, 3);
            a.send(SendArgs {
                flags: level,
                ..sargs(B, &m, 1)
            })
            .unwrap();
            // Only the sender progresses: the receiver never answers, and
            // the send completes anyway.
            run(&mut [&mut a], 3);
            assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)], "{sim:?} {level:#x}");
            let eager = net.log().into_iter().find(|r| r.hdr.op == op::EAGER).unwrap();
            assert_eq!(eager.hdr.flags & (flag::ACK_REQ | flag::ACK_ARRIVE), 0);
            // The message is there for the receiver all the same.
            let mut buf = vec![0u8; 300];
            b.recv(rargs(&mut buf, 2)).unwrap();
            run(&mut [&mut a, &mut b], 3);
            assert_eq!(b.rx_ok().len(), 1);
            assert_eq!(buf, m);
            assert!(net.log().iter().all(|r| r.hdr.op != op::ACK), "no answer sent");
        }
    }
}
