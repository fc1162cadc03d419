"""The zxids a ZooKeeper dataDir's txn logs hold more than once, and whether every copy
of each is the same txn.

Usage: zk_txnlog_dups.py DATA_DIR [LOG_LINES]

Reads DATA_DIR/version-2/log.* (ZooKeeper's FileTxnLog: a header, int magic ZKLG, int
version, long dbid; then records: long Adler-32 checksum, int length, the txn (TxnHeader:
long clientId, int cxid, long zxid, long time, int type; the txn; its digest), byte 'B';
a zero length ends the file, the rest is preallocated padding), in the order ZooKeeper
replays them (by the zxid in the file name).

Prints one line: `duplicates N identical|DIFFERENT first 0x.. last 0x..` (N = records
whose zxid an earlier record already had). Exits 0 when every zxid's copies are byte for
byte the same txn, 1 when some zxid was logged with two different txns (two histories:
a divergence, never a double write), 2 on an unreadable log.

With LOG_LINES (a file of the member's ERROR/WARN lines about them), each line must name
a zxid that the logs hold twice: the "N(next log)" of FileTxnSnapLog's "highestZxid >
next log", the txn header's zxid of DataTree's "First digest mismatch on txn: clientId,
cxid,zxid,...", the (last) value of its rate-limited "Digests are not matching. Value is
Zxid." Any other line (a mismatch at a zxid logged once: a real divergence) is printed
and the exit status is 1.

Why: ZooKeeper 3.8.0's learner does not stop its SyncRequestProcessor when it loses its
leader (Learner.shutdown calls ZooKeeperServer.shutdown(boolean), which
LearnerZooKeeperServer does not override: ZOOKEEPER-4712, fixed in 3.9.3). The old
SyncThread still appends its queued txns after the member fast-forwarded its tree from
the log, so the member reports an older last zxid to its next leader, gets those txns
again in the DIFF and logs them twice ("Current zxid X is <= Y"); restarted on that
dataDir it logs "highestZxid > next log" and a digest mismatch for each. A double write
of the same txns is that bug; different txns under one zxid would be a real divergence.
"""

import glob
import os
import re
import struct
import sys

MAGIC = struct.unpack(">i", b"ZKLG")[0]

# Where each accepted line names its zxid (decimal).
LINE_ZXID = [re.compile(r"(\d+)\(next log\)"),
             re.compile(r"First digest mismatch on txn: -?\d+,-?\d+,(\d+),"),
             re.compile(r"Digests are not matching\. Value is Zxid\. (?:Last value|Value):(\d+)")]


def unexplained(lines, doubled):
    """The lines that name no zxid of `doubled`."""
    out = []
    for line in lines:
        zxids = [int(m.group(1)) for r in LINE_ZXID for m in [r.search(line)] if m]
        if not zxids or any(z not in doubled for z in zxids):
            out.append(line)
    return out


def records(path):
    """Yields (zxid, txn bytes) for each record of the log file at path."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 16:
        return
    magic, _version, _dbid = struct.unpack_from(">iiq", data, 0)
    if magic != MAGIC:
        raise ValueError("%s: not a ZooKeeper txn log (magic %#x)" % (path, magic))
    pos = 16
    while pos + 12 <= len(data):
        _crc, length = struct.unpack_from(">qi", data, pos)
        if length <= 0:
            return
        start = pos + 12
        end = start + length
        if end + 1 > len(data) or data[end] != 0x42:
            return  # a torn last record: ZooKeeper stops there too
        txn = data[start:end]
        if len(txn) < 20:
            raise ValueError("%s: a %d-byte txn at %d" % (path, len(txn), pos))
        (zxid,) = struct.unpack_from(">q", txn, 12)
        yield zxid, txn
        pos = end + 1


def main():
    logs = glob.glob(os.path.join(sys.argv[1], "version-2", "log.*"))
    logs.sort(key=lambda p: int(p.rsplit(".", 1)[1], 16))
    seen = {}
    dups = []
    different = []
    try:
        for path in logs:
            for zxid, txn in records(path):
                first = seen.setdefault(zxid, txn)
                if first is not txn:
                    dups.append(zxid)
                    if first != txn:
                        different.append(zxid)
    except (OSError, ValueError) as e:
        print("unreadable: %s" % e)
        return 2
    if not dups:
        print("duplicates 0")
        return 0
    print("duplicates %d %s first %#x last %#x%s" % (
        len(dups), "DIFFERENT" if different else "identical", min(dups), max(dups),
        " (%d zxids with different txns, first %#x)" % (len(different), different[0])
        if different else ""))
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as f:
            bad = unexplained([l.rstrip("\n") for l in f if l.strip()], set(dups))
        for line in bad:
            print("not a doubled zxid: %s" % line)
        if bad:
            return 1
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
