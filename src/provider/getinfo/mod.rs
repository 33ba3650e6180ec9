//! `fi_getinfo`: what rustfab offers, matched against the application's hints.
//!
//! Flow: [`getinfo_c`] turns the C arguments into Rust through `fi/`
//! ([`Info::from_c`] for the hints) and calls [`getinfo`], which walks
//! [`TEMPLATES`] (`offer.rs`) in order. For each template: transport
//! selection (`transport_filter`), hint checks ([`check_hints`], libfabric
//! util's `ofi_check_info`) and alteration ([`alter`], util's
//! `ofi_alter_info`) in `hints.rs`, and address resolution (`shm_addresses`
//! / `tcp_addresses`, `address.rs`); the query and what its hints say about
//! addresses are `request.rs`. Only name resolution (`getaddrinfo`, a UDP
//! probe socket, through `sys/`) touches the system; everything else is pure
//! and unit-tested (`tests.rs`). The survivors are converted and chained
//! through `next` by `fi/attr.rs` ([`Info::to_c`], libc allocations).
//!
//! # Decisions
//! As docs/abi.md §4.1–4.3 and docs/mpi.md §2 describe:
//! * Entries in [`TEMPLATES`] order: auto RDM, shm RDM, tcp RDM, then auto,
//!   shm and tcp MSG. `FI_RUSTFAB_TRANSPORT` (a list of auto, shm, tcp; `all`/unset:
//!   every one) keeps the rows of the named transports.
//! * `fabric_attr->prov_name` stays NULL (core fills it in); `prov_name`
//!   hints (`rustfab`, `rustfab;^ofi_rxm`, …) are never a reason to reject.
//! * caps are exactly what the data path delivers ([`SHM_CAPS`],
//!   [`TCP_CAPS`], `MSG_CAPS`); shm, RDM and MSG, has no `FI_REMOTE_COMM`
//!   (it is host-local).
//! * mode: nothing is required. `FI_BUFFERED_RECV` is echoed when the hints
//!   allow it ([`OPTIONAL_MODE`] is the one-line hook); `FI_MSG_PREFIX`
//!   too, with its `msg_prefix_size` (`core/prefix.rs` decides).
//! * Values the application asks for are echoed (threading, progress,
//!   resource management, AV type, op_flags, queue sizes, iov limits);
//!   everything the hints ask for must be within what rustfab offers.
//! * mr_mode: template `FI_MR_BASIC | FI_MR_SCALABLE`; API ≥ 1.5 reports no
//!   required bits (0) unless the hints ask for exactly BASIC or SCALABLE,
//!   which are kept.
//!
//! Added here:
//! * tx/rx `caps` never carry `FI_LOCAL_COMM`/`FI_REMOTE_COMM`: those are
//!   domain-level capabilities (`fi_domain(3)`); they appear in `info->caps`
//!   and `domain_attr->caps`. fabtests' `fi_getinfo_test` fails an info
//!   whose tx/rx caps contain them.
//! * Every entry has a `src_addr` (fabtests check it even without node,
//!   service or FI_SOURCE, as util providers do). When no named source exists
//!   it is a wildcard: the shm address with token [`SHM_ANY_TOKEN`] (0, which
//!   `shm_token_for`/`shm_token_random` never produce) or `0.0.0.0:0` /
//!   `[::]:0` for tcp. An endpoint opened with a wildcard picks a fresh
//!   random token / any interface and an ephemeral port. This includes
//!   FI_SOURCE with a node but no service: fabtests' `getinfo_src2` and
//!   `no_hints2` require a `src_addr` there.
//! * The locality rule applies to destination nodes only; an FI_SOURCE node
//!   names this host by definition.
//! * Requested caps (`effective_caps`): a request naming only secondary
//!   caps gets the offered primary ones, a bare `FI_MSG`/`FI_TAGGED` both
//!   directions, one naming neither `FI_LOCAL_COMM` nor `FI_REMOTE_COMM` the
//!   offered locality (`fi_getinfo(3)`), `FI_SOURCE_ERR` brings `FI_SOURCE`.
//!   Non-requested secondary caps are not added. A direction the request
//!   excludes (`FI_MSG | FI_RECV`) leaves the other attr's caps empty.
//! * Without FI_SOURCE, tcp's `src_addr` is the local address the kernel
//!   would route to `dest_addr` from, port 0 (util's `ofi_get_src_addr`);
//!   shm's is the wildcard.
//! * `FI_SOURCE` with neither node nor service is `-FI_EINVAL`
//!   (`fi_getinfo(3)`: "either the node and/or service parameter must be
//!   non-NULL"), as in util.
//! * A destination `node` is local when one of its addresses is loopback,
//!   unspecified, or can be bound on this host. A node that does not resolve
//!   is not local (shm is skipped; tcp cannot resolve it either → ENODATA).
//! * `node` may also be an address string (`fi_rustfab_shm://<16 hex>`,
//!   `fi_sockaddr_in://a.b.c.d:port`, `fi_sockaddr_in6://[..]:port`); it is
//!   used as is, selects its transport, and `service` is ignored.
//! * Address family for tcp: `hints->addr_format` (IN or IN6) decides; else
//!   the family of an address in the hints; else IPv4 is preferred, IPv6
//!   used when the node only resolves to IPv6 (`-n ::1` works without
//!   `-a FI_SOCKADDR_IN6`). `FI_SOCKADDR` (any sockaddr) selects tcp too.
//! * In `FI_VERSION < 1.5` an unspecified mr_mode is answered with
//!   `FI_MR_SCALABLE`, the same semantics as modern mr_mode 0.
//! * Domain limits (cq_cnt, ep_cnt, mr_cnt, …) are checked, not echoed.
//! * op_flags accepted: tx `FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE |
//!   FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE` (a default `FI_INJECT`
//!   makes every send an inject: at most `inject_size` bytes), rx
//!   `FI_COMPLETION | FI_MULTI_RECV`.
//! * tclass: a quality-of-service hint. Every valid value (unspecified, a
//!   DSCP value `FI_TC_DSCP | 0..63`, or one of the six labels) is accepted
//!   and echoed, as util does (it does not check tclass at all; fabtests'
//!   pingpong asks for `FI_TC_LOW_LATENCY`); invalid encodings are refused.
//! * An unknown `FI_RUSTFAB_TRANSPORT` value is reported (FI_LOG_WARN) and
//!   treated as `auto`.

