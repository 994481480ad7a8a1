"""The launcher's channel inside a Kubernetes sandbox pod (ADR 47).

Run as `python3 -I -S pod-channel.py` beside the launcher (launcher.py), which is the pod's PID 1.
A local sandbox's launcher connects out to the host's unix socket; a pod has no host end to
mount, so this process is that end, in the pod: it listens where the launcher connects (CHANNEL)
and takes the one connection the launcher keeps. Berth reaches it through the Kubernetes exec
API: each exec runs `pod-channel-client.pl`, which connects to this process's abstract socket
(CLIENTS) and relays the exec's stdin and stdout to it. Many clients at once share the one
channel: each speaks the launcher's frames (launcher.py's FRAME) with ids of its own, which this
process maps to ids of the channel and back. A client is sent the launcher's HELLO first.

When a client goes away (its exec ended, or the pod was restored from a checkpoint, which ends
every process an exec started) its execs are cancelled, as the launcher cancels a channel's
execs when the host goes away; background processes stay. Started by the launcher's command line
before it becomes the launcher, this process is the launcher's child: it is inside a checkpoint,
and after a restore it is still there, listening and connected.
"""
import os
import selectors
import socket
import struct
import sys

CHANNEL = os.environ.get('BERTH_LAUNCHER_CHANNEL', '/run/berth/channel/launcher.sock')
CLIENTS = os.environ.get('BERTH_POD_CHANNEL', 'berth-pod-channel')
# launcher.py's FRAME: payload length, id, kind (big-endian); its HELLO and CANCEL kinds.
FRAME = struct.Struct('>IIB')
HELLO, CANCEL = 1, 6
# Largest frame a client may send (the host's MAX_FRAME_BYTES), and the launcher (the host's
# MAX_RECEIVED_FRAME_BYTES: its answer to `output` carries two streams' last MiB in base64).
MAX_PAYLOAD = 1 << 20
MAX_LAUNCHER_PAYLOAD = 4 << 20
SEND_TIMEOUT_S = 10
# Bytes of clients' frames kept while the launcher has not connected yet (a pod that just started).
MAX_PENDING = 16 << 20


def read_frames(buffer, limit=MAX_PAYLOAD):
    """The whole frames at the start of `buffer` as (id, kind, payload), and the bytes left over."""
    frames = []
    while len(buffer) >= FRAME.size:
        length, frame_id, kind = FRAME.unpack_from(buffer)
        if length > limit + (1 << 16):
            raise ValueError(f'a frame of {length} bytes')
        if len(buffer) < FRAME.size + length:
            break
        frames.append((frame_id, kind, buffer[FRAME.size:FRAME.size + length]))
        buffer = buffer[FRAME.size + length:]
    return frames, buffer


class Client:
    def __init__(self, conn):
        self.conn = conn
        self.received = b''
        # the client's id -> the channel's
        self.ids = {}


