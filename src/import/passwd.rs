//! The password of a ZooKeeper session, which ZooKeeper derives from the session id
//! instead of storing it (ZooKeeperServer.generatePasswd: `new java.util.Random(id ^
//! 0xB3415C00).nextBytes(new byte[16])`). Restoring the same bytes lets a client that
//! held a session on ZooKeeper resume it on keel with the password it already has.

/// ZooKeeperServer.superSecret.
const SUPER_SECRET: i64 = 0xB341_5C00;

/// java.util.Random's linear congruential generator (its documented algorithm).
struct JavaRandom {
    seed: u64,
}

impl JavaRandom {
    const MULTIPLIER: u64 = 0x5_DEEC_E66D;
    const ADDEND: u64 = 0xB;
    const MASK: u64 = (1 << 48) - 1;

    fn new(seed: i64) -> JavaRandom {
        JavaRandom {
            seed: (seed as u64 ^ Self::MULTIPLIER) & Self::MASK,
        }
    }

    /// Random.nextInt(): the top 32 of the 48 state bits.
    fn next_int(&mut self) -> i32 {
        self.seed = self
            .seed
            .wrapping_mul(Self::MULTIPLIER)
            .wrapping_add(Self::ADDEND)
            & Self::MASK;
        (self.seed >> 16) as u32 as i32
    }

    /// Random.nextBytes: each int fills up to four bytes, low byte first.
    fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(4) {
            let mut rnd = self.next_int();
            for b in chunk {
                *b = rnd as u8;
                rnd >>= 8;
            }
        }
    }
}

/// The 16-byte password ZooKeeper gives session `session_id`.
pub fn session_passwd(session_id: i64) -> [u8; 16] {
    let mut p = [0u8; 16];
    JavaRandom::new(session_id ^ SUPER_SECRET).fill(&mut p);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn java_random_matches_the_jdk() {
        // new java.util.Random(0).nextInt() is -1155484576 on every JDK.
        assert_eq!(JavaRandom::new(0).next_int(), -1_155_484_576);
    }

    #[test]
    fn passwords_match_zookeepers() {
        // Printed by OpenJDK 17 running ZooKeeperServer.generatePasswd's two lines.
        let cases = [
            (
                0x1000_00ab_cdef_0001_i64,
                "76b39f6d54c3bc4f6ebe2fdff1198ecf",
            ),
            (1, "054cc74a37327db215e702e20c73f005"),
            (-5, "d47144b5e45e45c49c3b7fdcd66257ba"),
            (0x0123_4567_890a_bcde, "26d2d12712427719854964451cfac688"),
        ];
        for (id, want) in cases {
            assert_eq!(hex(&session_passwd(id)), want, "session 0x{id:x}");
        }
    }
}
