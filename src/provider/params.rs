//! Runtime parameters. Each is declared to libfabric with `fi_param_define`
//! (so `fi_info -e` lists it with its help text) and read from the
//! environment as `FI_RUSTFAB_<NAME>`, exactly where `fi_param_get` would read
//! it. The table below is the only list; README "Parameters" mirrors it.

use crate::abi::libfabric::fi_param_define;
use crate::abi::*;
use std::ffi::CString;

pub(crate) struct Param {
    pub name: &'static str,
    pub ty: u32,
    pub help: &'static str,
}

pub(crate) const PARAMS: &[Param] = &[
    Param {
        name: "transport",
        ty: FI_PARAM_STRING,
        help: "Transport(s) fi_getinfo offers: all (auto, then shm, then tcp) or a comma-separated list of auto (shm to peers on this host, tcp to the others, one address), shm and tcp (default: all)",
    },
    Param {
        name: "iface",
        ty: FI_PARAM_STRING,
        help: "tcp: network interface whose address an endpoint bound to a wildcard address advertises (default: the one the route to the job's launcher leaves from, as mpirun, srun or hydra name it in the environment; else the default route's; else the first non-loopback interface that is up; else loopback)",
    },
    Param {
        name: "buffered_pool",
        ty: FI_PARAM_SIZE_T,
        help: "Bytes of provider buffers per endpoint with FI_BUFFERED_RECV; when the application holds that much unclaimed data, senders stall until it claims or discards (default: 8M, at least 256k)",
    },
    Param {
        name: "unexp_budget",
        ty: FI_PARAM_SIZE_T,
        help: "Bytes of unexpected (not yet matched) message data an endpoint holds; beyond it the sender is held back (its ring fills, its socket is not read) until a receive is posted (default: 8M)",
    },
    Param {
        name: "tcp_coalesce",
        ty: FI_PARAM_BOOL,
        help: "tcp: small sends posted back to back (after the first since the last progress call) wait for the next progress call and leave together in one system call; 0 writes every send at once (for applications that post a burst and then compute for long without calling into libfabric) (default: 1)",
    },
    Param {
        name: "tcp_max_conns",
        ty: FI_PARAM_SIZE_T,
        help: "tcp: established connections an endpoint keeps at most; beyond it a newcomer closes the connection idle for longest (none idle: the newcomer is refused), never one that carried traffic in the last second (default: 1024, at least 4)",
    },
    Param {
        name: "tcp_links",
        ty: FI_PARAM_STRING,
        help: "tcp: a comma-separated list of network interfaces whose addresses are extra links to peers that name some too (both sides list theirs in the same order; the k-th of one process joins the k-th of the other): the chunks of large (rendezvous) messages are spread over every link up, message by message; a link that fails costs throughput only, its chunks going again over the first link, and is dialed again every second; needs an endpoint bound to a wildcard address, at most 3 extra links (default: none, one link per peer)",
    },
    Param {
        name: "peer_budget",
        ty: FI_PARAM_SIZE_T,
        help: "tcp and shm: bytes of answers (acknowledgements, RMA answers, clear-to-send) one peer's requests may make an endpoint keep queued for it; beyond it the peer's records are left unread (its socket is not read, its ring not consumed) until it takes its answers (default: 4M, at least 16K; see docs/security.md)",
    },
    Param {
        name: "peer_budget_total",
        ty: FI_PARAM_SIZE_T,
        help: "tcp: bytes of such answers an endpoint keeps queued for all its peers together; beyond it a peer holding more than 16K of them is not read (default: 16M, at least 16K)",
    },
    Param {
        name: "peer_budget_timeout",
        ty: FI_PARAM_INT,
        help: "tcp and shm: milliseconds a peer may stay at its budget (not read because it leaves its answers unread) before it is cut off, its operations ending in error (default: 10000)",
    },
    Param {
        name: "auth_key",
        ty: FI_PARAM_STRING,
        help: "tcp: an authentication key (its bytes) for endpoints whose application gives none (domain_attr/ep_attr auth_key): peers must prove the same key in the handshake (HMAC-SHA256 challenge-response), connections from or to peers without it are refused (default: none; see docs/security.md)",
    },
    Param {
        name: "shm_cma",
        ty: FI_PARAM_BOOL,
        help: "shm: move large messages with one process_vm_readv copy when the kernel allows it; 0 forces the pipelined copy through the sender's ring (default: 1)",
    },
    Param {
        name: "shm_pull_batch",
        ty: FI_PARAM_SIZE_T,
        help: "shm: large messages from one sender matched in the same progress pass are copied with one process_vm_readv for up to this many bytes together (the call's fixed cost paid once per batch); 0 makes one call per message (default: 1M)",
    },
    Param {
        name: "shm_split_min",
        ty: FI_PARAM_SIZE_T,
        help: "shm: a large message of at least this many bytes is copied by both processes at once, the receiver reading the first half (process_vm_readv) while the sender writes the second (process_vm_writev); messages of one sender matched together that take this many bytes together are split by message (the sender writes the last, up to half); 0 turns this off, also for shm_split_lone_min (default: 256K)",
    },
    Param {
        name: "shm_split_lone_min",
        ty: FI_PARAM_SIZE_T,
        help: "shm: a large message that is the only one of its sender matched in a progress pass (nothing to pull together with it, as in a ping-pong) is split as shm_split_min describes from this many bytes; 0: only from shm_split_min (default: 16K)",
    },
    Param {
        name: "shm_ring_cells",
        ty: FI_PARAM_SIZE_T,
        help: "shm: cells of 64 bytes per ring of this endpoint's shared memory, one ring per peer sending to it: a power of two from 2048 (128 KiB) to 65536; from 16384 (1 MiB) a large message's cells are rewritten only after the receiver's cache let them go (small messages keep a 128 KiB lap), and lone large messages up to shm_stream_lone_max are streamed through the ring instead of copied with process_vm_readv (faster where both processes reuse their buffers, as MPI ping-pongs do; costs up to the ring's size of /dev/shm per busy peer) (default: 16384 where /dev/shm has 4 GiB free, else 2048)",
    },
    Param {
        name: "shm_stream_lone_max",
        ty: FI_PARAM_SIZE_T,
        help: "shm: with shm_ring_cells of 16384 or more, a large message that is the only one of its sender matched in a progress pass is streamed through the ring up to this many bytes; 0: never (default: 256K)",
    },
    Param {
        name: "shm_close_wait",
        ty: FI_PARAM_INT,
        help: "shm: milliseconds fi_close of an endpoint waits at most for peers still writing into its buffers (the sender's half of a split receive, the target of an RMA read); a dead or closed peer ends the wait at once; 0: no wait (default: 500)",
    },
];

