use super::{address::*, hints::*, offer::*, *};
use crate::base::error::{Error, Result};
use crate::core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use crate::core::domain::TransportKind;
use crate::core::ep::INJECT_SIZE;
use crate::core::scalable::MAX_CTX;
use crate::fi::attr::{free_c_info, info_list_to_c};
use crate::provider::PROVIDER_VERSION;
use crate::transport::addr::SHM_ADDR_LEN;
use crate::transport::addr::{shm_token_for, Addr};

const V: u32 = fi_version(1, 17);

/// The tests below are about the RDM entries; this shadows
/// `super::getinfo` to leave the FI_EP_MSG and FI_EP_DGRAM entries out
/// (they have their own tests, `msg_entry_*` and `dgram_tests.rs`).
fn getinfo(q: &Query) -> Result<Vec<Info>> {
    let rdm: Vec<Info> = super::getinfo(q)?
        .into_iter()
        .filter(|i| {
            i.ep.as_ref()
                .is_none_or(|e| e.ep_type != FI_EP_MSG && e.ep_type != FI_EP_DGRAM)
        })
        .collect();
    if rdm.is_empty() {
        Err(Error::NODATA)
    } else {
        Ok(rdm)
    }
}

fn query<'a>(hints: Option<&'a Info>) -> Query<'a> {
    Query {
        version: V,
        node: None,
        service: None,
        flags: 0,
        hints,
        transports: TransportChoice::ShmTcp,
    }
}

/// Hints as `fi_allocinfo` makes them: every attr present and zeroed.
fn alloc_hints() -> Info {
    Info {
        tx: Some(TxAttr::default()),
        rx: Some(RxAttr::default()),
        ep: Some(EpAttr::default()),
        domain: Some(DomainAttr::default()),
        fabric: Some(FabricAttr::default()),
        ..Default::default()
    }
}

fn names(list: &[Info]) -> Vec<String> {
    list.iter()
        .map(|i| i.domain.as_ref().unwrap().name.clone().unwrap())
        .collect()
}

fn run(h: &Info) -> Result<Vec<Info>> {
    getinfo(&query(Some(h)))
}

fn run_names(h: &Info) -> Vec<String> {
    run(h).map(|l| names(&l)).unwrap_or_default()
}

fn addr(b: &Option<Vec<u8>>) -> Option<Addr> {
    b.as_ref().map(|b| Addr::parse(FI_FORMAT_UNSPEC, b).unwrap().0)
}

fn sock(s: &str) -> Addr {
    Addr::Inet(s.parse().unwrap())
}

#[test]
fn null_hints_give_shm_then_tcp_complete() {
    let l = getinfo(&query(None)).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    for (i, t) in l
        .iter()
        .zip(TEMPLATES.iter().filter(|t| t.transport != TransportKind::Auto))
    {
        assert_eq!(i.caps, t.caps & !(FI_VARIABLE_MSG | FI_TRIGGER | FI_NAMED_RX_CTX));
        assert_eq!(i.mode, 0);
        let e = i.ep.as_ref().unwrap();
        assert_eq!(e.ep_type, FI_EP_RDM);
        assert_eq!(e.protocol, t.protocol);
        assert_eq!(e.protocol_version, 1);
        assert_eq!(e.max_msg_size, 1 << 30);
        assert_eq!(e.mem_tag_format, 0xaaaa_aaaa_aaaa_aaaa);
        assert_eq!((e.tx_ctx_cnt, e.rx_ctx_cnt), (1, 1));
        let d = i.domain.as_ref().unwrap();
        assert_eq!(d.threading, FI_THREAD_SAFE);
        assert_eq!(
            (d.control_progress, d.data_progress),
            (FI_PROGRESS_MANUAL, FI_PROGRESS_MANUAL)
        );
        assert_eq!(d.resource_mgmt, FI_RM_ENABLED);
        assert_eq!(d.av_type, FI_AV_UNSPEC);
        assert_eq!(d.mr_mode, 0);
        assert_eq!(d.cq_data_size, 8);
        assert_eq!(d.max_err_data, 64);
        assert_eq!(d.caps, t.caps & DOMAIN_LEVEL_CAPS);
        let f = i.fabric.as_ref().unwrap();
        assert_eq!(f.name.as_deref(), Some("rustfab"));
        assert_eq!(f.prov_name, None);
        assert_eq!(f.prov_version, PROVIDER_VERSION);
        let tx = i.tx.as_ref().unwrap();
        assert_eq!(
            tx.caps,
            FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE
        );
        assert_eq!((tx.msg_order, tx.comp_order), (FI_ORDER_SAS, FI_ORDER_NONE));
        assert_eq!(
            (tx.inject_size, tx.size, tx.iov_limit, tx.rma_iov_limit),
            (INJECT_SIZE, 1024, 8, 8)
        );
        let rx = i.rx.as_ref().unwrap();
        assert_eq!(rx.caps, RX_CAPS & !(FI_VARIABLE_MSG | CAPS_2_0));
        assert_eq!((rx.size, rx.iov_limit, rx.total_buffered_recv), (1024, 8, 0));
        // Every entry has a source address (the wildcard) and no dest.
        assert!(i.src_addr.is_some());
        assert!(i.dest_addr.is_none());
    }
    assert_eq!(l[0].addr_format, FI_ADDR_STR);
    assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));
    assert_eq!(l[0].src_addr.as_ref().unwrap().len(), SHM_ADDR_LEN);
    assert_eq!(l[1].addr_format, FI_SOCKADDR_IN);
    assert_eq!(addr(&l[1].src_addr), Some(sock("0.0.0.0:0")));
    // shm is host-local and says so.
    assert_eq!(l[0].caps & FI_REMOTE_COMM, 0);
    assert_ne!(l[1].caps & FI_REMOTE_COMM, 0);
}

#[test]
fn tx_rx_caps_never_carry_domain_caps() {
    for i in getinfo(&query(None)).unwrap() {
        assert_eq!(i.tx.unwrap().caps & DOMAIN_LEVEL_CAPS, 0);
        assert_eq!(i.rx.unwrap().caps & DOMAIN_LEVEL_CAPS, 0);
    }
}

#[test]
fn transport_parameter_selects() {
    assert_eq!(TransportChoice::parse("all"), Some(TransportChoice::All));
    assert_eq!(TransportChoice::parse(""), Some(TransportChoice::All));
    assert_eq!(
        TransportChoice::parse("auto"),
        Some(TransportChoice::Only(TransportKind::Auto))
    );
    assert_eq!(
        TransportChoice::parse(" SHM "),
        Some(TransportChoice::Only(TransportKind::Shm))
    );
    assert_eq!(
        TransportChoice::parse("tcp"),
        Some(TransportChoice::Only(TransportKind::Tcp))
    );
    assert_eq!(TransportChoice::parse("udp"), None);
    assert_eq!(TransportChoice::parse("shm, tcp"), Some(TransportChoice::ShmTcp));
    assert_eq!(TransportChoice::parse("shm,udp"), None);
    for (choice, want) in [
        (TransportChoice::All, vec!["auto", "shm", "tcp"]),
        (TransportChoice::ShmTcp, vec!["shm", "tcp"]),
        (TransportChoice::Only(TransportKind::Auto), vec!["auto"]),
        (TransportChoice::Only(TransportKind::Shm), vec!["shm"]),
        (TransportChoice::Only(TransportKind::Tcp), vec!["tcp"]),
    ] {
        let q = Query {
            transports: choice,
            ..query(None)
        };
        assert_eq!(names(&getinfo(&q).unwrap()), want);
    }
    // The only transport left does not match the hints: nothing at all.
    let mut h = alloc_hints();
    h.caps = FI_REMOTE_COMM;
    let q = Query {
        transports: TransportChoice::Only(TransportKind::Shm),
        ..query(Some(&h))
    };
    assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
}

#[test]
fn fi_info_verbose_hints_give_both() {
    // fi_info -v: mode ~0, domain mode ~0, mr_mode ~(BASIC|SCALABLE).
    let mut h = alloc_hints();
    h.mode = !0;
    h.fabric.as_mut().unwrap().prov_name = Some("rustfab".into());
    let d = h.domain.as_mut().unwrap();
    d.mode = !0;
    d.mr_mode = !(FI_MR_BASIC | FI_MR_SCALABLE);
    let l = run(&h).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    for i in &l {
        assert_eq!(i.mode, OPTIONAL_MODE);
        assert_eq!(i.rx.as_ref().unwrap().mode, OPTIONAL_MODE);
        assert_eq!(i.domain.as_ref().unwrap().mr_mode, 0);
        assert_eq!(i.domain.as_ref().unwrap().mode, 0);
    }
}

