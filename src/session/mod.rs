//! The session table and expiry in tick buckets (ZooKeeper's SessionTrackerImpl and
//! ExpiryQueue). Time is an input: every call takes `now_ms`; nothing reads a clock.
//!
//! A session's deadline is rounded up to the next multiple of tickTime, so all sessions
//! due in the same tick expire together, as in ZooKeeper.

use std::collections::{BTreeMap, BTreeSet};

/// One client session.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: i64,
    /// Negotiated timeout, ms.
    pub timeout_ms: i32,
    /// The 16-byte password a client must present to resume the session.
    pub passwd: [u8; 16],
    /// Deadline bucket, ms since the epoch (a multiple of tickTime).
    pub expires_at_ms: i64,
    /// Set once a closeSession txn is under way, so no new work is accepted.
    pub closing: bool,
}

/// All live sessions and their expiry buckets.
#[derive(Debug)]
pub struct SessionTracker {
    tick_ms: i64,
    sessions: rustc_hash::FxHashMap<i64, Session>,
    buckets: BTreeMap<i64, BTreeSet<i64>>,
    next_id: i64,
}

impl SessionTracker {
    /// A tracker whose ids start from `first_id` (ZooKeeper derives it from the start
    /// time and server id so ids do not repeat across restarts).
    pub fn new(tick_ms: u32, first_id: i64) -> SessionTracker {
        SessionTracker {
            tick_ms: tick_ms.max(1) as i64,
            sessions: Default::default(),
            buckets: BTreeMap::new(),
            next_id: first_id,
        }
    }

    /// ZooKeeper's initial session id for server `server_id` started at `now_ms`.
    pub fn initial_id(now_ms: i64, server_id: u8) -> i64 {
        let base = ((now_ms << 24) as u64 >> 8) as i64;
        base | ((server_id as i64) << 56)
    }

    /// Ids handed out from now on start at `id` (a member learns its server id after
    /// the tracker is built from its snapshot).
    pub fn set_next_session_id(&mut self, id: i64) {
        self.next_id = id;
    }

    /// Hands out the next session id.
    pub fn next_session_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn bucket(&self, deadline_ms: i64) -> i64 {
        (deadline_ms / self.tick_ms + 1) * self.tick_ms
    }

    /// Adds a session (applying a createSession txn).
    pub fn add(&mut self, id: i64, timeout_ms: i32, passwd: [u8; 16], now_ms: i64) {
        let expires_at_ms = self.bucket(now_ms + timeout_ms as i64);
        self.buckets.entry(expires_at_ms).or_default().insert(id);
        self.sessions.insert(
            id,
            Session {
                id,
                timeout_ms,
                passwd,
                expires_at_ms,
                closing: false,
            },
        );
    }

    /// The session with this id.
    pub fn get(&self, id: i64) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// Every session.
    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values()
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are no sessions.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Pushes a session's deadline to `now + timeout` (on every packet from it).
    /// `timeout_ms` replaces the stored timeout when given (a reconnect renegotiates).
    /// Returns false for an unknown or closing session.
    pub fn touch(&mut self, id: i64, timeout_ms: Option<i32>, now_ms: i64) -> bool {
        let tick = self.tick_ms;
        let Some(s) = self.sessions.get_mut(&id) else {
            return false;
        };
        if s.closing {
            return false;
        }
        if let Some(t) = timeout_ms {
            s.timeout_ms = t;
        }
        let new_bucket = ((now_ms + s.timeout_ms as i64) / tick + 1) * tick;
        if new_bucket != s.expires_at_ms {
            if let Some(b) = self.buckets.get_mut(&s.expires_at_ms) {
                b.remove(&id);
                if b.is_empty() {
                    self.buckets.remove(&s.expires_at_ms);
                }
            }
            s.expires_at_ms = new_bucket;
            self.buckets.entry(new_bucket).or_default().insert(id);
        }
        true
    }

    /// Marks a session as closing; it will be removed when its closeSession txn applies.
    pub fn set_closing(&mut self, id: i64) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.closing = true;
        }
    }

    /// Removes a session (applying a closeSession txn).
    pub fn remove(&mut self, id: i64) -> Option<Session> {
        let s = self.sessions.remove(&id)?;
        if let Some(b) = self.buckets.get_mut(&s.expires_at_ms) {
            b.remove(&id);
            if b.is_empty() {
                self.buckets.remove(&s.expires_at_ms);
            }
        }
        Some(s)
    }

    /// Sessions whose deadline bucket is at or before `now_ms` and that are not yet
    /// closing, in id order; each is marked closing.
    pub fn expire(&mut self, now_ms: i64) -> Vec<i64> {
        let due: Vec<i64> = self
            .buckets
            .range(..=now_ms)
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        let mut out = Vec::new();
        for id in due {
            if let Some(s) = self.sessions.get_mut(&id) {
                if !s.closing {
                    s.closing = true;
                    out.push(id);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_in_tick_buckets() {
        let mut t = SessionTracker::new(2000, 100);
        let id = t.next_session_id();
        t.add(id, 4000, [0; 16], 1000);
        // Deadline 5000 rounds up to bucket 6000.
        assert!(t.expire(5999).is_empty());
        assert_eq!(t.expire(6000), vec![id]);
        assert!(t.expire(7000).is_empty(), "expired once only");
        assert!(!t.touch(id, None, 7000), "closing sessions are not touched");
        assert!(t.remove(id).is_some());
        assert!(t.is_empty());
    }

    #[test]
    fn touch_moves_deadline() {
        let mut t = SessionTracker::new(2000, 1);
        t.add(1, 4000, [0; 16], 0);
        assert!(t.touch(1, None, 3000));
        assert!(t.expire(6000).is_empty());
        assert_eq!(t.expire(8000), vec![1]);
        assert!(!t.touch(99, None, 0));
    }
}
