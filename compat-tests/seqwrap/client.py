"""Sequential creates at the int32 boundary (issue 14 item 7), as raw frames; prints
names, error codes and the parent's cversion and child count (no zxids: the two servers
have different epochs after the restart and the import).

    client.py setup PORT      creates /q and /q/x, deletes /q/x (before the log patch)
    client.py check PORT      the creates at the boundary, one request at a time"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rawdiff"))
from rawzk import *  # noqa: E402,F401,F403


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    t = Transcript()
    c = Conn(("127.0.0.1", port), t, "c").handshake()
    steps = []
    if mode == "setup":
        steps = [(CREATE, create_body("/q")), (CREATE, create_body("/q/x")),
                 (DELETE, path_version_body("/q/x"))]
    else:
        steps = [(GET_CHILDREN2, path_watch_body("/q"))]
        steps += [(CREATE, create_body("/q/s-", flags=2))] * 4
        steps += [(CREATE2, create_body("/q/s-", flags=3))]
        steps += [(DELETE, path_version_body("/q/s-2147483647"))]
        steps += [(MULTI, multi_body([(CREATE, create_body("/q/m-", flags=2)),
                                      (CREATE2, create_body("/q/m-", flags=2))]))]
        steps += [(MULTI, multi_body([(CREATE, create_body("/q/n-", flags=2))]))]
        steps += [(GET_CHILDREN2, path_watch_body("/q"))]
    for xid, (opcode, body) in enumerate(steps, 1):
        c.send((xid, opcode, body))
        c.drain()
    for line in t.lines:
        line = re.sub(r"zxid=\S+ ", "", line)
        line = re.sub(r"stat\(c=\S+ m=\S+ p=\S+ ", "stat(", line)
        print(line)
    c.close()


import re  # noqa: E402

main()
