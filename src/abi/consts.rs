//! Constants of libfabric 1.17 that rustfab uses. Bit 59 (and others) mean
//! different things in different fields, so flags are plain `u64` constants
//! grouped by the field they belong to, never one global bitflags type.

use super::layout::abi_consts;

abi_consts! { const_values;
    FI_MAJOR_VERSION: u32 = 1;
    FI_MINOR_VERSION: u32 = 17;
    FI_NAME_MAX: usize = 64;
    FI_PATH_MAX: usize = 256;

    // ---- caps / op flags (fabric.h) ----
    FI_MSG: u64 = 1 << 1;
    FI_RMA: u64 = 1 << 2;
    FI_TAGGED: u64 = 1 << 3;
    FI_ATOMIC: u64 = 1 << 4;
    FI_MULTICAST: u64 = 1 << 5;
    FI_COLLECTIVE: u64 = 1 << 6;
    FI_READ: u64 = 1 << 8;
    FI_WRITE: u64 = 1 << 9;
    FI_RECV: u64 = 1 << 10;
    FI_SEND: u64 = 1 << 11;
    FI_TRANSMIT: u64 = 1 << 11;
    FI_REMOTE_READ: u64 = 1 << 12;
    FI_REMOTE_WRITE: u64 = 1 << 13;
    FI_MULTI_RECV: u64 = 1 << 16;
    FI_REMOTE_CQ_DATA: u64 = 1 << 17;
    FI_MORE: u64 = 1 << 18;
    FI_PEEK: u64 = 1 << 19;
    FI_TRIGGER: u64 = 1 << 20;
    FI_FENCE: u64 = 1 << 21;
    FI_PRIORITY: u64 = 1 << 22;
    FI_COMPLETION: u64 = 1 << 24;
    FI_INJECT: u64 = 1 << 25;
    FI_INJECT_COMPLETE: u64 = 1 << 26;
    FI_TRANSMIT_COMPLETE: u64 = 1 << 27;
    FI_DELIVERY_COMPLETE: u64 = 1 << 28;
    FI_AFFINITY: u64 = 1 << 29;
    FI_COMMIT_COMPLETE: u64 = 1 << 30;
    FI_MATCH_COMPLETE: u64 = 1 << 31;
    FI_PEER_TRANSFER: u64 = 1 << 36;
    FI_AV_USER_ID: u64 = 1 << 41;
    FI_PEER: u64 = 1 << 43;
    FI_XPU_TRIGGER: u64 = 1 << 44;
    FI_HMEM: u64 = 1 << 47;
    FI_VARIABLE_MSG: u64 = 1 << 48;
    FI_RMA_PMEM: u64 = 1 << 49;
    FI_SOURCE_ERR: u64 = 1 << 50;
    FI_LOCAL_COMM: u64 = 1 << 51;
    FI_REMOTE_COMM: u64 = 1 << 52;
    FI_SHARED_AV: u64 = 1 << 53;
    FI_PROV_ATTR_ONLY: u64 = 1 << 54;
    FI_NUMERICHOST: u64 = 1 << 55;
    FI_RMA_EVENT: u64 = 1 << 56;
    FI_SOURCE: u64 = 1 << 57;
    FI_NAMED_RX_CTX: u64 = 1 << 58;
    FI_DIRECTED_RECV: u64 = 1 << 59;
    FI_CLAIM: u64 = 1 << 59;
    FI_DISCARD: u64 = 1 << 58;
    FI_SELECTIVE_COMPLETION: u64 = 1 << 59;
    FI_SYMMETRIC: u64 = 1 << 59;
    FI_SYNC_ERR: u64 = 1 << 58;
    FI_UNIVERSE: u64 = 1 << 57;
    FI_REG_MR: u64 = 1 << 59;

    // ---- mode bits ----
    FI_CONTEXT: u64 = 1 << 59;
    FI_MSG_PREFIX: u64 = 1 << 58;
    FI_ASYNC_IOV: u64 = 1 << 57;
    FI_RX_CQ_DATA: u64 = 1 << 56;
    FI_LOCAL_MR: u64 = 1 << 55;
    FI_NOTIFY_FLAGS_ONLY: u64 = 1 << 54;
    FI_RESTRICTED_COMP: u64 = 1 << 53;
    FI_CONTEXT2: u64 = 1 << 52;
    FI_BUFFERED_RECV: u64 = 1 << 51;

    // ---- address formats ----
    FI_FORMAT_UNSPEC: u32 = 0;
    FI_SOCKADDR: u32 = 1;
    FI_SOCKADDR_IN: u32 = 2;
    FI_SOCKADDR_IN6: u32 = 3;
    FI_SOCKADDR_IB: u32 = 4;
    FI_ADDR_PSMX: u32 = 5;
    FI_ADDR_STR: u32 = 9;
    FI_ADDR_UNSPEC: u64 = u64::MAX;
    FI_ADDR_NOTAVAIL: u64 = u64::MAX;
    FI_KEY_NOTAVAIL: u64 = u64::MAX;
    FI_SHARED_CONTEXT: usize = usize::MAX;

    // ---- av types, mr modes ----
    FI_AV_UNSPEC: u32 = 0;
    FI_AV_MAP: u32 = 1;
    FI_AV_TABLE: u32 = 2;
    FI_MR_UNSPEC: i32 = 0;
    FI_MR_BASIC: i32 = 1;
    FI_MR_SCALABLE: i32 = 2;
    FI_MR_LOCAL: i32 = 1 << 2;
    FI_MR_RAW: i32 = 1 << 3;
    FI_MR_VIRT_ADDR: i32 = 1 << 4;
    FI_MR_ALLOCATED: i32 = 1 << 5;
    FI_MR_PROV_KEY: i32 = 1 << 6;
    FI_MR_MMU_NOTIFY: i32 = 1 << 7;
    FI_MR_RMA_EVENT: i32 = 1 << 8;
    FI_MR_ENDPOINT: i32 = 1 << 9;
    FI_MR_HMEM: i32 = 1 << 10;
    FI_MR_COLLECTIVE: i32 = 1 << 11;
    FI_HMEM_SYSTEM: u32 = 0;

    // ---- progress, threading, resource management ----
    FI_PROGRESS_UNSPEC: u32 = 0;
    FI_PROGRESS_AUTO: u32 = 1;
    FI_PROGRESS_MANUAL: u32 = 2;
    FI_THREAD_UNSPEC: u32 = 0;
    FI_THREAD_SAFE: u32 = 1;
    FI_THREAD_FID: u32 = 2;
    FI_THREAD_DOMAIN: u32 = 3;
    FI_THREAD_COMPLETION: u32 = 4;
    FI_THREAD_ENDPOINT: u32 = 5;
    FI_RM_UNSPEC: u32 = 0;
    FI_RM_DISABLED: u32 = 1;
    FI_RM_ENABLED: u32 = 2;

    // ---- ordering ----
    FI_ORDER_NONE: u64 = 0;
    FI_ORDER_RAR: u64 = 1 << 0;
    FI_ORDER_RAW: u64 = 1 << 1;
    FI_ORDER_RAS: u64 = 1 << 2;
    FI_ORDER_WAR: u64 = 1 << 3;
    FI_ORDER_WAW: u64 = 1 << 4;
    FI_ORDER_WAS: u64 = 1 << 5;
    FI_ORDER_SAR: u64 = 1 << 6;
    FI_ORDER_SAW: u64 = 1 << 7;
    FI_ORDER_SAS: u64 = 1 << 8;
    FI_ORDER_STRICT: u64 = 0x1FF;
    FI_ORDER_DATA: u64 = 1 << 16;

    // ---- endpoint types, protocols ----
    FI_EP_UNSPEC: u32 = 0;
    FI_EP_MSG: u32 = 1;
    FI_EP_DGRAM: u32 = 2;
    FI_EP_RDM: u32 = 3;
    FI_EP_SOCK_STREAM: u32 = 4;
    FI_EP_SOCK_DGRAM: u32 = 5;
    FI_PROTO_UNSPEC: u32 = 0;
    FI_PROTO_SOCK_TCP: u32 = 6;
    FI_PROTO_SHM: u32 = 16;
    FI_TC_UNSPEC: u32 = 0;

    // ---- fid classes ----
    FI_CLASS_UNSPEC: usize = 0;
    FI_CLASS_FABRIC: usize = 1;
    FI_CLASS_DOMAIN: usize = 2;
    FI_CLASS_EP: usize = 3;
    FI_CLASS_SEP: usize = 4;
    FI_CLASS_RX_CTX: usize = 5;
    FI_CLASS_SRX_CTX: usize = 6;
    FI_CLASS_TX_CTX: usize = 7;
    FI_CLASS_STX_CTX: usize = 8;
    FI_CLASS_PEP: usize = 9;
    FI_CLASS_INTERFACE: usize = 10;
    FI_CLASS_AV: usize = 11;
    FI_CLASS_MR: usize = 12;
    FI_CLASS_EQ: usize = 13;
    FI_CLASS_CQ: usize = 14;
    FI_CLASS_CNTR: usize = 15;
    FI_CLASS_WAIT: usize = 16;
    FI_CLASS_POLL: usize = 17;
    FI_CLASS_CONNREQ: usize = 18;
    FI_CLASS_MC: usize = 19;
    FI_CLASS_NIC: usize = 20;
    FI_CLASS_AV_SET: usize = 21;

    // ---- fi_control commands ----
    FI_GETFIDFLAG: i32 = 0;
    FI_SETFIDFLAG: i32 = 1;
    FI_GETOPSFLAG: i32 = 2;
    FI_SETOPSFLAG: i32 = 3;
    FI_ALIAS: i32 = 4;
    FI_GETWAIT: i32 = 5;
    FI_ENABLE: i32 = 6;
    FI_BACKLOG: i32 = 7;
    FI_GET_RAW_MR: i32 = 8;
    FI_MAP_RAW_MR: i32 = 9;
    FI_UNMAP_KEY: i32 = 10;
    FI_REFRESH: i32 = 14;
    FI_DUP: i32 = 15;
    FI_GETWAITOBJ: i32 = 16;
    FI_GET_VAL: i32 = 17;
    FI_SET_VAL: i32 = 18;

    // ---- trigger events (fi_trigger.h) ----
    FI_TRIGGER_THRESHOLD: u32 = 0;
    FI_TRIGGER_XPU: u32 = 1;

    // ---- wait objects, EQ events, CQ formats ----
    FI_WAIT_NONE: u32 = 0;
    FI_WAIT_UNSPEC: u32 = 1;
    FI_WAIT_SET: u32 = 2;
    FI_WAIT_FD: u32 = 3;
    FI_WAIT_MUTEX_COND: u32 = 4;
    FI_WAIT_YIELD: u32 = 5;
    FI_WAIT_POLLFD: u32 = 6;
    FI_NOTIFY: u32 = 0;
    FI_CONNREQ: u32 = 1;
    FI_CONNECTED: u32 = 2;
    FI_SHUTDOWN: u32 = 3;
    FI_MR_COMPLETE: u32 = 4;
    FI_AV_COMPLETE: u32 = 5;
    FI_JOIN_COMPLETE: u32 = 6;
    FI_CQ_FORMAT_UNSPEC: u32 = 0;
    FI_CQ_FORMAT_CONTEXT: u32 = 1;
    FI_CQ_FORMAT_MSG: u32 = 2;
    FI_CQ_FORMAT_DATA: u32 = 3;
    FI_CQ_FORMAT_TAGGED: u32 = 4;
    FI_CQ_COND_NONE: u32 = 0;
    FI_CQ_COND_THRESHOLD: u32 = 1;
    FI_CNTR_EVENTS_COMP: u32 = 0;

    // ---- endpoint options ----
    FI_OPT_ENDPOINT: i32 = 0;
    FI_OPT_MIN_MULTI_RECV: i32 = 0;
    FI_OPT_CM_DATA_SIZE: i32 = 1;
    FI_OPT_BUFFERED_MIN: i32 = 2;
    FI_OPT_BUFFERED_LIMIT: i32 = 3;
    FI_OPT_SEND_BUF_SIZE: i32 = 4;
    FI_OPT_RECV_BUF_SIZE: i32 = 5;
    FI_OPT_TX_SIZE: i32 = 6;
    FI_OPT_RX_SIZE: i32 = 7;
    FI_OPT_FI_HMEM_P2P: i32 = 8;

    // ---- params and logging ----
    FI_PARAM_STRING: u32 = 0;
    FI_PARAM_INT: u32 = 1;
    FI_PARAM_BOOL: u32 = 2;
    FI_PARAM_SIZE_T: u32 = 3;
    FI_LOG_WARN: u32 = 0;
    FI_LOG_TRACE: u32 = 1;
    FI_LOG_INFO: u32 = 2;
    FI_LOG_DEBUG: u32 = 3;
    FI_LOG_CORE: u32 = 0;
    FI_LOG_FABRIC: u32 = 1;
    FI_LOG_DOMAIN: u32 = 2;
    FI_LOG_EP_CTRL: u32 = 3;
    FI_LOG_EP_DATA: u32 = 4;
    FI_LOG_AV: u32 = 5;
    FI_LOG_CQ: u32 = 6;
    FI_LOG_EQ: u32 = 7;
    FI_LOG_MR: u32 = 8;
    FI_LOG_CNTR: u32 = 9;
    FI_TYPE_INFO: u32 = 0;

    // ---- atomics (fi_atomic.h, fi_domain.h) ----
    FI_DATATYPE_LAST: u32 = 14;
    FI_ATOMIC_OP_LAST: u32 = 19;
    FI_FETCH_ATOMIC: u64 = 1 << 58;
    FI_COMPARE_ATOMIC: u64 = 1 << 59;

    // ---- errno values (returned negated) ----
    FI_SUCCESS: i32 = 0;
    FI_EPERM: i32 = 1;
    FI_ENOENT: i32 = 2;
    FI_EINTR: i32 = 4;
    FI_EIO: i32 = 5;
    FI_E2BIG: i32 = 7;
    FI_EBADF: i32 = 9;
    FI_EAGAIN: i32 = 11;
    FI_ENOMEM: i32 = 12;
    FI_EACCES: i32 = 13;
    FI_EFAULT: i32 = 14;
    FI_EBUSY: i32 = 16;
    FI_ENODEV: i32 = 19;
    FI_EINVAL: i32 = 22;
    FI_EMFILE: i32 = 24;
    FI_ENOSPC: i32 = 28;
    FI_ENOSYS: i32 = 38;
    FI_ENOMSG: i32 = 42;
    FI_ENODATA: i32 = 61;
    FI_EOVERFLOW: i32 = 75;
    FI_EMSGSIZE: i32 = 90;
    FI_ENOPROTOOPT: i32 = 92;
    FI_EOPNOTSUPP: i32 = 95;
    FI_EADDRINUSE: i32 = 98;
    FI_EADDRNOTAVAIL: i32 = 99;
    FI_ENETDOWN: i32 = 100;
    FI_ENETUNREACH: i32 = 101;
    FI_ECONNABORTED: i32 = 103;
    FI_ECONNRESET: i32 = 104;
    FI_ENOBUFS: i32 = 105;
    FI_EISCONN: i32 = 106;
    FI_ENOTCONN: i32 = 107;
    FI_ESHUTDOWN: i32 = 108;
    FI_ETIMEDOUT: i32 = 110;
    FI_ECONNREFUSED: i32 = 111;
    FI_EHOSTDOWN: i32 = 112;
    FI_EHOSTUNREACH: i32 = 113;
    FI_EALREADY: i32 = 114;
    FI_EINPROGRESS: i32 = 115;
    FI_ECANCELED: i32 = 125;
    FI_ENOKEY: i32 = 266;
    FI_EKEYREJECTED: i32 = 129;
    FI_EOTHER: i32 = 256;
    FI_ETOOSMALL: i32 = 257;
    FI_EOPBADSTATE: i32 = 258;
    FI_EAVAIL: i32 = 259;
    FI_EBADFLAGS: i32 = 260;
    FI_ENOEQ: i32 = 261;
    FI_EDOMAIN: i32 = 262;
    FI_ENOCQ: i32 = 263;
    FI_ECRC: i32 = 264;
    FI_ETRUNC: i32 = 265;
    FI_ENOAV: i32 = 267;
    FI_EOVERRUN: i32 = 268;
    FI_ENORX: i32 = 269;
}