#[test]
fn prov_name_hints_never_reject() {
    for n in ["rustfab", "RUSTFAB", "rustfab;^ofi_rxm", "rustfab;ofi_rxm", "^ofi_rxm"] {
        let mut h = alloc_hints();
        h.fabric.as_mut().unwrap().prov_name = Some(n.into());
        assert_eq!(run_names(&h), ["shm", "tcp"], "{n}");
    }
}

/// FI_TRIGGER (fi_trigger(3)) is reported when asked for, on the RDM
/// entries of every transport, with its tx side; never unasked.
#[test]
fn trigger_only_when_asked() {
    let mut h = alloc_hints();
    h.caps = FI_MSG | FI_RMA | FI_RMA_EVENT | FI_TRIGGER;
    let l = run(&h).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"], "the RDM entries");
    for i in &l {
        assert_eq!(i.ep.as_ref().unwrap().ep_type, FI_EP_RDM);
        assert_ne!(i.caps & FI_TRIGGER, 0);
        assert_ne!(i.tx.as_ref().unwrap().caps & FI_TRIGGER, 0);
    }
    for i in run(&alloc_hints()).unwrap() {
        assert_eq!(i.caps & FI_TRIGGER, 0, "not asked for");
    }
}

#[test]
fn shared_av_offered_on_rdm_entries() {
    let mut h = alloc_hints();
    h.caps = FI_MSG | FI_SHARED_AV;
    let l = run(&h).unwrap();
    assert_eq!(run_names(&h), ["shm", "tcp"]);
    for i in &l {
        assert_eq!(i.ep.as_ref().unwrap().ep_type, FI_EP_RDM);
        assert_ne!(i.caps & FI_SHARED_AV, 0);
        assert_ne!(i.domain.as_ref().unwrap().caps & FI_SHARED_AV, 0);
        assert_eq!(i.tx.as_ref().unwrap().caps & FI_SHARED_AV, 0);
    }
}

/// Contexts only when asked for: MPI libraries open a scalable endpoint
/// whenever `max_ep_tx_ctx` > 1 and issue RMA on its contexts.
/// Shared contexts only when asked for (FI_SHARED_CONTEXT in ep_attr, or
/// the domain's maxima): applications that do not ask see 0, and asking
/// for them is not asking for a scalable endpoint's contexts.
#[test]
fn shared_contexts_offered_only_when_asked() {
    let h = alloc_hints();
    for i in run(&h).unwrap() {
        let d = i.domain.as_ref().unwrap();
        assert_eq!((d.max_ep_stx_ctx, d.max_ep_srx_ctx), (0, 0), "not asked");
    }
    for t in [FI_EP_RDM, FI_EP_MSG, FI_EP_DGRAM] {
        let mut h = alloc_hints();
        let e = h.ep.as_mut().unwrap();
        (e.ep_type, e.tx_ctx_cnt, e.rx_ctx_cnt) = (t, FI_SHARED_CONTEXT, FI_SHARED_CONTEXT);
        // Every entry of this type (not the RDM-only `getinfo` above).
        let l = super::getinfo(&query(Some(&h))).unwrap_or_else(|e| panic!("type {t}: {e:?}"));
        assert!(!l.is_empty(), "type {t}");
        for i in &l {
            let (d, e) = (i.domain.as_ref().unwrap(), i.ep.as_ref().unwrap());
            assert_eq!((d.max_ep_stx_ctx, d.max_ep_srx_ctx), (1, 1));
            assert_eq!((d.max_ep_tx_ctx, d.max_ep_rx_ctx), (1, 1));
            assert_eq!((e.tx_ctx_cnt, e.rx_ctx_cnt), (FI_SHARED_CONTEXT, FI_SHARED_CONTEXT));
        }
    }
    let mut h = alloc_hints();
    h.domain.as_mut().unwrap().max_ep_srx_ctx = 1;
    for i in run(&h).unwrap() {
        assert_eq!(i.domain.as_ref().unwrap().max_ep_srx_ctx, 1);
    }
}

#[test]
fn contexts_offered_only_when_asked() {
    let mut h = alloc_hints();
    h.caps = FI_MSG | FI_RMA | FI_ATOMIC;
    for i in run(&h).unwrap() {
        let d = i.domain.as_ref().unwrap();
        assert_eq!((d.max_ep_tx_ctx, d.max_ep_rx_ctx), (1, 1), "not asked");
    }
    h.caps = FI_MSG | FI_NAMED_RX_CTX;
    let l = run(&h).unwrap();
    assert!(!l.is_empty());
    for i in &l {
        let d = i.domain.as_ref().unwrap();
        assert_eq!((d.max_ep_tx_ctx, d.max_ep_rx_ctx), (16, 16), "FI_NAMED_RX_CTX");
    }
    let mut h = alloc_hints();
    h.ep.as_mut().unwrap().tx_ctx_cnt = 4;
    for i in run(&h)
        .unwrap()
        .iter()
        .filter(|i| i.ep.as_ref().unwrap().ep_type == FI_EP_RDM)
    {
        assert_eq!(i.domain.as_ref().unwrap().max_ep_tx_ctx, 16, "four contexts asked");
    }
}

#[test]
fn caps_must_be_a_subset() {
    for bad in [FI_COLLECTIVE, FI_RMA | FI_ATOMIC | FI_COLLECTIVE, FI_HMEM, FI_RMA_PMEM] {
        let mut h = alloc_hints();
        h.caps = bad;
        assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{bad:#x}");
    }
    // Remote communication: tcp only.
    let mut h = alloc_hints();
    h.caps = FI_TAGGED | FI_REMOTE_COMM;
    assert_eq!(run_names(&h), ["tcp"]);
}

#[test]
fn caps_are_narrowed_to_the_request() {
    let mut h = alloc_hints();
    h.caps = FI_TAGGED;
    let l = run(&h).unwrap();
    assert_eq!(l[0].caps, FI_TAGGED | FI_SEND | FI_RECV | FI_LOCAL_COMM);
    assert_eq!(
        l[1].caps,
        FI_TAGGED | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM
    );
    assert_eq!(l[0].tx.as_ref().unwrap().caps, FI_TAGGED | FI_SEND);
    assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_TAGGED | FI_RECV);
    assert_eq!(l[1].domain.as_ref().unwrap().caps, FI_LOCAL_COMM | FI_REMOTE_COMM);

    // Open MPI's request (docs/mpi.md §2): tcp only, all of it granted.
    h.caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
    let l = run(&h).unwrap();
    assert_eq!(names(&l), ["tcp"]);
    assert_eq!(l[0].caps, h.caps | FI_SEND | FI_RECV);
    assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_TAGGED | FI_RECV | FI_DIRECTED_RECV);

    // Only secondary caps: the default primary ones come with them.
    h.caps = FI_SOURCE;
    let l = run(&h).unwrap();
    assert_eq!(
        l[0].caps,
        FI_SOURCE | FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SEND | FI_RECV | FI_LOCAL_COMM
    );

    // A receive-only endpoint gets no tx caps.
    h.caps = FI_MSG | FI_RECV;
    let l = run(&h).unwrap();
    assert_eq!(l[0].tx.as_ref().unwrap().caps, 0);
    assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_MSG | FI_RECV);

    // A primary rx cap alone lands in rx_attr (fabtests' caps check).
    h.caps = FI_DIRECTED_RECV;
    let l = run(&h).unwrap();
    assert_eq!(l[0].caps, FI_DIRECTED_RECV | FI_LOCAL_COMM);
    assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_DIRECTED_RECV);
    assert_eq!(l[0].tx.as_ref().unwrap().caps, 0);

    // FI_SOURCE_ERR brings FI_SOURCE.
    h.caps = FI_MSG | FI_SOURCE_ERR;
    assert_ne!(run(&h).unwrap()[0].caps & FI_SOURCE, 0);

    // tx/rx caps hints narrow tx/rx caps.
    let mut h = alloc_hints();
    h.tx.as_mut().unwrap().caps = FI_TAGGED;
    h.rx.as_mut().unwrap().caps = FI_MSG | FI_MULTI_RECV | FI_SEND /* ignored */;
    let l = run(&h).unwrap();
    assert_eq!(l[0].tx.as_ref().unwrap().caps, FI_TAGGED | FI_SEND);
    assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_MSG | FI_RECV | FI_MULTI_RECV);
}

