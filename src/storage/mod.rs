//! On-disk state in dataDir. For now only the epoch: the tree itself is not yet
//! persisted (see the durability issue), but zxids must still never go backwards
//! across restarts, or clients that saw a newer zxid would be refused.

pub mod epoch;
