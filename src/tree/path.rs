//! Path rules: ZooKeeper's PathUtils.validatePath, and parent/child splitting.

/// Whether `path` is a valid znode path: absolute, no empty, "." or ".." segments, no
/// trailing slash (except "/" itself, or when `sequential` appends a suffix), no null
/// or control characters, and nothing ZooKeeper's PathUtils.validatePath refuses in
/// its UTF-16 view: U+0001-U+001F, U+007F-U+009F, U+D800-U+F8FF, U+FFF0-U+FFFF, and
/// every character outside the Basic Multilingual Plane (Java holds it as a surrogate
/// pair, which falls in U+D800-U+DFFF). Violations are answered with BADARGUMENTS.
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
            || c > 0xffff
    })
}

/// The path a lookup uses: the empty path is the root (ZooKeeper's DataTree keeps the
/// root under "" as well as "/").
pub fn root_alias(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
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
        // Outside the BMP (a surrogate pair in Java), U+FFFD (what invalid UTF-8
        // decodes to), private use: refused; the rest of the BMP is fine.
        for bad in [
            "/a\u{10000}",
            "/\u{1f600}",
            "/\u{10ffff}",
            "/\u{fffd}",
            "/\u{e000}",
        ] {
            assert!(!is_valid(bad, false), "{bad:?}");
        }
        for ok in ["/\u{a0}", "/\u{d7ff}", "/\u{f900}", "/\u{ffef}", "/é"] {
            assert!(is_valid(ok, false), "{ok:?}");
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