/// Atomics are offered on every entry and matched like RMA: asked for
/// (fi_rdm_atomic's FI_MSG | FI_ATOMICS), both sides, every direction;
/// a request naming RMA only gets no atomics, and the reverse.
#[test]
fn atomics_on_every_entry() {
    let mut h = alloc_hints();
    h.caps = FI_MSG | FI_ATOMIC;
    let l = run(&h).unwrap();
    assert_eq!(l.len(), 2);
    for i in &l {
        let dirs = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        assert_eq!(i.caps & (ATOMIC_CAPS | FI_RMA), FI_ATOMIC | dirs);
        assert_eq!(
            i.tx.as_ref().unwrap().caps & !(FI_MSG | FI_SEND),
            FI_ATOMIC | FI_READ | FI_WRITE
        );
        assert_eq!(
            i.rx.as_ref().unwrap().caps & !(FI_MSG | FI_RECV),
            FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE
        );
    }
    h.caps = FI_RMA;
    for i in run(&h).unwrap() {
        assert_eq!(i.caps & FI_ATOMIC, 0, "RMA alone brings no atomics");
    }
    h.caps = FI_ATOMIC | FI_REMOTE_WRITE;
    for i in run(&h).unwrap() {
        assert_eq!(i.caps & (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ), 0);
        assert_eq!(i.tx.as_ref().unwrap().caps & FI_ATOMIC, 0, "target only");
    }
    // The connected entry too.
    let l = super::getinfo(&query(Some(&msg_hints(FI_MSG | FI_ATOMIC)))).unwrap();
    assert_eq!(l[0].caps & FI_ATOMIC, FI_ATOMIC);
}

/// RMA is offered on the RDM entries (the connected entry: the
/// msg_entry tests; this file's `getinfo` leaves it out), with the attributes
/// fabtests' fi_getinfo_test checks: FI_RMA in info, tx and rx caps,
/// the directions named or all of them, nothing beyond what was asked,
/// no RMA ordering (so no ordering sizes).
#[test]
fn rma_on_rdm_entries() {
    let mut h = alloc_hints();
    h.caps = FI_RMA;
    let l = run(&h).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    for i in &l {
        let dirs = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        assert_eq!(i.caps & !(FI_LOCAL_COMM | FI_REMOTE_COMM), FI_RMA | dirs);
        assert_eq!(i.tx.as_ref().unwrap().caps, FI_RMA | FI_READ | FI_WRITE);
        assert_eq!(i.rx.as_ref().unwrap().caps, FI_RMA | FI_REMOTE_READ | FI_REMOTE_WRITE);
        assert_eq!(i.tx.as_ref().unwrap().rma_iov_limit, RMA_IOV_LIMIT);
        let e = i.ep.as_ref().unwrap();
        assert_eq!(
            (e.max_order_raw_size, e.max_order_war_size, e.max_order_waw_size),
            (0, 0, 0)
        );
    }
    // One side only: the other attribute has no RMA.
    h.caps = FI_MSG | FI_RMA | FI_WRITE;
    let l = run(&h).unwrap();
    assert_eq!(l[0].tx.as_ref().unwrap().caps, FI_MSG | FI_SEND | FI_RMA | FI_WRITE);
    assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_MSG | FI_RECV);
    h.caps = FI_RMA | FI_REMOTE_WRITE | FI_RMA_EVENT;
    let l = run(&h).unwrap();
    assert_eq!(l[0].tx.as_ref().unwrap().caps, 0);
    assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_RMA | FI_REMOTE_WRITE | FI_RMA_EVENT);
    // fi_rdm_rma_event's and fi_rma_bw's requests.
    h.caps = FI_MSG | FI_RMA | FI_RMA_EVENT;
    assert_eq!(run_names(&h), ["shm", "tcp"]);
    h.caps = FI_MSG | FI_RMA;
    h.domain.as_mut().unwrap().resource_mgmt = FI_RM_ENABLED;
    h.tx.as_mut().unwrap().rma_iov_limit = 2;
    let l = run(&h).unwrap();
    assert_eq!(l[0].tx.as_ref().unwrap().rma_iov_limit, 2, "echoed");
    // No RMA ordering is offered (fi_getinfo_test then expects ENODATA).
    let mut h = alloc_hints();
    h.caps = FI_RMA;
    h.tx.as_mut().unwrap().msg_order = FI_ORDER_RAW;
    assert_eq!(run(&h).unwrap_err(), Error::NODATA);
    // Asked for messaging only: no RMA anywhere in the answer.
    let mut h = alloc_hints();
    h.caps = FI_MSG | FI_TAGGED;
    for i in run(&h).unwrap() {
        assert_eq!(i.caps & RMA_CAPS, 0);
        assert_eq!(i.tx.as_ref().unwrap().caps & RMA_CAPS, 0);
        assert_eq!(i.rx.as_ref().unwrap().caps & RMA_CAPS, 0);
    }
}

#[test]
fn effective_caps_rules() {
    assert_eq!(
        effective_caps(TCP_CAPS, 0),
        TCP_CAPS & !(FI_VARIABLE_MSG | FI_TRIGGER | FI_NAMED_RX_CTX)
    );
    assert_eq!(
        effective_caps(TCP_CAPS, FI_MSG | FI_VARIABLE_MSG),
        FI_MSG | FI_VARIABLE_MSG | FI_SEND | FI_RECV | COMM_CAPS
    );
    assert_eq!(effective_caps(TCP_CAPS, FI_MSG), FI_MSG | FI_SEND | FI_RECV | COMM_CAPS);
    assert_eq!(effective_caps(TCP_CAPS, FI_MSG | FI_SEND), FI_MSG | FI_SEND | COMM_CAPS);
    assert_eq!(
        effective_caps(SHM_CAPS, FI_MSG | FI_LOCAL_COMM),
        FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM
    );
    assert_eq!(
        effective_caps(TCP_CAPS, FI_MULTI_RECV),
        FI_MULTI_RECV | FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SEND | FI_RECV | COMM_CAPS
    );
    // RMA: all directions when none is named, only what is named else;
    // never with a request that names other primary caps only, nor
    // with a bare secondary request (FI_RMA_EVENT aside).
    const DIRS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    assert_eq!(effective_caps(SHM_CAPS, FI_RMA), FI_RMA | DIRS | FI_LOCAL_COMM);
    assert_eq!(
        effective_caps(SHM_CAPS, FI_MSG | FI_RMA),
        FI_MSG | FI_SEND | FI_RECV | FI_RMA | DIRS | FI_LOCAL_COMM
    );
    assert_eq!(
        effective_caps(SHM_CAPS, FI_RMA | FI_READ),
        FI_RMA | FI_READ | FI_LOCAL_COMM
    );
    assert_eq!(effective_caps(TCP_CAPS, FI_MSG | FI_TAGGED) & RMA_CAPS, 0);
    assert_eq!(effective_caps(TCP_CAPS, FI_SOURCE) & RMA_CAPS, 0);
    assert_eq!(
        effective_caps(SHM_CAPS, FI_RMA_EVENT) & RMA_CAPS,
        RMA_CAPS,
        "FI_RMA_EVENT implies FI_RMA"
    );
    assert_eq!(effective_caps(SHM_CAPS, 0) & RMA_CAPS, RMA_CAPS, "no hints: all");
    // Results never exceed what is offered.
    for req in [
        0,
        FI_MSG,
        FI_SOURCE,
        FI_TAGGED | FI_SOURCE_ERR,
        FI_RECV,
        FI_RMA,
        FI_RMA | FI_WRITE,
    ] {
        assert_eq!(effective_caps(SHM_CAPS, req) & !SHM_CAPS, 0, "{req:#x}");
    }
}

#[test]
fn ep_type_and_mode() {
    let mut h = alloc_hints();
    h.ep.as_mut().unwrap().ep_type = FI_EP_RDM;
    assert_eq!(run_names(&h), ["shm", "tcp"]);
    for t in [FI_EP_MSG, FI_EP_SOCK_STREAM, 77] {
        h.ep.as_mut().unwrap().ep_type = t;
        assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{t}");
    }
    // No mode bits are required.
    let mut h = alloc_hints();
    h.mode = 0;
    assert_eq!(run(&h).unwrap()[0].mode, 0);
    h.mode = FI_CONTEXT | FI_CONTEXT2;
    assert_eq!(run(&h).unwrap()[0].mode, 0);
    h.mode = FI_CONTEXT | FI_BUFFERED_RECV;
    assert_eq!(run(&h).unwrap()[0].mode, OPTIONAL_MODE & FI_BUFFERED_RECV);
}

#[test]
fn addr_format_selects_transport() {
    let mut h = alloc_hints();
    for (f, want) in [
        (FI_ADDR_STR, vec!["shm"]),
        (FI_SOCKADDR_IN, vec!["tcp"]),
        (FI_SOCKADDR_IN6, vec!["tcp"]),
        (FI_SOCKADDR, vec!["tcp"]),
        (FI_FORMAT_UNSPEC, vec!["shm", "tcp"]),
    ] {
        h.addr_format = f;
        assert_eq!(run_names(&h), want, "{f}");
    }
    let l = {
        h.addr_format = FI_SOCKADDR_IN6;
        run(&h).unwrap()
    };
    assert_eq!(l[0].addr_format, FI_SOCKADDR_IN6);
    assert_eq!(addr(&l[0].src_addr), Some(sock("[::]:0")));
    for f in [FI_SOCKADDR_IB, FI_ADDR_PSMX, 6, 7, 8, 10, 99] {
        h.addr_format = f;
        assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{f}");
    }
}

