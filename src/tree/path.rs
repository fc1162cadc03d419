//! Path rules: ZooKeeper's PathUtils.validatePath, and parent/child splitting.

/// Whether `path` is a valid znode path: absolute, no empty, "." or ".." segments, no
/// trailing slash (except "/" itself, or when `sequential` appends a suffix), no null
/// or control characters. Violations are answered with BADARGUMENTS.
pub fn is_valid(path: &str, sequential: bool) -> bool {
    let owned;
    let path = if sequential {
        owned = format!("{path}1");
        owned.as_str()
    } else {
        path
    };
    if path.is_empty() || !path.starts_with('/') {
        return false;
    }
    if path == "/" {
        return true;
    }
    if path.ends_with('/') {
        return false;
    }
    for seg in path[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return false;
        }
    }
    !path.chars().any(|c| {
        let c = c as u32;
        c == 0
            || (0x01..=0x1f).contains(&c)
            || (0x7f..=0x9f).contains(&c)
            || (0xd800..=0xf8ff).contains(&c)
            || (0xfff0..=0xffff).contains(&c)
    })
}

/// Splits an absolute path into (parent, last segment); the root's parent is "".
pub fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// Whether `path` is `ancestor` or lies below it.
pub fn is_under(path: &str, ancestor: &str) -> bool {
    ancestor == "/"
        || path == ancestor
        || (path.starts_with(ancestor) && path.as_bytes().get(ancestor.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_like_zookeeper() {
        for ok in ["/", "/a", "/a/b", "/a.b", "/a/..b"] {
            assert!(is_valid(ok, false), "{ok}");
        }
        for bad in [
            "", "a", "/a/", "//", "/a//b", "/.", "/a/..", "/a/./b", "/a\u{0}b", "/\u{1f}",
        ] {
            assert!(!is_valid(bad, false), "{bad:?}");
        }
        assert!(is_valid("/a/", true));
        assert!(!is_valid("/a//", true));
    }

    #[test]
    fn splits_and_joins() {
        assert_eq!(split("/a"), ("/", "a"));
        assert_eq!(split("/a/b/c"), ("/a/b", "c"));
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert!(is_under("/a/b", "/a"));
        assert!(is_under("/a", "/a"));
        assert!(!is_under("/ab", "/a"));
        assert!(is_under("/x", "/"));
    }
}
