"""A little client traffic that stays: one Kazoo session with znodes, an ephemeral,
data/exists/child watches and a setData. Prints "ready" once done, then keeps the session
open for SECONDS (or until killed). Usage: traffic.py HOST:PORT SECONDS"""
import sys
import time

from kazoo.client import KazooClient

client = KazooClient(hosts=sys.argv[1], timeout=10)
client.start(timeout=15)
client.create("/adm", b"x")
for i in range(3):
    client.create("/adm/n%d" % i, b"data%d" % i)
client.create("/adm/eph", b"e", ephemeral=True)
client.get("/adm/n0", watch=lambda e: None)
client.get_children("/adm", watch=lambda e: None)
client.exists("/adm/none", watch=lambda e: None)
client.set("/adm/n1", b"changed")
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
client.stop()
client.close()