mod address;
mod hints;
mod offer;
mod request;

use address::*;
use hints::*;
pub(crate) use offer::*;
pub(crate) use request::*;

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::domain::TransportKind;
use crate::fi::attr::info_list_to_c;
use crate::fi::{self, cmem};
use crate::transport::addr::Addr;
use core::ffi::c_char;

// ---- Entry point ---------------------------------------------------------

/// `provider->getinfo`.
///
/// # Safety
/// The C arguments of `fi_provider.getinfo`: `node`/`service` NULL or
/// NUL-terminated, `hints` NULL or a valid `fi_info`, `info` a writable out
/// pointer (or NULL, which is refused).
pub(crate) unsafe fn getinfo_c(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> Result<()> {
    // SAFETY: `info` is NULL (refused) or writable per the contract. It is
    // cleared first so that no caller ever sees a stale pointer.
    unsafe { fi::write_out(info, core::ptr::null_mut()) }?;
    // SAFETY: NULL or NUL-terminated per the contract.
    let node = unsafe { cmem::opt_str(node) }?;
    // SAFETY: as above.
    let service = unsafe { cmem::opt_str(service) }?;
    let hints = if hints.is_null() {
        None
    } else {
        // SAFETY: non-NULL and valid per the contract.
        Some(unsafe { Info::from_c(hints) }?)
    };
    let q = Query {
        version,
        node,
        service,
        flags,
        hints: hints.as_ref(),
        transports: TransportChoice::from_param(),
    };
    let list = getinfo(&q)?;
    let head = info_list_to_c(&list)?;
    // SAFETY: checked non-NULL and writable above.
    unsafe { fi::write_out(info, head) }
}

/// fi_getinfo in Rust: every template that satisfies the request, altered
/// by the hints and with its addresses resolved, in [`TEMPLATES`] order.
/// `Err(NODATA)` when nothing matches.
/// libfabric's internal fi_getinfo flag with which a utility provider asks
/// for core providers to layer over (`OFI_CORE_PROV_ONLY` in the core's
/// `include/ofi.h`, the same bit from 1.17 to 2.6).
pub(crate) const OFI_CORE_PROV_ONLY: u64 = 1 << 59;

/// Whether the hints' `prov_name` names rustfab as one of its layers (the
/// core turns "rustfab;ofi_rxm" into "rustfab;^ofi_rxm" for the core query;
/// a "^name" excludes).
fn names_rustfab(hints: Option<&Info>) -> bool {
    hints
        .and_then(|h| h.fabric.as_ref())
        .and_then(|f| f.prov_name.as_deref())
        .is_some_and(|n| {
            n.split(';')
                .any(|p| p.eq_ignore_ascii_case(crate::core::fabric::FABRIC_NAME))
        })
}

pub(crate) fn getinfo(q: &Query) -> Result<Vec<Info>> {
    if q.flags & OFI_CORE_PROV_ONLY != 0 && !names_rustfab(q.hints) {
        // A utility provider (ofi_rxm) looking for a core provider to layer
        // over: only when the application named rustfab in its layering
        // request ("rustfab;ofi_rxm"). Native RDM entries are what users get.
        crate::base::log::log_info!(
            FI_LOG_CORE,
            "fi_getinfo: not offered for layering (ask for rustfab;ofi_rxm)"
        );
        return Err(Error::NODATA);
    }
    if q.source() && q.node.is_none() && q.service.is_none() {
        crate::base::log::log_info!(FI_LOG_CORE, "fi_getinfo: FI_SOURCE set, but no node or service");
        return Err(Error::INVAL);
    }
    let p = match Prepared::new(q) {
        Ok(p) => p,
        Err(why) => {
            crate::base::log::log_info_at!(FI_LOG_CORE, why.at, "fi_getinfo: {why}");
            return Err(Error::NODATA);
        }
    };
    let mut out = Vec::new();
    for t in TEMPLATES {
        match offer(q, &p, t) {
            Ok(info) => out.push(info),
            Err(why) => crate::base::log::log_info_at!(
                FI_LOG_CORE,
                why.at,
                "fi_getinfo: {} entry skipped: {why}",
                t.transport.domain_name(),
            ),
        }
    }
    if out.is_empty() {
        Err(Error::NODATA)
    } else {
        Ok(out)
    }
}

/// One template against the request.
fn offer(q: &Query, p: &Prepared, t: &Template) -> core::result::Result<Info, Skip> {
    let t = &t.at_version(q.version);
    transport_filter(q, p, t)?;
    let base = template_info(t, q.version);
    if let Some(h) = q.hints {
        check_hints(t, &base, h, q.version)?;
    }
    let mut info = alter(t, base, q.hints, q.version);
    let (src, dest) = match t.addressing() {
        TransportKind::Shm => shm_addresses(q, p),
        TransportKind::Tcp => tcp_addresses(q, p)?,
        TransportKind::Auto => auto_addresses(q, p)?,
    };
    info.addr_format = src.format();
    info.src_addr = Some(src.to_bytes());
    info.dest_addr = dest.map(|d| d.to_bytes());
    Ok(info)
}

fn transport_of(a: &Addr) -> TransportKind {
    match a {
        Addr::Shm(_) => TransportKind::Shm,
        Addr::Inet(_) => TransportKind::Tcp,
        Addr::Auto { .. } => TransportKind::Auto,
    }
}

/// Whether the request may use this template's transport at all: the
/// transport parameter, the address format and addresses in the hints, the
/// domain name, and the locality of a destination node.
fn transport_filter(q: &Query, p: &Prepared, t: &Template) -> Check {
    if !q.transports.allows(t.transport) {
        return Err(skip("FI_RUSTFAB_TRANSPORT excludes it"));
    }
    let format_ok = match p.format {
        FI_ADDR_STR => t.addressing() != TransportKind::Tcp,
        FI_SOCKADDR | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 => t.addressing() == TransportKind::Tcp,
        _ => true,
    };
    if !format_ok {
        return Err(skip("address format belongs to another transport"));
    }
    if p.addresses().any(|a| transport_of(a) != t.addressing()) {
        return Err(skip("an address in the request belongs to another transport"));
    }
    if let Some(name) = q.hints.and_then(|h| h.domain.as_ref()).and_then(|d| d.name.as_deref()) {
        if !name.eq_ignore_ascii_case(t.transport.domain_name()) {
            return Err(skip("domain name does not match"));
        }
    }
    // Host-local: the shm entries, and auto's datagrams (shm addresses).
    let local_only = t.transport == TransportKind::Shm || t.addressing() == TransportKind::Shm;
    if local_only && !q.source() && p.node_addr.is_none() {
        if let Some(node) = q.node {
            if !*p.node_local.get_or_init(|| node_is_local(node, q.numeric())) {
                return Err(skip("node is not this host (shm is host-local)"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod dgram_tests;
#[cfg(test)]
mod tests;
