//! Which receives read their `src_addr`, which must, and which may take
//! several tagged messages: the receive-matching capabilities of an
//! endpoint, read from its caps at its fabric's API version
//! (docs/libfabric2.md, "Receive matching and addressing of 2.x").
//!
//! * `FI_DIRECTED_RECV`: untagged and tagged receives honour `src_addr`.
//! * `FI_TAGGED_DIRECTED_RECV` (2.0): tagged receives only.
//! * `FI_EXACT_DIRECTED_RECV` (2.0): the receives it applies to must name a
//!   source (`FI_ADDR_UNSPEC` is refused); alone it applies to both kinds,
//!   with `FI_TAGGED_DIRECTED_RECV` alone to tagged receives only.
//! * `FI_TAGGED_MULTI_RECV` (2.0): tagged receives may be multi-receive
//!   buffers (`FI_MULTI_RECV` alone covers untagged ones).
//!
//! Below API 2.0, capability bits 45 and 46 are memory-registration flags
//! and bit 48 is `FI_VARIABLE_MSG`: none of them changes matching there.

use crate::abi::v2::{API_FIRST_2_0, FI_EXACT_DIRECTED_RECV, FI_TAGGED_DIRECTED_RECV, FI_TAGGED_MULTI_RECV};
use crate::abi::*;

/// The matching rules of one endpoint (fixed when it opens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RecvMatching {
    msg_directed: bool,
    tagged_directed: bool,
    msg_exact: bool,
    tagged_exact: bool,
    msg_multi: bool,
    tagged_multi: bool,
    /// `msg_exact || tagged_exact`, kept: one load on the path of every
    /// any-source receive.
    any_exact: bool,
}

impl RecvMatching {
    /// The rules `caps` (the endpoint's, as the application gave them)
    /// mean at API `version`.
    pub(crate) fn of(caps: u64, version: u32) -> RecvMatching {
        let directed = caps & FI_DIRECTED_RECV != 0;
        let msg_multi = caps & FI_MULTI_RECV != 0;
        if version < API_FIRST_2_0 {
            return RecvMatching {
                msg_directed: directed,
                tagged_directed: directed,
                msg_multi,
                ..RecvMatching::default()
            };
        }
        let tagged_only = caps & FI_TAGGED_DIRECTED_RECV != 0;
        let exact = caps & FI_EXACT_DIRECTED_RECV != 0;
        // Exact alone applies to both kinds; as a modifier, to what the
        // directed capability it modifies covers.
        let msg_directed = directed || (exact && !tagged_only);
        let tagged_directed = directed || tagged_only || exact;
        RecvMatching {
            msg_directed,
            tagged_directed,
            msg_exact: exact && msg_directed,
            tagged_exact: exact && tagged_directed,
            msg_multi,
            tagged_multi: caps & FI_TAGGED_MULTI_RECV != 0,
            any_exact: exact && (msg_directed || tagged_directed),
        }
    }

    /// The same rules with every receive reading no source (a connected
    /// endpoint: its one peer is every message's source).
    pub(crate) fn undirected(self) -> RecvMatching {
        RecvMatching {
            msg_directed: false,
            tagged_directed: false,
            msg_exact: false,
            tagged_exact: false,
            any_exact: false,
            ..self
        }
    }

    /// Whether a receive of this kind reads its `src_addr`.
    #[inline(always)]
    pub(crate) fn directed(&self, tagged: bool) -> bool {
        by_kind(tagged, self.tagged_directed, self.msg_directed)
    }

    /// Whether a receive of this kind must name its source.
    #[inline(always)]
    pub(crate) fn exact(&self, tagged: bool) -> bool {
        by_kind(tagged, self.tagged_exact, self.msg_exact)
    }

    /// Whether any receive must name its source (one test on the path of
    /// every any-source receive).
    #[inline(always)]
    pub(crate) fn any_exact(&self) -> bool {
        self.any_exact
    }

    /// Whether a receive of this kind may be posted with `FI_MULTI_RECV`.
    pub(crate) fn multi(&self, tagged: bool) -> bool {
        by_kind(tagged, self.tagged_multi, self.msg_multi)
    }
}

/// The tagged or the untagged receives' answer.
#[inline(always)]
fn by_kind(tagged: bool, if_tagged: bool, if_untagged: bool) -> bool {
    if tagged {
        if_tagged
    } else {
        if_untagged
    }
}

/// The caps the rest of the engine reads, at API `version`: bit 48 is
/// `FI_VARIABLE_MSG` only below 2.0 (from 2.0 it is
/// `FI_EXACT_DIRECTED_RECV`, which [`RecvMatching`] holds), and bits 45
/// and 46 mean nothing as endpoint caps below 2.0.
pub(crate) fn engine_caps(caps: u64, version: u32) -> u64 {
    if version < API_FIRST_2_0 {
        caps & !(FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV)
    } else {
        caps & !FI_EXACT_DIRECTED_RECV
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::layout::fi_version;

    const V2: u32 = fi_version(2, 0);
    const V1: u32 = fi_version(1, 22);

    /// The table of docs/libfabric2.md: (caps, untagged directed, tagged
    /// directed, untagged exact, tagged exact).
    #[test]
    fn the_table_at_2x() {
        let rows = [
            (0, false, false, false, false),
            (FI_DIRECTED_RECV, true, true, false, false),
            (FI_TAGGED_DIRECTED_RECV, false, true, false, false),
            (FI_EXACT_DIRECTED_RECV, true, true, true, true),
            (FI_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV, true, true, true, true),
            (
                FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV,
                false,
                true,
                false,
                true,
            ),
            (FI_DIRECTED_RECV | FI_TAGGED_DIRECTED_RECV, true, true, false, false),
        ];
        for (caps, md, td, me, te) in rows {
            let m = RecvMatching::of(caps | FI_MSG | FI_TAGGED, V2);
            assert_eq!(
                (m.directed(false), m.directed(true), m.exact(false), m.exact(true)),
                (md, td, me, te),
                "caps {caps:#x}"
            );
        }
    }

    /// Below 2.0 the 2.0 bits mean other things: only FI_DIRECTED_RECV
    /// directs, for both kinds, and bit 48 (FI_VARIABLE_MSG) stays a cap.
    #[test]
    fn before_2_0_only_directed_recv_counts() {
        for caps in [FI_TAGGED_DIRECTED_RECV, FI_EXACT_DIRECTED_RECV, FI_TAGGED_MULTI_RECV] {
            assert_eq!(RecvMatching::of(caps, V1), RecvMatching::default(), "{caps:#x}");
        }
        let m = RecvMatching::of(FI_DIRECTED_RECV | FI_MULTI_RECV, V1);
        assert!(m.directed(false) && m.directed(true) && !m.exact(false) && !m.exact(true));
        assert!(m.multi(false) && !m.multi(true));
        assert_eq!(
            engine_caps(FI_VARIABLE_MSG | FI_TAGGED_DIRECTED_RECV, V1),
            FI_VARIABLE_MSG
        );
        assert_eq!(
            engine_caps(FI_EXACT_DIRECTED_RECV | FI_TAGGED_MULTI_RECV, V2),
            FI_TAGGED_MULTI_RECV
        );
    }

    #[test]
    fn multi_receive_per_kind() {
        let m = RecvMatching::of(FI_TAGGED_MULTI_RECV, V2);
        assert!(m.multi(true) && !m.multi(false));
        let m = RecvMatching::of(FI_MULTI_RECV, V2);
        assert!(!m.multi(true) && m.multi(false));
    }
}