#[test]
fn names_must_match() {
    let mut h = alloc_hints();
    h.domain.as_mut().unwrap().name = Some("tcp".into());
    assert_eq!(run_names(&h), ["tcp"]);
    h.domain.as_mut().unwrap().name = Some("SHM".into());
    assert_eq!(run_names(&h), ["shm"]);
    h.domain.as_mut().unwrap().name = Some("eth0".into());
    assert_eq!(run(&h).unwrap_err(), Error::NODATA);
    let mut h = alloc_hints();
    h.fabric.as_mut().unwrap().name = Some("RustFab".into());
    assert_eq!(run_names(&h), ["shm", "tcp"]);
    h.fabric.as_mut().unwrap().name = Some("192.0.2.0/24".into());
    assert_eq!(run(&h).unwrap_err(), Error::NODATA);
    let mut h = alloc_hints();
    h.fabric.as_mut().unwrap().prov_version = PROVIDER_VERSION + 1;
    assert_eq!(run(&h).unwrap_err(), Error::NODATA);
}

/// Each mutation pushes one value just beyond what rustfab offers.
#[test]
fn auth_keys_only_on_tcp_rdm_and_echoed() {
    for (on_ep, key) in [(true, vec![1u8, 2]), (false, vec![0u8])] {
        let mut h = alloc_hints();
        if on_ep {
            h.ep.as_mut().unwrap().auth_key = Some(key.clone());
        } else {
            h.domain.as_mut().unwrap().auth_key = Some(key.clone());
        }
        let list = run(&h).unwrap();
        assert!(!list.is_empty());
        for i in &list {
            let d = i.domain.as_ref().unwrap();
            assert_eq!(d.name.as_deref(), Some("tcp"));
            assert_eq!(i.ep.as_ref().unwrap().ep_type, FI_EP_RDM);
            assert_eq!(d.max_ep_auth_key, 1);
            let echoed = if on_ep {
                &i.ep.as_ref().unwrap().auth_key
            } else {
                &d.auth_key
            };
            assert_eq!(echoed.as_ref(), Some(&key));
        }
    }
}

#[test]
fn every_limit_is_enforced() {
    type Mutate = fn(&mut Info);
    let cases: &[(&str, Mutate)] = &[
        ("tx size", |h| h.tx.as_mut().unwrap().size = QUEUE_SIZE + 1),
        ("tx iov", |h| h.tx.as_mut().unwrap().iov_limit = IOV_LIMIT + 1),
        ("inject", |h| h.tx.as_mut().unwrap().inject_size = INJECT_SIZE + 1),
        ("rma iov", |h| h.tx.as_mut().unwrap().rma_iov_limit = RMA_IOV_LIMIT + 1),
        ("tx order", |h| {
            h.tx.as_mut().unwrap().msg_order = FI_ORDER_SAS | FI_ORDER_RAW
        }),
        ("tx comp", |h| h.tx.as_mut().unwrap().comp_order = FI_ORDER_STRICT),
        ("tx op", |h| h.tx.as_mut().unwrap().op_flags = FI_COMMIT_COMPLETE),
        ("tx caps", |h| h.tx.as_mut().unwrap().caps = FI_COLLECTIVE),
        ("tx tclass", |h| h.tx.as_mut().unwrap().tclass = 0x100 | 64),
        ("rx size", |h| h.rx.as_mut().unwrap().size = QUEUE_SIZE + 1),
        ("rx iov", |h| h.rx.as_mut().unwrap().iov_limit = IOV_LIMIT + 1),
        ("rx buffered", |h| h.rx.as_mut().unwrap().total_buffered_recv = 1),
        ("rx order", |h| h.rx.as_mut().unwrap().msg_order = FI_ORDER_DATA),
        ("rx comp", |h| h.rx.as_mut().unwrap().comp_order = FI_ORDER_DATA),
        ("rx op", |h| h.rx.as_mut().unwrap().op_flags = FI_DELIVERY_COMPLETE),
        ("rx caps", |h| h.rx.as_mut().unwrap().caps = FI_COLLECTIVE),
        ("max msg", |h| h.ep.as_mut().unwrap().max_msg_size = (1 << 30) + 1),
        ("protocol", |h| h.ep.as_mut().unwrap().protocol = FI_PROTO_SOCK_TCP),
        ("proto ver", |h| h.ep.as_mut().unwrap().protocol_version = 2),
        ("tx ctx", |h| h.ep.as_mut().unwrap().tx_ctx_cnt = MAX_CTX + 1),
        ("rx ctx", |h| h.ep.as_mut().unwrap().rx_ctx_cnt = MAX_CTX + 1),
        ("cq data", |h| h.domain.as_mut().unwrap().cq_data_size = 9),
        ("key size", |h| h.domain.as_mut().unwrap().mr_key_size = 9),
        ("cq cnt", |h| h.domain.as_mut().unwrap().cq_cnt = CQ_CNT + 1),
        ("ep cnt", |h| h.domain.as_mut().unwrap().ep_cnt = EP_CNT + 1),
        ("dom tx ctx", |h| {
            h.domain.as_mut().unwrap().tx_ctx_cnt = DOMAIN_TX_CTX_CNT + 1
        }),
        ("dom rx ctx", |h| {
            h.domain.as_mut().unwrap().rx_ctx_cnt = DOMAIN_RX_CTX_CNT + 1
        }),
        ("max ep tx", |h| h.domain.as_mut().unwrap().max_ep_tx_ctx = MAX_CTX + 1),
        ("max ep rx", |h| h.domain.as_mut().unwrap().max_ep_rx_ctx = MAX_CTX + 1),
        ("stx", |h| h.domain.as_mut().unwrap().max_ep_stx_ctx = 2),
        ("srx", |h| h.domain.as_mut().unwrap().max_ep_srx_ctx = 2),
        ("cntr", |h| h.domain.as_mut().unwrap().cntr_cnt = CNTR_CNT + 1),
        ("mr iov", |h| h.domain.as_mut().unwrap().mr_iov_limit = MR_IOV_LIMIT + 1),
        ("mr cnt", |h| h.domain.as_mut().unwrap().mr_cnt = MR_CNT + 1),
        ("err data", |h| {
            h.domain.as_mut().unwrap().max_err_data = MAX_ERR_DATA + 1
        }),
        ("dom caps", |h| h.domain.as_mut().unwrap().caps = FI_HMEM),
        ("dom tclass", |h| h.domain.as_mut().unwrap().tclass = 0x206),
        ("threading", |h| h.domain.as_mut().unwrap().threading = 6),
        ("ctrl prog", |h| h.domain.as_mut().unwrap().control_progress = 3),
        ("data prog", |h| h.domain.as_mut().unwrap().data_progress = 3),
        ("rm", |h| h.domain.as_mut().unwrap().resource_mgmt = 3),
        ("av type", |h| h.domain.as_mut().unwrap().av_type = 3),
        ("mr mode", |h| {
            h.domain.as_mut().unwrap().mr_mode = FI_MR_BASIC | FI_MR_LOCAL
        }),
    ];
    for (what, mutate) in cases {
        let mut h = alloc_hints();
        mutate(&mut h);
        assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{what}");
    }
    // Exactly at the limit is fine.
    let mut h = alloc_hints();
    let tx = h.tx.as_mut().unwrap();
    (tx.size, tx.iov_limit, tx.inject_size) = (QUEUE_SIZE, IOV_LIMIT, INJECT_SIZE);
    h.ep.as_mut().unwrap().max_msg_size = 1 << 30;
    h.domain.as_mut().unwrap().cq_data_size = 8;
    assert_eq!(run_names(&h), ["shm", "tcp"]);
}

#[test]
fn remote_comm_domain_cap_selects_tcp() {
    let mut h = alloc_hints();
    h.domain.as_mut().unwrap().caps = FI_REMOTE_COMM;
    let l = run(&h).unwrap();
    assert_eq!(names(&l), ["tcp"]);
    assert_ne!(l[0].domain.as_ref().unwrap().caps & FI_REMOTE_COMM, 0);
    h.domain.as_mut().unwrap().caps = FI_LOCAL_COMM;
    assert_eq!(run_names(&h), ["shm", "tcp"]);
}

