//! Reading ZooKeeper's files: the offset-aware jute reader they share with the server
//! wire formats ([`crate::zab::wire::reader`]), and the checksum they carry.

pub use crate::zab::wire::reader::{Input, Malformed};

/// Java's `java.util.zip.Adler32` over `bytes`, as the `long` ZooKeeper stores.
pub fn adler32(bytes: &[u8]) -> i64 {
    adler32::RollingAdler32::from_buffer(bytes).hash() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_matches_javas() {
        // java.util.zip.Adler32 over "Wikipedia" is 0x11E60398 (and 1 for no bytes).
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
    }
}
