//! The hints: checked against an entry (util's `ofi_check_info`), and
//! the entry altered by them (util's `ofi_alter_info`).

use super::offer::*;
use super::request::*;
use crate::abi::*;
use crate::core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use crate::core::fabric::FABRIC_NAME;
use crate::provider::PROVIDER_VERSION;

// ---- Hint checks (util's ofi_check_info) ----------------------------------

#[track_caller]
pub(super) fn at_most(hint: usize, ours: usize, why: &'static str) -> Check {
    if hint > ours {
        Err(skip(why))
    } else {
        Ok(())
    }
}

#[track_caller]
pub(super) fn subset(hint: u64, ours: u64, why: &'static str) -> Check {
    if hint & !ours != 0 {
        Err(skip(why))
    } else {
        Ok(())
    }
}

pub(super) fn tclass_ok(tclass: u32) -> bool {
    const FI_TC_DSCP: u32 = 0x100;
    const FI_TC_NETWORK_CTRL: u32 = FI_TC_BEST_EFFORT + 5;
    tclass == FI_TC_UNSPEC
        || (tclass & !0xff == FI_TC_DSCP && tclass & 0xff <= 63)
        || (FI_TC_BEST_EFFORT..=FI_TC_NETWORK_CTRL).contains(&tclass)
}

/// util's `ofi_max_tag`: the largest tag a `mem_tag_format` can hold.
pub(super) fn max_tag(format: u64) -> u64 {
    if format == 0 {
        0
    } else {
        u64::MAX >> format.leading_zeros()
    }
}

/// Checks the hints against one template (`base` is its unaltered entry).
pub(super) fn check_hints(t: &Template, base: &Info, h: &Info, version: u32) -> Check {
    if let Some(e) = &h.ep {
        if e.ep_type != FI_EP_UNSPEC && e.ep_type != t.ep_type {
            return Err(skip("endpoint type not offered"));
        }
    }
    subset(h.caps, t.caps, "unsupported capabilities")?;
    // Our required mode bits must all be in the hints' mode.
    subset(REQUIRED_MODE, h.mode, "needed mode not set")?;
    if let Some(f) = &h.fabric {
        check_fabric(f)?;
    }
    if let (Some(d), Some(ours)) = (&h.domain, &base.domain) {
        check_domain(ours, d, version)?;
    }
    if let (Some(e), Some(ours)) = (&h.ep, &base.ep) {
        let keys = base.domain.as_ref().is_some_and(|d| d.max_ep_auth_key > 0);
        let ctx = base
            .domain
            .as_ref()
            .map_or((1, 1), |d| (d.max_ep_tx_ctx, d.max_ep_rx_ctx));
        check_ep(ours, e, h.caps, keys, ctx)?;
    }
    if let (Some(r), Some(ours)) = (&h.rx, &base.rx) {
        check_rx(ours, r)?;
    }
    if let (Some(x), Some(ours)) = (&h.tx, &base.tx) {
        check_tx(ours, x)?;
    }
    Ok(())
}

pub(super) fn check_fabric(f: &FabricAttr) -> Check {
    // prov_name is the core's business (docs/abi.md §1.8): never a reason here.
    if f.name.as_deref().is_some_and(|n| !n.eq_ignore_ascii_case(FABRIC_NAME)) {
        return Err(skip("fabric name does not match"));
    }
    if f.prov_version > PROVIDER_VERSION {
        return Err(skip("provider version too new"));
    }
    Ok(())
}

/// util's `ofi_check_mr_mode` for a provider whose template is
/// `FI_MR_BASIC | FI_MR_SCALABLE` and which requires no modern bit.
pub(super) fn check_mr_mode(version: u32, hint: i32) -> Check {
    const WHY: &str = "memory registration mode not supported";
    if version < fi_version(1, 5) {
        // The old enum: only these three values exist.
        return match hint {
            FI_MR_UNSPEC | FI_MR_BASIC | FI_MR_SCALABLE => Ok(()),
            _ => Err(skip(WHY)),
        };
    }
    if hint & FI_MR_BASIC != 0 {
        // "FI_MR_BASIC ... may not be combined with other mode bits".
        return if hint & !FI_MR_BASIC != 0 {
            Err(skip(WHY))
        } else {
            Ok(())
        };
    }
    if hint & FI_MR_SCALABLE != 0 {
        return if hint & !FI_MR_SCALABLE != 0 {
            Err(skip(WHY))
        } else {
            Ok(())
        };
    }
    // Modern bits: rustfab requires none of them, so any set will do.
    Ok(())
}

