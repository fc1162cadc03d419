//! The web console on the AdminServer port (issue 20), against a keel process: pages
//! show what a stock client reads, names and data are escaped, ACLs hold for the
//! console's identity, wide parents are paged.

mod common;

use bytes::Bytes;
use common::*;
use jute::{Acl, CreateRequest, Id, Record};
use keel::proto::opcode as op;
use std::io::{Read, Write};
use std::net::TcpStream;

/// GET `path` from the AdminServer: (status code, body).
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply[9..12].parse().unwrap();
    let body = reply.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

fn create_with_acl(c: &mut Client, path: &str, data: &[u8], acl: Vec<Acl>) {
    let req = CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl,
        flags: 0,
    };
    c.call(op::CREATE, &|b| req.encode(b)).unwrap();
}

fn digest_acl(user_password: &str) -> Vec<Acl> {
    vec![Acl {
        perms: 31,
        id: Id {
            scheme: "digest".into(),
            id: keel::tree::acl::digest_id(user_password),
        },
    }]
}

fn console() -> (Keel, u16) {
    let admin = free_port();
    let keel = Keel::new(
        "console",
        KeelOptions {
            extra: format!(
                "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n\
                 admin.console.identity=bob:secret\n"
            ),
            ..KeelOptions::default()
        },
    );
    (keel, admin)
}

#[test]
fn pages_show_the_tree_sessions_and_member_as_a_client_reads_them() {
    let (mut keel, admin) = console();
    keel.start();
    let mut c = Client::connect(keel.port, 10_000).unwrap();
    c.create("/app", Some(b"hello"), CreateMode::Persistent)
        .unwrap();
    let (_, eph) = c.create("/app/lock", None, CreateMode::Ephemeral).unwrap();
    c.get_data("/app", true).unwrap();
    let stat = c.exists("/app", false).unwrap().unwrap();

    let (status, page) = get(admin, "/console/tree/app");
    assert_eq!(status, 200);
    assert!(
        page.contains(&format!("id=\"stat-mzxid\">0x{:x}<", stat.mzxid)),
        "{page}"
    );
    assert!(page.contains("id=\"stat-numChildren\">1<"), "{page}");
    assert!(page.contains("<pre id=\"data\">hello</pre>"), "{page}");
    let owner = format!("0x{:x}", eph.ephemeral_owner as u64);
    assert!(
        page.contains(&format!("href=\"/console/session/{owner}\"")),
        "{page}"
    );

    let (_, list) = get(admin, "/console/sessions");
    assert!(list.contains("<p id=\"total\">1 sessions</p>"), "{list}");
    assert!(list.contains(&owner), "{list}");
    let (_, session) = get(admin, &format!("/console/session/{owner}"));
    assert!(
        session.contains("href=\"/console/tree/app/lock\""),
        "{session}"
    );
    assert!(
        session.contains("data: <a href=\"/console/tree/app\">"),
        "{session}"
    );

    let (status, root) = get(admin, "/");
    assert_eq!(status, 200);
    assert!(root.contains("id=\"state\">standalone<"), "{root}");
    assert!(root.contains("id=\"connected-clients\">1<"), "{root}");
    assert!(
        root.contains(&format!("id=\"last-applied-zxid\">0x{:x}<", c.last_zxid())),
        "{root}"
    );
    // The AdminServer's commands are still where they were.
    let (status, ruok) = get(admin, "/commands/ruok");
    assert_eq!(status, 200);
    assert!(ruok.contains("\"command\" : \"ruok\""), "{ruok}");
    assert_eq!(get(admin, "/console/nothing").0, 404);
}

#[test]
fn names_and_data_are_escaped() {
    let (mut keel, admin) = console();
    keel.start();
    let mut c = Client::connect(keel.port, 10_000).unwrap();
    // ZooKeeper refuses control characters in paths (PathUtils.validatePath); data may
    // hold anything.
    let name = "/<script>alert(\"x\")&'é";
    c.create(
        name,
        Some(b"<img src=x onerror=alert(1)>"),
        CreateMode::Persistent,
    )
    .unwrap();
    c.create(
        "/bin",
        Some(&[0xff, 0xfe, 0x00, 0x01, b'<']),
        CreateMode::Persistent,
    )
    .unwrap();
    let (_, root) = get(admin, "/console/tree/");
    assert!(!root.contains("<script>"), "{root}");
    assert!(
        root.contains(">&lt;script&gt;alert(&quot;x&quot;)&amp;&#39;é</a>"),
        "{root}"
    );
    let href = "/console/tree/%3Cscript%3Ealert%28%22x%22%29%26%27%C3%A9";
    assert!(root.contains(&format!("href=\"{href}\"")), "{root}");
    let (status, page) = get(admin, href);
    assert_eq!(status, 200);
    assert!(!page.contains("<img"), "{page}");
    assert!(
        page.contains("<pre id=\"data\">&lt;img src=x onerror=alert(1)&gt;</pre>"),
        "{page}"
    );
    let (_, bin) = get(admin, "/console/tree/bin");
    assert!(bin.contains("ff fe 00 01 3c  ....&lt;"), "{bin}");
}

#[test]
fn a_znode_the_console_may_not_read_shows_neither_data_nor_children() {
    let (mut keel, admin) = console();
    keel.start();
    let mut c = Client::connect(keel.port, 10_000).unwrap();
    create_with_acl(&mut c, "/alice", b"alice's secret", digest_acl("alice:pw"));
    create_with_acl(&mut c, "/bob", b"bob's data", digest_acl("bob:secret"));
    let (_, alice) = get(admin, "/console/tree/alice");
    assert!(alice.contains("id=\"denied\""), "{alice}");
    assert!(!alice.contains("secret"), "{alice}");
    assert!(!alice.contains("id=\"children\""), "{alice}");
    assert!(!alice.contains("<h2>ACL</h2>"), "{alice}");
    // admin.console.identity=bob:secret reads bob's znode.
    let (_, bob) = get(admin, "/console/tree/bob");
    assert!(
        bob.contains("<pre id=\"data\">bob&#39;s data</pre>"),
        "{bob}"
    );
}

#[test]
fn a_wide_parent_is_paged() {
    let (mut keel, admin) = console();
    keel.start();
    let mut c = Client::connect(keel.port, 10_000).unwrap();
    c.create("/w", None, CreateMode::Persistent).unwrap();
    for i in 0..250 {
        c.create(&format!("/w/c{i:03}"), None, CreateMode::Persistent)
            .unwrap();
    }
    // The names linked from the children table.
    let names = |page: &str| -> Vec<String> {
        let table = page.split("<table id=\"children\">").nth(1).unwrap();
        let table = table.split("</table>").next().unwrap();
        table
            .split("\">c")
            .skip(1)
            .map(|s| format!("c{}", &s[..3]))
            .collect()
    };
    let mut seen = Vec::new();
    let mut path = "/console/tree/w".to_string();
    loop {
        let (_, page) = get(admin, &path);
        seen.extend(names(&page));
        match page.split("id=\"next\" href=\"").nth(1) {
            Some(rest) => path = rest.split('"').next().unwrap().to_string(),
            None => break,
        }
    }
    let want: Vec<String> = (0..250).map(|i| format!("c{i:03}")).collect();
    assert_eq!(seen, want);
}