#[test]
fn requested_values_are_echoed() {
    let mut h = alloc_hints();
    h.handle = 0x1234;
    let d = h.domain.as_mut().unwrap();
    d.threading = FI_THREAD_DOMAIN;
    d.control_progress = FI_PROGRESS_AUTO;
    d.data_progress = FI_PROGRESS_AUTO;
    d.resource_mgmt = FI_RM_DISABLED;
    d.av_type = FI_AV_MAP;
    d.tclass = FI_TC_BEST_EFFORT;
    let tx = h.tx.as_mut().unwrap();
    tx.op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
    tx.size = 100;
    tx.iov_limit = 1;
    tx.inject_size = 64;
    tx.msg_order = FI_ORDER_SAS;
    let rx = h.rx.as_mut().unwrap();
    rx.op_flags = FI_COMPLETION | FI_MULTI_RECV;
    rx.size = 200;
    rx.iov_limit = 2;
    let e = h.ep.as_mut().unwrap();
    e.tx_ctx_cnt = 1;
    e.mem_tag_format = 0x0fff_ffff_ffff_ffff;
    for i in run(&h).unwrap() {
        assert_eq!(i.handle, 0x1234);
        let d = i.domain.unwrap();
        assert_eq!(d.threading, FI_THREAD_DOMAIN);
        assert_eq!(
            (d.control_progress, d.data_progress),
            (FI_PROGRESS_AUTO, FI_PROGRESS_AUTO)
        );
        assert_eq!(d.resource_mgmt, FI_RM_DISABLED);
        assert_eq!(d.av_type, FI_AV_MAP);
        assert_eq!(d.tclass, FI_TC_BEST_EFFORT);
        let tx = i.tx.unwrap();
        assert_eq!(tx.op_flags, FI_COMPLETION | FI_DELIVERY_COMPLETE);
        assert_eq!((tx.size, tx.iov_limit, tx.inject_size), (100, 1, 64));
        assert_eq!(tx.msg_order, FI_ORDER_SAS);
        let rx = i.rx.unwrap();
        assert_eq!(rx.op_flags, FI_COMPLETION | FI_MULTI_RECV);
        assert_eq!((rx.size, rx.iov_limit), (200, 2));
        // The tag format stays ours: bit 63 is always usable.
        assert_eq!(i.ep.unwrap().mem_tag_format, MEM_TAG_FORMAT);
    }
    // Every threading level is granted as asked.
    for lvl in [
        FI_THREAD_SAFE,
        FI_THREAD_FID,
        FI_THREAD_DOMAIN,
        FI_THREAD_COMPLETION,
        FI_THREAD_ENDPOINT,
    ] {
        let mut h = alloc_hints();
        h.domain.as_mut().unwrap().threading = lvl;
        assert_eq!(run(&h).unwrap()[1].domain.as_ref().unwrap().threading, lvl);
    }
    for av in [FI_AV_MAP, FI_AV_TABLE] {
        let mut h = alloc_hints();
        h.domain.as_mut().unwrap().av_type = av;
        assert_eq!(run(&h).unwrap()[0].domain.as_ref().unwrap().av_type, av);
    }
}

#[test]
fn open_mpi_hints_get_tcp() {
    // ompi mtl/ofi (docs/mpi.md §2).
    let mut h = alloc_hints();
    h.caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
    h.mode = FI_CONTEXT | FI_CONTEXT2;
    h.ep.as_mut().unwrap().ep_type = FI_EP_RDM;
    h.tx.as_mut().unwrap().op_flags = FI_COMPLETION;
    h.rx.as_mut().unwrap().op_flags = FI_COMPLETION;
    h.tx.as_mut().unwrap().msg_order = FI_ORDER_SAS;
    h.rx.as_mut().unwrap().msg_order = FI_ORDER_SAS;
    let d = h.domain.as_mut().unwrap();
    d.threading = FI_THREAD_DOMAIN;
    d.av_type = FI_AV_MAP;
    d.resource_mgmt = FI_RM_ENABLED;
    d.cq_data_size = 4;
    h.fabric.as_mut().unwrap().prov_name = Some("rustfab".into());
    let l = getinfo(&Query {
        version: fi_version(1, 5),
        ..query(Some(&h))
    })
    .unwrap();
    assert_eq!(names(&l), ["tcp"]);
    let i = &l[0];
    assert_eq!(i.mode, 0);
    assert_eq!(i.tx.as_ref().unwrap().op_flags, FI_COMPLETION);
    assert_eq!(i.rx.as_ref().unwrap().op_flags, FI_COMPLETION);
    assert_eq!(i.domain.as_ref().unwrap().mr_mode, 0);
    assert_eq!(i.domain.as_ref().unwrap().threading, FI_THREAD_DOMAIN);
    assert!(i.ep.as_ref().unwrap().mem_tag_format >> 63 == 1);
}

#[test]
fn mr_mode_per_version() {
    let v14 = fi_version(1, 4);
    let v10 = fi_version(1, 0);
    let v15 = fi_version(1, 5);
    // No hints / unspecified.
    assert_eq!(alter_mr_mode(V, None), 0);
    assert_eq!(alter_mr_mode(v15, Some(0)), 0);
    assert_eq!(alter_mr_mode(v14, None), FI_MR_SCALABLE);
    assert_eq!(alter_mr_mode(v10, Some(FI_MR_UNSPEC)), FI_MR_SCALABLE);
    // BASIC / SCALABLE asked for are kept, in every version.
    for v in [v10, v14, v15, V] {
        assert!(check_mr_mode(v, FI_MR_BASIC).is_ok());
        assert_eq!(alter_mr_mode(v, Some(FI_MR_BASIC)), FI_MR_BASIC);
        assert!(check_mr_mode(v, FI_MR_SCALABLE).is_ok());
        assert_eq!(alter_mr_mode(v, Some(FI_MR_SCALABLE)), FI_MR_SCALABLE);
        assert!(check_mr_mode(v, FI_MR_BASIC | FI_MR_SCALABLE).is_err());
        assert!(check_mr_mode(v, FI_MR_BASIC | FI_MR_VIRT_ADDR).is_err());
    }
    // Modern bits: none required, any accepted, none reported.
    for m in [
        FI_MR_LOCAL,
        FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED,
        !(FI_MR_BASIC | FI_MR_SCALABLE),
    ] {
        assert!(check_mr_mode(V, m).is_ok(), "{m:#x}");
        assert_eq!(alter_mr_mode(V, Some(m)), 0);
        // ... but they are not values of the old enum.
        assert!(check_mr_mode(v14, m).is_err());
    }

    // Through getinfo.
    let mut h = alloc_hints();
    let mr = |l: Vec<Info>| l[0].domain.as_ref().unwrap().mr_mode;
    for v in [v10, v14] {
        let q = Query {
            version: v,
            ..query(None)
        };
        assert_eq!(mr(getinfo(&q).unwrap()), FI_MR_SCALABLE);
        h.domain.as_mut().unwrap().mr_mode = FI_MR_BASIC;
        let q = Query {
            version: v,
            ..query(Some(&h))
        };
        assert_eq!(mr(getinfo(&q).unwrap()), FI_MR_BASIC);
        h.domain.as_mut().unwrap().mr_mode = FI_MR_LOCAL;
        let q = Query {
            version: v,
            ..query(Some(&h))
        };
        assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
    }
    h.domain.as_mut().unwrap().mr_mode = FI_MR_SCALABLE;
    assert_eq!(mr(run(&h).unwrap()), FI_MR_SCALABLE);
    h.domain.as_mut().unwrap().mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR;
    assert_eq!(mr(run(&h).unwrap()), 0);
}

fn with_node<'a>(node: Option<&'a str>, service: Option<&'a str>, flags: u64, hints: Option<&'a Info>) -> Query<'a> {
    Query {
        node,
        service,
        flags,
        ..query(hints)
    }
}

#[test]
fn layering_queries_need_rustfab_named() {
    // ofi_rxm's query for a core provider to layer over: refused unless
    // the application asked for "rustfab;ofi_rxm" (the core passes
    // "rustfab;^ofi_rxm" down), whatever the core's version.
    let mut h = Info::default();
    let q = |h: &Info| getinfo(&with_node(None, None, OFI_CORE_PROV_ONLY, Some(h))).map(|l| l.len());
    assert_eq!(q(&h), Err(Error::NODATA));
    for name in ["^ofi_rxm", "tcp;^ofi_rxm", "verbs;^ofi_rxm", "rustfabx;^ofi_rxm"] {
        h.fabric = Some(FabricAttr {
            prov_name: Some(name.into()),
            ..Default::default()
        });
        assert_eq!(q(&h), Err(Error::NODATA), "{name}");
    }
    for name in ["rustfab;^ofi_rxm", "RustFab;^ofi_rxm", "rustfab"] {
        h.fabric = Some(FabricAttr {
            prov_name: Some(name.into()),
            ..Default::default()
        });
        assert!(q(&h).is_ok_and(|n| n > 0), "{name}");
    }
    // Applications' own queries are not affected.
    assert!(getinfo(&query(None)).is_ok());
}

