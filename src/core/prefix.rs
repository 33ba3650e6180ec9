//! `FI_MSG_PREFIX` (fi_getinfo(3)): when the application's hints allow it,
//! every send and receive buffer of a message or tagged call begins with
//! [`MSG_PREFIX_SIZE`] bytes that belong to the provider. rustfab puts
//! nothing there: a send skips them, a receive places its data after them,
//! and a receive's completion counts them in its `len` (fi_cq(3): "the len
//! also reflects the size of the prefix buffer").
//!
//! The endpoint's C face (`fi/prefix.rs`) has its own message and tagged
//! operation tables that strip the prefix before the common thunks run; the
//! engine adds [`msg_prefix`]'s size to receive completions
//! (`EpConfig::msg_prefix`, 0 on every other endpoint).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;

/// `ep_attr->msg_prefix_size` rustfab answers: a multiple of 8 as
/// fi_getinfo(3) requires, and one wire header (`proto::HDR_LEN`, a cache
/// line), so that the payload after the prefix keeps the 64-byte alignment
/// of a buffer the application aligned.
pub(crate) const MSG_PREFIX_SIZE: usize = 64;
const _: () = assert!(MSG_PREFIX_SIZE.is_multiple_of(8));
const _: () = assert!(MSG_PREFIX_SIZE == crate::transport::proto::HDR_LEN);

/// Whether fi_getinfo answers `FI_MSG_PREFIX` to hints whose mode has it:
/// not together with buffered receives (`FI_BUFFERED_RECV`, whose
/// completions point into provider buffers) nor with multi-receive buffers
/// (`FI_MULTI_RECV` in the caps or the receive op_flags), where each
/// message would need a prefix of its own inside the one buffer. Without the
/// bit nothing changes.
fn offered(hint_mode: u64, answered_mode: u64, caps: u64, rx_op_flags: u64) -> bool {
    hint_mode & FI_MSG_PREFIX != 0 && answered_mode & FI_BUFFERED_RECV == 0 && (caps | rx_op_flags) & FI_MULTI_RECV == 0
}

/// Answers `FI_MSG_PREFIX` in `info` (fi_getinfo's entry, otherwise
/// complete) when [`offered`] to hints whose mode is `hint_mode`: the mode
/// bit in `info`, its tx and rx attributes (where fabtests look) and
/// `msg_prefix_size`.
pub(crate) fn answer(hint_mode: u64, info: &mut Info) {
    let rx_op_flags = info.rx.as_ref().map_or(0, |r| r.op_flags);
    if !offered(hint_mode, info.mode, info.caps, rx_op_flags) {
        return;
    }
    info.mode |= FI_MSG_PREFIX;
    if let Some(t) = info.tx.as_mut() {
        t.mode |= FI_MSG_PREFIX;
    }
    if let Some(r) = info.rx.as_mut() {
        r.mode |= FI_MSG_PREFIX;
    }
    if let Some(e) = info.ep.as_mut() {
        e.msg_prefix_size = MSG_PREFIX_SIZE;
    }
}

/// The prefix size of an endpoint opened with `info`: 0 without
/// `FI_MSG_PREFIX` in its mode (or with a `msg_prefix_size` of 0), else
/// `msg_prefix_size`, which must be the one fi_getinfo answers
/// (-FI_EINVAL for any other size: the application's buffers are laid out
/// for what fi_getinfo told it).
pub(crate) fn msg_prefix(info: &Info) -> Result<usize> {
    let mode = info.mode | info.tx.as_ref().map_or(0, |t| t.mode) | info.rx.as_ref().map_or(0, |r| r.mode);
    let size = info.ep.as_ref().map_or(0, |e| e.msg_prefix_size);
    match (mode & FI_MSG_PREFIX != 0, size) {
        (false, _) | (true, 0) => Ok(0),
        (true, MSG_PREFIX_SIZE) => Ok(MSG_PREFIX_SIZE),
        _ => Err(Error::INVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::attr::{EpAttr, RxAttr, TxAttr};

    fn info(mode: u64, tx_mode: u64, rx_mode: u64, size: usize) -> Info {
        Info {
            mode,
            tx: Some(TxAttr {
                mode: tx_mode,
                ..Default::default()
            }),
            rx: Some(RxAttr {
                mode: rx_mode,
                ..Default::default()
            }),
            ep: Some(EpAttr {
                msg_prefix_size: size,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn endpoint_prefix_from_info() {
        assert_eq!(msg_prefix(&Info::default()).unwrap(), 0);
        assert_eq!(msg_prefix(&info(0, 0, 0, MSG_PREFIX_SIZE)).unwrap(), 0);
        assert_eq!(msg_prefix(&info(FI_MSG_PREFIX, 0, 0, 0)).unwrap(), 0);
        for (m, t, r) in [(FI_MSG_PREFIX, 0, 0), (0, FI_MSG_PREFIX, 0), (0, 0, FI_MSG_PREFIX)] {
            assert_eq!(msg_prefix(&info(m, t, r, MSG_PREFIX_SIZE)).unwrap(), MSG_PREFIX_SIZE);
        }
        for bad in [8, 16, 60, 128] {
            assert_eq!(msg_prefix(&info(FI_MSG_PREFIX, 0, 0, bad)).unwrap_err(), Error::INVAL);
        }
    }

    #[test]
    fn answered_in_mode_attrs_and_size() {
        let mut i = info(0, 0, 0, 0);
        i.caps = FI_MSG;
        answer(FI_CONTEXT | FI_MSG_PREFIX, &mut i);
        let mut want = info(FI_MSG_PREFIX, FI_MSG_PREFIX, FI_MSG_PREFIX, MSG_PREFIX_SIZE);
        want.caps = FI_MSG;
        assert_eq!(i, want);
        assert_eq!(msg_prefix(&i).unwrap(), MSG_PREFIX_SIZE);
        let mut i = info(0, 0, 0, 0);
        answer(FI_CONTEXT, &mut i);
        assert_eq!(i, info(0, 0, 0, 0));
    }

    #[test]
    fn offered_only_when_asked_and_compatible() {
        assert!(offered(FI_MSG_PREFIX | FI_CONTEXT, 0, FI_MSG | FI_TAGGED, 0));
        assert!(!offered(FI_CONTEXT, 0, FI_MSG, 0));
        assert!(!offered(FI_MSG_PREFIX, FI_BUFFERED_RECV, FI_MSG, 0));
        assert!(!offered(FI_MSG_PREFIX, 0, FI_MSG | FI_MULTI_RECV, 0));
        assert!(!offered(FI_MSG_PREFIX, 0, FI_MSG, FI_MULTI_RECV));
    }
}