/// Declares every parameter. Called once from `fi_prov_ini`.
///
/// # Safety
/// `prov` must be rustfab's registered provider descriptor.
pub(crate) unsafe fn define_all(prov: *const fi_provider) {
    for p in PARAMS {
        let name = CString::new(p.name).unwrap_or_default();
        let help = CString::new(p.help).unwrap_or_default();
        // SAFETY: `prov` is our static provider; the strings are
        // NUL-terminated and "%s" consumes the one vararg. libfabric copies
        // both strings.
        unsafe { fi_param_define(prov, name.as_ptr(), p.ty, c"%s".as_ptr(), help.as_ptr()) };
    }
}

/// Every parameter's value (defaults where unset or not understood). A
/// value that is not understood, or that is replaced or clamped, warns once
/// per process (naming the parameter, the value given and the value used);
/// the values in effect are logged at FI_LOG_INFO the first time they are
/// read and whenever they change (fi_getinfo and every fabric open read
/// them).
pub(crate) fn settings() -> crate::core::settings::Settings {
    let d = crate::core::settings::Settings::default();
    let shm_free = crate::sys::shm::free_bytes();
    let ring_cells = crate::core::settings::default_ring_cells(shm_free);
    let s = crate::core::settings::Settings {
        unexp_budget: get_size("unexp_budget", d.unexp_budget),
        buffered_pool: at_least(
            "buffered_pool",
            crate::core::engine::buffered::MIN_POOL,
            d.buffered_pool,
        ),
        shm_cma: get_bool("shm_cma", d.shm_cma),
        shm_pull_batch: get_size("shm_pull_batch", d.shm_pull_batch),
        shm_split_min: get_size("shm_split_min", d.shm_split_min),
        shm_split_lone_min: get_size("shm_split_lone_min", d.shm_split_lone_min),
        shm_ring_cells: ring_cells_param(ring_cells),
        shm_stream_lone_max: get_size("shm_stream_lone_max", d.shm_stream_lone_max),
        shm_close_wait: std::time::Duration::from_millis(get_millis(
            "shm_close_wait",
            d.shm_close_wait.as_millis() as u64,
        )),
        tcp: crate::transport::tcp::TcpSettings {
            iface: get_str("iface"),
            coalesce: get_bool("tcp_coalesce", d.tcp.coalesce),
            max_conns: at_least("tcp_max_conns", crate::transport::tcp::MAX_CONNS_MIN, d.tcp.max_conns),
            auth_key: get_str("auth_key").map(|k| crate::transport::tcp::AuthKey(k.into_bytes())),
            route_hints: launcher_addresses(|v| std::env::var(v).ok()),
            links: get_str("tcp_links").map_or_else(Vec::new, |v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect()
            }),
            budget: crate::transport::tcp::PeerBudget {
                per_peer: at_least(
                    "peer_budget",
                    crate::transport::tcp::BUDGET_FLOOR,
                    d.tcp.budget.per_peer,
                ),
                total: at_least(
                    "peer_budget_total",
                    crate::transport::tcp::BUDGET_FLOOR,
                    d.tcp.budget.total,
                ),
                timeout: std::time::Duration::from_millis(get_millis(
                    "peer_budget_timeout",
                    d.tcp.budget.timeout.as_millis() as u64,
                )),
            },
        },
    };
    show_once(&in_effect(&s, shm_free));
    s
}