#[test]
fn node_service_destination() {
    let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, None)).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    let tok = shm_token_for(Some("127.0.0.1"), Some("9228"));
    assert_eq!(addr(&l[0].dest_addr), Some(Addr::Shm(tok)));
    assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));
    assert_eq!(l[0].dest_addr.as_ref().unwrap().len(), SHM_ADDR_LEN);
    assert_eq!(addr(&l[1].dest_addr), Some(sock("127.0.0.1:9228")));
    // Source: the local address routing to it, any port.
    assert_eq!(addr(&l[1].src_addr), Some(sock("127.0.0.1:0")));
    assert_eq!(l[1].addr_format, FI_SOCKADDR_IN);

    // Service alone names a local destination.
    let l = getinfo(&with_node(None, Some("9228"), 0, None)).unwrap();
    assert_eq!(
        addr(&l[0].dest_addr),
        Some(Addr::Shm(shm_token_for(None, Some("9228"))))
    );
    let d = addr(&l[1].dest_addr).unwrap();
    assert!(matches!(d, Addr::Inet(a) if a.ip().is_loopback() && a.port() == 9228));

    // localhost resolves (to IPv4 first).
    let l = getinfo(&with_node(Some("localhost"), Some("9228"), 0, None)).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    assert_eq!(addr(&l[1].dest_addr), Some(sock("127.0.0.1:9228")));
}

#[test]
fn node_service_ipv6() {
    let mut h = alloc_hints();
    h.addr_format = FI_SOCKADDR_IN6;
    let l = getinfo(&with_node(Some("::1"), Some("9228"), 0, Some(&h))).unwrap();
    assert_eq!(names(&l), ["tcp"]);
    assert_eq!(l[0].addr_format, FI_SOCKADDR_IN6);
    assert_eq!(addr(&l[0].dest_addr), Some(sock("[::1]:9228")));
    assert_eq!(addr(&l[0].src_addr), Some(sock("[::1]:0")));
    // Without a stated format an IPv6-only node still works.
    let l = getinfo(&with_node(Some("::1"), Some("9228"), 0, None)).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    assert_eq!(l[1].addr_format, FI_SOCKADDR_IN6);
    // An IPv4 format cannot hold it.
    h.addr_format = FI_SOCKADDR_IN;
    let q = with_node(Some("::1"), Some("9228"), 0, Some(&h));
    assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
    // FI_SOURCE with IPv6 and no node: the IPv6 wildcard.
    h.addr_format = FI_SOCKADDR_IN6;
    let l = getinfo(&with_node(None, Some("9228"), FI_SOURCE, Some(&h))).unwrap();
    assert_eq!(addr(&l[0].src_addr), Some(sock("[::]:9228")));
}

#[test]
fn fi_source_resolution() {
    let tok = shm_token_for(Some("127.0.0.1"), Some("9228"));
    let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), FI_SOURCE, None)).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(tok)));
    assert_eq!(l[0].dest_addr, None);
    assert_eq!(addr(&l[1].src_addr), Some(sock("127.0.0.1:9228")));
    assert_eq!(l[1].dest_addr, None);

    // Node without service: anonymous shm endpoint, any tcp port.
    let l = getinfo(&with_node(Some("127.0.0.1"), None, FI_SOURCE, None)).unwrap();
    assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));
    assert_eq!(addr(&l[1].src_addr), Some(sock("127.0.0.1:0")));

    // Service without node: named shm endpoint, tcp wildcard:service.
    let l = getinfo(&with_node(None, Some("9228"), FI_SOURCE, None)).unwrap();
    assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(shm_token_for(None, Some("9228")))));
    assert_eq!(addr(&l[1].src_addr), Some(sock("0.0.0.0:9228")));

    // FI_SOURCE needs a node or a service.
    assert_eq!(
        getinfo(&with_node(None, None, FI_SOURCE, None)).unwrap_err(),
        Error::INVAL
    );

    // A source node is not subject to the locality rule (it is ours).
    let l = getinfo(&with_node(Some("localhost"), Some("1"), FI_SOURCE, None)).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
}

#[test]
fn remote_node_selects_tcp_only() {
    // TEST-NET-3: never an address of this host.
    let l = getinfo(&with_node(Some("203.0.113.5"), Some("9228"), 0, None)).unwrap();
    assert_eq!(names(&l), ["tcp"]);
    assert_eq!(addr(&l[0].dest_addr), Some(sock("203.0.113.5:9228")));
    assert!(l[0].src_addr.is_some());
    let q = Query {
        transports: TransportChoice::Only(TransportKind::Shm),
        ..with_node(Some("203.0.113.5"), Some("9228"), 0, None)
    };
    assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
    // Unresolvable: nothing.
    let q = with_node(Some("no-such-host.invalid"), Some("9228"), 0, None);
    assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
}

#[test]
fn local_detection() {
    assert!(node_is_local("127.0.0.1", true));
    assert!(node_is_local("127.3.4.5", true));
    assert!(node_is_local("::1", true));
    assert!(node_is_local("0.0.0.0", true));
    assert!(node_is_local("localhost", false));
    assert!(!node_is_local("localhost", true), "FI_NUMERICHOST refuses names");
    assert!(!node_is_local("203.0.113.5", true));
    assert!(!node_is_local("no-such-host.invalid", false));
    // An address of one of this host's interfaces is local.
    let mine = route_source(&"203.0.113.5:1".parse().unwrap());
    if !mine.ip().is_unspecified() {
        assert!(node_is_local(&mine.ip().to_string(), true));
    }
}

#[test]
fn numerichost_is_respected() {
    let q = with_node(Some("localhost"), Some("9228"), FI_NUMERICHOST, None);
    assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
    let q = with_node(Some("127.0.0.1"), Some("9228"), FI_NUMERICHOST, None);
    assert_eq!(names(&getinfo(&q).unwrap()), ["shm", "tcp"]);
}

#[test]
fn hint_addresses_are_copied_and_select() {
    // An shm destination in the hints: shm only, copied through.
    let shm = Addr::Shm(0x1234_5678_9abc_def0);
    let mut h = alloc_hints();
    h.addr_format = FI_ADDR_STR;
    h.dest_addr = Some(shm.to_bytes());
    let l = run(&h).unwrap();
    assert_eq!(names(&l), ["shm"]);
    assert_eq!(addr(&l[0].dest_addr), Some(shm));
    assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));

    // A tcp source in the hints (format unstated): tcp only, kept.
    let mut h = alloc_hints();
    h.src_addr = Some(sock("127.0.0.1:5555").to_bytes());
    let l = run(&h).unwrap();
    assert_eq!(names(&l), ["tcp"]);
    assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:5555")));
    // ... and with node/service the destination is resolved next to it.
    let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, Some(&h))).unwrap();
    assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:5555")));
    assert_eq!(addr(&l[0].dest_addr), Some(sock("127.0.0.1:9228")));
    // FI_SOURCE: the resolved node replaces the hint's source.
    let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), FI_SOURCE, Some(&h))).unwrap();
    assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:9228")));

    // An IPv6 hint address makes node resolution IPv6.
    let mut h = alloc_hints();
    h.dest_addr = Some(sock("[::1]:7").to_bytes());
    let l = getinfo(&with_node(Some("localhost"), Some("9228"), FI_SOURCE, Some(&h)));
    // localhost is IPv4-only in some /etc/hosts; either IPv6 or nothing.
    if let Ok(l) = l {
        assert_eq!(l[0].addr_format, FI_SOCKADDR_IN6);
        assert_eq!(addr(&l[0].dest_addr), Some(sock("[::1]:7")));
    }

    // Garbage addresses and mismatched formats: nothing.
    let mut h = alloc_hints();
    h.addr_format = FI_ADDR_STR;
    h.src_addr = Some(sock("127.0.0.1:1").to_bytes());
    assert_eq!(run(&h).unwrap_err(), Error::NODATA);
    let mut h = alloc_hints();
    h.dest_addr = Some(vec![0xff; 8]);
    assert_eq!(run(&h).unwrap_err(), Error::NODATA);
    // A source and destination of different families.
    let mut h = alloc_hints();
    h.src_addr = Some(sock("127.0.0.1:1").to_bytes());
    h.dest_addr = Some(sock("[::1]:1").to_bytes());
    assert_eq!(run(&h).unwrap_err(), Error::NODATA);
}

