use super::*;
use std::cell::RefCell;

fn shm(t: u64) -> Addr {
    Addr::Shm(t)
}
fn inet(s: &str) -> Addr {
    Addr::Inet(s.parse().unwrap())
}
fn shm_state() -> AvState {
    AvState::new(0, TransportKind::Shm, AvFormat::Str, 4)
}
fn tcp_state(format: AvFormat) -> AvState {
    AvState::new(0, TransportKind::Tcp, format, 4)
}

#[test]
fn table_indices_are_insertion_order_across_calls() {
    let s = shm_state();
    let a: Vec<Result<Addr>> = (1..=3).map(|t| Ok(shm(t))).collect();
    let r1 = s.insert_batch(&a, None).unwrap();
    let r2 = s.insert_batch(&[Ok(shm(9))], None).unwrap();
    assert_eq!(r1, vec![Ok(0), Ok(1), Ok(2)]);
    assert_eq!(r2, vec![Ok(3)]);
    assert_eq!(s.lookup_addr(2), Some(shm(3)));
    assert_eq!(s.reverse_lookup(&shm(9)), Some(3));
    assert_eq!(s.lookup_addr(4), None);
    assert_eq!(s.lookup_addr(FI_ADDR_NOTAVAIL), None);
}

#[test]
fn bad_entries_take_no_index() {
    let s = shm_state();
    let r = s
        .insert_batch(&[Ok(shm(1)), Err(Error::INVAL), Ok(shm(2))], None)
        .unwrap();
    assert_eq!(r, vec![Ok(0), Err(Error::INVAL), Ok(1)]);
    assert_eq!(s.table.read().len(), 2);
}

#[test]
fn removed_slots_are_tombstones() {
    let mut t = AvTable::default();
    let a = t.insert(shm(1), None);
    let b = t.insert(shm(2), None);
    t.remove_all(&[a]).unwrap();
    assert!(t.get(a).is_none());
    assert_eq!(t.reverse(&shm(1)), None);
    assert_eq!(t.insert(shm(3), None), 2, "index 0 is not reused");
    assert_eq!(t.get(b).unwrap().addr, shm(2));
    assert_eq!(t.len(), 2);
    // Re-inserting a removed address is allowed and gets a new index.
    assert_eq!(t.insert(shm(1), None), 3);
    assert_eq!(t.reverse(&shm(1)), Some(3));
    assert_eq!(t.next_index(), 4);
}

#[test]
fn remove_is_all_or_nothing() {
    let mut t = AvTable::default();
    let a = t.insert(shm(1), None);
    let b = t.insert(shm(2), None);
    assert_eq!(t.remove_all(&[a, 7]), Err(Error::INVAL));
    assert_eq!(t.remove_all(&[a, a]), Err(Error::INVAL));
    assert_eq!(t.len(), 2);
    t.remove_all(&[b, a]).unwrap();
    assert!(t.is_empty());
    assert_eq!(t.remove_all(&[a]), Err(Error::INVAL), "already removed");
    assert_eq!(t.remove_all(&[]), Ok(()));
}

#[test]
fn duplicates_get_new_indices_and_reverse_is_oldest_live() {
    let mut t = AvTable::default();
    let a = t.insert(shm(5), None);
    let b = t.insert(shm(5), None);
    let c = t.insert(shm(5), None);
    assert_eq!((a, b, c), (0, 1, 2));
    assert_eq!(t.reverse(&shm(5)), Some(0));
    t.remove_all(&[a]).unwrap();
    assert_eq!(t.reverse(&shm(5)), Some(1));
    t.remove_all(&[c]).unwrap();
    assert_eq!(t.reverse(&shm(5)), Some(1));
    t.remove_all(&[b]).unwrap();
    assert_eq!(t.reverse(&shm(5)), None);
    assert!(t.by_addr.is_empty());
}