/// The mr_mode returned for a (validated) hint; `None` = no domain hints.
pub(super) fn alter_mr_mode(version: u32, hint: Option<i32>) -> i32 {
    let h = hint.unwrap_or(FI_MR_UNSPEC);
    if h & (FI_MR_BASIC | FI_MR_SCALABLE) != 0 {
        // Exactly BASIC or exactly SCALABLE: the application asked for
        // those semantics and must see them kept (docs/abi.md §4.1).
        h
    } else if version < fi_version(1, 5) {
        FI_MR_SCALABLE
    } else {
        0
    }
}

pub(super) fn check_domain(ours: &DomainAttr, d: &DomainAttr, version: u32) -> Check {
    // Names: compared by transport_filter.
    if d.threading > FI_THREAD_ENDPOINT {
        // FI_THREAD_SAFE satisfies every valid level; unknown values do not.
        return Err(skip("invalid threading model"));
    }
    if d.control_progress > FI_PROGRESS_MANUAL {
        return Err(skip("invalid control progress model"));
    }
    if d.data_progress > FI_PROGRESS_MANUAL {
        return Err(skip("invalid data progress model"));
    }
    if d.resource_mgmt > FI_RM_ENABLED {
        return Err(skip("invalid resource management model"));
    }
    if d.av_type > FI_AV_TABLE {
        return Err(skip("invalid AV type"));
    }
    check_mr_mode(version, d.mr_mode)?;
    at_most(d.mr_key_size, ours.mr_key_size, "MR key size too large")?;
    at_most(d.cq_data_size, ours.cq_data_size, "CQ data size too large")?;
    at_most(d.cq_cnt, ours.cq_cnt, "CQ count too large")?;
    at_most(d.ep_cnt, ours.ep_cnt, "endpoint count too large")?;
    at_most(d.tx_ctx_cnt, ours.tx_ctx_cnt, "tx context count too large")?;
    at_most(d.rx_ctx_cnt, ours.rx_ctx_cnt, "rx context count too large")?;
    at_most(d.max_ep_tx_ctx, ours.max_ep_tx_ctx, "max_ep_tx_ctx too large")?;
    at_most(d.max_ep_rx_ctx, ours.max_ep_rx_ctx, "max_ep_rx_ctx too large")?;
    at_most(
        d.max_ep_stx_ctx,
        ours.max_ep_stx_ctx,
        "shared tx contexts not supported",
    )?;
    at_most(
        d.max_ep_srx_ctx,
        ours.max_ep_srx_ctx,
        "shared rx contexts not supported",
    )?;
    at_most(d.cntr_cnt, ours.cntr_cnt, "counter count too large")?;
    at_most(d.mr_iov_limit, ours.mr_iov_limit, "MR iov limit too large")?;
    at_most(d.mr_cnt, ours.mr_cnt, "MR count too large")?;
    at_most(d.max_err_data, ours.max_err_data, "max err data too large")?;
    subset(d.caps, ours.caps, "requested domain caps not supported")?;
    subset(ours.mode, d.mode, "required domain mode missing")?;
    if d.auth_key.as_ref().is_some_and(|k| !k.is_empty()) && ours.max_ep_auth_key == 0 {
        return Err(skip("authorization keys not supported"));
    }
    if !tclass_ok(d.tclass) {
        return Err(skip("traffic class not supported"));
    }
    Ok(())
}

/// `max_ctx`: the domain's `max_ep_tx_ctx` and `max_ep_rx_ctx` (what a
/// scalable endpoint may have).
pub(super) fn check_ep(ours: &EpAttr, e: &EpAttr, caps: u64, keys: bool, max_ctx: (usize, usize)) -> Check {
    if e.protocol != FI_PROTO_UNSPEC && e.protocol != ours.protocol {
        return Err(skip("protocol not supported"));
    }
    if e.protocol_version > ours.protocol_version {
        return Err(skip("protocol version not supported"));
    }
    at_most(e.max_msg_size, ours.max_msg_size, "max message size too large")?;
    // Up to the domain's most contexts per (scalable) endpoint, or a shared
    // context (FI_SHARED_CONTEXT, core/shared_ctx.rs).
    if e.tx_ctx_cnt != FI_SHARED_CONTEXT {
        at_most(e.tx_ctx_cnt, ours.tx_ctx_cnt.max(max_ctx.0), "tx_ctx_cnt too large")?;
    }
    if e.rx_ctx_cnt != FI_SHARED_CONTEXT {
        at_most(e.rx_ctx_cnt, ours.rx_ctx_cnt.max(max_ctx.1), "rx_ctx_cnt too large")?;
    }
    if caps & (FI_RMA | FI_ATOMIC) != 0 {
        at_most(
            e.max_order_raw_size,
            ours.max_order_raw_size,
            "max_order_raw_size too large",
        )?;
        at_most(
            e.max_order_war_size,
            ours.max_order_war_size,
            "max_order_war_size too large",
        )?;
        at_most(
            e.max_order_waw_size,
            ours.max_order_waw_size,
            "max_order_waw_size too large",
        )?;
    }
    if e.auth_key.as_ref().is_some_and(|k| !k.is_empty()) && !keys {
        return Err(skip("authorization keys not supported"));
    }
    if (caps == 0 || caps & FI_TAGGED != 0) && max_tag(e.mem_tag_format) > max_tag(ours.mem_tag_format) {
        return Err(skip("tag format too wide"));
    }
    Ok(())
}