#[test]
fn node_as_address_string() {
    let shm = Addr::Shm(0x00ab_cdef_0123_4567);
    let s = shm.to_string_form();
    let l = getinfo(&with_node(Some(&s), None, 0, None)).unwrap();
    assert_eq!(names(&l), ["shm"]);
    assert_eq!(addr(&l[0].dest_addr), Some(shm));
    let l = getinfo(&with_node(Some(&s), Some("99"), FI_SOURCE, None)).unwrap();
    assert_eq!(addr(&l[0].src_addr), Some(shm));
    let l = getinfo(&with_node(Some("fi_sockaddr_in://127.0.0.1:4242"), None, 0, None)).unwrap();
    assert_eq!(names(&l), ["tcp"]);
    assert_eq!(addr(&l[0].dest_addr), Some(sock("127.0.0.1:4242")));
}

#[test]
fn c_list_round_trip_and_free() {
    let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, None)).unwrap();
    let head = info_list_to_c(&l).unwrap();
    let mut p = head;
    let mut back = Vec::new();
    while !p.is_null() {
        // SAFETY: a list just built by info_list_to_c.
        back.push(unsafe { Info::from_c(p) }.unwrap());
        // SAFETY: as above.
        p = unsafe { (*p).next };
    }
    // Hints are read as 1.17 structs (an application's may be that
    // short): the fields of newer APIs come back as zero.
    let mut l = l;
    for i in &mut l {
        let d = i.domain.as_mut().unwrap();
        (
            d.max_ep_auth_key,
            d.max_group_id,
            d.max_cntr_value,
            d.max_err_cntr_value,
        ) = (0, 0, 0, 0);
    }
    assert_eq!(back, l);
    // SAFETY: built by info_list_to_c, freed once.
    unsafe { free_c_info(head) };
}

#[test]
fn getinfo_c_arguments() {
    let mut out: *mut fi_info = core::ptr::dangling_mut();
    // SAFETY: valid NUL-terminated strings and out pointer.
    let r = unsafe {
        getinfo_c(
            V,
            c"127.0.0.1".as_ptr(),
            c"9228".as_ptr(),
            0,
            core::ptr::null(),
            &mut out,
        )
    };
    assert_eq!(r, Ok(()));
    assert!(!out.is_null());
    // SAFETY: the list getinfo_c returned.
    unsafe { free_c_info(out) };
    // SAFETY: NULL out pointer is refused before any use.
    let r = unsafe {
        getinfo_c(
            V,
            core::ptr::null(),
            core::ptr::null(),
            0,
            core::ptr::null(),
            core::ptr::null_mut(),
        )
    };
    assert_eq!(r, Err(Error::INVAL));
    // No match: the out pointer is left NULL.
    let mut out: *mut fi_info = core::ptr::dangling_mut();
    let h = Info {
        caps: FI_RMA_PMEM,
        ..alloc_hints()
    }
    .to_c()
    .unwrap();
    // SAFETY: `h` is a valid info built by to_c.
    let r = unsafe { getinfo_c(V, core::ptr::null(), core::ptr::null(), 0, h, &mut out) };
    assert_eq!(r, Err(Error::NODATA));
    assert!(out.is_null());
    // SAFETY: built by to_c, freed once.
    unsafe { free_c_info(h) };
}

#[test]
fn auto_entry_first_with_both_comm_caps() {
    let q = Query {
        transports: TransportChoice::All,
        ..query(None)
    };
    let l = getinfo(&q).unwrap();
    assert_eq!(names(&l), ["auto", "shm", "tcp"]);
    let a = &l[0];
    assert_eq!(a.addr_format, FI_ADDR_STR);
    assert_eq!(
        a.caps & (FI_LOCAL_COMM | FI_REMOTE_COMM),
        FI_LOCAL_COMM | FI_REMOTE_COMM
    );
    match addr(&a.src_addr) {
        Some(Addr::Auto { host, shm, .. }) => {
            assert_eq!(host, crate::transport::addr::host_id());
            assert_eq!(shm, SHM_ANY_TOKEN);
        }
        other => panic!("auto entry without an auto source address: {other:?}"),
    }
}

#[test]
fn auto_node_service_resolution() {
    let q = Query {
        transports: TransportChoice::Only(TransportKind::Auto),
        node: Some("127.0.0.1"),
        service: Some("9228"),
        ..query(None)
    };
    let l = getinfo(&q).unwrap();
    match addr(&l[0].dest_addr) {
        Some(Addr::Auto { host, shm, inet }) => {
            assert_eq!(
                host,
                crate::transport::addr::host_id(),
                "a local node is reached over shm"
            );
            assert_eq!(shm, shm_token_for(None, Some("9228")));
            assert_eq!(inet, "127.0.0.1:9228".parse().unwrap());
        }
        other => panic!("{other:?}"),
    }
    let q = Query { flags: FI_SOURCE, ..q };
    let l = getinfo(&q).unwrap();
    match addr(&l[0].src_addr) {
        Some(Addr::Auto { shm, inet, .. }) => {
            assert_eq!(shm, shm_token_for(None, Some("9228")));
            assert_eq!(inet.port(), 9228);
        }
        other => panic!("{other:?}"),
    }
    // A remote node: host unknown (0), so peers use TCP.
    let q = Query {
        node: Some("192.0.2.7"),
        flags: 0,
        ..q
    };
    let l = getinfo(&q).unwrap();
    assert!(matches!(addr(&l[0].dest_addr), Some(Addr::Auto { host: 0, .. })));
    // Socket address formats exclude the auto entry.
    let mut h = alloc_hints();
    h.addr_format = FI_SOCKADDR_IN;
    let q = Query {
        transports: TransportChoice::All,
        hints: Some(&h),
        node: None,
        service: None,
        ..query(None)
    };
    assert_eq!(names(&getinfo(&q).unwrap()), ["tcp"]);
}

fn msg_hints(caps: u64) -> Info {
    let mut h = alloc_hints();
    h.caps = caps;
    h.ep.as_mut().unwrap().ep_type = FI_EP_MSG;
    h
}

#[test]
fn what_older_apis_had_is_offered_only_at_them() {
    let at = |version: u32, h: &Info| {
        super::getinfo(&Query {
            version,
            ..query(Some(h))
        })
    };
    // FI_VARIABLE_MSG (capability bit 48) up to 1.20.
    let h = msg_hints(FI_MSG | FI_VARIABLE_MSG);
    assert_ne!(at(fi_version(1, 20), &h).unwrap()[0].caps & FI_VARIABLE_MSG, 0);
    for v in [fi_version(1, 21), fi_version(1, 22), fi_version(2, 0), fi_version(2, 6)] {
        // 1.21/1.22: undefined; 2.x: FI_EXACT_DIRECTED_RECV, not offered
        // on FI_EP_MSG (one peer: nothing to direct).
        assert_eq!(at(v, &h).unwrap_err(), Error::NODATA, "{v:#x}");
        let l = at(v, &msg_hints(FI_MSG)).unwrap();
        assert!(l
            .iter()
            .all(|i| i.caps & (1 << 48) == 0 && i.rx.as_ref().unwrap().caps & (1 << 48) == 0));
    }
    // FI_BUFFERED_RECV (mode bit 51) up to 1.22.
    let mut h = alloc_hints();
    h.mode = FI_CONTEXT | FI_BUFFERED_RECV;
    assert_eq!(at(fi_version(1, 22), &h).unwrap()[0].mode, FI_BUFFERED_RECV);
    for v in [fi_version(2, 0), fi_version(2, 5)] {
        let l = at(v, &h).unwrap();
        assert!(l
            .iter()
            .all(|i| i.mode & FI_BUFFERED_RECV == 0 && i.rx.as_ref().unwrap().mode == 0));
    }
}

