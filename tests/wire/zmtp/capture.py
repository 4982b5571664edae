"""Captures what libzmq writes on a data-plane connection, as vLLM's engine opens it.

vLLM's engine core connects a DEALER (routing id = its DP rank as 2 little-endian bytes) to the
gateway's input ROUTER and a PUSH to its output PULL, both with pyzmq. This plays the gateway's
side with a plain Unix listener, answers with a ZMTP 3.1 greeting and READY, and records the
engine side's bytes: the greeting, the READY, and one message of each kind. Run it with the
real-vLLM venv's python (pyzmq bundles libzmq 4.3.5) to refresh `pyzmq-4.3.5.json`:

    ~/.cache/real-vllm/venv/bin/python tests/wire/zmtp/capture.py > tests/wire/zmtp/pyzmq-4.3.5.json
"""

import json
import os
import socket
import struct
import tempfile
import time

import zmq

GREETING = b"\xff" + b"\x00" * 7 + b"\x01\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31


def ready(socket_type: bytes, identity: bool) -> bytes:
    props = bytes([11]) + b"Socket-Type" + struct.pack(">I", len(socket_type)) + socket_type
    if identity:
        props += bytes([8]) + b"Identity" + struct.pack(">I", 0)
    body = b"\x05READY" + props
    return bytes([0x04, len(body)]) + body


def capture(kind: int, ours: bytes, send) -> str:
    path = os.path.join(tempfile.mkdtemp(), "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    ctx = zmq.Context()
    peer = ctx.socket(kind)
    if kind == zmq.DEALER:
        peer.setsockopt(zmq.IDENTITY, (1).to_bytes(2, "little"))
    peer.connect(f"ipc://{path}")
    conn, _ = listener.accept()
    conn.sendall(GREETING + ready(ours, ours == b"ROUTER"))
    send(peer)
    conn.settimeout(0.5)
    data = b""
    deadline = time.time() + 2
    while time.time() < deadline:
        try:
            chunk = conn.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    peer.close(linger=0)
    ctx.term()
    conn.close()
    listener.close()
    return data.hex()


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "libzmq": zmq.zmq_version(),
                "pyzmq": zmq.__version__,
                # Registration-like message on the input socket, then a 3-frame output.
                "dealer": capture(zmq.DEALER, b"ROUTER", lambda s: s.send(b"reg")),
                "push": capture(zmq.PUSH, b"PULL", lambda s: s.send_multipart([b"out", b"", b"x" * 300])),
            },
            indent=1,
        )
    )