#[test]
fn user_ids_replace_index_in_reverse_lookup() {
    let s = shm_state();
    let r = s.insert_batch(&[Ok(shm(1)), Ok(shm(2))], Some(&[1000, 2000])).unwrap();
    assert_eq!(r, vec![Ok(0), Ok(1)]);
    assert_eq!(s.reverse_lookup(&shm(2)), Some(2000));
    assert_eq!(s.table.read().get(0).unwrap().user_id, Some(1000));
    assert_eq!(s.lookup_addr(1), Some(shm(2)), "data path still uses the index");
}

/// An AV opened with FI_AV_USER_ID (2.0): entries report
/// FI_ADDR_NOTAVAIL until fi_av_set_user_id names them; the data path
/// keeps the index; set_user_id needs the open flag, no flags, a live
/// index.
#[test]
fn user_ids_set_after_insert() {
    let s = AvState::new(FI_AV_USER_ID, TransportKind::Shm, AvFormat::Str, 4);
    let r = s.insert_batch(&[Ok(shm(1)), Ok(shm(2))], None).unwrap();
    assert_eq!(r, vec![Ok(0), Ok(1)]);
    assert_eq!(s.reverse_lookup(&shm(2)), Some(FI_ADDR_NOTAVAIL));
    s.set_user_id(1, 0xabc, 0).unwrap();
    assert_eq!(s.reverse_lookup(&shm(2)), Some(0xabc));
    assert_eq!(s.reverse_lookup(&shm(1)), Some(FI_ADDR_NOTAVAIL));
    assert_eq!(s.lookup_addr(1), Some(shm(2)));
    assert_eq!(s.set_user_id(7, 1, 0), Err(Error::INVAL), "not an entry");
    assert_eq!(s.set_user_id(0, 1, crate::abi::v2::FI_AUTH_KEY), Err(Error::BADFLAGS));
    s.remove(&[1]).unwrap();
    assert_eq!(s.set_user_id(1, 1, 0), Err(Error::INVAL), "removed");
    assert_eq!(
        shm_state().set_user_id(0, 1, 0),
        Err(Error::INVAL),
        "opened without the flag"
    );
}

#[test]
fn decode_and_stride() {
    let name = shm(0xabc).to_bytes();
    assert_eq!(AvFormat::Str.decode(&name), Ok(shm(0xabc)));
    assert!(AvFormat::Str.decode(b"garbage\0").is_err());
    let v4 = inet("10.0.0.1:9").to_bytes();
    let v6 = inet("[fe80::1]:80").to_bytes();
    assert_eq!(AvFormat::SockaddrIn.decode(&v4), Ok(inet("10.0.0.1:9")));
    assert!(
        AvFormat::SockaddrIn.decode(&v6[..16]).is_err(),
        "a v6 address in a v4 slot"
    );
    assert_eq!(AvFormat::SockaddrIn6.decode(&v6), Ok(inet("[fe80::1]:80")));
    assert_eq!(AvFormat::SockaddrIn6.decode(&v4), Ok(inet("10.0.0.1:9")));
    assert!(AvFormat::Sockaddr.decode(&[0u8; 16]).is_err(), "fabtests' bad address");
    let fam = |b: &[u8]| u16::from_ne_bytes([b[0], b[1]]);
    assert_eq!(AvFormat::Sockaddr.stride(fam(&v4)), addr::SIN_LEN);
    assert_eq!(AvFormat::Sockaddr.stride(fam(&v6)), addr::SIN6_LEN);
    assert_eq!(AvFormat::SockaddrIn.stride(fam(&v6)), addr::SIN_LEN);
    assert_eq!(AvFormat::SockaddrIn6.stride(fam(&v4)), addr::SIN6_LEN);
}