/// The addresses the job's launcher was started from, as a rank's
/// environment gives them: Open MPI 4's `OMPI_MCA_orte_hnp_uri`
/// ("jobid;tcp://a,b:port;tcp6://[x]:port": mpirun's addresses), Slurm's
/// `SLURM_LAUNCH_NODE_IPADDR` (where srun ran), MPICH hydra's `PMI_PORT`
/// ("host:port", numeric hosts only: no name lookup here). A TCP endpoint
/// bound to a wildcard advertises the address its route to them leaves
/// from (`transport::tcp::advertised_addr_with`).
fn launcher_addresses(var: impl Fn(&str) -> Option<String>) -> Vec<std::net::IpAddr> {
    use std::net::IpAddr;
    let ip = |s: &str| {
        s.trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok()
    };
    let mut out = Vec::new();
    if let Some(uri) = var("OMPI_MCA_orte_hnp_uri") {
        for part in uri.split(';') {
            let Some(rest) = part.strip_prefix("tcp://").or_else(|| part.strip_prefix("tcp6://")) else {
                continue;
            };
            let hosts = rest.rsplit_once(':').map_or(rest, |(h, _port)| h);
            out.extend(hosts.split(',').filter_map(ip));
        }
    }
    if let Some(a) = var("SLURM_LAUNCH_NODE_IPADDR").as_deref().and_then(ip) {
        out.push(a);
    }
    if let Some(p) = var("PMI_PORT") {
        if let Some(a) = p.rsplit_once(':').and_then(|(h, _port)| ip(h)) {
            out.push(a);
        }
    }
    out.dedup();
    out
}

/// A size parameter with a floor: a value below it is raised to it, with a
/// warning.
#[track_caller]
fn at_least(name: &str, min: usize, default: usize) -> usize {
    let v = get_size(name, default);
    if v < min {
        warn_once(
            core::panic::Location::caller(),
            format!("{}={v} is below its minimum; using {min}", env_name(name)),
        );
    }
    v.max(min)
}

