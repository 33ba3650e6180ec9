use super::*;

fn meta_of(token: u64) -> Option<sys::shm::Meta> {
    let fd = sys::shm::open(&seg_name(token), Access::ReadOnly).ok()?;
    sys::shm::meta(&fd).ok()
}

/// Leaves an object named like `token`'s segment with a complete
/// header that says `pid`/`start` own it, as a killed owner would.
fn plant(token: u64, pid: i32, start: u64) {
    let name = seg_name(token);
    let map = SharedMap::new(sys::shm::create(&name, SEG_SIZE).unwrap(), SEG_SIZE).unwrap();
    let w = |off: usize, v: u64| {
        // SAFETY: header words inside the fresh mapping, 8-aligned,
        // accessed atomically only.
        unsafe { AtomicU64::from_ptr(map.as_ptr().add(off).cast()) }.store(v, Ordering::Release)
    };
    w(H_VERSION, SEG_VERSION as u64 | ((NSLOTS as u64) << 32));
    w(H_NCELLS, NCELLS as u64 | ((pid as u32 as u64) << 32));
    w(H_START, start);
    w(H_TOKEN, token);
    w(H_UID, sys::geteuid() as u64);
    w(H_MAGIC, SEG_MAGIC);
}

/// A new segment with 16384-cell rings, and how many bytes of its
/// file are allocated (`st_blocks`).
fn large_segment() -> (Segment, impl Fn() -> u64) {
    use std::os::unix::fs::MetadataExt;
    let token = crate::transport::addr::shm_token_random();
    let owner = Segment::create_with(token, 16384).unwrap();
    let path = format!("/dev/shm{}", seg_name(token).to_str().unwrap());
    (owner, move || std::fs::metadata(&path).unwrap().blocks() * 512)
}

/// Freeing a slot gives its ring's pages back to /dev/shm: a sender
/// that wrote all round a 16384-cell ring made its MiB resident; after
/// `free_slot` the file holds at most the two partly used pages of it,
/// every cell reads empty, and the next slot's ring is untouched.
#[test]
fn a_freed_slot_gives_its_rings_pages_back() {
    let (owner, resident) = large_segment();
    let before = resident();
    let (r, next) = (owner.ring(5), owner.ring(6));
    let fill = |r: &Ring, i: u64| {
        // The word reads as published at lap 0 (the magic, tag 0).
        let word = crate::transport::proto::MAGIC as u64 | (i + 1) << 16;
        // SAFETY: cell `i` lies inside the ring's mapping; a test is
        // the only process writing it.
        unsafe { core::ptr::write_volatile(r.cell(i).cast::<u64>(), word) }
    };
    for i in 0..16384 {
        fill(&r, i);
    }
    fill(&next, 0);
    assert!(resident() >= before + (1 << 20), "the ring was not made resident");
    owner.free_slot(5);
    assert!(
        resident() <= before + 3 * 4096,
        "still resident after free_slot: {} bytes more than before",
        resident() - before
    );
    for i in 0..16384 {
        assert_eq!(r.ready(i), None, "cell {i} not empty after the reset");
    }
    assert!(next.ready(0).is_some(), "the next slot's ring was touched");
}

/// A claim allocates the ring's first page before its first store
/// (the file grows by exactly that), and with no room for it in
/// /dev/shm the claim fails with -FI_ENOMEM and leaves the slot free.
#[test]
fn a_claim_allocates_its_slots_first_pages_or_fails_without_a_store() {
    let (owner, resident) = large_segment();
    let peer = Segment::open(owner.token).unwrap();
    let me = SlotSender {
        token: 7,
        pid: sys::getpid(),
        start: 1,
    };
    peer.no_room_from.store(0, Ordering::Relaxed);
    let before = resident();
    assert_eq!(peer.claim_slot(me).err(), Some(Error::NOMEM));
    assert!(
        (0..NSLOTS).all(|s| owner.slot_state(s) == SLOT_FREE),
        "a slot was taken"
    );
    assert_eq!(resident(), before, "a page was written");
    peer.no_room_from.store(u64::MAX, Ordering::Relaxed);
    let c = peer.claim_slot(me).unwrap();
    assert_eq!(resident() - before, 4096, "the claim allocates the ring's first page");
    assert_eq!(owner.slot_state(c.slot), SLOT_CLAIMED);
}

