//! rustfab's transports. `proto` is the record header both share; `shm`
//! moves data between processes on one host; `tcp` between hosts.

pub mod proto;
pub mod shm;
