//! Every distinct ACL in use, shared by all znodes that carry it, with a reference count
//! each (ZooKeeper's ReferenceCountedACLCache). Znodes hold a 4-byte id instead of a
//! pointer: most trees use a handful of ACLs, so one copy per znode would cost more than
//! a small znode's data, and an id packs into the znode's byte header.

use jute::Acl;
use std::collections::HashMap;
use std::sync::Arc;

/// One cached ACL and how many znodes carry it.
#[derive(Debug)]
struct Entry {
    acl: Arc<Vec<Acl>>,
    refs: u64,
}

/// ACLs by id. An id is valid while some znode holds a reference; released ids are
/// reused.
#[derive(Debug)]
pub struct AclCache {
    /// Indexed by id; `None` for a free id.
    entries: Vec<Option<Entry>>,
    /// The id of each cached ACL, to share equal ones.
    ids: HashMap<Arc<Vec<Acl>>, u32>,
    /// Free ids, reused before the table grows.
    free: Vec<u32>,
    /// What an unknown id reads as: nobody has any permission. Only a bug could ask for
    /// one; failing closed is the safe answer (an empty ACL would mean open).
    deny_all: Arc<Vec<Acl>>,
    /// The id [`AclCache::acquire`] found last: a load passes the same `Arc` for every
    /// znode with that ACL, and a pointer compare spares hashing the list each time
    /// (SipHash of the lists was 3 % of a 1,000,000-znode SNAP's parse).
    last_hit: u32,
}

impl Default for AclCache {
    fn default() -> Self {
        Self::new()
    }
}

impl AclCache {
    /// An empty cache.
    pub fn new() -> AclCache {
        AclCache {
            entries: Vec::new(),
            ids: HashMap::new(),
            free: Vec::new(),
            deny_all: Arc::new(vec![Acl {
                perms: 0,
                id: jute::Id {
                    scheme: "world".into(),
                    id: "anyone".into(),
                },
            }]),
            last_hit: u32::MAX,
        }
    }

    /// The id of `acl`, with one more reference: an equal cached ACL's, or a new one.
    pub fn acquire(&mut self, acl: &Arc<Vec<Acl>>) -> u32 {
        // Both `Arc`s are alive here, so the same pointer is the same list.
        if let Some(Some(e)) = self.entries.get_mut(self.last_hit as usize) {
            if Arc::ptr_eq(&e.acl, acl) {
                e.refs += 1;
                return self.last_hit;
            }
        }
        if let Some(&id) = self.ids.get(acl.as_ref()) {
            self.last_hit = id;
            if let Some(Some(e)) = self.entries.get_mut(id as usize) {
                e.refs += 1;
            }
            return id;
        }
        let entry = Entry {
            acl: acl.clone(),
            refs: 1,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.entries[id as usize] = Some(entry);
                id
            }
            None => {
                self.entries.push(Some(entry));
                (self.entries.len() - 1) as u32
            }
        };
        self.ids.insert(acl.clone(), id);
        self.last_hit = id;
        id
    }

    /// One more reference to a cached id (a znode copied with its ACL).
    pub fn retain(&mut self, id: u32) {
        if let Some(Some(e)) = self.entries.get_mut(id as usize) {
            e.refs += 1;
        }
    }

    /// Drops one reference to `id`; the ACL leaves the cache with its last reference.
    pub fn release(&mut self, id: u32) {
        let Some(slot) = self.entries.get_mut(id as usize) else {
            return;
        };
        let Some(e) = slot else {
            return;
        };
        e.refs = e.refs.saturating_sub(1);
        if e.refs == 0 {
            if let Some(e) = slot.take() {
                self.ids.remove(&e.acl);
            }
            self.free.push(id);
        }
    }

    /// The ACL with `id`.
    pub fn get(&self, id: u32) -> &Arc<Vec<Acl>> {
        match self.entries.get(id as usize) {
            Some(Some(e)) => &e.acl,
            _ => &self.deny_all,
        }
    }

    /// Every cached ACL with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Arc<Vec<Acl>>)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(id, e)| e.as_ref().map(|e| (id as u32, &e.acl)))
    }

    /// Distinct ACLs cached.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no ACL is cached.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_acls_share_an_id_until_released() {
        let mut c = AclCache::new();
        let open = Arc::new(super::super::acl::open_acl());
        let a = c.acquire(&open);
        let b = c.acquire(&Arc::new(super::super::acl::open_acl()));
        assert_eq!((a, c.len()), (b, 1));
        c.release(a);
        assert_eq!(c.get(a).as_ref(), open.as_ref());
        c.release(b);
        assert!(c.is_empty());
        assert_eq!(c.get(a).len(), 1);
        assert_eq!(c.get(a)[0].perms, 0);
    }

    #[test]
    fn the_last_hit_shortcut_never_outlives_its_entry() {
        let mut c = AclCache::new();
        let open = Arc::new(super::super::acl::open_acl());
        let id = c.acquire(&open);
        assert_eq!(c.acquire(&open), id, "the same Arc: the same id");
        c.release(id);
        c.release(id);
        assert!(c.is_empty());
        // The freed id now holds another list; `open` (still alive) must not get it.
        let other = Arc::new(vec![Acl {
            perms: 1,
            id: jute::Id {
                scheme: "digest".into(),
                id: "u:p".into(),
            },
        }]);
        let reused = c.acquire(&other);
        assert_eq!(reused, id, "the freed id is reused");
        let again = c.acquire(&open);
        assert_ne!(again, reused);
        assert_eq!(c.get(again).as_ref(), open.as_ref());
        assert_eq!(c.get(reused).as_ref(), other.as_ref());
        assert_eq!(c.len(), 2);
    }
}