class Broker:
    def __init__(self, listener, clients):
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, 'listener')
        self.selector.register(clients, selectors.EVENT_READ, 'clients')
        self.clients_server = clients
        self.launcher = None
        self.from_launcher = b''
        self.hello = None
        self.clients = []
        # the channel's id -> (client, the client's id)
        self.routes = {}
        self.next_id = 1
        # Frames of clients that came before the launcher connected: sent to it once it does.
        self.pending = []
        self.pending_bytes = 0

    def take_id(self):
        while True:
            frame_id = self.next_id
            self.next_id = 1 if self.next_id >= 0xffffffff else self.next_id + 1
            if frame_id not in self.routes:
                return frame_id

    def send(self, client, frame_id, kind, payload):
        try:
            client.conn.sendall(FRAME.pack(len(payload), frame_id, kind) + payload)
        except OSError:
            self.drop(client)

    def accept_launcher(self):
        conn, _ = self.listener.accept()
        if self.launcher is not None:  # a launcher that reconnects: the newer connection wins
            self.selector.unregister(self.launcher)
            self.launcher.close()
        conn.settimeout(SEND_TIMEOUT_S)
        self.launcher, self.from_launcher = conn, b''
        self.selector.register(conn, selectors.EVENT_READ, 'launcher')
        pending, self.pending, self.pending_bytes = self.pending, [], 0
        for _, data in pending:
            self.launcher.sendall(data)

    def accept_client(self):
        conn, _ = self.clients_server.accept()
        conn.settimeout(SEND_TIMEOUT_S)
        client = Client(conn)
        self.clients.append(client)
        self.selector.register(conn, selectors.EVENT_READ, client)
        if self.hello is not None:
            self.send(client, 0, HELLO, self.hello)

    def launcher_lost(self):
        self.selector.unregister(self.launcher)
        self.launcher.close()
        self.launcher, self.hello = None, None
        for client in list(self.clients):  # their execs ended with the launcher's connection
            self.drop(client, cancel=False)

    def from_the_launcher(self):
        try:
            data = self.launcher.recv(262144)
        except OSError:
            data = b''
        if not data:
            return self.launcher_lost()
        try:
            frames, self.from_launcher = read_frames(self.from_launcher + data, MAX_LAUNCHER_PAYLOAD)
        except ValueError as error:
            log(f'the launcher sent {error}')
            return self.launcher_lost()
        for frame_id, kind, payload in frames:
            if kind == HELLO:
                self.hello = payload
                for client in list(self.clients):
                    self.send(client, 0, HELLO, payload)
                continue
            route = self.routes.get(frame_id)
            if route is not None:
                self.send(route[0], route[1], kind, payload)

    def from_a_client(self, client):
        try:
            data = client.conn.recv(262144)
        except OSError:
            data = b''
        if not data:
            return self.drop(client)
        try:
            frames, client.received = read_frames(client.received + data)
        except ValueError:
            return self.drop(client)
        for frame_id, kind, payload in frames:
            channel_id = client.ids.get(frame_id)
            if channel_id is None:
                channel_id = client.ids[frame_id] = self.take_id()
                self.routes[channel_id] = (client, frame_id)
            data = FRAME.pack(len(payload), channel_id, kind) + payload
            if self.launcher is None:
                # The launcher connects a moment after the pod starts: the frames wait for it.
                if self.pending_bytes + len(data) > MAX_PENDING:
                    return self.drop(client)
                self.pending.append((channel_id, data))
                self.pending_bytes += len(data)
                continue
            try:
                self.launcher.sendall(data)
            except OSError:
                return self.launcher_lost()

    def drop(self, client, cancel=True):
        if client not in self.clients:
            return
        self.clients.remove(client)
        self.selector.unregister(client.conn)
        client.conn.close()
        gone = set(client.ids.values())
        kept = [(channel_id, data) for channel_id, data in self.pending if channel_id not in gone]
        self.pending_bytes -= sum(len(data) for channel_id, data in self.pending if channel_id in gone)
        self.pending = kept
        for channel_id in client.ids.values():
            del self.routes[channel_id]
            if cancel and self.launcher is not None:
                # An exec whose client went away is killed; for any other id the launcher ignores it.
                try:
                    self.launcher.sendall(FRAME.pack(0, channel_id, CANCEL))
                except OSError:
                    return self.launcher_lost()

    def serve(self):
        while True:
            for key, _ in self.selector.select():
                try:
                    if key.data == 'listener':
                        self.accept_launcher()
                    elif key.data == 'clients':
                        self.accept_client()
                    elif key.data == 'launcher':
                        if self.launcher is not None:
                            self.from_the_launcher()
                    elif key.data in self.clients:
                        self.from_a_client(key.data)
                except Exception as error:  # one connection's trouble ends no other's
                    log(repr(error))


def log(message):
    print(f'berth-pod-channel: {message}', file=sys.stderr, flush=True)


def main():
    try:
        os.unlink(CHANNEL)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(CHANNEL)
    listener.listen(4)
    clients = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    clients.bind('\0' + CLIENTS)
    clients.listen(128)
    Broker(listener, clients).serve()


if __name__ == '__main__':
    main()