/// `SHM_RING_CELLS`: a power of two from 2048 to 65536; anything else is
/// replaced by the default for this host, with a warning.
#[track_caller]
fn ring_cells_param(default: usize) -> usize {
    let v = get_size("shm_ring_cells", default);
    if crate::transport::shm::segment::ring_cells_ok(v) {
        return v;
    }
    warn_once(
        core::panic::Location::caller(),
        format!(
            "{}={v} is not a power of two from 2048 to 65536; using {default}",
            env_name("shm_ring_cells")
        ),
    );
    default
}

/// The values in effect, one line: every parameter, `*` after those the
/// environment set.
fn in_effect(s: &crate::core::settings::Settings, shm_free: u64) -> String {
    let set = |name: &str| if get_str(name).is_some() { "*" } else { "" };
    let mut line = String::from("settings in effect (* = from the environment):");
    let mut add = |name: &str, value: &dyn core::fmt::Display| {
        line.push_str(&format!(" {}={value}{}", env_name(name), set(name)));
    };
    add("transport", &get_str("transport").unwrap_or_else(|| "all".into()));
    add(
        "iface",
        &s.tcp
            .iface
            .as_deref()
            .unwrap_or("(the route to the launcher, else the default route)"),
    );
    add("buffered_pool", &s.buffered_pool);
    add("unexp_budget", &s.unexp_budget);
    add("tcp_coalesce", &u8::from(s.tcp.coalesce));
    add("tcp_max_conns", &s.tcp.max_conns);
    add(
        "tcp_links",
        &if s.tcp.links.is_empty() {
            "(none)".to_string()
        } else {
            s.tcp.links.join(",")
        },
    );
    add("auth_key", &if s.tcp.auth_key.is_some() { "(set)" } else { "(none)" });
    add("shm_cma", &u8::from(s.shm_cma));
    add("shm_pull_batch", &s.shm_pull_batch);
    add("shm_split_min", &s.shm_split_min);
    add("shm_split_lone_min", &s.shm_split_lone_min);
    add(
        "shm_ring_cells",
        &format_args!("{} (/dev/shm has {} MiB free)", s.shm_ring_cells, shm_free >> 20),
    );
    add("shm_stream_lone_max", &s.shm_stream_lone_max);
    add("shm_close_wait", &format_args!("{}ms", s.shm_close_wait.as_millis()));
    add("peer_budget", &s.tcp.budget.per_peer);
    add("peer_budget_total", &s.tcp.budget.total);
    add(
        "peer_budget_timeout",
        &format_args!("{}ms", s.tcp.budget.timeout.as_millis()),
    );
    line
}

/// The last settings line logged in this process.
static SHOWN: parking_lot::Mutex<String> = parking_lot::Mutex::new(String::new());

/// Logs `line` at FI_LOG_INFO unless it is the one logged last.
fn show_once(line: &str) {
    let mut shown = SHOWN.lock();
    if *shown != line {
        crate::base::log::log_info!(FI_LOG_CORE, "{line}");
        line.clone_into(&mut shown);
    }
}

/// The warnings given in this process: each is given once.
static WARNED: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());

/// Warns (FI_LOG_WARN, attributed to `at`) unless this very warning was
/// given before in this process.
pub(crate) fn warn_once(at: &'static core::panic::Location<'static>, text: String) {
    let mut warned = WARNED.lock();
    if !warned.contains(&text) {
        crate::base::log::log_warn_at!(FI_LOG_CORE, at, "{text}");
        warned.push(text);
    }
}

fn env_name(name: &str) -> String {
    format!("FI_RUSTFAB_{}", name.to_ascii_uppercase())
}

/// The parameter's string value, if set (and not empty).
pub(crate) fn get_str(name: &str) -> Option<String> {
    std::env::var(env_name(name)).ok().filter(|s| !s.is_empty())
}

