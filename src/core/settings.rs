//! What the environment sets (`FI_RUSTFAB_*`, read by the provider when a
//! fabric opens) as plain values; every object below the fabric reads them
//! from here, so nothing under the provider looks at the environment.

use crate::transport::tcp::TcpSettings;

/// `FI_RUSTFAB_SHM_PULL_BATCH`'s default (docs/shm.md, Large messages).
pub(crate) const DEFAULT_SHM_PULL_BATCH: usize = 1 << 20;

/// `FI_RUSTFAB_SHM_SPLIT_MIN`'s default (docs/shm.md, Large messages).
pub(crate) const DEFAULT_SHM_SPLIT_MIN: usize = 256 << 10;

/// `FI_RUSTFAB_SHM_SPLIT_LONE_MIN`'s default (docs/shm.md, Large messages).
pub(crate) const DEFAULT_SHM_SPLIT_LONE_MIN: usize = 16 << 10;

/// `FI_RUSTFAB_SHM_STREAM_LONE_MAX`'s default (docs/shm.md, Ring size).
pub(crate) const DEFAULT_SHM_STREAM_LONE_MAX: usize = 256 << 10;

/// Rings of at least this many cells (1 MiB) stream lone rendezvous
/// messages (`SHM_STREAM_LONE_MAX`): below it a cell is written again while
/// the consumer's cache still holds it, and streaming is slower than the
/// split pull (docs/performance-history.md "bigring").
pub(crate) const STREAM_RING_MIN: usize = LARGE_RING_CELLS;

/// `FI_RUSTFAB_SHM_RING_CELLS`'s default where /dev/shm has at least
/// `LARGE_RINGS_SHM_FREE` bytes free (docs/shm.md, Ring size): a cell is
/// rewritten a MiB later, after the consumer's cache let it go.
pub(crate) const LARGE_RING_CELLS: usize = 16384;

/// Bytes /dev/shm must have free for the large default rings: each busy
/// peer may make up to a MiB of an endpoint's segment resident (against
/// 128 KiB with the default rings), 64 endpoints with 64 busy peers each
/// 4 GiB. Where less is free (containers often give 64 MiB), the rings
/// keep 2048 cells.
pub(crate) const LARGE_RINGS_SHM_FREE: u64 = 4 << 30;

/// `FI_RUSTFAB_SHM_RING_CELLS`'s default given the bytes free in /dev/shm.
pub(crate) fn default_ring_cells(shm_free: u64) -> usize {
    if shm_free >= LARGE_RINGS_SHM_FREE {
        LARGE_RING_CELLS
    } else {
        crate::transport::shm::segment::NCELLS
    }
}

/// `FI_RUSTFAB_SHM_CLOSE_WAIT`'s default (docs/shm.md, Large messages).
pub(crate) const DEFAULT_SHM_CLOSE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Bytes of unexpected message data an endpoint holds (`UNEXP_BUDGET`).
    pub unexp_budget: usize,
    /// Bytes of provider buffers per endpoint with buffered receives
    /// (`BUFFERED_POOL`).
    pub buffered_pool: usize,
    /// Large shm messages by one `process_vm_readv` copy (`SHM_CMA`).
    pub shm_cma: bool,
    /// Bytes of rendezvous messages from one sender pulled with one
    /// `process_vm_readv` at most (`SHM_PULL_BATCH`; 0: one per message).
    pub shm_pull_batch: usize,
    /// Rendezvous messages of at least this many bytes are copied half by
    /// the receiver, half by the sender (`SHM_SPLIT_MIN`; 0: never).
    pub shm_split_min: usize,
    /// A rendezvous message that is the only one of its sender pulled in
    /// its progress pass is split from this many bytes (`SHM_SPLIT_LONE_MIN`;
    /// 0: only from `shm_split_min`; `shm_split_min` 0 turns both off).
    pub shm_split_lone_min: usize,
    /// Cells (64 bytes) per ring of this endpoint's shm segment
    /// (`SHM_RING_CELLS`: a power of two from 2048 to 65536; other values:
    /// the default, `default_ring_cells`; `Settings::default` has 2048).
    pub shm_ring_cells: usize,
    /// With rings of `STREAM_RING_MIN` cells or more: lone rendezvous
    /// messages up to this many bytes are streamed through the ring
    /// (`SHM_STREAM_LONE_MAX`; 0: never).
    pub shm_stream_lone_max: usize,
    /// How long an endpoint's close waits at most for peers still writing
    /// into its buffers (split receives, CMA RMA reads; `SHM_CLOSE_WAIT`,
    /// milliseconds; 0: no wait). A dead peer, or one that closed its
    /// endpoint, ends the wait at once.
    pub shm_close_wait: std::time::Duration,
    /// `IFACE`, `TCP_COALESCE`.
    pub tcp: TcpSettings,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            unexp_budget: crate::transport::DEFAULT_UNEXP_BUDGET,
            buffered_pool: crate::core::engine::buffered::DEFAULT_POOL,
            shm_cma: true,
            shm_pull_batch: DEFAULT_SHM_PULL_BATCH,
            shm_split_min: DEFAULT_SHM_SPLIT_MIN,
            shm_split_lone_min: DEFAULT_SHM_SPLIT_LONE_MIN,
            shm_ring_cells: crate::transport::shm::segment::NCELLS,
            shm_stream_lone_max: DEFAULT_SHM_STREAM_LONE_MAX,
            shm_close_wait: DEFAULT_SHM_CLOSE_WAIT,
            tcp: TcpSettings::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_rings_by_default_only_where_dev_shm_has_room_for_them() {
        assert_eq!(default_ring_cells(LARGE_RINGS_SHM_FREE), LARGE_RING_CELLS);
        assert_eq!(default_ring_cells(u64::MAX), LARGE_RING_CELLS);
        assert_eq!(
            default_ring_cells(LARGE_RINGS_SHM_FREE - 1),
            crate::transport::shm::segment::NCELLS
        );
        assert_eq!(default_ring_cells(64 << 20), crate::transport::shm::segment::NCELLS);
        assert_eq!(
            default_ring_cells(0),
            crate::transport::shm::segment::NCELLS,
            "unreadable: the small rings"
        );
        assert!(crate::transport::shm::segment::ring_cells_ok(LARGE_RING_CELLS));
    }
}
