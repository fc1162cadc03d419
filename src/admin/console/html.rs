//! HTML for the console: escaping of everything that comes from the tree or a client
//! (znode names, data, ACL ids, addresses), and the page frame with its inline style.
//!
//! Every page is server-rendered, with no script and no external asset, so it works on a
//! machine without internet (issue 20). Text from the tree is escaped with [`text`]
//! (element content) or [`attr`] (a double-quoted attribute); paths in links are
//! percent-encoded with [`path_href`], so a znode name cannot end an element or an
//! attribute or start a script.

use std::fmt::Write as _;

/// `s` safe as element content or inside a double-quoted attribute: `& < > " '` become
/// entities, and C0 control characters other than tab and newline (and DEL) are shown as
/// `\xNN` escapes so they cannot confuse the reader or the parser.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The same escaping as [`text`], named for its use inside `attr="..."`.
pub fn attr(s: &str) -> String {
    text(s)
}

/// A znode path as the part of a `/console/tree/...` URL after `tree`: each byte that is
/// not an unreserved URL character or `/` is percent-encoded (RFC 3986 §2.3), so any
/// name round-trips through the router's percent-decoding.
pub fn path_href(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A query-string value, percent-encoded as [`path_href`] but with `/` encoded too.
pub fn query_value(s: &str) -> String {
    path_href(s).replace('/', "%2F")
}

/// Data bytes for display: the text when they are valid UTF-8 without control
/// characters other than tab, newline and carriage return, else a hex dump of 16 bytes a
/// line; at most `cap` bytes are shown, and the caller is told how many were cut.
/// Returns (HTML, whether shown as text).
pub fn data(bytes: &[u8], cap: usize) -> (String, bool) {
    let shown = &bytes[..bytes.len().min(cap)];
    let as_text = std::str::from_utf8(shown).ok().filter(|s| {
        !s.chars()
            .any(|c| (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{7f}')
    });
    if let Some(s) = as_text {
        return (text(s), true);
    }
    let mut out = String::new();
    for (i, line) in shown.chunks(16).enumerate() {
        let _ = write!(out, "{:08x} ", i * 16);
        for b in line {
            let _ = write!(out, " {b:02x}");
        }
        out.push_str("  ");
        for &b in line {
            out.push(if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            });
        }
        out.push('\n');
    }
    (text(&out), false)
}

/// Where a page's foot goes: [`super::render`] replaces it with the core time. A
/// comment, so a page rendered without it shows nothing there.
pub const FOOT_MARK: &str = "<!--foot-->";

/// The page frame: `title` (already escaped) and `body` (HTML), with the console's
/// navigation and a style that reads at 1280 px and on a phone.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} - keel console</title><style>{STYLE}</style></head><body>\
<nav><b>keel</b> <a href=\"/console/ensemble\">ensemble</a> \
<a href=\"/console/tree/\">tree</a> <a href=\"/console/sessions\">sessions</a></nav>\
<main><h1>{title}</h1>\n{body}{FOOT_MARK}</main></body></html>\n"
    )
}

const STYLE: &str = "body{font:15px/1.4 system-ui,sans-serif;margin:0;color:#222}\
nav{background:#234;color:#fff;padding:.5em 1em}nav a{color:#cde;margin-left:1em}\
main{padding:0 1em 2em;max-width:78em}h1{font-size:1.3em;word-break:break-all}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;\
text-align:left;vertical-align:top}th{background:#eee}\
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}\
.wide{overflow-x:auto}footer{color:#777;font-size:.85em;margin-top:2em}.denied{color:#a00}.me{font-weight:bold}\
@media(max-width:600px){body{font-size:14px}td,th{padding:.15em .3em}}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_are_escaped() {
        assert_eq!(
            text("<script>alert('x')</script>&\"\u{1}\u{7f}\t"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\\x01\\x7f\t"
        );
    }

    #[test]
    fn paths_in_links_are_percent_encoded() {
        assert_eq!(path_href("/a b/<c>\"/é"), "/a%20b/%3Cc%3E%22/%C3%A9");
        assert_eq!(query_value("a/b&c"), "a%2Fb%26c");
    }

    #[test]
    fn data_is_text_or_hex_and_capped() {
        assert_eq!(
            data(b"hello <b>", 100),
            ("hello &lt;b&gt;".to_string(), true)
        );
        let (hex, as_text) = data(&[0xff, 0x00, b'a'], 100);
        assert!(!as_text);
        assert_eq!(hex, "00000000  ff 00 61  ..a\n");
        let (capped, _) = data(b"abcdef", 3);
        assert_eq!(capped, "abc");
    }
}