pub(super) fn check_tx(ours: &TxAttr, x: &TxAttr) -> Check {
    subset(x.caps & !IGNORED_TX_CAPS, ours.caps, "tx caps not supported")?;
    subset(x.op_flags, TX_OP_FLAGS, "tx op_flags not supported")?;
    subset(x.msg_order, ours.msg_order, "tx msg_order not supported")?;
    subset(x.comp_order, ours.comp_order, "tx comp_order not supported")?;
    at_most(x.inject_size, ours.inject_size, "inject size too large")?;
    at_most(x.size, ours.size, "tx size too large")?;
    at_most(x.iov_limit, ours.iov_limit, "tx iov_limit too large")?;
    at_most(x.rma_iov_limit, ours.rma_iov_limit, "rma_iov_limit too large")?;
    if !tclass_ok(x.tclass) {
        return Err(skip("traffic class not supported"));
    }
    Ok(())
}

pub(super) fn check_rx(ours: &RxAttr, r: &RxAttr) -> Check {
    subset(r.caps & !IGNORED_RX_CAPS, ours.caps, "rx caps not supported")?;
    subset(r.op_flags, RX_OP_FLAGS, "rx op_flags not supported")?;
    subset(r.msg_order, ours.msg_order, "rx msg_order not supported")?;
    subset(r.comp_order, ours.comp_order, "rx comp_order not supported")?;
    at_most(
        r.total_buffered_recv,
        ours.total_buffered_recv,
        "total_buffered_recv too large",
    )?;
    at_most(r.size, ours.size, "rx size too large")?;
    at_most(r.iov_limit, ours.iov_limit, "rx iov_limit too large")?;
    Ok(())
}

// ---- Alteration (util's ofi_alter_info) -----------------------------------

/// `FI_MSG`/`FI_TAGGED` without a direction mean both directions.
pub(super) fn with_directions(caps: u64) -> u64 {
    if caps & (FI_MSG | FI_TAGGED) != 0 && caps & MSG_DIRECTION_CAPS == 0 {
        caps | MSG_DIRECTION_CAPS
    } else {
        caps
    }
}

/// `FI_RMA` or `FI_ATOMIC` without a direction means every direction
/// offered (util's `ofi_get_caps`).
pub(super) fn with_rma_directions(caps: u64, offered: u64) -> u64 {
    if caps & REMOTE_MEMORY != 0 && caps & RMA_DIRECTION_CAPS == 0 {
        caps | (offered & RMA_DIRECTION_CAPS)
    } else {
        caps
    }
}

/// The RMA part of a tx (`side` = `FI_READ | FI_WRITE`, `RMA_TX_CAPS`) or
/// rx (`FI_REMOTE_READ | FI_REMOTE_WRITE`, `RMA_RX_CAPS`) attribute's caps:
/// present when the caps have `FI_RMA` or `FI_ATOMIC` and that side is
/// named or no direction is.
pub(super) fn rma_side(caps: u64, side: u64, mask: u64) -> u64 {
    if caps & REMOTE_MEMORY != 0 && (caps & side != 0 || caps & RMA_DIRECTION_CAPS == 0) {
        caps & mask
    } else {
        0
    }
}

/// Whether `caps` allow one direction (`FI_SEND` or `FI_RECV`): named, or no
/// direction named at all.
pub(super) fn allows(caps: u64, direction: u64) -> bool {
    caps & direction != 0 || caps & MSG_DIRECTION_CAPS == 0
}

