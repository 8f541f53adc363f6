"""torch.distributed.TCPStore as a peer of tally's store (tests/unit/test_tcp_store.cpp).

  torch_store_peer.py server        hosts a TCPStore on a free port, prints the port, then
                                    talks to tally's client (which connects to it)
  torch_store_peer.py client H P    a TCPStore client of tally's server at H:P

Exits 0 and prints "python ... ok" when every exchange gave what tally's side sent. As a client
of tally's server it first proves the job's secret (TALLY_STORE_SECRET) as docs/gloo.md says:
GET "tally/auth/nonce", SET "tally/auth/proof" to the hex HMAC-SHA256 of the nonce.
"""
import hashlib
import hmac
import os
import sys
from datetime import timedelta

from torch.distributed import TCPStore

TIMEOUT = timedelta(seconds=60)


def check(got, want, what):
    if got != want:
        print(f"python: {what}: got {got!r}, want {want!r}", flush=True)
        sys.exit(1)


def server():
    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=TIMEOUT, wait_for_workers=False)
    print(store.port, flush=True)
    store.set("py/key", b"from python")
    check(store.add("counter", 7), 7, "add")
    store.wait(["tally/key"])
    check(store.get("tally/key"), b"from tally", "get tally/key")
    # tally adds 5 after python's 7.
    while store.add("counter", 0) != 12:
        pass
    store.set("py/done", b"yes")
    store.wait(["tally/bye"])
    print("python server ok", flush=True)


def authenticate(store, secret):
    nonce = store.get("tally/auth/nonce")
    store.set("tally/auth/proof", hmac.new(secret.encode(), nonce, hashlib.sha256).hexdigest())


def client(host, port):
    store = TCPStore(host, int(port), is_master=False, timeout=TIMEOUT, wait_for_workers=False)
    authenticate(store, os.environ["TALLY_STORE_SECRET"])
    check(store.get("tally/key"), b"from tally", "get tally/key")
    check(store.add("counter", 5), 12, "add")
    check(store.check(["tally/key", "counter"]), True, "check")
    store.set("py/key", b"from python")
    store.wait(["tally/late"])
    check(store.get("tally/late"), b"late", "get tally/late")
    check(store.num_keys() >= 4, True, "num_keys")
    check(store.compare_set("cas", b"", b"first"), b"first", "compare_set")
    check(store.delete_key("cas"), True, "delete_key")
    print("python client ok", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server()
    else:
        client(sys.argv[2], sys.argv[3])
