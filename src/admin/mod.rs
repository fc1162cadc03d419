//! Admin surface: the four-letter words (later: AdminServer, metrics).
//!
//! - [`fourlw`]: the text each four-letter word answers, rendered from a
//!   [`fourlw::ServerSnapshot`] in Apache ZooKeeper 3.8's exact formats.

pub mod fourlw;
pub mod snapshot;