/// The caps of the returned entry: everything offered when the application
/// asked for nothing, else what it asked for (already a subset of `offered`)
/// plus what that request implies: the offered primary caps when it named
/// only secondary ones, both directions for a bare `FI_MSG`/`FI_TAGGED`,
/// the offered locality when it named neither `FI_LOCAL_COMM` nor
/// `FI_REMOTE_COMM` (`fi_getinfo(3)`), and `FI_SOURCE` with `FI_SOURCE_ERR`.
///
/// `FI_TRIGGER` (fi_trigger(3)) is not implied by an empty request either:
/// it is reported to the applications that name it.
///
/// `FI_VARIABLE_MSG` is never implied (by an empty request or one naming
/// only secondary caps): it turns the receive side into buffered receives
/// (fi_msg(3) "Variable Length Messages"), so only an application that names
/// it gets it. From API 2.0 the same bit is `FI_EXACT_DIRECTED_RECV`, which
/// refuses any-source receives: never implied either. `FI_RMA` is implied by an empty request only (or by
/// `FI_RMA_EVENT`), `FI_ATOMIC` by an empty request only; either without a
/// direction gets every direction.
pub(super) fn effective_caps(offered: u64, requested: u64) -> u64 {
    // FI_VARIABLE_MSG and FI_NAMED_RX_CTX (scalable endpoints' named
    // receive contexts) come only when asked for.
    if requested == 0 {
        return offered & !(FI_VARIABLE_MSG | FI_TRIGGER | FI_NAMED_RX_CTX);
    }
    let mut c = requested;
    if c & PRIMARY_CAPS == 0 {
        // RMA comes only with a request that names it (or FI_RMA_EVENT):
        // the messaging primaries are what a bare secondary request meant
        // before RMA was offered, and still means.
        let rma = if c & FI_RMA_EVENT != 0 { FI_RMA } else { 0 };
        c |= offered & PRIMARY_CAPS & !(FI_VARIABLE_MSG | FI_NAMED_RX_CTX | REMOTE_MEMORY) | (offered & rma);
    }
    c = with_rma_directions(with_directions(c), offered) & (offered | requested);
    if c & COMM_CAPS == 0 {
        c |= offered & COMM_CAPS;
    }
    if c & FI_SOURCE_ERR != 0 {
        c |= offered & FI_SOURCE;
    }
    c
}

