//! The endpoint calls' arguments as the C face hands them to the endpoint
//! core: what `fi_ep_bind` attaches ([`BindTarget`]), the option and
//! direction names of `fi_getopt`/`fi_setopt`/`fi_control`, a send or a
//! receive as the data calls describe it ([`SendOp`], [`RecvOp`]), and the
//! rules that turn an operation's flags into its effective flags
//! (`tx_flags`, `rx_flags`). A leaf: it uses nothing of `ep.rs`.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::av::Av;
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::engine::matching::IovList;
use crate::core::engine::Inner;
use crate::core::eq::Eq;
use std::sync::Arc;

const COMPLETION_LEVELS: u64 = FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE;
const SEND_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE
    | COMPLETION_LEVELS
    | FI_TRANSMIT
    | FI_MSG
    | FI_TAGGED
    | FI_COMMIT_COMPLETE;
const RECV_FLAGS: u64 = FI_COMPLETION | FI_MULTI_RECV | FI_MORE | FI_RECV | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA;
const TAGGED_RECV_FLAGS: u64 = RECV_FLAGS | FI_PEEK | FI_CLAIM | FI_DISCARD;

/// An object `fi_ep_bind` attaches to an endpoint.
pub(crate) enum BindTarget {
    Av(Arc<Av>),
    Cq(Arc<Cq>),
    Cntr(Arc<Cntr>),
    Eq(Arc<Eq>),
}

/// Which operational flags `fi_control(FI_GETOPSFLAG/FI_SETOPSFLAG)` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Transmit,
    Receive,
}

impl Direction {
    /// The direction the `FI_TRANSMIT`/`FI_RECV` bit of `flags` names
    /// (exactly one of them, else -FI_EINVAL).
    pub(crate) fn of_flags(flags: u64) -> Result<Direction> {
        match (flags & FI_TRANSMIT != 0, flags & FI_RECV != 0) {
            (true, false) => Ok(Direction::Transmit),
            (false, true) => Ok(Direction::Receive),
            _ => Err(Error::INVAL),
        }
    }
}

/// The endpoint options (`fi_getopt`/`fi_setopt`, level
/// `FI_OPT_ENDPOINT`) every endpoint has; each is a `size_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpOpt {
    MinMultiRecv,
    /// `FI_OPT_BUFFERED_LIMIT` (endpoints with buffered receives only).
    BufferedLimit,
    /// `FI_OPT_BUFFERED_MIN` (endpoints with buffered receives only).
    BufferedMin,
}

impl EpOpt {
    /// The option `name` denotes; -FI_ENOPROTOOPT for others.
    pub(crate) fn from_name(name: i32) -> Result<EpOpt> {
        match name {
            FI_OPT_MIN_MULTI_RECV => Ok(EpOpt::MinMultiRecv),
            FI_OPT_BUFFERED_LIMIT => Ok(EpOpt::BufferedLimit),
            FI_OPT_BUFFERED_MIN => Ok(EpOpt::BufferedMin),
            _ => Err(Error::NOPROTOOPT),
        }
    }

    pub(super) fn buffered_name(self) -> Option<i32> {
        match self {
            EpOpt::MinMultiRecv => None,
            EpOpt::BufferedLimit => Some(FI_OPT_BUFFERED_LIMIT),
            EpOpt::BufferedMin => Some(FI_OPT_BUFFERED_MIN),
        }
    }
}

/// How a send call asks for its buffer to be treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendMode {
    /// `fi_send` and friends: the buffer is the application's until the
    /// completion.
    Post,
    /// `fi_inject`/`fi_injectdata`: the buffer is reusable on return and
    /// no completion is generated.
    Inject,
}

/// A send as the C calls describe it.
pub(crate) struct SendOp {
    pub(crate) iov: IovList,
    pub(crate) dest: fi_addr_t,
    /// `Some(tag)` for the tagged calls.
    pub(crate) tag: Option<u64>,
    /// Remote CQ data (`fi_senddata`, `FI_REMOTE_CQ_DATA` on `fi_sendmsg`).
    pub(crate) data: Option<u64>,
    /// The flags of `fi_sendmsg`; `None`: the endpoint's default operation
    /// flags.
    pub(crate) flags: Option<u64>,
    pub(crate) context: usize,
    pub(crate) mode: SendMode,
}

impl SendOp {
    /// A send call with the endpoint's default flags.
    pub(crate) fn post(iov: IovList, dest: fi_addr_t, context: usize) -> SendOp {
        SendOp {
            iov,
            dest,
            tag: None,
            data: None,
            flags: None,
            context,
            mode: SendMode::Post,
        }
    }

    /// `fi_inject` and friends (no context: no completion).
    pub(crate) fn inject(iov: IovList, dest: fi_addr_t) -> SendOp {
        SendOp {
            mode: SendMode::Inject,
            ..SendOp::post(iov, dest, 0)
        }
    }

    /// The tagged form of the call.
    pub(crate) fn tagged(self, tag: u64) -> SendOp {
        SendOp { tag: Some(tag), ..self }
    }

    /// With remote CQ data (`fi_senddata` and friends).
    pub(crate) fn with_data(self, data: u64) -> SendOp {
        SendOp {
            data: Some(data),
            ..self
        }
    }
}

/// What a tagged receive matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TagMatch {
    pub(crate) tag: u64,
    pub(crate) ignore: u64,
}

/// A receive as the C calls describe it.
pub(crate) struct RecvOp {
    pub(crate) iov: IovList,
    pub(crate) src: fi_addr_t,
    /// `Some` for the tagged calls.
    pub(crate) tag: Option<TagMatch>,
    /// The flags of `fi_recvmsg`; `None`: the endpoint's default operation
    /// flags.
    pub(crate) flags: Option<u64>,
    pub(crate) context: usize,
}

impl RecvOp {
    /// A receive call with the endpoint's default flags.
    pub(crate) fn new(iov: IovList, src: fi_addr_t, context: usize) -> RecvOp {
        RecvOp {
            iov,
            src,
            tag: None,
            flags: None,
            context,
        }
    }

    /// The tagged form of the call.
    pub(crate) fn tagged(self, tag: u64, ignore: u64) -> RecvOp {
        RecvOp {
            tag: Some(TagMatch { tag, ignore }),
            ..self
        }
    }
}

/// The effective flags of a send: `explicit` ones are checked, and without
/// an explicit completion level the endpoint's default applies.
pub(super) fn tx_flags(defaults: u64, explicit: Option<u64>) -> Result<u64> {
    match explicit {
        None => Ok(defaults),
        Some(f) => {
            if f & !SEND_FLAGS != 0 {
                return Err(Error::BADFLAGS);
            }
            Ok(if f & COMPLETION_LEVELS == 0 {
                f | (defaults & COMPLETION_LEVELS)
            } else {
                f
            })
        }
    }
}

/// The effective flags of a receive.
pub(super) fn rx_flags(inner: &mut Inner, op: &RecvOp) -> Result<u64> {
    match op.flags {
        None => Ok(inner.config().rx_op_flags),
        Some(f) => {
            let valid = if op.tag.is_some() {
                TAGGED_RECV_FLAGS
            } else if f & (FI_CLAIM | FI_DISCARD) != 0 && inner.buffered_opts().is_some() {
                // fi_msg(3): FI_CLAIM/FI_DISCARD apply to endpoints with
                // FI_BUFFERED_RECV.
                RECV_FLAGS | FI_CLAIM | FI_DISCARD
            } else {
                RECV_FLAGS
            };
            if f & !valid != 0 {
                return Err(Error::BADFLAGS);
            }
            Ok(f)
        }
    }
}