#[test]
fn msg_entry_comes_after_every_rdm_entry() {
    let l = super::getinfo(&query(None)).unwrap();
    let types: Vec<(String, u32)> = l
        .iter()
        .map(|i| {
            (
                names(std::slice::from_ref(i))[0].clone(),
                i.ep.as_ref().unwrap().ep_type,
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("shm".into(), FI_EP_RDM),
            ("tcp".into(), FI_EP_RDM),
            ("shm".into(), FI_EP_MSG),
            ("tcp".into(), FI_EP_MSG),
            ("shm".into(), FI_EP_DGRAM),
            ("tcp".into(), FI_EP_DGRAM)
        ]
    );
    // The shm and tcp MSG entries differ in their domain, protocol and
    // locality only: shm reaches this host alone.
    let (ms, m) = (&l[2], &l[3]);
    assert_eq!(ms.caps, m.caps & !FI_REMOTE_COMM);
    assert_ne!(m.caps & FI_REMOTE_COMM, 0);
    assert_eq!(ms.domain.as_ref().unwrap().caps & FI_REMOTE_COMM, 0);
    assert_eq!(ms.tx.as_ref().unwrap().caps, m.tx.as_ref().unwrap().caps);
    assert_eq!(ms.rx.as_ref().unwrap().caps, m.rx.as_ref().unwrap().caps);
    assert_eq!(ms.addr_format, FI_SOCKADDR_IN);
    assert_eq!(ms.ep.as_ref().unwrap().protocol, SHM_PROTOCOL);
    // FI_VARIABLE_MSG is offered but only given when asked for.
    assert_eq!(m.caps, crate::fi::connected::MSG_CAPS & !FI_VARIABLE_MSG);
    let l = super::getinfo(&query(Some(&msg_hints(FI_MSG | FI_VARIABLE_MSG)))).unwrap();
    assert_ne!(l[0].caps & FI_VARIABLE_MSG, 0);
    assert_eq!(m.caps & (FI_SOURCE | FI_DIRECTED_RECV), 0);
    assert_eq!(m.caps & RMA_CAPS, RMA_CAPS, "RMA on connected endpoints too");
    assert_eq!(m.caps & ATOMIC_CAPS, ATOMIC_CAPS, "atomics too");
    assert_eq!(
        m.tx.as_ref().unwrap().caps,
        FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE
    );
    assert_eq!(
        m.rx.as_ref().unwrap().caps,
        FI_MSG
            | FI_TAGGED
            | FI_RECV
            | FI_MULTI_RECV
            | FI_RMA
            | FI_ATOMIC
            | FI_REMOTE_READ
            | FI_REMOTE_WRITE
            | FI_RMA_EVENT
    );
    assert_eq!(m.addr_format, FI_SOCKADDR_IN);
    assert_eq!(m.ep.as_ref().unwrap().protocol, TCP_PROTOCOL);
    // shm alone and auto alone offer their connected endpoints, with
    // sockaddr addresses (set up over TCP, data over shm).
    let h = msg_hints(0);
    for t in [TransportKind::Shm, TransportKind::Auto] {
        let q = Query {
            transports: TransportChoice::Only(t),
            ..query(Some(&h))
        };
        let l = super::getinfo(&q).unwrap();
        assert_eq!(names(&l), [t.domain_name()]);
        assert_eq!(l[0].addr_format, FI_SOCKADDR_IN);
        assert_eq!(l[0].caps & (RMA_CAPS | ATOMIC_CAPS), RMA_CAPS | ATOMIC_CAPS);
        let with_sin = Query {
            transports: TransportChoice::Only(t),
            ..with_node(Some("127.0.0.1"), Some("9228"), 0, Some(&h))
        };
        assert_eq!(
            addr(&super::getinfo(&with_sin).unwrap()[0].dest_addr),
            Some(sock("127.0.0.1:9228"))
        );
    }
    // A remote node never selects shm; auto reaches it (over TCP).
    let remote = |t| Query {
        transports: TransportChoice::Only(t),
        ..with_node(Some("192.0.2.1"), Some("9228"), FI_NUMERICHOST, Some(&h))
    };
    assert_eq!(super::getinfo(&remote(TransportKind::Shm)).unwrap_err(), Error::NODATA);
    assert_eq!(names(&super::getinfo(&remote(TransportKind::Auto)).unwrap()), ["auto"]);
}

/// A refusal is logged with the line that decided it, also when a
/// shared check (`subset`, `at_most`) decided it for its caller.
#[test]
fn a_skip_names_the_line_that_decided_it() {
    let here = line!() + 1;
    let e = subset(1, 0, "not offered").unwrap_err();
    assert_eq!((e.at.file(), e.at.line(), e.why), (file!(), here, "not offered"));
    let here = line!() + 1;
    let e = at_most(2, 1, "too many").unwrap_err();
    assert_eq!((e.at.file(), e.at.line()), (file!(), here));
}

#[test]
fn msg_entry_hints_and_addresses() {
    let h = msg_hints(FI_MSG);
    let l = super::getinfo(&query(Some(&h))).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    assert_eq!(l[0].caps, FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM);
    assert_eq!(l[1].caps, FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM);
    // Asking for FI_REMOTE_COMM leaves shm out.
    let hr = msg_hints(FI_MSG | FI_REMOTE_COMM);
    assert_eq!(names(&super::getinfo(&query(Some(&hr))).unwrap()), ["tcp"]);
    // fi_rma_bw -e msg's request.
    let l = super::getinfo(&query(Some(&msg_hints(FI_MSG | FI_RMA)))).unwrap();
    assert_eq!(l[0].tx.as_ref().unwrap().rma_iov_limit, RMA_IOV_LIMIT);
    // Capabilities the connected data path does not have.
    for c in [FI_SOURCE, FI_DIRECTED_RECV] {
        assert_eq!(
            super::getinfo(&query(Some(&msg_hints(FI_MSG | c)))).unwrap_err(),
            Error::NODATA
        );
    }
    // Client: dest_addr is the server; server (FI_SOURCE): src_addr.
    let l = super::getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, Some(&h))).unwrap();
    assert_eq!(addr(&l[0].dest_addr), Some(sock("127.0.0.1:9228")));
    assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:0")));
    let l = super::getinfo(&with_node(Some("127.0.0.1"), Some("9228"), FI_SOURCE, Some(&h))).unwrap();
    assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:9228")));
    assert!(l[0].dest_addr.is_none());
    // FI_INJECT as a default send flag (fabtests fi_msg_inject -A inject).
    let mut hi = msg_hints(FI_MSG);
    hi.tx.as_mut().unwrap().op_flags = FI_INJECT;
    assert_eq!(
        super::getinfo(&query(Some(&hi))).unwrap()[0]
            .tx
            .as_ref()
            .unwrap()
            .op_flags,
        FI_INJECT
    );
    // A name that does not resolve (fabtests' negative test): no entry.
    let q = with_node(Some("g00n13s"), Some("9228"), 0, Some(&h));
    assert_eq!(super::getinfo(&q).unwrap_err(), Error::NODATA);
}

/// API 2.0+: the RDM entries offer libfabric 2.x's matching capabilities
/// and FI_AV_USER_ID; the primary ones when asked for or by default,
/// FI_EXACT_DIRECTED_RECV only when asked for; none of them before 2.0.
#[test]
fn the_2_x_matching_caps_are_offered_from_2_0_only() {
    use crate::abi::v2::{FI_EXACT_DIRECTED_RECV, FI_TAGGED_DIRECTED_RECV, FI_TAGGED_MULTI_RECV};
    let at = |version: u32, h: Option<&Info>| getinfo(&Query { version, ..query(h) });
    let v2 = fi_version(2, 0);
    // Defaults: all but exact.
    for i in at(fi_version(2, 6), None).unwrap() {
        let want = FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV | FI_AV_USER_ID;
        assert_eq!(i.caps & (want | FI_EXACT_DIRECTED_RECV), want);
        assert_eq!(i.domain.as_ref().unwrap().caps & FI_AV_USER_ID, FI_AV_USER_ID);
        let rx = i.rx.as_ref().unwrap().caps;
        assert_eq!(
            rx & (want | FI_EXACT_DIRECTED_RECV),
            FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV
        );
        assert_eq!(i.tx.as_ref().unwrap().caps & (want | FI_EXACT_DIRECTED_RECV), 0);
    }
    // Asked for: granted, in info, rx and domain caps.
    let mut h = alloc_hints();
    h.caps = FI_TAGGED | FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV | FI_TAGGED_MULTI_RECV | FI_AV_USER_ID;
    let l = at(v2, Some(&h)).unwrap();
    assert_eq!(names(&l), ["shm", "tcp"]);
    for i in &l {
        assert_eq!(i.caps & h.caps, h.caps);
        let rx = i.rx.as_ref().unwrap().caps;
        assert_eq!(
            rx & !FI_RECV,
            FI_TAGGED | FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV | FI_TAGGED_MULTI_RECV
        );
        assert_eq!(i.domain.as_ref().unwrap().caps & FI_AV_USER_ID, FI_AV_USER_ID);
    }
    // Primary ones not asked for are not given with another primary.
    h.caps = FI_TAGGED | FI_DIRECTED_RECV;
    for i in at(v2, Some(&h)).unwrap() {
        assert_eq!(
            i.caps & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV | FI_AV_USER_ID),
            0
        );
    }
    // Before 2.0 the bits are something else: not offered.
    for caps in [FI_TAGGED_DIRECTED_RECV, FI_TAGGED_MULTI_RECV, FI_AV_USER_ID] {
        h.caps = FI_TAGGED | caps;
        for v in [fi_version(1, 17), fi_version(1, 22)] {
            assert_eq!(at(v, Some(&h)).unwrap_err(), Error::NODATA, "{caps:#x} at {v:#x}");
        }
    }
    for i in at(fi_version(1, 22), None).unwrap() {
        assert_eq!(i.caps & CAPS_2_0, 0);
        assert_eq!(i.rx.as_ref().unwrap().caps & CAPS_2_0, 0);
    }
}