/// Boolean parameter: 1/0, true/false, yes/no, on/off (libfabric's
/// spellings). Anything else is reported and reads as `default`.
#[track_caller]
pub(crate) fn get_bool(name: &str, default: bool) -> bool {
    let Some(s) = get_str(name) else { return default };
    // A match, not a closure: the warning names our caller's line.
    match parse_bool(&s) {
        Some(v) => v,
        None => {
            bad_value(name, &s, "a boolean (1/0, true/false, yes/no, on/off)", &default);
            default
        }
    }
}

/// Size parameter (decimal, with optional k/m/g suffix). Anything else is
/// reported and reads as `default`.
#[track_caller]
pub(crate) fn get_size(name: &str, default: usize) -> usize {
    let Some(s) = get_str(name) else { return default };
    match parse_size(&s) {
        Some(v) => v,
        None => {
            bad_value(name, &s, "a size (a number with an optional k, m or g)", &default);
            default
        }
    }
}

/// Milliseconds parameter (declared `FI_PARAM_INT`: a plain non-negative
/// decimal, no suffix). Anything else is reported and reads as `default`.
#[track_caller]
pub(crate) fn get_millis(name: &str, default: u64) -> u64 {
    let Some(s) = get_str(name) else { return default };
    match parse_millis(&s) {
        Some(v) => v,
        None => {
            bad_value(name, &s, "a number of milliseconds (0 or more, no suffix)", &default);
            default
        }
    }
}

/// Warns (once per process, through fi_log) that a parameter's value was
/// not understood, naming the caller's line.
#[track_caller]
pub(crate) fn bad_value(name: &str, value: &str, expected: &str, default: &dyn core::fmt::Display) {
    warn_once(
        core::panic::Location::caller(),
        format!(
            "{}={value:?} is not {expected}; using the default ({default})",
            env_name(name)
        ),
    );
}

/// Parses libfabric's boolean spellings.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Some(true),
        "0" | "false" | "no" | "off" | "n" => Some(false),
        _ => None,
    }
}

/// Parses "123", "64k", "4M", "1g".
pub(crate) fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()?.to_ascii_lowercase() {
        'k' => (&s[..s.len() - 1], 1usize << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// Parses a non-negative decimal integer ("500", " 0 "); no sign, no
/// suffix (an `FI_PARAM_INT` as `fi_info -e` describes it: "1k" is refused,
/// not read as 1,024).
pub(crate) fn parse_millis(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("3"), Some(3));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_bool(" On"), Some(true));
        assert_eq!(parse_bool("n"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn launcher_addresses_from_open_mpi_slurm_and_hydra() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |v: &str| pairs.iter().find(|(k, _)| *k == v).map(|(_, x)| x.to_string())
        };
        let ips = |l: &[&str]| {
            l.iter()
                .map(|s| s.parse::<std::net::IpAddr>().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            launcher_addresses(env(&[(
                "OMPI_MCA_orte_hnp_uri",
                "1938292736.0;tcp://192.0.2.2,10.0.0.1:40135;tcp6://[fd00::2]:43267"
            )])),
            ips(&["192.0.2.2", "10.0.0.1", "fd00::2"])
        );
        assert_eq!(
            launcher_addresses(env(&[
                ("SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3"),
                ("PMI_PORT", "10.1.2.4:5555")
            ])),
            ips(&["10.1.2.3", "10.1.2.4"])
        );
        // Names are not looked up; garbage is ignored.
        assert!(launcher_addresses(env(&[
            ("PMI_PORT", "node01:5555"),
            ("OMPI_MCA_orte_hnp_uri", "x;tcp://;y")
        ]))
        .is_empty());
        assert!(launcher_addresses(env(&[])).is_empty());
    }

    /// `shm_close_wait` is an `FI_PARAM_INT`: no size suffix, no sign.
    #[test]
    fn millis_parse_as_plain_integers() {
        assert_eq!(parse_millis("500"), Some(500));
        assert_eq!(parse_millis(" 0 "), Some(0));
        assert_eq!(parse_millis("1k"), None);
        assert_eq!(parse_millis("-5"), None);
        assert_eq!(parse_millis("+5"), None);
        assert_eq!(parse_millis(""), None);
        assert_eq!(parse_millis("99999999999999999999999"), None);
    }
}
