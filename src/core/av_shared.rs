//! Named (shared) address vectors (`fi_av_attr.name`, `FI_READ`,
//! `map_addr`): one AV whose entries the processes of one user on one host
//! see under the same `fi_addr_t` values (docs/av.md, "Shared AVs"). The
//! shm object behind one is core/av_segment.rs.
//!
//! Every process keeps the ordinary local table ([`AvState`]): the creator
//! (the only writer) inserts there and writes each entry, in the AV's
//! stored form (`AvFormat::encode`), at the same index of the segment,
//! then publishes the count; a reader copies the published entries it has
//! not seen into its table when a lookup (`fi_addr` → address, or a
//! message's source → `fi_addr`) misses, so lookups that hit cost what
//! they cost in a private AV. Each copied entry is decoded and checked
//! like an inserted address; one that fails becomes a removed slot: a
//! lookup of it fails (-FI_EINVAL on a send), the other entries are
//! unaffected. The hooks in core/av.rs call the `Av` methods below.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::av::{check_dest, Av, AvFormat, AvState};
use crate::core::av_segment::{AvSegment, ENTRY_DATA};
use crate::core::domain::TransportKind;
use crate::transport::addr::Addr;

/// A full named AV: the entries beyond its capacity fail with this.
const NOSPC: Error = Error(FI_ENOSPC);

/// The segment header's format word: the domain's transport and the AV's
/// address layout (a reader of another kind would misread the entries).
fn format_code(t: TransportKind, f: AvFormat) -> u64 {
    let t = match t {
        TransportKind::Shm => 1,
        TransportKind::Tcp => 2,
        TransportKind::Auto => 3,
    };
    let f = match f {
        AvFormat::Str => 1,
        AvFormat::SockaddrIn => 2,
        AvFormat::SockaddrIn6 => 3,
        AvFormat::Sockaddr => 4,
    };
    t << 8 | f
}

impl Av {
    /// The segment of the named AV `name` for an AV of this transport and
    /// format (`AvSegment::open` has the errors).
    pub(crate) fn open_segment(
        name: &str,
        read_only: bool,
        transport: TransportKind,
        format: AvFormat,
        count: usize,
    ) -> Result<AvSegment> {
        AvSegment::open(name, read_only, format_code(transport, format), count)
    }

    /// Inserts into a named AV ([`insert`]).
    pub(crate) fn shared_insert(
        &self,
        addrs: Vec<Result<Addr>>,
        user_ids: Option<&[fi_addr_t]>,
    ) -> Result<Vec<Result<fi_addr_t>>> {
        let seg = self.shared.as_ref().ok_or(Error::INVAL)?;
        insert(seg, &self.state, addrs, user_ids)
    }

    /// A reader's catch-up after a lookup missed (core/av.rs): whether
    /// entries were copied (then the lookup is worth repeating).
    pub(crate) fn shared_catch_up(&self) -> bool {
        self.shared.as_ref().is_some_and(|seg| catch_up(seg, &self.state))
    }
}

/// Inserts checked addresses into a named AV (the writer): into the local
/// table and, at the same indices, into the segment, published in order.
/// An entry beyond the capacity fails with `FI_ENOSPC`; a reader's insert
/// is -FI_EINVAL (the AV is read-only).
pub(crate) fn insert(
    seg: &AvSegment,
    state: &AvState,
    mut addrs: Vec<Result<Addr>>,
    user_ids: Option<&[fi_addr_t]>,
) -> Result<Vec<Result<fi_addr_t>>> {
    if !seg.is_writer() {
        return Err(Error::INVAL);
    }
    let _order = seg.order();
    let mut room = seg.capacity().saturating_sub(state.table.read().next_index() as usize);
    let encoded: Vec<Option<Vec<u8>>> = addrs
        .iter_mut()
        .map(|a| {
            let bytes = a.as_ref().ok().map(|a| state.format.encode(a))?;
            if bytes.len() > ENTRY_DATA {
                *a = Err(Error::INVAL);
                None
            } else if room == 0 {
                *a = Err(NOSPC);
                None
            } else {
                room -= 1;
                Some(bytes)
            }
        })
        .collect();
    let results = state.insert_batch(&addrs, user_ids)?;
    let mut published = None;
    for (r, bytes) in results.iter().zip(&encoded) {
        if let (Ok(idx), Some(bytes)) = (r, bytes) {
            seg.write_entry(*idx as usize, bytes);
            published = Some(*idx as usize + 1);
        }
    }
    if let Some(n) = published {
        seg.publish(n);
    }
    Ok(results)
}

