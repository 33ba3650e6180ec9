//! The passive endpoint core without the C face: an announcer that records
//! what it is given stands in for the `FI_CONNREQ` event (and can play an
//! EQ with no room).

use super::*;
use crate::abi::{fi_version, FI_CONNREQ, FI_EP_RDM, FI_SOCKADDR_IN, FI_WAIT_NONE};
use crate::core::attr::{DomainAttr, EpAttr};
use crate::core::eq::EqAttr;
use crate::transport::connected::cm::{self, CmKind};
use crate::transport::proto::{WireHdr, HDR_LEN};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Every offer the announcer got (its data), and the requests it took.
static OFFERED: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
static TAKEN: Mutex<Vec<(usize, ConnRequest)>> = Mutex::new(Vec::new());
/// The "EQ" has no room.
static FULL: AtomicBool = AtomicBool::new(false);

fn announce(pep: &Pep, eq: &Eq, req: ConnRequest) -> core::result::Result<(), ConnRequest> {
    OFFERED.lock().push(req.data().to_vec());
    if FULL.load(Ordering::Acquire) || eq.push_event(FI_CONNREQ, req.data()).is_err() {
        return Err(req);
    }
    TAKEN.lock().push((pep.handle(), req));
    Ok(())
}

fn info() -> Info {
    Info {
        addr_format: FI_SOCKADDR_IN,
        src_addr: Some(Addr::Inet("127.0.0.1:0".parse().unwrap()).to_bytes()),
        ep: Some(EpAttr {
            ep_type: FI_EP_MSG,
            ..EpAttr::default()
        }),
        ..Info::default()
    }
}

fn owner(engine: &Arc<Engine>) -> Owner {
    Owner {
        fabric: None,
        engine: engine.clone(),
        iface: None,
        route_hints: Vec::new(),
    }
}

fn connreq(data: &[u8]) -> Vec<u8> {
    let (h, p) = cm::encode(CmKind::ConnReq, data, 0, None);
    let mut v = h.to_vec();
    v.extend(p);
    v
}

/// Progresses `pep` until `done` (5 s: a hang guard), sleeping on the
/// engine as a thread in `fi_eq_sread` would.
fn progress_until(pep: &Pep, engine: &Engine, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    loop {
        pep.progress();
        if done() {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "timed out");
        crate::sys::poll_readable(engine.fd(), Some(Duration::from_millis(50)));
    }
}

#[test]
fn only_connected_endpoints_of_rustfab_domains() {
    let engine = Engine::new().unwrap();
    let mut i = info();
    i.ep.as_mut().unwrap().ep_type = FI_EP_RDM;
    assert!(Pep::build(owner(&engine), i, announce).is_err());
    // Connected endpoints of every transport listen over TCP.
    for (name, ok) in [("shm", true), ("auto", true), ("tcp", true), ("verbs", false)] {
        let mut i = info();
        i.domain = Some(DomainAttr {
            name: Some(name.into()),
            ..DomainAttr::default()
        });
        assert_eq!(Pep::build(owner(&engine), i, announce).is_ok(), ok, "{name}");
    }
    let mut i = info();
    i.src_addr = Some(vec![1, 2, 3]);
    assert!(Pep::build(owner(&engine), i, announce).is_err());
}

/// Bind, name, listen; requests are announced in arrival order, and one the
/// EQ has no room for waits (first in line) instead of being lost; a taken
/// request can be refused with data; close stops listening.
#[test]
fn requests_are_announced_in_order_and_wait_while_the_eq_is_full() {
    let engine = Engine::new().unwrap();
    let pep = Pep::build(owner(&engine), info(), announce).unwrap();
    pep.set_handle(0x1234);
    assert_eq!(pep.listen(), Err(Error::NOEQ));
    let attr = EqAttr {
        size: 8,
        flags: 0,
        wait_obj: FI_WAIT_NONE,
    };
    let eq = Eq::new(&attr, fi_version(1, 17), crate::core::wait::Holds::none(), None).unwrap();
    pep.bind_eq(eq).unwrap();
    let name = pep.name().unwrap();
    assert!(name.ip().is_loopback() && name.port() != 0, "{name}");
    assert_eq!(pep.set_backlog(0), Err(Error::INVAL));
    pep.set_backlog(16).unwrap();
    pep.listen().unwrap();
    pep.listen().unwrap();
    assert_eq!(pep.name().unwrap(), name, "listening where it was bound");
    assert_eq!(pep.set_name(name), Err(Error::OPBADSTATE));
    assert_eq!(pep.take_bound().err(), Some(Error::INVAL));

    FULL.store(true, Ordering::Release);
    let mut first = TcpStream::connect(name).unwrap();
    first.write_all(&connreq(b"first")).unwrap();
    progress_until(&pep, &engine, || !OFFERED.lock().is_empty());
    let mut second = TcpStream::connect(name).unwrap();
    second.write_all(&connreq(b"second")).unwrap();
    for _ in 0..5 {
        pep.progress();
        crate::sys::poll_readable(engine.fd(), Some(Duration::from_millis(20)));
    }
    assert!(TAKEN.lock().is_empty());
    assert!(
        OFFERED.lock().iter().all(|d| d == b"first"),
        "the waiting request stays first in line"
    );
    FULL.store(false, Ordering::Release);
    progress_until(&pep, &engine, || TAKEN.lock().len() == 2);
    let taken: Vec<(usize, ConnRequest)> = TAKEN.lock().drain(..).collect();
    assert_eq!(taken[0].1.data(), b"first");
    assert_eq!(taken[1].1.data(), b"second");
    assert!(taken.iter().all(|(h, _)| *h == 0x1234), "events name the pep");
    assert_eq!(taken[0].1.local().port(), name.port());
    assert_eq!(taken[0].1.peer(), first.local_addr().unwrap());

    // Refusing a request: REJECT with the data, then the end.
    let mut it = taken.into_iter();
    let (_, req) = it.next().unwrap();
    req.reject(b"no");
    first.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut h = [0u8; HDR_LEN];
    first.read_exact(&mut h).unwrap();
    let h = WireHdr::from_bytes(&h);
    let mut p = vec![0u8; h.payload as usize];
    first.read_exact(&mut p).unwrap();
    assert_eq!(cm::parse(&h, &p), Ok(CmKind::Reject));
    assert_eq!(p, b"no");
    assert_eq!(first.read(&mut [0u8; 8]).unwrap(), 0);
    drop(it);
    second.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(matches!(second.read(&mut [0u8; 8]), Ok(0) | Err(_)), "dropped: closed");

    pep.close();
    assert!(TcpStream::connect(name).is_err(), "nobody listens any more");
}
