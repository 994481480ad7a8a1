"""The egress relay: the sandbox's way out, to the egress proxy on the host (ADR 46).

Run as `python3 -I -S egress-relay.py` under the name berth-egress-relay, started by the launcher
at the first connection to its port in a sandbox that has the egress folder mounted (ADR 49): the
launcher listens until then and hands its listening socket over as descriptor LISTEN_FD, with that
first connection still waiting in it. Run alone (tests, the bench), it listens itself. The sandbox has no network device
(runsc --network=none): only its loopback. The relay listens there, on 127.0.0.1:3128, which the
sandbox's HTTP_PROXY and HTTPS_PROXY name, and carries each connection it accepts, byte for byte,
to the host's egress proxy over the unix socket at SOCKET (mounted from the sandbox's directory;
runsc's --host-uds=open lets it connect). The proxy decides what the connection may reach; the
relay decides nothing and holds no state beyond its open connections, so a sandbox restored from
a checkpoint keeps relaying (a connection cut by the restore is the client's to open again).
"""
import os
import socket
import sys
import threading

NAME = 'berth-egress-relay'
COMM = 'berth-egress'
# Tests run a relay of their own on the host, with a port and socket of their own.
PORT = int(os.environ.get('BERTH_EGRESS_PORT', '3128'))
SOCKET = os.environ.get('BERTH_EGRESS_SOCKET', '/run/berth/egress/proxy.sock')
LISTEN_FD = os.environ.get('BERTH_EGRESS_LISTEN_FD')
CHUNK = 64 * 1024
# What a client reads when the host's proxy cannot be reached (Berth is restarting, say).
UNREACHABLE = (
    b'HTTP/1.1 502 Berth egress proxy unreachable\r\n'
    b'Content-Type: text/plain\r\nConnection: close\r\nContent-Length: 42\r\n\r\n'
    b'berth: the egress proxy cannot be reached\n'
)


def pump(source, target):
    """Copies source to target until source ends, then ends target's writing side."""
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(client):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(SOCKET)
    except OSError as error:
        log(f'cannot reach the egress proxy at {SOCKET}: {error}')
        try:
            client.sendall(UNREACHABLE)
        except OSError:
            pass
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(server):
    while True:
        try:
            client, _ = server.accept()
        except OSError as error:
            log(f'accept failed: {error}')
            continue
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=relay, args=(client,), daemon=True).start()


def log(message):
    print(f'{NAME}: {message}', file=sys.stderr, flush=True)


def main():
    # Seen by name among the sandbox's processes (/proc/*/comm holds 15 bytes), as the launcher is.
    with open('/proc/self/comm', 'w') as comm:
        comm.write(COMM)
    serve(listener())


def listener():
    """The socket the launcher handed over, or one of its own."""
    if LISTEN_FD is not None:
        os.environ.pop('BERTH_EGRESS_LISTEN_FD')
        return socket.socket(fileno=int(LISTEN_FD))
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(('127.0.0.1', PORT))
    server.listen(128)
    return server


if __name__ == '__main__':
    main()
