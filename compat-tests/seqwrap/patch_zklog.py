"""Sets the parentCVersion of the create txn of PATH in a ZooKeeper 3.8 txn log to VALUE
and fixes that entry's Adler32 checksum, so a restarted server (or `keel
import-zookeeper`) replays a parent whose child-create count is VALUE: the only way to
bring a parent near 2^31 creates in reasonable time.

    patch_zklog.py LOG PATH VALUE

Layout (ZooKeeper's FileTxnLog): a 16-byte file header, then entries of {long Adler32,
int length, TxnHeader + txn record, byte 'B'}; TxnHeader is {long session, int cxid,
long zxid, long time, int type}; a CreateTxn (type 1) is {path, data, ACL vector,
bool ephemeral, int parentCVersion}."""

import struct
import sys
import zlib


def main():
    log, target, value = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
    b = bytearray(open(log, "rb").read())
    pos, patched = 16, 0
    while pos + 12 <= len(b):
        n = struct.unpack(">i", b[pos + 8:pos + 12])[0]
        if n <= 0:
            break
        start = pos + 12
        txn = b[start:start + n]
        if struct.unpack(">i", txn[28:32])[0] == 1:
            plen = struct.unpack(">i", txn[32:36])[0]
            if bytes(txn[36:36 + plen]) == target:
                o = 36 + plen
                dlen = struct.unpack(">i", txn[o:o + 4])[0]
                o += 4 + max(dlen, 0)
                nacl = struct.unpack(">i", txn[o:o + 4])[0]
                o += 4
                for _ in range(nacl):
                    o += 4
                    for _ in range(2):
                        o += 4 + struct.unpack(">i", txn[o:o + 4])[0]
                o += 1
                txn[o:o + 4] = struct.pack(">i", value)
                b[start:start + n] = txn
                b[pos:pos + 8] = struct.pack(">q", zlib.adler32(bytes(txn)))
                patched += 1
        pos = start + n + 1
    if patched != 1:
        sys.exit(f"patch_zklog: {patched} creates of {target.decode()} in {log}, expected 1")
    open(log, "wb").write(b)


main()