/// Copies the entries published since the last call into a reader's local
/// table (a bad entry as a removed slot). Returns whether any was copied;
/// the writer has nothing to copy.
pub(crate) fn catch_up(seg: &AvSegment, state: &AvState) -> bool {
    if seg.is_writer() {
        return false;
    }
    let _order = seg.order();
    let published = seg.published();
    let mut t = state.table.write();
    let have = t.next_index() as usize;
    if published <= have || t.reserve(published - have).is_err() {
        return false;
    }
    for idx in have..published {
        let entry = seg
            .entry(idx)
            .and_then(|b| state.format.decode(&b))
            .and_then(|a| check_dest(state.transport, state.format, a));
        match entry {
            Ok(a) => {
                t.insert(a, None);
            }
            Err(e) => {
                crate::base::log::log_warn!(
                    FI_LOG_AV,
                    "shared AV {:?}: entry {idx} is corrupt ({e}); lookups of it fail",
                    seg.object()
                );
                t.push_removed();
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::av_segment::tests::{scribble, scribble_count, unique};
    use crate::core::av_segment::MIN_CAPACITY;

    fn state() -> AvState {
        AvState::new(0, TransportKind::Shm, AvFormat::Str, 4)
    }
    fn open(name: &str, read_only: bool) -> AvSegment {
        Av::open_segment(name, read_only, TransportKind::Shm, AvFormat::Str, 0).unwrap()
    }

    #[test]
    fn writer_publishes_and_reader_catches_up() {
        let name = unique("pub");
        let w = open(&name, false);
        let r = open(&name, true);
        let (ws, rs) = (state(), state());
        assert!(!catch_up(&r, &rs), "nothing published yet");
        let res = insert(
            &w,
            &ws,
            vec![Ok(Addr::Shm(5)), Err(Error::INVAL), Ok(Addr::Shm(6))],
            None,
        )
        .unwrap();
        assert_eq!(res, vec![Ok(0), Err(Error::INVAL), Ok(1)]);
        assert!(catch_up(&r, &rs));
        assert_eq!(rs.lookup_addr(0), Some(Addr::Shm(5)));
        assert_eq!(rs.lookup_addr(1), Some(Addr::Shm(6)));
        assert_eq!(rs.reverse_lookup(&Addr::Shm(6)), Some(1));
        assert!(!catch_up(&r, &rs), "nothing new");
        assert_eq!(insert(&r, &rs, vec![Ok(Addr::Shm(1))], None), Err(Error::INVAL));
        assert_eq!(
            Av::open_segment(&name, true, TransportKind::Tcp, AvFormat::SockaddrIn, 0).err(),
            Some(Error::INVAL),
            "another transport's reader would misread the entries"
        );
    }

    #[test]
    fn capacity_is_enforced() {
        let w = open(&unique("cap"), false);
        let s = state();
        let many: Vec<_> = (1..=MIN_CAPACITY as u64 + 2).map(|t| Ok(Addr::Shm(t))).collect();
        let res = insert(&w, &s, many, None).unwrap();
        assert!(res[..MIN_CAPACITY].iter().all(|r| r.is_ok()));
        assert_eq!(res[MIN_CAPACITY..], [Err(NOSPC), Err(NOSPC)]);
        assert_eq!(insert(&w, &s, vec![Ok(Addr::Shm(1))], None).unwrap(), [Err(NOSPC)]);
    }

    #[test]
    fn corrupt_entries_cost_only_themselves() {
        let name = unique("bad");
        let w = open(&name, false);
        let ws = state();
        insert(&w, &ws, (1..=4).map(|t| Ok(Addr::Shm(t))).collect(), None).unwrap();
        // What a same-user process could write: a huge length, an address
        // of another transport, a zero token, and a count past the capacity.
        scribble(&w, 0, 0, u64::MAX);
        w.write_entry(1, &AvFormat::Str.encode(&Addr::Inet("1.2.3.4:5".parse().unwrap())));
        w.write_entry(2, &Addr::Shm(0).to_bytes());
        scribble_count(&w, u64::MAX);
        let r = open(&name, true);
        let rs = state();
        assert!(catch_up(&r, &rs));
        assert_eq!(rs.lookup_addr(0), None);
        assert_eq!(rs.lookup_addr(1), None);
        assert_eq!(rs.lookup_addr(2), None);
        assert_eq!(rs.lookup_addr(3), Some(Addr::Shm(4)));
        assert_eq!(
            rs.table.read().next_index(),
            MIN_CAPACITY as u64,
            "bounded by the capacity"
        );
        assert!(!catch_up(&r, &rs));
    }
}
