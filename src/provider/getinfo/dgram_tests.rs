//! fi_getinfo's datagram (`FI_EP_DGRAM`) entries: which there are, what
//! they offer (no more than core/dgram.rs carries) and how hints narrow
//! them.

use super::offer::*;
use super::request::{Query, TransportChoice};
use super::*;
use crate::base::error::{Error, Result};
use crate::core::attr::{EpAttr, Info};
use crate::core::domain::TransportKind;

const V: u32 = fi_version(1, 17);

fn dgram_hints() -> Info {
    Info {
        ep: Some(EpAttr {
            ep_type: FI_EP_DGRAM,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(h: &Info, transports: TransportChoice) -> Result<Vec<Info>> {
    super::getinfo(&Query {
        version: V,
        node: None,
        service: None,
        flags: 0,
        hints: Some(h),
        transports,
    })
}

fn domain(i: &Info) -> &str {
    i.domain.as_ref().unwrap().name.as_deref().unwrap()
}

#[test]
fn one_entry_per_transport_with_one_datagram_as_max_msg_size() {
    let l = run(&dgram_hints(), TransportChoice::All).unwrap();
    let got: Vec<(&str, u32, usize)> = l
        .iter()
        .map(|i| {
            let e = i.ep.as_ref().unwrap();
            (domain(i), e.ep_type, e.max_msg_size)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("auto", FI_EP_DGRAM, 16384),
            ("shm", FI_EP_DGRAM, 16384),
            ("tcp", FI_EP_DGRAM, 65507 - 64),
        ]
    );
    for i in &l {
        // Messages, tagged messages, FI_SOURCE, directed receives; never RMA,
        // atomics or variable-length messages.
        let want = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV;
        assert_eq!(i.caps & want, want, "{}", domain(i));
        assert_eq!(i.caps & (FI_RMA | FI_ATOMIC | FI_VARIABLE_MSG | FI_RMA_EVENT), 0);
        assert_eq!(i.tx.as_ref().unwrap().rma_iov_limit, 0);
        assert_eq!(i.domain.as_ref().unwrap().max_ep_auth_key, 0);
        assert!(i.tx.as_ref().unwrap().inject_size <= i.ep.as_ref().unwrap().max_msg_size);
    }
    // Over the rings (shm, auto): this host's peers only, shm addresses,
    // in order. Over UDP: any host, socket addresses, no order promised.
    for i in &l[..2] {
        assert_eq!(i.caps & FI_REMOTE_COMM, 0);
        assert_eq!(i.addr_format, FI_ADDR_STR);
        assert_eq!(i.tx.as_ref().unwrap().msg_order, FI_ORDER_SAS);
    }
    let u = &l[2];
    assert_ne!(u.caps & FI_REMOTE_COMM, 0);
    assert_eq!(u.addr_format, FI_SOCKADDR_IN);
    assert_eq!(u.tx.as_ref().unwrap().msg_order, FI_ORDER_NONE);
    assert_eq!(u.ep.as_ref().unwrap().protocol, UDP_PROTOCOL);
}

#[test]
fn hints_narrow_the_datagram_entries() {
    let only = |t| TransportChoice::Only(t);
    // What a datagram endpoint cannot do is not offered.
    for caps in [FI_MSG | FI_RMA, FI_ATOMIC, FI_MSG | FI_VARIABLE_MSG] {
        let h = Info { caps, ..dgram_hints() };
        assert_eq!(run(&h, TransportChoice::All).unwrap_err(), Error::NODATA, "{caps:#x}");
    }
    // More than one datagram carries.
    let mut h = dgram_hints();
    h.ep.as_mut().unwrap().max_msg_size = 65507 - 64 + 1;
    assert_eq!(run(&h, only(TransportKind::Tcp)).unwrap_err(), Error::NODATA);
    h.ep.as_mut().unwrap().max_msg_size = 16385;
    assert_eq!(run(&h, only(TransportKind::Shm)).unwrap_err(), Error::NODATA);
    // Peers on other hosts: UDP only.
    let h = Info {
        caps: FI_MSG | FI_REMOTE_COMM,
        ..dgram_hints()
    };
    let l = run(&h, TransportChoice::All).unwrap();
    assert_eq!(l.iter().map(domain).collect::<Vec<_>>(), ["tcp"]);
    // A node that is not this host: the shm-addressed entries (shm, and
    // auto's datagrams) are host-local; UDP takes any node.
    for (t, want) in [
        (TransportKind::Auto, Err(Error::NODATA)),
        (TransportKind::Shm, Err(Error::NODATA)),
        (TransportKind::Tcp, Ok(1)),
    ] {
        let r = super::getinfo(&Query {
            version: V,
            node: Some("192.0.2.1"),
            service: Some("9228"),
            flags: 0,
            hints: Some(&dgram_hints()),
            transports: only(t),
        });
        assert_eq!(r.map(|l| l.len()), want, "{t:?}");
    }
    // The RDM entries keep their own caps (datagram ones are after them).
    let l = super::getinfo(&Query {
        version: V,
        node: None,
        service: None,
        flags: 0,
        hints: None,
        transports: only(TransportKind::Shm),
    })
    .unwrap();
    let types: Vec<u32> = l.iter().map(|i| i.ep.as_ref().unwrap().ep_type).collect();
    assert_eq!(types, [FI_EP_RDM, FI_EP_MSG, FI_EP_DGRAM]);
}
