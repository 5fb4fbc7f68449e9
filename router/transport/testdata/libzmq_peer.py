#!/usr/bin/env python3
"""A real libzmq peer for router/transport's interop test (libzmq_test.go).

It uses the system's libzmq through pyzmq: a DEALER with routing id
b"pyzmq-peer" connects to a meshnode ROUTER and speaks service records encoded
here by hand, independently of the Go codec:

  1. hello (command 1) with a route-mesh admission  -> expects admit (2)
  2. livenessProbe (5)                               -> expects livenessAck (6), same id
  3. spotRequest (22) with a payload                 -> expects reply (20), same correlation, payload echoed
  4. a series of malformed records                   -> expects nothing back
  5. livenessProbe again                             -> expects its ack: the node survived

Usage: libzmq_peer.py ENDPOINT NODE_RID_HEX MESH SECURITY_IDENTITY
Prints "malformed=N" and "OK" on success; exits 1 with a reason otherwise.
"""
import struct
import sys

import zmq

PEER_ID = b"pyzmq-peer"


def head(cmd, flags=0):
    return b"ZM" + bytes([1, cmd, flags])


def text8(s):
    b = s.encode()
    assert 1 <= len(b) <= 255
    return bytes([len(b)]) + b


def u8(v):
    return struct.pack(">B", v)


def u16(v):
    return struct.pack(">H", v)


def u32(v):
    return struct.pack(">I", v)


def u64(v):
    return struct.pack(">Q", v)


def tlv(field_id, value):
    return u8(field_id) + u32(len(value)) + value


def hello(mesh, security, endpoint):
    ext = b"".join([
        tlv(1, u8(1)),                                   # runtimeState: serving
        tlv(2, u64(0)),                                  # applicationVersion
        tlv(6, u16(1) + text8("framework-service-v11")),  # protocolCapabilities
        tlv(7, u8(0)),                                   # objectRole: none
        tlv(8, u32(0)),                                  # placementWeight
        tlv(9, u32(1)),                                  # activeCapacityLimit
        tlv(10, u32(0)),                                 # pendingCapacityLimit
        tlv(11, u32(0)),                                 # activeCapacityUsed
        tlv(12, u32(0)),                                 # pendingCapacityUsed
    ])
    ep = endpoint.encode()
    route_mesh = (text8(mesh) + text8(security) + u64(1) + u64(1)
                  + u16(len(ep)) + ep
                  + u16(0)                               # no channels
                  + u32(len(ext)) + ext)
    admission = u8(1) + u32(len(route_mesh)) + route_mesh  # topologyKind routeMesh
    return [head(1) + admission]


def probe(probe_id):
    return [head(5) + u64(probe_id)]


def payload_frame(data):
    body = text8("py.Packet") + text8("application/octet-stream") + u32(len(data)) + data
    return u8(1) + u32(len(body)) + body


def spot_request(correlation, node_rid, data):
    fence = (text8("spot-1") + u64(1)                   # spot ref
             + u8(len(node_rid)) + node_rid             # targetNodeRid
             + u64(1) + u64(1) + u64(1))                # node gen, authority owner gen, lease gen
    body = (u64(correlation) + u64(0) + u64(7)          # correlation, operation id (nonzero)
            + u8(0) + text8("py-src") + fence)
    return [head(22) + body, payload_frame(data)]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def recv(sock, what):
    try:
        return sock.recv_multipart()
    except zmq.Again:
        fail("no %s within the timeout" % what)


def expect(frames, cmd, what):
    if not frames or len(frames[0]) < 5 or frames[0][:3] != b"ZM\x01":
        fail("%s: not a service record: %r" % (what, frames))
    if frames[0][3] != cmd:
        fail("%s: got command %d, want %d (%r)" % (what, frames[0][3], cmd, frames))
    return frames


def main():
    endpoint, rid_hex, mesh, security = sys.argv[1:5]
    node_rid = bytes.fromhex(rid_hex)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, PEER_ID)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.connect(endpoint)

    sock.send_multipart(hello(mesh, security, "tcp://127.0.0.1:1"))
    admit = expect(recv(sock, "admit"), 2, "admit")
    if text8(mesh) not in admit[0]:
        fail("admit does not carry the mesh name")

    sock.send_multipart(probe(0x0102030405060708))
    ack = expect(recv(sock, "ack"), 6, "ack")
    if ack[0][5:] != u64(0x0102030405060708):
        fail("ack echoes %r" % ack[0][5:])

    sock.send_multipart(spot_request(4242, node_rid, b"from libzmq"))
    rep = expect(recv(sock, "reply"), 20, "reply")
    if rep[0][5:13] != u64(4242):
        fail("reply correlation %r" % rep[0][5:13])
    if len(rep) != 2 or not rep[1].endswith(b"from libzmq"):
        fail("reply payload %r" % rep[1:])

    malformed = [
        [b"\x00garbage"],                       # bad magic
        [b"ZM\x02\x05\x00" + u64(1)],           # wire major 2
        [b"ZM\x01\x07\x00" + u64(1)],           # unknown command
        [head(5, 1) + u64(1), b"\x01\x00"],     # forbidden metadata flag on a probe
        [head(5) + u64(0)],                     # zero probe id
        [head(5) + b"\x00\x01"],                # truncated probe id
        [head(5) + u64(1) + b"\x00"],           # trailing byte
        [head(5) + u64(1), b"extra frame"],     # wrong frame count
        [b""],                                  # empty frame
        [head(22)],                             # request without body or payload
        hello(mesh, security, "tcp://127.0.0.1:1"),  # second hello on an admitted connection
    ]
    for m in malformed:
        sock.send_multipart(m)

    sock.send_multipart(probe(99))
    ack = expect(recv(sock, "ack after malformed records"), 6, "ack after malformed records")
    if ack[0][5:] != u64(99):
        fail("ack after malformed records echoes %r" % ack[0][5:])

    print("malformed=%d" % len(malformed))
    print("OK")
    sock.close()
    ctx.term()


if __name__ == "__main__":
    main()