/// Populating a ring from a cell on allocates the pages from there to
/// the ring's end in the file (and no others), and changes no byte.
#[test]
fn populating_a_ring_allocates_its_pages_and_changes_nothing() {
    let (owner, resident) = large_segment();
    let before = resident();
    assert_eq!(
        owner.populate_cells(3, 2048, 16384, 0),
        Ok(()),
        "MADV_POPULATE_WRITE refused (Linux >= 5.14 needed)"
    );
    let grown = resident() - before;
    let want = (16384 - 2048) * CELL as u64;
    assert!(
        grown >= want && grown <= want + 2 * 4096,
        "populated {grown} bytes, want about {want}"
    );
    let r = owner.ring(3);
    for i in 0..16384 {
        assert_eq!(r.ready(i), None, "cell {i} changed");
    }
    assert_eq!(
        owner.populate_cells(3, 16384, 16384, 0),
        Err(Error::INVAL),
        "nothing past the ring's end to populate"
    );
    owner.free_slot(3);
    assert!(resident() <= before + 2 * 4096, "free_slot gave the pages back");
}

/// The owner chooses its rings' size: the file is sized by it, an
/// opener takes it from there (and the header must agree), and sizes
/// a segment may not have are refused.
#[test]
fn a_segment_carries_the_ring_size_its_owner_chose() {
    let token = crate::transport::addr::shm_token_random();
    let owner = Segment::create_with(token, 16384).unwrap();
    assert_eq!(meta_of(token).unwrap().size, seg_size(16384) as u64);
    let peer = Segment::open(token).unwrap();
    assert_eq!(peer.ring(NSLOTS - 1).ncells(), 16384);
    assert_eq!(owner.ring(0).ncells(), 16384);
    // The last slot's ring ends inside the mapping: its last cell is
    // readable (a zeroed first word, no record).
    assert_eq!(peer.ring(NSLOTS - 1).ready(16383), None);
    // A header that disagrees with the file's size: refused.
    owner
        .word(H_NCELLS)
        .store(8192 | ((sys::getpid() as u32 as u64) << 32), Ordering::Release);
    assert_eq!(Segment::open(token).err(), Some(Error::ADDRNOTAVAIL));
    for bad in [0, 1000, 1024, 3000, NCELLS_MAX * 2] {
        let t = crate::transport::addr::shm_token_random();
        assert_eq!(Segment::create_with(t, bad).err(), Some(Error::INVAL), "{bad} cells");
    }
    assert_eq!(cells_of_size(seg_size(NCELLS) as u64 + 4096), None);
    assert_eq!(cells_of_size(seg_size(4096) as u64), Some(4096));
}

/// A claimer resets its ring whatever it holds: garbage written into
/// a never-claimed slot's ring (its head and cells) and into a freed
/// one's reads as an empty ring once claimed, and the claimer's first
/// record goes where the owner looks.
#[test]
fn a_claim_resets_its_ring_whatever_it_holds() {
    let token = crate::transport::addr::shm_token_random();
    let owner = Segment::create(token).unwrap();
    let peer = Segment::open(token).unwrap();
    let me = SlotSender {
        token: 9,
        pid: sys::getpid(),
        start: 1,
    };
    let scribble = |slot: usize| {
        let r = owner.ring(slot);
        // SAFETY: the head word and cells lie inside the slot's ring;
        // a test, the only writer.
        unsafe {
            // The head word (`ring.rs`: the second line of the ring).
            core::ptr::write_volatile(owner.slot_base(slot).add(64).cast::<u64>(), 0xdead_beef);
            for i in 0..256 {
                // Each reads as a record published at lap 0.
                let word = crate::transport::proto::MAGIC as u64 | (i + 1) << 16;
                core::ptr::write_volatile(r.cell(i).cast::<u64>(), word);
            }
        }
        assert!(r.ready(0).is_some());
    };
    // Never claimed (generation 0), then freed and scribbled on again.
    let first = owner.claim_seq() as usize % NSLOTS;
    scribble(first);
    let c = peer.claim_slot(me).unwrap();
    assert_eq!(c.slot, first);
    let r = owner.ring(c.slot);
    assert_eq!(r.head_now(), 0, "stale head kept");
    assert!((0..256).all(|i| r.ready(i).is_none()), "stale cells kept");
    peer.activate(c, me);
    peer.close_slot(c.slot);
    owner.free_slot(c.slot);
    scribble(c.slot);
    let mut again = peer.claim_slot(me).unwrap();
    while again.slot != c.slot {
        again = peer.claim_slot(me).unwrap();
    }
    assert_eq!(r.head_now(), 0, "stale head kept");
    assert!((0..256).all(|i| r.ready(i).is_none()), "stale cells kept");
}

