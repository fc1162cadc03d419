//! The runtime layer: tokio listener and connections. See [`listener`].
pub mod listener;