#[test]
fn destinations_checked_against_transport() {
    let s = shm_state();
    let ok = s.validate(vec![Ok(shm(1)), Ok(shm(0)), Ok(inet("1.2.3.4:5")), Err(Error::INVAL)]);
    assert_eq!(ok[0], Ok(shm(1)));
    assert_eq!(ok[1], Err(Error::ADDRNOTAVAIL));
    assert_eq!(ok[2], Err(Error::INVAL));
    let t = tcp_state(AvFormat::SockaddrIn);
    let r = t.validate(vec![
        Ok(inet("1.2.3.4:5")),
        Ok(inet("1.2.3.4:0")),
        Ok(inet("0.0.0.0:5")),
        Ok(inet("224.0.0.1:5")),
        Ok(inet("255.255.255.255:5")),
        Ok(inet("[::1]:5")),
        Ok(shm(3)),
    ]);
    assert_eq!(r[0], Ok(inet("1.2.3.4:5")));
    assert!(r[1..].iter().all(|x| x.is_err()));
    let t6 = tcp_state(AvFormat::Sockaddr);
    assert!(t6.validate(vec![Ok(inet("[::1]:5"))])[0].is_ok());
}

#[test]
fn node_sequences() {
    let v4 = NodeSeq::new("10.1.1.255", 3).unwrap();
    assert_eq!(v4.nth(0), "10.1.1.255");
    assert_eq!(v4.nth(1), "10.1.2.0");
    assert_eq!(NodeSeq::new("255.255.255.255", 2), Err(Error::INVAL));
    let v6 = NodeSeq::new("fe80::ffff", 2).unwrap();
    assert_eq!(v6.nth(1), "fe80::1:0");
    let h = NodeSeq::new("host10", 3).unwrap();
    assert_eq!((h.nth(0), h.nth(2)), ("host10".into(), "host12".into()));
    let p = NodeSeq::new("node007", 4).unwrap();
    assert_eq!(p.nth(3), "node010");
    let w = NodeSeq::new("n9", 2).unwrap();
    assert_eq!(w.nth(1), "n10");
    assert_eq!(NodeSeq::new("host", 2), Err(Error::INVAL));
    assert_eq!(NodeSeq::new("host", 1).unwrap().nth(0), "host");
    assert_eq!(NodeSeq::new("", 1), Err(Error::INVAL));
}

#[test]
fn service_sequences() {
    let s = SvcSeq::new(Some("5000"), 2, 65535).unwrap();
    assert_eq!((s.nth(0), s.nth(1)), (Some("5000".into()), Some("5001".into())));
    assert_eq!(SvcSeq::new(Some("65535"), 2, 65535), Err(Error::INVAL));
    assert_eq!(SvcSeq::new(Some("http"), 2, 65535), Err(Error::INVAL));
    assert_eq!(SvcSeq::new(Some("http"), 1, 65535).unwrap().nth(0), Some("http".into()));
    assert_eq!(SvcSeq::new(None, 1, 65535).unwrap().nth(0), None);
    assert_eq!(SvcSeq::new(None, 2, 65535), Err(Error::INVAL));
}

#[test]
fn insertsym_order_is_node_major() {
    let t = tcp_state(AvFormat::Sockaddr);
    let r = t.resolve_sym("10.1.1.1", 2, Some("5000"), 2).unwrap();
    let want: Vec<Result<Addr>> = ["10.1.1.1:5000", "10.1.1.1:5001", "10.1.1.2:5000", "10.1.1.2:5001"]
        .iter()
        .map(|s| Ok(inet(s)))
        .collect();
    assert_eq!(r, want);
    assert_eq!(t.resolve_sym("10.1.1.1", 0, Some("1"), 5).unwrap(), vec![]);
    assert_eq!(t.resolve_sym("10.1.1.1", usize::MAX, Some("1"), 2), Err(Error::INVAL));
    assert_eq!(
        t.resolve_sym("10.1.1.1", 1 << 20, Some("1"), 1 << 12),
        Err(Error::INVAL)
    );
}