#[test]
fn create_open_claim_and_cleanup() {
    let token = crate::transport::addr::shm_token_random();
    let owner = Segment::create(token).unwrap();
    let md = meta_of(token).unwrap();
    assert_eq!(md.mode & 0o777, 0o600, "segment must be private");
    assert_eq!(md.uid, sys::geteuid());
    assert_eq!(md.size, SEG_SIZE as u64);
    // A second exclusive create of the same live name fails.
    assert_eq!(Segment::create(token).err(), Some(Error::ADDRINUSE));
    let peer = Segment::open(token).unwrap();
    assert_eq!(peer.owner_pid, sys::getpid());
    assert!(peer.owner_alive());
    let me = SlotSender {
        token: 42,
        pid: sys::getpid(),
        start: 7,
    };
    let seq0 = owner.claim_seq();
    let c = peer.claim_slot(me).unwrap();
    let s = c.slot;
    assert_eq!(owner.slot_state(s), SLOT_CLAIMED, "invisible until activated");
    assert_eq!(owner.claim_seq(), seq0);
    let w = owner.slot_word_now(s);
    assert_eq!((w.pid, w.gen), (me.pid, c.gen));
    peer.activate(c, me);
    assert_eq!(owner.slot_state(s), SLOT_ACTIVE);
    assert_eq!(owner.slot_sender(s), me);
    assert!(owner.claim_seq() > seq0);
    let c2 = peer.claim_slot(me).unwrap();
    assert_ne!(s, c2.slot);
    // Reclaiming a claimed slot only works on the word as seen: an
    // activation in between wins.
    let seen = owner.slot_word_now(c2.slot);
    peer.activate(c2, me);
    assert!(!owner.reclaim_claimed(c2.slot, seen));
    assert_eq!(owner.slot_state(c2.slot), SLOT_ACTIVE);
    peer.close_slot(s);
    assert_eq!(owner.slot_state(s), SLOT_CLOSED);
    owner.free_slot(s);
    assert_eq!(owner.slot_state(s), SLOT_FREE);
    drop(owner);
    assert!(meta_of(token).is_none(), "segment must be unlinked on close");
    assert!(peer.closed());
    assert!(!peer.owner_alive());
    assert!(Segment::open(token).is_err());
}

/// The owner's header says which barriers the handshakes use; an
/// opener takes `Membarrier` only for the value 1 (and only when its
/// own process is registered), anything else a peer wrote there means
/// fences on both sides.
#[test]
fn the_handshake_is_the_owners_and_anything_but_1_means_fences() {
    let reg = sys::membarrier_register();
    let token = crate::transport::addr::shm_token_random();
    let mut owner = Segment::create(token).unwrap();
    let expect = if reg { Handshake::Membarrier } else { Handshake::Fences };
    assert_eq!(owner.handshake(), expect);
    assert_eq!(Segment::open(token).unwrap().handshake(), expect);
    owner.force_handshake(Handshake::Fences);
    assert_eq!(Segment::open(token).unwrap().handshake(), Handshake::Fences);
    for v in [2u64, u64::MAX, 1 << 32 | 1] {
        owner.word(H_HANDSHAKE).store(v, Ordering::Relaxed);
        assert_eq!(Segment::open(token).unwrap().handshake(), Handshake::Fences, "{v:#x}");
    }
    owner.force_handshake(Handshake::Membarrier);
    assert_eq!(Segment::open(token).unwrap().handshake(), expect);
}

