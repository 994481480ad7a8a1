"""A WebSocket echo server on 127.0.0.1:PORT (argv[1]), the standard library only.

Run inside a sandbox by the E2B-compatible tests: a WebSocket through `getHost(port)` and the
port tunnel. It answers the RFC 6455 handshake, then sends back each text frame it gets
(unmasked, as a server must) until a close frame or the end of the connection.
"""
import base64
import hashlib
import socketserver
import struct
import sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(stream, size):
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        headers = {}
        self.rfile.readline()
        while True:
            line = self.rfile.readline().decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].encode() + GUID).digest())
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        try:
            while True:
                first, second = read_exact(self.rfile, 2)
                opcode = first & 0x0F
                length = second & 0x7F
                if length == 126:
                    length = struct.unpack(">H", read_exact(self.rfile, 2))[0]
                elif length == 127:
                    length = struct.unpack(">Q", read_exact(self.rfile, 8))[0]
                mask = read_exact(self.rfile, 4) if second & 0x80 else b"\0\0\0\0"
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(read_exact(self.rfile, length)))
                if opcode == 0x8:
                    self.wfile.write(b"\x88\x00")
                    return
                if length < 126:
                    head = bytes([0x80 | opcode, length])
                elif length < 65536:
                    head = bytes([0x80 | opcode, 126]) + struct.pack(">H", length)
                else:
                    head = bytes([0x80 | opcode, 127]) + struct.pack(">Q", length)
                self.wfile.write(head + payload)
        except EOFError:
            return


if __name__ == "__main__":
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", int(sys.argv[1])), Echo) as server:
        server.serve_forever()
