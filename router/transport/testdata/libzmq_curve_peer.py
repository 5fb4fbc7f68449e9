#!/usr/bin/env python3
"""A real libzmq CURVE peer for router/transport's interop test (libzmq_test.go).

It reuses the record encoders of libzmq_peer.py and runs libzmq's own CURVE
(libsodium) against a meshnode node:

client mode -- a CURVE DEALER (routing id = the node RID of its key: b"C" +
the 32-byte public key) connects to the node's ROUTER, with libzmq
heartbeats on so that PING/PONG travel inside CURVE MESSAGE boxes:
  hello -> admit; probe -> ack; a 100 KiB spotRequest -> its reply;
  2 s of heartbeats (libzmq drops the link if PONGs do not come back);
  probe -> ack.
  Prints "OK".

refused mode -- the same DEALER, with a key the node does not allow: the
handshake must fail, so the hello gets no answer. Prints "REFUSED".

server mode -- a CURVE ROUTER (with a ZAP handler allowing one client key)
on a random port; prints "ENDPOINT tcp://127.0.0.1:PORT", then admits the
node's hello, acks its probes, and waits for a one-way record carrying
b"from go over curve". Prints "OK".

Usage:
  libzmq_curve_peer.py client  ENDPOINT NODE_RID_HEX MESH SECURITY SERVER_PUBLIC CLIENT_SECRET
  libzmq_curve_peer.py refused ENDPOINT NODE_RID_HEX MESH SECURITY SERVER_PUBLIC CLIENT_SECRET
  libzmq_curve_peer.py server  MESH SECURITY SERVER_SECRET ALLOWED_CLIENT_PUBLIC
Keys are Z85. Exits 1 with "FAIL: reason" otherwise.
"""
import os
import sys
import threading
import time

import zmq
from zmq.utils import z85

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from libzmq_peer import expect, fail, head, hello, probe, recv, spot_request, u64  # noqa: E402


def curve_dealer(ctx, endpoint, server_public, client_secret):
    client_public = zmq.curve_public(client_secret)
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, b"C" + z85.decode(client_public))
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.CURVE_SERVERKEY, server_public)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, client_public)
    sock.setsockopt(zmq.CURVE_SECRETKEY, client_secret)
    sock.setsockopt(zmq.HEARTBEAT_IVL, 100)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 1000)
    sock.connect(endpoint)
    return sock


def client(endpoint, rid_hex, mesh, security, server_public, client_secret):
    node_rid = bytes.fromhex(rid_hex)
    ctx = zmq.Context()
    sock = curve_dealer(ctx, endpoint, server_public, client_secret)
    sock.setsockopt(zmq.RCVTIMEO, 5000)

    sock.send_multipart(hello(mesh, security, "tcp://127.0.0.1:1"))
    admit = expect(recv(sock, "admit"), 2, "admit")
    if b"mesh" not in admit[0] and mesh.encode() not in admit[0]:
        fail("admit does not carry the mesh name")
    sock.send_multipart(probe(7))
    ack = expect(recv(sock, "ack"), 6, "ack")
    if ack[0][5:] != u64(7):
        fail("ack echoes %r" % ack[0][5:])
    big = bytes(range(256)) * 400
    sock.send_multipart(spot_request(4242, node_rid, big))
    rep = expect(recv(sock, "reply"), 20, "reply")
    if rep[0][5:13] != u64(4242) or len(rep) != 2 or not rep[1].endswith(big):
        fail("reply to the 100 KiB request: %r" % [len(f) for f in rep])
    time.sleep(2)  # heartbeats: PING in MESSAGE boxes, our PONGs back
    sock.send_multipart(probe(8))
    ack = expect(recv(sock, "ack after heartbeats"), 6, "ack after heartbeats")
    if ack[0][5:] != u64(8):
        fail("ack after heartbeats echoes %r" % ack[0][5:])
    print("OK")
    sock.close()
    ctx.term()


def refused(endpoint, rid_hex, mesh, security, server_public, client_secret):
    ctx = zmq.Context()
    sock = curve_dealer(ctx, endpoint, server_public, client_secret)
    sock.setsockopt(zmq.RCVTIMEO, 1500)
    sock.send_multipart(hello(mesh, security, "tcp://127.0.0.1:1"))
    try:
        frames = sock.recv_multipart()
        fail("a refused key got an answer: %r" % frames)
    except zmq.Again:
        pass
    print("REFUSED")
    sock.close()
    ctx.term()


def zap_handler(ctx, allowed, ready):
    """RFC 27: accept the one allowed client key, refuse the rest."""
    zap = ctx.socket(zmq.REP)
    zap.linger = 0
    zap.bind("inproc://zeromq.zap.01")
    ready.set()
    while True:
        try:
            req = zap.recv_multipart()
        except zmq.ContextTerminated:
            return
        version, request_id, mechanism, key = req[0], req[1], req[5], req[6]
        ok = mechanism == b"CURVE" and key == allowed
        zap.send_multipart([version, request_id, b"200" if ok else b"400",
                            b"OK" if ok else b"refused", b"", b""])


def server(mesh, security, server_secret, allowed_public):
    ctx = zmq.Context()
    ready = threading.Event()
    threading.Thread(target=zap_handler, args=(ctx, z85.decode(allowed_public), ready), daemon=True).start()
    ready.wait()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_SECRETKEY, server_secret)
    sock.setsockopt(zmq.RCVTIMEO, 15000)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    print("ENDPOINT tcp://127.0.0.1:%d" % port, flush=True)
    admitted = False
    while True:
        frames = recv(sock, "a record from the node")
        ident, rec = frames[0], frames[1:]
        if not rec or len(rec[0]) < 5 or rec[0][:3] != b"ZM\x01":
            fail("not a service record: %r" % frames)
        cmd = rec[0][3]
        if cmd == 1:  # hello -> admit with our own admission
            admission = hello(mesh, security, "tcp://127.0.0.1:%d" % port)[0][5:]
            sock.send_multipart([ident, head(2) + admission])
            admitted = True
        elif cmd == 5:  # probe -> ack
            sock.send_multipart([ident, head(6) + rec[0][5:13]])
        elif any(b"from go over curve" in f for f in rec):
            if not admitted:
                fail("record before hello")
            print("OK", flush=True)
            break
    sock.close()
    ctx.term()


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "client":
        endpoint, rid_hex, mesh, security, spub, csec = args
        client(endpoint, rid_hex, mesh, security, spub.encode(), csec.encode())
    elif mode == "refused":
        endpoint, rid_hex, mesh, security, spub, csec = args
        refused(endpoint, rid_hex, mesh, security, spub.encode(), csec.encode())
    elif mode == "server":
        mesh, security, ssec, cpub = args
        server(mesh, security, ssec.encode(), cpub.encode())
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