#[test]
fn insertsvc_tcp_and_shm() {
    let t = tcp_state(AvFormat::SockaddrIn);
    assert_eq!(t.resolve("127.0.0.1", Some("9228")), Ok(inet("127.0.0.1:9228")));
    assert!(t.resolve("::1", Some("9228")).is_err(), "v6 into a v4-only AV");
    assert!(t.resolve("127.0.0.1", None).is_err(), "port 0");
    assert_eq!(
        t.resolve("fi_sockaddr_in://127.0.0.1:80", None),
        Ok(inet("127.0.0.1:80"))
    );
    assert!(t.resolve("no-such-host.invalid", Some("1")).is_err());
    let s = shm_state();
    let want = shm(addr::shm_token_for(Some("127.0.0.1"), Some("9228")));
    assert_eq!(s.resolve("127.0.0.1", Some("9228")), Ok(want));
    let name = shm(0x1234).to_string_form();
    assert_eq!(s.resolve(&name, None), Ok(shm(0x1234)));
    assert!(s.resolve("fi_sockaddr_in://127.0.0.1:80", None).is_err());
    let r = s.resolve_sym("host1", 2, Some("7"), 1).unwrap();
    assert_eq!(r[1], Ok(shm(addr::shm_token_for(Some("host2"), Some("7")))));
}

#[test]
fn lookup_truncation() {
    let stored = shm(0x42).to_bytes();
    assert_eq!(lookup_bytes(&stored, true, 100), stored);
    let t = lookup_bytes(&stored, true, 10);
    assert_eq!(t.len(), 10);
    assert_eq!(&t[..9], &stored[..9]);
    assert_eq!(t[9], 0);
    assert!(lookup_bytes(&stored, true, 0).is_empty());
    let sin = inet("1.2.3.4:5").to_bytes();
    assert_eq!(lookup_bytes(&sin, false, 4), sin[..4].to_vec());
}

#[test]
fn encode_matches_format() {
    let a = inet("1.2.3.4:5");
    assert_eq!(AvFormat::SockaddrIn.encode(&a), a.to_bytes());
    assert_eq!(AvFormat::Str.encode(&a), b"fi_sockaddr_in://1.2.3.4:5\0".to_vec());
    assert_eq!(AvFormat::Str.encode(&shm(1)), shm(1).to_bytes());
}

#[derive(Default)]
struct Recorder {
    events: RefCell<Vec<(&'static str, usize, i32)>>,
    fail_complete: bool,
}
impl AvEvents for Recorder {
    fn error(&self, index: usize, err: i32) -> Result<()> {
        self.events.borrow_mut().push(("err", index, err));
        Ok(())
    }
    fn complete(&self, count: usize) -> Result<()> {
        if self.fail_complete {
            return Err(Error::AGAIN);
        }
        self.events.borrow_mut().push(("done", count, 0));
        Ok(())
    }
}

#[test]
fn async_reports_errors_then_one_completion() {
    let rec = Recorder::default();
    let results = vec![Ok(0), Err(Error::INVAL), Ok(1), Err(Error::CANCELED)];
    report_async(&results, &rec).unwrap();
    assert_eq!(
        *rec.events.borrow(),
        vec![("err", 1, FI_EINVAL), ("err", 3, FI_ECANCELED), ("done", 2, 0)]
    );
    let rec = Recorder::default();
    report_async(&[], &rec).unwrap();
    assert_eq!(
        *rec.events.borrow(),
        vec![("done", 0, 0)],
        "zero inserts still complete"
    );
    let rec = Recorder {
        fail_complete: true,
        ..Default::default()
    };
    assert_eq!(report_async(&[Ok(0)], &rec), Err(Error::AGAIN));
}

#[test]
fn av_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Av>();
    check::<AvState>();
}

#[test]
fn effective_types() {
    assert_eq!(effective_type(FI_AV_UNSPEC), FI_AV_TABLE);
    assert_eq!(effective_type(FI_AV_MAP), FI_AV_MAP);
    assert_eq!(effective_type(77), 77);
}
