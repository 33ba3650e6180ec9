//! Endpoints: the matching core and (later) the RDM endpoint object.

pub mod matching;
