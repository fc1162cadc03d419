//! Quotas: `/zookeeper/quota/<path>/zookeeper_limits` and `.../zookeeper_stats`
//! (ZooKeeper's Quotas and StatsTrack). The stats node's data is kept as
//! `count=N,bytes=M` and updated in place, without a Stat change. Newer keys (the hard
//! limits) follow as `=;key=value;...`, the form ZooKeeper writes so that 3.4 parsers
//! still read count and bytes.

/// Where quota nodes live.
pub const QUOTA_ROOT: &str = "/zookeeper/quota";
/// Name of the node holding a path's limits.
pub const LIMIT_NODE: &str = "zookeeper_limits";
/// Name of the node holding a path's current usage.
pub const STAT_NODE: &str = "zookeeper_stats";

/// Parsed `key=value,...` quota text, with count and bytes first (StatsTrack).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsTrack {
    pub count: i64,
    pub bytes: i64,
    /// Other keys, sorted, as ZooKeeper prints them after count and bytes.
    pub extra: Vec<(String, i64)>,
}

impl StatsTrack {
    /// Parses quota text: pairs separated by `,` or `;`, each `key=value` (an empty
    /// value, or text after a second `=`, is ignored as ZooKeeper's parser ignores it);
    /// missing count/bytes read as -1, unparsable parts are skipped.
    pub fn parse(text: &[u8]) -> StatsTrack {
        let text = String::from_utf8_lossy(text);
        let mut t = StatsTrack {
            count: -1,
            bytes: -1,
            extra: Vec::new(),
        };
        for part in text.split([',', ';']).filter(|p| !p.is_empty()) {
            let mut kv = part.split('=');
            let k = kv.next().unwrap_or("");
            let v = match kv.next() {
                None | Some("") => -1,
                Some(v) => match v.trim().parse::<i64>() {
                    Ok(v) => v,
                    Err(_) => continue,
                },
            };
            match k.trim() {
                "count" => t.count = v,
                "bytes" => t.bytes = v,
                other => t.extra.push((other.to_string(), v)),
            }
        }
        t.extra.sort();
        t
    }

    /// The limit for `key` among the extras (e.g. countHardLimit), if set and >= 0.
    pub fn extra(&self, key: &str) -> Option<i64> {
        self.extra
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
            .filter(|v| *v >= 0)
    }

    /// The text form, count and bytes first.
    pub fn render(&self) -> String {
        let mut s = format!("count={},bytes={}", self.count, self.bytes);
        if !self.extra.is_empty() {
            s.push('=');
            for (k, v) in &self.extra {
                s.push_str(&format!(";{k}={v}"));
            }
        }
        s
    }
}

/// The quota node path for a quota'd `path` and node name.
pub fn node_path(path: &str, name: &str) -> String {
    format!("{QUOTA_ROOT}{path}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let text = "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=2";
        let t = StatsTrack::parse(text.as_bytes());
        assert_eq!((t.count, t.bytes), (-1, -1));
        assert_eq!(t.extra("countHardLimit"), Some(2));
        assert_eq!(t.extra("byteHardLimit"), None);
        assert_eq!(t.render(), text);
        assert_eq!(
            StatsTrack::parse(b"count=3,bytes=10").render(),
            "count=3,bytes=10"
        );
    }
}