/// Narrows `base` (the template's entry) to the validated hints.
pub(super) fn alter(t: &Template, mut info: Info, hints: Option<&Info>, version: u32) -> Info {
    let requested = hints.map_or(0, |h| h.caps);
    info.caps = effective_caps(t.caps, requested);
    let ep_caps = with_directions(info.caps);
    info.mode = REQUIRED_MODE | (hints.map_or(0, |h| h.mode) & optional_mode(version));
    if let Some(h) = hints {
        info.handle = h.handle;
    }

    let hd = hints.and_then(|h| h.domain.as_ref());
    if let Some(d) = info.domain.as_mut() {
        d.mr_mode = alter_mr_mode(version, hd.map(|h| h.mr_mode));
        d.caps = (info.caps | hd.map_or(0, |h| h.caps)) & t.caps & DOMAIN_LEVEL_CAPS;
        if let Some(h) = hd {
            // Every valid level is satisfiable (FI_THREAD_SAFE underneath);
            // MPICH insists on getting FI_THREAD_DOMAIN back (docs/mpi.md §2).
            if h.threading != FI_THREAD_UNSPEC {
                d.threading = h.threading;
            }
            if h.control_progress != FI_PROGRESS_UNSPEC {
                d.control_progress = h.control_progress;
            }
            if h.data_progress != FI_PROGRESS_UNSPEC {
                d.data_progress = h.data_progress;
            }
            if h.resource_mgmt != FI_RM_UNSPEC {
                d.resource_mgmt = h.resource_mgmt;
            }
            if h.av_type != FI_AV_UNSPEC {
                d.av_type = h.av_type;
            }
            if h.tclass != FI_TC_UNSPEC {
                d.tclass = h.tclass;
            }
            if d.max_ep_auth_key > 0 && h.auth_key.as_ref().is_some_and(|k| !k.is_empty()) {
                d.auth_key = h.auth_key.clone();
            }
        }
    }

    // A scalable endpoint's contexts are offered to applications that ask
    // for them (FI_NAMED_RX_CTX, or more than one context in the endpoint or
    // domain attributes). Open MPI's btl ofi and MPICH open a scalable
    // endpoint whenever `max_ep_tx_ctx` > 1 and issue RMA on its contexts,
    // which carry messages only (docs/protocol.md, "Receive contexts").
    let he = hints.and_then(|h| h.ep.as_ref());
    let many = |n: usize| n > 1 && n != FI_SHARED_CONTEXT;
    let asks_contexts = requested & FI_NAMED_RX_CTX != 0
        || he.is_some_and(|e| many(e.tx_ctx_cnt) || many(e.rx_ctx_cnt))
        || hd.is_some_and(|d| d.max_ep_tx_ctx > 1 || d.max_ep_rx_ctx > 1);
    if let (Some(d), false) = (info.domain.as_mut(), asks_contexts) {
        d.max_ep_tx_ctx = d.max_ep_tx_ctx.min(1);
        d.max_ep_rx_ctx = d.max_ep_rx_ctx.min(1);
    }
    // Shared contexts likewise, to hints that ask for them
    // (FI_SHARED_CONTEXT in ep_attr, or max_ep_stx_ctx/max_ep_srx_ctx):
    // applications that do not ask see none (MPI libraries choose their
    // endpoint layout by these numbers).
    let asks_shared = he.is_some_and(|e| e.tx_ctx_cnt == FI_SHARED_CONTEXT || e.rx_ctx_cnt == FI_SHARED_CONTEXT)
        || hd.is_some_and(|d| d.max_ep_stx_ctx > 0 || d.max_ep_srx_ctx > 0);
    if let (Some(d), false) = (info.domain.as_mut(), asks_shared) {
        d.max_ep_stx_ctx = 0;
        d.max_ep_srx_ctx = 0;
    }

    if let (Some(e), Some(h)) = (info.ep.as_mut(), hints.and_then(|h| h.ep.as_ref())) {
        if h.tx_ctx_cnt != 0 {
            e.tx_ctx_cnt = h.tx_ctx_cnt;
        }
        if h.rx_ctx_cnt != 0 {
            e.rx_ctx_cnt = h.rx_ctx_cnt;
        }
        if h.auth_key.as_ref().is_some_and(|k| !k.is_empty()) {
            // Accepted by check_hints only where keys are supported.
            e.auth_key = h.auth_key.clone();
        }
    }

    let htx = hints.and_then(|h| h.tx.as_ref());
    if let Some(x) = info.tx.as_mut() {
        let asked = htx.map_or(0, |h| h.caps & !IGNORED_TX_CAPS);
        let caps = if asked != 0 {
            with_rma_directions(with_directions(asked), ep_caps) & ep_caps
        } else {
            ep_caps
        };
        let msg = if allows(caps, FI_SEND) {
            caps & TX_CAPS & !RMA_TX_CAPS
        } else {
            0
        };
        x.caps = msg | rma_side(caps, FI_READ | FI_WRITE, RMA_TX_CAPS);
        if let Some(h) = htx {
            x.op_flags = h.op_flags;
            if h.inject_size != 0 {
                x.inject_size = h.inject_size;
            }
            if h.size != 0 {
                x.size = h.size;
            }
            if h.iov_limit != 0 {
                x.iov_limit = h.iov_limit;
            }
            if h.rma_iov_limit != 0 {
                x.rma_iov_limit = h.rma_iov_limit;
            }
            if h.tclass != FI_TC_UNSPEC {
                x.tclass = h.tclass;
            }
        }
    }

    let hrx = hints.and_then(|h| h.rx.as_ref());
    if let Some(r) = info.rx.as_mut() {
        let asked = hrx.map_or(0, |h| h.caps & !IGNORED_RX_CAPS);
        let caps = if asked != 0 {
            with_rma_directions(with_directions(asked), ep_caps) & ep_caps
        } else {
            ep_caps
        };
        let msg = if allows(caps, FI_RECV) {
            caps & RX_CAPS & !RMA_RX_CAPS
        } else {
            0
        };
        r.caps = msg | rma_side(caps, FI_REMOTE_READ | FI_REMOTE_WRITE, RMA_RX_CAPS);
        r.mode = info.mode & FI_BUFFERED_RECV;
        if let Some(h) = hrx {
            r.op_flags = h.op_flags;
            r.total_buffered_recv = h.total_buffered_recv;
            if h.size != 0 {
                r.size = h.size;
            }
            if h.iov_limit != 0 {
                r.iov_limit = h.iov_limit;
            }
        }
    }
    crate::core::prefix::answer(hints.map_or(0, |h| h.mode), &mut info);
    info
}
