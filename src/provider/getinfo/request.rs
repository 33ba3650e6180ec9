//! The request: the transports the environment allows, the query, and
//! what its hints say about addresses, parsed once per call.

use crate::abi::*;
use crate::core::attr::Info;
use crate::core::domain::TransportKind;
use crate::transport::addr::Addr;
use std::cell::OnceCell;

// ---- The request ---------------------------------------------------------

/// Which transports `FI_RUSTFAB_TRANSPORT` lets fi_getinfo offer: a set,
/// written as a comma-separated list (`shm,tcp`), or `all` (the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TransportChoice(u8);

#[allow(non_upper_case_globals)]
impl TransportChoice {
    /// Every transport (the default).
    pub(crate) const All: TransportChoice = TransportChoice(0b111);
    #[cfg(test)]
    /// shm and tcp without the auto entry.
    pub(crate) const ShmTcp: TransportChoice = TransportChoice(0b110);

    fn bit(t: TransportKind) -> u8 {
        match t {
            TransportKind::Auto => 1,
            TransportKind::Shm => 2,
            TransportKind::Tcp => 4,
        }
    }

    #[cfg(test)]
    #[allow(non_snake_case)]
    pub(crate) fn Only(t: TransportKind) -> TransportChoice {
        TransportChoice(Self::bit(t))
    }

    /// Parses the parameter value (case-insensitive); `None` if unknown.
    pub(crate) fn parse(s: &str) -> Option<TransportChoice> {
        let s = s.trim().to_ascii_lowercase();
        if s.is_empty() || s == "all" {
            return Some(TransportChoice::All);
        }
        let mut set = 0;
        for part in s.split(',') {
            set |= Self::bit(TransportKind::from_domain_name(part.trim())?);
        }
        Some(TransportChoice(set))
    }

    /// The current `FI_RUSTFAB_TRANSPORT` setting.
    pub(crate) fn from_param() -> TransportChoice {
        match crate::provider::params::get_str("transport") {
            None => TransportChoice::All,
            Some(s) => TransportChoice::parse(&s).unwrap_or_else(|| {
                crate::provider::params::warn_once(
                    core::panic::Location::caller(),
                    format!("FI_RUSTFAB_TRANSPORT={s:?} is not all or a list of auto, shm, tcp; using all"),
                );
                TransportChoice::All
            }),
        }
    }

    pub(crate) fn allows(self, t: TransportKind) -> bool {
        self.0 & Self::bit(t) != 0
    }
}

/// The arguments of one fi_getinfo call, in Rust.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Query<'a> {
    pub version: u32,
    pub node: Option<&'a str>,
    pub service: Option<&'a str>,
    pub flags: u64,
    pub hints: Option<&'a Info>,
    pub transports: TransportChoice,
}

impl Query<'_> {
    pub(super) fn source(&self) -> bool {
        self.flags & FI_SOURCE != 0
    }
    pub(super) fn numeric(&self) -> bool {
        self.flags & FI_NUMERICHOST != 0
    }
}

/// Why one template (or the whole request) was not offered, and the line
/// that decided it: logged at FI_LOG_INFO, like util's `FI_INFO` lines, with
/// that line rather than the logging call's.
#[derive(Clone, Copy, Debug)]
pub(super) struct Skip {
    pub(super) why: &'static str,
    pub(super) at: &'static core::panic::Location<'static>,
}

/// A [`Skip`] raised at the caller's line.
#[track_caller]
pub(super) fn skip(why: &'static str) -> Skip {
    Skip {
        why,
        at: core::panic::Location::caller(),
    }
}

impl core::fmt::Display for Skip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.why)
    }
}

pub(super) type Check = core::result::Result<(), Skip>;

/// What the hints and `node` say about addresses, parsed once per call.
pub(super) struct Prepared {
    /// `hints->addr_format` (0 = any).
    pub(super) format: u32,
    pub(super) hint_src: Option<Addr>,
    pub(super) hint_dest: Option<Addr>,
    /// `node` written as an address string.
    pub(super) node_addr: Option<Addr>,
    /// Whether the destination `node` is this host (computed on first use).
    pub(super) node_local: OnceCell<bool>,
}

impl Prepared {
    pub(super) fn new(q: &Query) -> core::result::Result<Prepared, Skip> {
        let format = q.hints.map_or(FI_FORMAT_UNSPEC, |h| h.addr_format);
        match format {
            FI_FORMAT_UNSPEC | FI_SOCKADDR | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 | FI_ADDR_STR => {}
            _ => return Err(skip("address format not supported")),
        }
        let parse = |b: Option<&[u8]>| -> core::result::Result<Option<Addr>, Skip> {
            match b {
                None => Ok(None),
                Some(b) => Addr::parse(format, b)
                    .map(|(a, _)| Some(a))
                    .map_err(|_| skip("hints carry an address rustfab cannot parse")),
            }
        };
        let hint_src = parse(q.hints.and_then(|h| h.src_addr.as_deref()))?;
        let hint_dest = parse(q.hints.and_then(|h| h.dest_addr.as_deref()))?;
        let node_addr = q.node.and_then(|n| Addr::parse_str(n).ok());
        Ok(Prepared {
            format,
            hint_src,
            hint_dest,
            node_addr,
            node_local: OnceCell::new(),
        })
    }

    /// Every address the request names (each one selects its transport).
    pub(super) fn addresses(&self) -> impl Iterator<Item = &Addr> {
        self.hint_src
            .iter()
            .chain(self.hint_dest.iter())
            .chain(self.node_addr.iter())
    }
}