/// Garbage in any identity or geometry word of the header refuses
/// openers (-FI_EADDRNOTAVAIL, with a warning), and the owner's check
/// rewrites it; garbage in `closed` makes senders take the owner for
/// gone until then. Senders that opened it before are not touched.
#[test]
fn a_garbage_header_refuses_openers_until_its_owner_rewrites_it() {
    let token = crate::transport::addr::shm_token_random();
    let owner = Segment::create(token).unwrap();
    let before = Segment::open(token).unwrap();
    assert!(!owner.repair_header(), "nothing to repair");
    for off in [H_MAGIC, H_VERSION, H_NCELLS, H_TOKEN, H_UID] {
        owner.word(off).store(0x0123_4567_89ab_cdef, Ordering::Relaxed);
        assert_eq!(
            Segment::open(token).err(),
            Some(Error::ADDRNOTAVAIL),
            "garbage at {off}"
        );
        assert!(owner.repair_header());
        assert!(!owner.repair_header());
        let s = Segment::open(token).unwrap();
        assert_eq!((s.owner_pid, s.ncells), (sys::getpid(), NCELLS));
    }
    for off in [H_START, H_HANDSHAKE] {
        owner.word(off).store(0x0123_4567_89ab_cdef, Ordering::Relaxed);
        assert!(owner.repair_header(), "garbage at {off} kept");
        assert_eq!(Segment::open(token).unwrap().owner_start, owner.owner_start);
    }
    owner.word(H_CLOSED).store(7, Ordering::Relaxed);
    assert!(!before.owner_alive());
    assert!(owner.repair_header());
    assert!(before.owner_alive());
    assert!(!before.repair_header(), "only the owner rewrites");
}

#[test]
fn garbage_and_foreign_segments_rejected() {
    assert!(Segment::open(0x1234_5678_9abc_def0).is_err());
    // A same-named object that is not a rustfab segment (wrong size).
    let token = crate::transport::addr::shm_token_random();
    let name = seg_name(token);
    drop(sys::shm::create(&name, 4096).unwrap());
    assert!(Segment::open(token).is_err());
    // A name without a header may be a creator still initialising: it
    // is not taken over while young (only after UNINIT_GRACE_SECS).
    assert_eq!(Segment::create(token).err(), Some(Error::ADDRINUSE));
    assert!(!remove_if_stale(&name));
    assert!(sys::shm::unlink(&name));
    let s = Segment::create(token).unwrap();
    drop(s);
    // A well-formed segment that others may read is refused.
    let token = crate::transport::addr::shm_token_random();
    let owner = Segment::create(token).unwrap();
    let path = format!("/dev/shm{}", seg_name(token).to_str().unwrap());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(Segment::open(token).err(), Some(Error::ADDRNOTAVAIL));
    drop(owner);
}

#[test]
fn dead_owners_segment_is_reclaimed_live_ones_are_not() {
    // This process's first create sweeps once; have it done before
    // planting, so that only this test's own sweep runs below.
    drop(Segment::create(crate::transport::addr::shm_token_random()).unwrap());
    let me = sys::getpid();
    let my_start = sys::proc_start_time(me).unwrap();
    // Same pid, other start time: an earlier incarnation of this pid,
    // i.e. an owner that died (and whose pid was reused).
    let token = crate::transport::addr::shm_token_random();
    plant(token, me, my_start + 1);
    assert!(!Segment::open(token).unwrap().owner_alive());
    let peer = Segment::open(token).unwrap();
    assert!(!peer.closed());
    let seg = Segment::create(token).unwrap();
    assert_eq!(seg.owner_start, my_start, "ours now");
    // The dead owner's segment was marked closed before it went: a
    // peer that still has it mapped sees that on its next send.
    assert!(peer.closed(), "the dead owner's segment not marked closed");
    drop(seg);
    // A live owner's segment stays.
    let token = crate::transport::addr::shm_token_random();
    plant(token, me, my_start);
    assert_eq!(Segment::create(token).err(), Some(Error::ADDRINUSE));
    assert!(Segment::open(token).unwrap().owner_alive());
    // A sweep (as at the first create of a process) takes only the dead.
    let dead = crate::transport::addr::shm_token_random();
    plant(dead, me, my_start + 1);
    sweep_stale();
    assert!(meta_of(dead).is_none(), "dead owner's segment swept");
    assert!(meta_of(token).is_some(), "live owner's segment kept");
    assert!(sys::shm::unlink(&seg_name(token)));
}
