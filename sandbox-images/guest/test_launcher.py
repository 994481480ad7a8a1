"""Unit tests of the launcher's pure parts; providers/src/local/launcher.test.ts runs it with its client."""
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launcher  # noqa: E402


def process_state(pid):
    """The state letter of process `pid` (`R`, `S`, `Z`, ...), or None once it is gone (reaped meanwhile too)."""
    try:
        with open(f'/proc/{pid}/stat') as stat:
            return stat.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return None


def wait_status(argv):
    pid = os.spawnvp(os.P_NOWAIT, argv[0], argv)
    return os.waitpid(pid, 0)[1]


class OutcomeTest(unittest.TestCase):
    def test_exit(self):
        self.assertEqual(launcher.outcome(wait_status(['sh', '-c', 'exit 124'])), {'outcome': 'exited', 'exitCode': 124})

    def test_signal(self):
        status = wait_status(['sh', '-c', 'kill -TERM $$'])
        self.assertEqual(launcher.outcome(status), {'outcome': 'signaled', 'signal': 15, 'exitCode': 143})

    def test_stopped_at_the_limit(self):
        status = wait_status(['sh', '-c', 'kill -KILL $$'])
        self.assertEqual(launcher.outcome(status, signal.SIGKILL), {'outcome': 'timedOut', 'signal': 9, 'exitCode': 137})
        # A program that exits by itself after TERM still timed out.
        status = wait_status(['sh', '-c', 'exit 3'])
        self.assertEqual(launcher.outcome(status, signal.SIGTERM), {'outcome': 'timedOut', 'signal': 15, 'exitCode': 3})

    def test_failure(self):
        self.assertEqual(launcher.failure('no program after --'), {'outcome': 'failed', 'error': 'no program after --'})


class RequestTest(unittest.TestCase):
    def test_two_descriptors(self):
        self.assertEqual(launcher.parse_request(b'4 6\n'), [4, 6])

    def test_anything_else_is_refused(self):
        for line in (b'4\n', b'4 6 8\n', b'x y\n'):
            with self.assertRaises(ValueError):
                launcher.parse_request(line)


class FrameTest(unittest.TestCase):
    def test_round_trip(self):
        data = launcher.frame(7, launcher.STDOUT, b'out') + launcher.frame(0, launcher.HELLO, b'{}')
        frames, rest = launcher.read_frames(data)
        self.assertEqual(frames, [(7, launcher.STDOUT, b'out'), (0, launcher.HELLO, b'{}')])
        self.assertEqual(rest, b'')

    def test_a_frame_cut_short_waits_for_the_rest(self):
        data = launcher.frame(3, launcher.EXEC, b'{"argv": ["true"]}')
        for cut in range(len(data)):
            frames, rest = launcher.read_frames(data[:cut])
            self.assertEqual((frames, rest), ([], data[:cut]))

    def test_an_oversized_frame_is_refused(self):
        with self.assertRaises(ValueError):
            launcher.read_frames(launcher.FRAME.pack(launcher.MAX_REQUEST + 1, 1, launcher.EXEC))


class ExecRequestTest(unittest.TestCase):
    def test_fields(self):
        request = launcher.parse_exec(json.dumps({'argv': ['bash', 'a.sh'], 'env': {'A': '1'}, 'cwd': '/workspace', 'limitMs': 1500, 'maxOutputBytes': 10}))
        self.assertEqual(request, {'argv': [b'bash', b'a.sh'], 'env': {b'A': b'1'}, 'cwd': '/workspace', 'limit': 1.5, 'cap': 10, 'stdin': None, 'pty': None, 'background': False, 'keep_stdin': False})

    def test_bad_requests_are_refused(self):
        for bad in ({'argv': []}, {'argv': 'true', 'maxOutputBytes': 1}, {'argv': ['true'], 'env': {'A': 1}, 'maxOutputBytes': 1},
                    {'argv': ['true'], 'limitMs': 0, 'maxOutputBytes': 1}, {'argv': ['true']},
                    {'argv': ['true'], 'maxOutputBytes': 1, 'keepStdin': True}, {'argv': ['true'], 'maxOutputBytes': 1, 'background': True, 'keepStdin': 1}):
            with self.assertRaises((ValueError, TypeError)):
                launcher.parse_exec(json.dumps(bad))

    def test_output_past_the_cap_is_counted_not_kept(self):
        output = launcher.Output(1, None, launcher.STDOUT, 5)
        self.assertEqual(output.take(b'abc'), [(1, b'abc')])
        self.assertEqual(output.take(b'defg'), [(1, b'de')])
        self.assertEqual(output.take(b'h'), [])
        self.assertEqual(output.dropped, 3)


class BackgroundOrderTest(unittest.TestCase):
    """What a follow from byte offsets is sent first: the kept bytes past them, in the order they came."""

    def test_a_follow_from_offsets_gets_what_is_kept_past_them_in_order(self):
        process = launcher.Background(1, [b'x'], [launcher.Ring(None, launcher.STDOUT, 8), launcher.Ring(None, launcher.STDERR, 8)], None)
        out, err = process.outputs
        for ring, data in ((out, b'ab'), (err, b'XY'), (out, b'cd'), (err, b'Z'), (out, b'efghij')):
            ring.take(data)
        # stdout kept 'cdefghij' (2 dropped): from [3, 1] come 'defghij' of stdout and 'YZ' of stderr, in their order.
        self.assertEqual(process.since([3, 1]), [(1, b'Y'), (0, b'd'), (1, b'Z'), (0, b'efghij')])
        self.assertEqual(process.since([0, 0]), [(1, b'XY'), (0, b'cd'), (1, b'Z'), (0, b'efghij')])
        # Past the runs kept, older bytes come first, stream by stream.
        del process.runs[:3]
        self.assertEqual(process.since([0, 0]), [(0, b'cd'), (1, b'XY'), (1, b'Z'), (0, b'efghij')])
        self.assertEqual(process.since([10, 3]), [])
        process.followers.append(7)
        self.assertEqual(out.take(b'k'), [(7, b'k')])


class RunningLauncher(unittest.TestCase):
    """The launcher as a process on this host, connecting out to a channel this test listens on."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='berth-launcher-')
        self.path = os.path.join(self.dir, 'launcher.sock')
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.server.settimeout(10)
        self.workspace = os.path.join(self.dir, 'workspace')
        os.mkdir(self.workspace)
        env = dict(os.environ, BERTH_LAUNCHER_CHANNEL=self.path, BERTH_LAUNCHER_SOCKET=f'berth-launcher-unittest-{os.getpid()}',
                   BERTH_WORKSPACE=self.workspace)
        self.addCleanup(self.stop)
        self.process = subprocess.Popen([sys.executable, '-I', '-S', launcher.__file__], env=env, stdin=subprocess.DEVNULL)
        self.accept()

    def stop(self):
        self.process.kill()  # it ignores the signals that would end it, as PID 1 must
        self.process.wait()
        if hasattr(self, 'conn'):
            self.conn.close()
        self.server.close()
        shutil.rmtree(self.dir)

    def accept(self):
        conn, _ = self.server.accept()
        conn.settimeout(10)
        self.conn = conn
        self.received, self.pending = b'', []
        hello = self.frames(1)[0]
        self.assertEqual((hello[0], hello[1]), (0, launcher.HELLO))
        self.assertEqual(json.loads(hello[2])['protocol'], launcher.PROTOCOL)
        return conn

    def frames(self, count):
        while len(self.pending) < count:
            data = self.conn.recv(65536)
            if not data:
                raise EOFError('the launcher closed the channel')
            more, self.received = launcher.read_frames(self.received + data)
            self.pending += more
        frames, self.pending = self.pending[:count], self.pending[count:]
        return frames

    def exec(self, exec_id, argv, limit_ms=5000, cap=1 << 20, env=None):
        request = {'argv': argv, 'env': env or {}, 'cwd': self.dir, 'limitMs': limit_ms, 'maxOutputBytes': cap}
        self.conn.sendall(launcher.frame(exec_id, launcher.EXEC, json.dumps(request).encode()))

    def result(self, exec_id):
        out, err = b'', b''
        while True:
            (frame_id, kind, payload), = self.frames(1)
            self.assertEqual(frame_id, exec_id)
            if kind == launcher.STDOUT:
                out += payload
            elif kind == launcher.STDERR:
                err += payload
            else:
                self.assertEqual(kind, launcher.OUTCOME)
                return out, err, json.loads(payload)

    def send(self, exec_id, kind, payload):
        self.conn.sendall(launcher.frame(exec_id, kind, payload if isinstance(payload, bytes) else json.dumps(payload).encode()))

    def request(self, exec_id, extra, argv):
        self.send(exec_id, launcher.EXEC, dict({'argv': argv, 'env': {}, 'cwd': self.dir, 'maxOutputBytes': 1 << 20}, **extra))

    def reply(self, exec_id):
        (frame_id, kind, payload), = self.frames(1)
        self.assertEqual((frame_id, kind), (exec_id, launcher.REPLY))
        return json.loads(payload)


class ChannelTest(RunningLauncher):
    def test_exit_status_and_output_never_mixed(self):
        self.exec(1, ['bash', '-c', 'echo out; echo "timeout: sending signal TERM to command x" >&2; pwd >&2; exit 124'])
        out, err, outcome = self.result(1)
        self.assertEqual(out, b'out\n')
        self.assertEqual(err, f'timeout: sending signal TERM to command x\n{self.dir}\n'.encode())
        self.assertEqual(outcome, {'outcome': 'exited', 'exitCode': 124, 'dropped': [0, 0]})

    def test_environment_under_the_launchers_own_and_stdin_empty(self):
        self.exec(2, ['bash', '-c', 'echo "$GREETING ${BERTH_LAUNCHER_CHANNEL:+leaked}"; cat'], env={'GREETING': 'hi'})
        out, _, outcome = self.result(2)
        self.assertEqual(out, b'hi leaked\n')  # the launcher's environment is the sandbox's
        self.assertEqual(outcome['exitCode'], 0)

    def test_a_program_that_cannot_start(self):
        self.exec(3, ['no-such-program-here'])
        _, err, outcome = self.result(3)
        self.assertTrue(err.startswith(b'no-such-program-here: No such file or directory'), err)
        self.assertEqual(outcome['exitCode'], launcher.NOT_STARTED)

    def test_output_is_capped(self):
        self.exec(4, ['bash', '-c', 'head -c 100000 /dev/zero'], cap=1000)
        out, _, outcome = self.result(4)
        self.assertEqual(len(out), 1000)
        self.assertEqual(outcome['dropped'], [99000, 0])

    def test_limit_then_term(self):
        self.exec(5, ['sleep', '30'], limit_ms=300)
        _, _, outcome = self.result(5)
        self.assertEqual(outcome, {'outcome': 'timedOut', 'signal': 15, 'exitCode': 143, 'dropped': [0, 0]})

    def test_concurrent_execs_do_not_wait_for_each_other(self):
        # Each waits until all four have started: run one after another, the first would time out.
        barrier = f"touch {self.dir}/started-$0; for i in $(seq 200); do [ $(ls {self.dir} | grep -c '^started-') = 4 ] && exit 0; sleep 0.05; done; exit 1"
        for exec_id in range(10, 14):
            self.exec(exec_id, ['bash', '-c', barrier, str(exec_id)])
        outcomes = {}
        while len(outcomes) < 4:
            (frame_id, kind, payload), = self.frames(1)
            if kind == launcher.OUTCOME:
                outcomes[frame_id] = json.loads(payload)['exitCode']
        self.assertEqual(outcomes, {10: 0, 11: 0, 12: 0, 13: 0})

    def test_cancel_kills_the_program(self):
        self.exec(20, ['sleep', '30'])
        time.sleep(0.1)
        self.conn.sendall(launcher.frame(20, launcher.CANCEL))
        _, _, outcome = self.result(20)
        self.assertEqual(outcome['outcome'], 'signaled')
        self.assertEqual(outcome['signal'], 9)

    def test_returns_when_the_program_exits_though_a_background_child_holds_its_output(self):
        self.exec(21, ['bash', '-c', 'echo before; sleep 30 & echo after'], limit_ms=20000)
        out, _, outcome = self.result(21)
        # Not timedOut: the outcome came when bash exited, though the sleep keeps the pipes open.
        self.assertEqual((out, outcome), (b'before\nafter\n', {'outcome': 'exited', 'exitCode': 0, 'dropped': [0, 0]}))

    def test_a_closed_channel_kills_its_programs_and_the_launcher_connects_again(self):
        pid_file = os.path.join(self.dir, 'pid')
        self.exec(30, ['bash', '-c', f'echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 30'])
        while not os.path.exists(pid_file):
            time.sleep(0.01)
        with open(pid_file) as file:
            pid = int(file.read())
        self.conn.close()
        self.accept()
        deadline = time.monotonic() + 5
        while os.path.exists(f'/proc/{pid}') and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertFalse(os.path.exists(f'/proc/{pid}'))
        self.exec(31, ['true'])
        self.assertEqual(self.result(31)[2]['exitCode'], 0)

    def test_stdin_is_written_then_closed(self):
        data = b'line one\n' + b'x' * 300_000  # more than a pipe holds: written as the program reads
        self.request(40, {'stdin': base64.b64encode(data).decode()}, ['python3', '-c', 'import sys; d = sys.stdin.buffer.read(); print(len(d), d[:8])'])
        out, _, outcome = self.result(40)
        self.assertEqual((out, outcome['exitCode']), (f"{len(data)} b'line one'\n".encode(), 0))

    def test_a_terminal_exec_takes_input_and_resizes(self):
        self.request(41, {'pty': {'rows': 24, 'cols': 80}}, ['python3', '-i', '-q'])
        self.send(41, launcher.INPUT, b'1+1\n')
        screen = b''
        while b'2\r\n' not in screen:
            (frame_id, kind, payload), = self.frames(1)
            self.assertEqual((frame_id, kind), (41, launcher.STDOUT))
            screen += payload
        self.send(41, launcher.RESIZE, {'rows': 40, 'cols': 132})
        self.send(41, launcher.INPUT, b'import os; print(os.get_terminal_size(), os.isatty(0))\n')
        self.send(41, launcher.INPUT, b'exit()\n')
        out, _, outcome = self.result(41)
        self.assertIn(b'columns=132, lines=40) True', out)
        self.assertEqual(outcome, {'outcome': 'exited', 'exitCode': 0, 'dropped': [0, 0]})

    def test_bad_terminal_sizes_are_refused(self):
        for size in ({'rows': 0, 'cols': 80}, {'rows': 24}, [24, 80], {'rows': 24, 'cols': 5000}):
            with self.assertRaises(ValueError):
                launcher.parse_size(size)

    def test_background_processes_outlive_the_channel(self):
        self.request(50, {'background': True}, ['bash', '-c', 'echo started; echo warn >&2; read line; echo "got $line"; sleep 30'])
        started = self.reply(50)
        pid = started['pid']
        self.assertTrue(started['running'])
        self.conn.close()  # the host went away: the background process stays
        self.accept()
        self.send(51, launcher.CONTROL, {'op': 'list'})
        self.assertEqual([p['pid'] for p in self.reply(51)['processes']], [pid])
        self.send(52, launcher.CONTROL, {'op': 'wait', 'pid': pid, 'timeoutMs': 200})
        self.assertTrue(self.reply(52)['running'])  # answered at its timeout
        self.send(53, launcher.CONTROL, {'op': 'signal', 'pid': pid, 'signal': 'TERM'})
        self.reply(53)
        self.send(54, launcher.CONTROL, {'op': 'wait', 'pid': pid, 'timeoutMs': 5000})
        ended = self.reply(54)
        self.assertEqual((ended['running'], ended['outcome']), (False, {'outcome': 'signaled', 'signal': 15, 'exitCode': 143}))
        self.send(55, launcher.CONTROL, {'op': 'output', 'pid': pid})
        output = self.reply(55)
        self.assertEqual((base64.b64decode(output['stdout']), base64.b64decode(output['stderr'])), (b'started\ngot \n', b'warn\n'))  # its stdin is empty

    def follow_frames(self, follow_id):
        """A follow's chunks as [(kind, bytes)] up to its END, and the END's record."""
        chunks = []
        while True:
            (frame_id, kind, payload), = self.frames(1)
            self.assertEqual(frame_id, follow_id)
            if kind == launcher.END:
                return chunks, json.loads(payload)
            self.assertIn(kind, (launcher.STDOUT, launcher.STDERR))
            if chunks and chunks[-1][0] == kind:
                chunks[-1] = (kind, chunks[-1][1] + payload)
            else:
                chunks.append((kind, payload))

    def test_a_follow_is_pushed_the_output_in_order_as_it_comes(self):
        self.request(70, {'background': True, 'keepStdin': True},
                     ['bash', '-c', 'echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; read line; echo "got $line"; sleep 0.2; echo bye >&2'])
        pid = self.reply(70)['pid']
        # From the start: what was printed before the follow came first, in its order, then the rest as it comes.
        self.send(71, launcher.CONTROL, {'op': 'follow', 'pid': pid, 'from': [0, 0]})
        self.assertTrue(self.reply(71)['running'])
        before = []
        while sum(len(data) for _, data in before) < len(b'one\ntwo\nthree\n'):
            (frame_id, kind, payload), = self.frames(1)
            self.assertEqual(frame_id, 71)
            before.append((kind, payload))
        self.send(72, launcher.CONTROL, {'op': 'input', 'pid': pid, 'data': base64.b64encode(b'hello\n').decode()})
        self.assertEqual(self.reply_among(72)['pid'], pid)
        after, ended = self.follow_frames(71)
        chunks = []
        for kind, data in before + after:
            if chunks and chunks[-1][0] == kind:
                chunks[-1] = (kind, chunks[-1][1] + data)
            else:
                chunks.append((kind, data))
        self.assertEqual(chunks, [(launcher.STDOUT, b'one\n'), (launcher.STDERR, b'two\n'), (launcher.STDOUT, b'three\ngot hello\n'), (launcher.STDERR, b'bye\n')])
        self.assertEqual(ended['outcome'], {'outcome': 'exited', 'exitCode': 0})

    def reply_among(self, exec_id):
        """The REPLY to `exec_id`, leaving the other frames that came before it pending."""
        while True:
            for index, (frame_id, kind, payload) in enumerate(self.pending):
                if (frame_id, kind) == (exec_id, launcher.REPLY):
                    del self.pending[index]
                    return json.loads(payload)
            data = self.conn.recv(65536)
            if not data:
                raise EOFError('the launcher closed the channel')
            more, self.received = launcher.read_frames(self.received + data)
            self.pending += more

    def test_stdin_kept_open_takes_input_until_closed(self):
        self.request(80, {'background': True, 'keepStdin': True, 'stdin': base64.b64encode(b'first ').decode()}, ['cat'])
        pid = self.reply(80)['pid']
        self.send(81, launcher.CONTROL, {'op': 'follow', 'pid': pid})
        self.reply(81)
        self.send(82, launcher.CONTROL, {'op': 'input', 'pid': pid, 'data': base64.b64encode(b'second').decode()})
        self.assertTrue(self.reply_among(82)['running'])
        self.send(83, launcher.CONTROL, {'op': 'closeStdin', 'pid': pid})
        self.reply_among(83)
        chunks, ended = self.follow_frames(81)
        # 'first ' may have been read before the follow (from now on) began.
        self.assertTrue(b''.join(data for _, data in chunks).endswith(b'second'))
        self.assertEqual(ended['outcome'], {'outcome': 'exited', 'exitCode': 0})
        self.send(84, launcher.CONTROL, {'op': 'input', 'pid': pid, 'data': ''})
        self.assertEqual(self.reply(84)['error'], 'closed')
        self.send(85, launcher.CONTROL, {'op': 'output', 'pid': pid})
        self.assertEqual(base64.b64decode(self.reply(85)['stdout']), b'first second')

    def test_stdin_is_closed_without_keep_stdin_and_a_follow_can_be_cancelled(self):
        self.request(90, {'background': True}, ['bash', '-c', 'cat; echo "eof"; sleep 30'])
        pid = self.reply(90)['pid']
        self.send(91, launcher.CONTROL, {'op': 'closeStdin', 'pid': pid})
        self.assertEqual(self.reply(91)['error'], 'closed')
        self.send(92, launcher.CONTROL, {'op': 'follow', 'pid': pid, 'from': [0, 0]})
        self.reply(92)
        self.assertEqual(self.frames(1)[0][1:], (launcher.STDOUT, b'eof\n'))
        self.send(92, launcher.CANCEL, b'')
        self.send(93, launcher.CONTROL, {'op': 'signal', 'pid': pid, 'signal': 'KILL'})
        self.reply(93)
        self.send(94, launcher.CONTROL, {'op': 'wait', 'pid': pid, 'timeoutMs': 5000})
        self.assertFalse(self.reply(94)['running'])  # no END for the cancelled follow came before it
        self.send(95, launcher.EXEC, {'argv': ['true'], 'env': {}, 'cwd': self.dir, 'maxOutputBytes': 0, 'keepStdin': True})
        self.assertIn('keepStdin', self.frames(1)[0][2].decode())

    def test_background_output_keeps_the_last_bytes(self):
        ring = launcher.Ring(None, launcher.STDOUT, 4)
        for chunk in (b'abc', b'def', b'g'):
            ring.take(chunk)
        self.assertEqual((bytes(ring.data), ring.dropped), (b'defg', 3))

    def test_control_requests_are_checked(self):
        self.send(60, launcher.CONTROL, {'op': 'signal', 'pid': 1, 'signal': 'SEGV'})
        self.assertEqual(self.reply(60)['error'], 'bad_request')
        self.send(61, launcher.CONTROL, {'op': 'wait', 'pid': 999999, 'timeoutMs': 10})
        self.assertEqual(self.reply(61)['error'], 'not_found')

    def test_an_environment_set_later_reaches_the_programs_started_after_it(self):
        self.send(65, launcher.CONTROL, {'op': 'environment', 'env': {'AGENT_TOKEN': 's3cret', 'GREETING': 'from the agent'}})
        self.assertEqual(self.reply(65), {'environment': 2})
        self.exec(66, ['bash', '-c', 'echo "$AGENT_TOKEN $GREETING"'], env={'GREETING': 'from the exec'})
        out, _, outcome = self.result(66)
        self.assertEqual((out, outcome['exitCode']), (b's3cret from the exec\n', 0))  # the exec's own env still wins
        for bad in ({'A=B': 'x'}, {'': 'x'}, {'A': 1}, ['A'], {'A': 'x\0y'}):
            self.send(67, launcher.CONTROL, {'op': 'environment', 'env': bad})
            self.assertEqual(self.reply(67)['error'], 'bad_request')

    def test_the_largest_program_is_found_and_killed(self):
        hog = subprocess.Popen([sys.executable, '-c', 'x = bytearray(64 << 20); import time; time.sleep(60)'])
        self.addCleanup(hog.kill)
        proc = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, proc)
        for pid in (hog.pid, os.getpid()):
            os.symlink(f'/proc/{pid}', f'{proc}/{pid}')
        os.mkdir(f'{proc}/self')
        deadline = time.monotonic() + 10
        while launcher.largest_program(proc)['residentBytes'] < 64 << 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(launcher.largest_program(proc)['pid'], hog.pid)
        self.assertEqual(launcher.largest_program(proc, skip=(hog.pid,))['pid'], os.getpid())
        self.send(62, launcher.CONTROL, {'op': 'largest'})
        self.assertIsInstance(self.reply(62)['program']['residentBytes'], int)
        self.send(63, launcher.CONTROL, {'op': 'kill', 'pid': hog.pid})
        self.assertEqual(self.reply(63), {'killed': hog.pid})
        self.assertEqual(hog.wait(10), -signal.SIGKILL)
        self.send(64, launcher.CONTROL, {'op': 'kill', 'pid': 1})
        self.assertEqual(self.reply(64)['error'], 'bad_request')

    # Files and tunnels (ADR 40).

    def stream(self, stream_id):
        """DATA frames of a stream until its END: the bytes, the END's record; a WINDOW back for each DATA."""
        data = b''
        while True:
            (frame_id, kind, payload), = self.frames(1)
            self.assertEqual(frame_id, stream_id)
            if kind == launcher.END:
                return data, json.loads(payload)
            self.assertEqual(kind, launcher.DATA)
            data += payload
            self.send(stream_id, launcher.WINDOW, struct.pack('>I', len(payload)))

    def test_a_file_written_in_pieces_then_read_back(self):
        body = os.urandom(3 * launcher.STREAM_WINDOW + 12345)
        self.send(50, launcher.FILE, {'op': 'write', 'path': self.workspace + '/dir/blob.bin', 'parents': True, 'mode': 0o600})
        self.assertEqual(self.reply(50), {'ready': True})
        sent, room = 0, launcher.STREAM_WINDOW
        while sent < len(body):
            # Never more than the window ahead of what the launcher said it wrote.
            while room == 0:
                (frame_id, kind, payload), = self.frames(1)
                self.assertEqual((frame_id, kind), (50, launcher.WINDOW))
                room += launcher.parse_window(payload)
            piece = body[sent:sent + min(room, launcher.DATA_CHUNK)]
            self.send(50, launcher.DATA, piece)
            sent, room = sent + len(piece), room - len(piece)
        self.assertFalse(os.path.exists(self.workspace + '/dir/blob.bin'))  # nothing half-written at the path
        self.send(50, launcher.END, {})
        while True:
            (frame_id, kind, payload), = self.frames(1)
            if kind == launcher.END:
                break
            self.assertEqual(kind, launcher.WINDOW)
        info = json.loads(payload)['info']
        self.assertEqual((info['type'], info['size'], info['mode']), ('file', len(body), 0o600))
        self.send(51, launcher.FILE, {'op': 'read', 'path': self.workspace + '/dir/../dir/blob.bin'})
        self.assertEqual(self.reply(51)['info']['size'], len(body))
        data, end = self.stream(51)
        self.assertEqual((data, end), (body, {}))
        self.assertEqual(os.listdir(self.workspace + '/dir'), ['blob.bin'])

    def test_a_read_waits_for_room(self):
        with open(self.workspace + '/big', 'wb') as file:
            file.write(b'y' * (launcher.STREAM_WINDOW * 2))
        self.send(52, launcher.FILE, {'op': 'read', 'path': self.workspace + '/big'})
        self.reply(52)
        got = 0
        while got < launcher.STREAM_WINDOW:
            (_, kind, payload), = self.frames(1)
            self.assertEqual(kind, launcher.DATA)
            got += len(payload)
        self.assertEqual(got, launcher.STREAM_WINDOW)  # exactly the window, then nothing until a WINDOW
        self.conn.settimeout(0.3)
        with self.assertRaises(socket.timeout):
            self.frames(1)
        self.conn.settimeout(10)
        self.send(52, launcher.WINDOW, struct.pack('>I', launcher.STREAM_WINDOW))
        data, end = self.stream(52)
        self.assertEqual((len(data), end), (launcher.STREAM_WINDOW, {}))

    def test_an_upload_given_up_leaves_nothing(self):
        self.send(53, launcher.FILE, {'op': 'write', 'path': self.workspace + '/half'})
        self.reply(53)
        self.send(53, launcher.DATA, b'abc')
        (frame_id, kind, payload), = self.frames(1)
        self.assertEqual((frame_id, kind, launcher.parse_window(payload)), (53, launcher.WINDOW, 3))
        self.send(53, launcher.END, {'error': 'aborted'})
        self.send(54, launcher.FILE, {'op': 'list', 'path': self.workspace})
        self.assertEqual(self.reply(54), {'entries': [], 'omitted': 0})

    def test_paths_outside_the_workspace_are_refused_in_the_sandbox(self):
        os.symlink('/etc', self.workspace + '/etc-link')
        os.symlink('/etc/passwd', self.workspace + '/passwd-link')
        for stream_id, request in enumerate([
            {'op': 'read', 'path': self.workspace + '/passwd-link'},
            {'op': 'list', 'path': self.workspace + '/etc-link'},
            {'op': 'write', 'path': self.workspace + '/etc-link/x'},
            {'op': 'read', 'path': self.workspace + '/../launcher.sock'},
            {'op': 'tar', 'path': self.workspace + '/etc-link'},
            {'op': 'move', 'path': self.workspace + '/passwd-link', 'to': '/tmp/x'},
        ], start=60):
            self.send(stream_id, launcher.FILE, request)
            self.assertEqual(self.reply(stream_id)['error'], 'outside', request)
        # The link itself is inside: removing it removes the link, not /etc.
        self.send(70, launcher.FILE, {'op': 'remove', 'path': self.workspace + '/etc-link'})
        self.assertEqual(self.reply(70), {})
        self.assertTrue(os.path.isdir('/etc'))

    def test_list_mkdir_move_remove_and_tar(self):
        self.send(80, launcher.FILE, {'op': 'mkdir', 'path': self.workspace + '/a/b', 'parents': True})
        self.assertEqual(self.reply(80)['info']['type'], 'directory')
        with open(self.workspace + '/a/b/f.txt', 'w') as file:
            file.write('hello')
        self.send(81, launcher.FILE, {'op': 'mkdir', 'path': self.workspace + '/a'})
        self.assertEqual(self.reply(81)['error'], 'exists')
        self.send(82, launcher.FILE, {'op': 'move', 'path': self.workspace + '/a/b/f.txt', 'to': self.workspace + '/a/g.txt'})
        self.assertEqual(self.reply(82)['info']['size'], 5)
        self.send(83, launcher.FILE, {'op': 'list', 'path': self.workspace + '/a'})
        self.assertEqual([(e['name'], e['type']) for e in self.reply(83)['entries']], [('b', 'directory'), ('g.txt', 'file')])
        self.send(84, launcher.FILE, {'op': 'tar', 'path': self.workspace + '/a'})
        self.reply(84)
        data, end = self.stream(84)
        self.assertEqual(end, {})
        names = subprocess.run(['tar', '-t', '-f', '-'], input=data, capture_output=True, check=True).stdout.decode().split()
        self.assertEqual(sorted(names), ['./', './b/', './g.txt'])
        self.send(85, launcher.FILE, {'op': 'remove', 'path': self.workspace + '/a'})
        self.assertEqual(self.reply(85)['error'], 'not_empty')
        self.send(86, launcher.FILE, {'op': 'remove', 'path': self.workspace + '/a', 'recursive': True})
        self.assertEqual(self.reply(86), {})
        self.send(87, launcher.FILE, {'op': 'stat', 'path': self.workspace + '/a'})
        self.assertEqual(self.reply(87)['error'], 'not_found')
        self.send(88, launcher.FILE, {'op': 'remove', 'path': self.workspace})
        self.assertEqual(self.reply(88)['error'], 'bad_request')

    def test_a_deep_path_is_answered_not_dropped(self):
        # 2100 parts, just past the system's path limit: os.makedirs would recurse past Python's limit.
        self.addCleanup(subprocess.run, ['rm', '-rf', self.workspace + '/d'], check=True)  # deeper than this rmtree goes
        deep = self.workspace + '/d' + '/d' * 2099
        self.send(93, launcher.FILE, {'op': 'mkdir', 'path': deep, 'parents': True})
        self.assertEqual(self.reply(93)['error'], 'bad_request')  # ENAMETOOLONG, once made as deep as the system allows
        self.assertTrue(os.path.isdir(self.workspace + '/d/d/d'))
        shallow = self.workspace + '/e' + '/e' * 20
        self.send(94, launcher.FILE, {'op': 'mkdir', 'path': shallow, 'parents': True})
        self.assertEqual(self.reply(94)['info']['type'], 'directory')
        self.send(95, launcher.FILE, {'op': 'mkdir', 'path': shallow, 'parents': True})
        self.assertEqual(self.reply(95)['info']['type'], 'directory')
        # A tree deeper than Python's recursion limit, made a directory at a time: rmtree recursed
        # once per level before Python 3.12. Removed, or the failure answered; the launcher goes on.
        fd = os.open(self.workspace + '/d', os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(1200):
            try:
                os.mkdir('d', dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open('d', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(fd)
        self.send(96, launcher.FILE, {'op': 'remove', 'path': self.workspace + '/d', 'recursive': True})
        answer = self.reply(96)
        self.assertIn(answer.get('error'), (None, 'io_error'), answer)
        self.send(97, launcher.FILE, {'op': 'stat', 'path': shallow})
        self.assertEqual(self.reply(97)['info']['type'], 'directory')

    def test_a_tunnel_relays_both_ways_and_half_closes(self):
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(('127.0.0.1', 0))
        server.listen(1)
        self.addCleanup(server.close)
        port = server.getsockname()[1]
        self.send(90, launcher.TUNNEL, {'port': port})
        peer, _ = server.accept()
        peer.settimeout(10)
        self.assertEqual(self.reply(90), {'connected': True})
        self.send(90, launcher.DATA, b'ping')
        self.assertEqual(peer.recv(10), b'ping')
        (frame_id, kind, payload), = self.frames(1)
        self.assertEqual((frame_id, kind, launcher.parse_window(payload)), (90, launcher.WINDOW, 4))
        self.send(90, launcher.END, {})
        self.assertEqual(peer.recv(10), b'')  # the host's end reached the program as EOF
        peer.sendall(b'pong')
        peer.close()
        data, end = self.stream(90)
        self.assertEqual((data, end), (b'pong', {}))

    def test_a_tunnel_to_a_closed_port_is_refused(self):
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
        probe.close()
        self.send(91, launcher.TUNNEL, {'port': port})
        self.assertEqual(self.reply(91)['error'], 'refused')
        self.send(92, launcher.TUNNEL, {'port': 70000})
        self.assertEqual(self.reply(92)['error'], 'bad_request')


    # Directory watches (ADR 51).

    def changes(self, stream_id, until):
        """A watch's changes as (name, type) until `until(changes)` holds; its room given back as it goes."""
        changes = []
        deadline = time.monotonic() + 10
        while not until(changes):
            self.assertLess(time.monotonic(), deadline, changes)
            (frame_id, kind, payload), = self.frames(1)
            self.assertEqual((frame_id, kind), (stream_id, launcher.DATA), payload)
            changes += [(event['name'], event['type']) for event in map(json.loads, payload.decode().splitlines())]
            self.send(stream_id, launcher.WINDOW, struct.pack('>I', len(payload)))
        return changes

    def watches(self):
        """The launcher's inotify descriptors."""
        fds = f'/proc/{self.process.pid}/fd'
        return [fd for fd in os.listdir(fds) if 'inotify' in os.readlink(f'{fds}/{fd}')]

    def test_a_watch_tells_creates_writes_renames_removes_and_chmods_by_name(self):
        os.mkdir(self.workspace + '/w')
        self.send(100, launcher.FILE, {'op': 'watch', 'path': self.workspace + '/w', 'recursive': True})
        self.assertEqual(self.reply(100)['info']['type'], 'directory')
        with open(self.workspace + '/w/a.txt', 'w') as file:
            file.write('a')
        changes = self.changes(100, lambda seen: ('a.txt', 'write') in seen)
        self.assertEqual(changes[0], ('a.txt', 'create'))
        # A directory made and a file in it at once: its watch is added as it appears, and what
        # came before the watch is told as created.
        os.makedirs(self.workspace + '/w/sub/deeper')
        with open(self.workspace + '/w/sub/deeper/b.txt', 'w'):
            pass
        changes = self.changes(100, lambda seen: ('sub/deeper/b.txt', 'create') in seen)
        self.assertEqual(changes[0], ('sub', 'create'))
        os.rename(self.workspace + '/w/a.txt', self.workspace + '/w/sub/c.txt')
        os.chmod(self.workspace + '/w/sub/c.txt', 0o600)
        os.remove(self.workspace + '/w/sub/c.txt')
        changes = self.changes(100, lambda seen: ('sub/c.txt', 'remove') in seen)
        # (A directory's entries made as its watch was added may be told twice: by inotify and as found.)
        changes = [change for change in changes if not change[0].startswith('sub/deeper')]
        self.assertEqual(changes, [('a.txt', 'rename'), ('sub/c.txt', 'create'), ('sub/c.txt', 'chmod'), ('sub/c.txt', 'remove')])
        # An upload through the launcher is its path's create and write: its file beside the path is not told.
        seen = []
        for stream_id, content in ((101, b'new'), (102, b'again')):
            self.send(stream_id, launcher.FILE, {'op': 'write', 'path': self.workspace + '/w/up.txt'})
            while True:
                (frame_id, kind, payload), = self.frames(1)
                if frame_id == 100:
                    seen += [(event['name'], event['type']) for event in map(json.loads, payload.decode().splitlines())]
                    self.send(100, launcher.WINDOW, struct.pack('>I', len(payload)))
                elif kind == launcher.REPLY:
                    self.send(stream_id, launcher.DATA, content)
                    self.send(stream_id, launcher.END, {})
                elif kind == launcher.END:
                    break
        seen += self.changes(100, lambda more: (seen + more).count(('up.txt', 'write')) == 2)
        self.assertEqual(seen, [('up.txt', 'create'), ('up.txt', 'write'), ('up.txt', 'write')])
        # Closed by the host: the launcher lets the watch go.
        self.assertEqual(len(self.watches()), 1)
        self.send(100, launcher.END, {'error': 'aborted'})
        self.send(103, launcher.FILE, {'op': 'stat', 'path': self.workspace})
        self.reply(103)
        self.assertEqual(self.watches(), [])

    def test_a_watch_ends_with_its_directory_and_on_cancel(self):
        os.makedirs(self.workspace + '/gone/inner')
        self.send(104, launcher.FILE, {'op': 'watch', 'path': self.workspace + '/gone'})
        self.reply(104)
        # Not recursive: what happens in a directory under it is not told.
        with open(self.workspace + '/gone/inner/x', 'w'):
            pass
        shutil.rmtree(self.workspace + '/gone')
        self.assertEqual(self.changes(104, lambda seen: ('inner', 'remove') in seen), [('inner', 'remove')])
        (frame_id, kind, payload), = self.frames(1)
        self.assertEqual((frame_id, kind, json.loads(payload)['error']), (104, launcher.END, 'not_found'))
        self.send(105, launcher.FILE, {'op': 'watch', 'path': self.workspace})
        self.reply(105)
        self.assertEqual(len(self.watches()), 1)
        self.send(105, launcher.CANCEL, b'')  # pod-channel.py's, when the client of the watch went away
        self.send(106, launcher.FILE, {'op': 'stat', 'path': self.workspace})
        self.reply(106)
        self.assertEqual(self.watches(), [])

    def test_a_watch_is_refused_outside_the_workspace_and_for_what_is_no_directory(self):
        os.symlink('/etc', self.workspace + '/etc-link')
        with open(self.workspace + '/file', 'w'):
            pass
        for stream_id, request, error in (
            (107, {'op': 'watch', 'path': self.workspace + '/etc-link'}, 'outside'),
            (108, {'op': 'watch', 'path': self.workspace + '/..'}, 'outside'),
            (109, {'op': 'watch', 'path': self.workspace + '/file'}, 'not_directory'),
            (110, {'op': 'watch', 'path': self.workspace + '/none'}, 'not_found'),
            (111, {'op': 'watch', 'path': self.workspace, 'recursive': 'yes'}, 'bad_request'),
        ):
            self.send(stream_id, launcher.FILE, request)
            self.assertEqual(self.reply(stream_id)['error'], error, request)
        self.assertEqual(self.watches(), [])

    def test_a_recursive_watch_follows_no_link_out_of_the_workspace(self):
        outside = tempfile.mkdtemp(prefix='berth-outside-')
        self.addCleanup(shutil.rmtree, outside)
        os.symlink(outside, self.workspace + '/out')
        self.send(112, launcher.FILE, {'op': 'watch', 'path': self.workspace, 'recursive': True})
        self.reply(112)
        with open(outside + '/secret', 'w'):
            pass
        with open(self.workspace + '/inside', 'w'):
            pass
        self.assertEqual(self.changes(112, lambda seen: ('inside', 'create') in seen), [('inside', 'create')])


# What a python program sees of itself, its process and its environment; its pid on a line of its own.
PYTHON_PROBE = """import json, os, signal, stat, sys
main = sys.modules['__main__']
print(json.dumps({
    'argv': sys.argv, 'orig_argv': sys.orig_argv, 'name': __name__, 'file': __file__, 'path0': sys.path[0],
    'main': sorted(vars(main)), 'env': {k: v for k, v in os.environ.items() if k != 'BERTH_SPARE_INTERPRETERS'},
    'cwd': os.getcwd(), 'umask': os.umask(0o22),
    'signals': [str(signal.getsignal(n)) for n in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGHUP, signal.SIGUSR1, signal.SIGCHLD)],
    'masks': [line for line in open('/proc/self/status') if line.startswith(('SigIgn', 'SigBlk'))],
    'leader': [os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid()],
    'fds': sorted(os.listdir('/proc/self/fd')), 'stdin': os.path.realpath('/proc/self/fd/0'),
    'pipes': [stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (1, 2)], 'stdin_type': type(sys.stdin).__name__,
    'modules': sorted(sys.modules), 'path': sys.path}))
print(os.getpid())
"""

# The same for bash: `set` without what differs in a spare (BASH_LINENO, BASH_ARGV, BASH_ARGC: the `.` that runs
# the program; SECONDS: listed once set; see ADR 56), env, traps, options.
BASH_PROBE = """echo "0=$0 #=$# umask=$(umask) leader=$([ "$(ps -o sid= -p $$)" -eq $$ ] && [ "$(ps -o pgid= -p $$)" -eq $$ ] && echo yes)"
set | grep -v -e '^_=' -e '^BASH_LINENO=' -e '^BASH_ARGV=' -e '^BASH_ARGC=' -e '^SECONDS=' -e '^BERTH_SPARE_INTERPRETERS='
env | grep -v -e '^_=' -e '^BERTH_SPARE_INTERPRETERS=' | sort
trap -p; shopt | tr -s ' \\t' ' '; set -o | tr -s ' \\t' ' '
ls /proc/self/fd; readlink /proc/self/fd/0
echo $$
"""


class SpareTest(RunningLauncher):
    """Spare interpreters (ADR 56): an exec that fits one runs in it and sees what it would cold."""

    def program(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as file:
            file.write(text)
        return path

    def run_exec(self, argv, env=None, limit_ms=10000, cap=1 << 20):
        self.exec_id = getattr(self, 'exec_id', 100) + 1
        self.exec(self.exec_id, argv, limit_ms=limit_ms, cap=cap, env=env)
        return self.result(self.exec_id)

    def results(self, exec_ids):
        """The stdout of execs running at once, by id, once each one's outcome came."""
        outs, ended = {exec_id: b'' for exec_id in exec_ids}, set()
        while len(ended) < len(exec_ids):
            (frame_id, kind, payload), = self.frames(1)
            if kind == launcher.STDOUT:
                outs[frame_id] += payload
            elif kind == launcher.OUTCOME:
                ended.add(frame_id)
        return outs

    def spares(self):
        """The launcher's children that are spares, by pid: {pid: 'python' or 'bash'}."""
        found = {}
        for name in os.listdir('/proc'):
            try:
                with open(f'/proc/{name}/stat', 'rb') as file:
                    ppid = int(file.read().rsplit(b')', 1)[1].split()[1])
                args = launcher.strings(f'/proc/{name}/cmdline')
            except (OSError, ValueError, IndexError):
                continue
            if ppid == self.process.pid and (launcher.SPARE_PYTHON in args or launcher.SPARE_BASH in args):
                found[int(name)] = 'python' if launcher.SPARE_PYTHON in args else 'bash'
        return found

    def spare(self, kind, other_than=()):
        """The pid of the spare of `kind` once one is waiting (other than `other_than`)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for pid, found in self.spares().items():
                if found == kind and pid not in other_than:
                    return pid
            time.sleep(0.01)
        self.fail(f'no spare {kind} was started')

    def cold_and_spare(self, argv):
        """The program run cold (spares off), then by the spare that is waiting: both results, and the spare's pid."""
        spare = self.spare('python' if argv[0] == 'python3' else 'bash')
        cold = self.run_exec(argv, env={'BERTH_SPARE_INTERPRETERS': '0'})
        self.assertIn(spare, self.spares())  # a cold exec leaves the spare alone
        return cold, self.run_exec(argv), spare

    def warm(self, argv):
        self.run_exec(argv)

    def test_python_sees_what_it_would_cold(self):
        probe = self.program('probe.py', PYTHON_PROBE)
        self.warm(['python3', '-u', probe])
        cold, spared, spare = self.cold_and_spare(['python3', '-u', probe])
        cold_seen, cold_pid = cold[0].splitlines()
        seen, pid = spared[0].splitlines()
        self.assertEqual(int(pid), spare)  # run by the spare
        self.assertNotEqual(int(cold_pid), spare)
        self.assertEqual(json.loads(seen), json.loads(cold_seen))
        self.assertEqual(json.loads(seen)['argv'], [probe])
        self.assertEqual(json.loads(seen)['path0'], self.dir)
        self.assertEqual((spared[1], spared[2]['exitCode']), (b'', 0))

    def test_python_errors_and_exit_statuses_are_as_cold(self):
        programs = {
            'raises.py': 'def f():\n    raise ValueError("boom")\nprint("before", flush=True)\nf()\n',
            'exits.py': 'raise SystemExit(5)\n',
            'says.py': 'import sys\nsys.exit("a message")\n',
            'syntax.py': 'print("never")\nx = (\n',
            'interrupted.py': 'raise KeyboardInterrupt\n',
            'stdin.py': 'import sys\nprint(repr(sys.stdin.read()), sys.stdin.name)\n',
        }
        self.warm(['python3', '-u', self.program('warm.py', '')])
        for name, text in programs.items():
            path = self.program(name, text)
            cold, spared, spare = self.cold_and_spare(['python3', '-u', path])
            self.assertEqual(spared, cold, name)
            self.assertNotIn(b'spare.py', spared[1])
            self.spare('python', other_than=(spare,))  # the next one, for the next program
        self.assertEqual(spared[0], b"'' <stdin>\n")

    def test_bash_sees_what_it_would_cold(self):
        self.maxDiff = None
        probe = self.program('probe.sh', BASH_PROBE)
        self.warm(['bash', probe])
        cold, spared, spare = self.cold_and_spare(['bash', probe])
        *cold_lines, cold_pid = cold[0].splitlines()
        *lines, pid = spared[0].splitlines()
        self.assertEqual(int(pid), spare)
        self.assertEqual(lines, cold_lines)
        self.assertIn(f'0={probe} #=0'.encode(), lines[0])
        self.assertFalse([line for line in lines if b'BERTH_SPARE' in line or b'BASH_EXECUTION_STRING' in line])
        self.assertEqual((spared[1], spared[2]['exitCode']), (b'', 0))

    def test_bash_exit_statuses_and_syntax_errors_are_as_cold(self):
        self.warm(['bash', self.program('warm.sh', 'true\n')])
        for name, text in {'exits.sh': 'echo a; exit 7\n', 'syntax.sh': 'echo before\nif then )\necho after\n',
                           'seconds.sh': 'echo "$SECONDS ${BASH_SOURCE[*]}"\n', 'fails.sh': 'no-such-command-here\n'}.items():
            path = self.program(name, text)
            if name == 'seconds.sh':
                time.sleep(1.1)  # the spare has waited a second: SECONDS still counts from the program's start
            cold, spared, _ = self.cold_and_spare(['bash', path])
            self.assertEqual(spared, cold, name)

    def test_an_exec_that_does_not_fit_runs_cold_and_sees_its_own_environment(self):
        probe = self.program('env.py', 'import os\nprint(os.environ.get("GREETING"), "HOME" in os.environ, os.getcwd(), os.getpid())\n')
        self.warm(['python3', '-u', probe])
        spare = self.spare('python')
        # Another environment: cold, with the variable added; the spare stays for its own.
        out, _, _ = self.run_exec(['python3', '-u', probe], env={'GREETING': 'hi'})
        greeting, _, cwd, pid = out.split()
        self.assertEqual((greeting, cwd), (b'hi', self.dir.encode()))
        self.assertNotEqual(int(pid), spare)
        # The next spare is started with that exec's environment: a variable removed does not reach it.
        replaced = self.spare('python', other_than=(spare,))
        out, _, _ = self.run_exec(['python3', '-u', probe], env={'GREETING': 'hi'})
        self.assertEqual(out.split()[0::3], [b'hi', str(replaced).encode()])
        out, _, _ = self.run_exec(['python3', '-u', probe])
        self.assertEqual(out.split()[0], b'None')
        self.assertNotEqual(int(out.split()[3]), self.spare('python'))
        # Stdin, a terminal, arguments, another interpreter's flags: cold, and the spare stays.
        spare = self.spare('python')
        self.request(151, {'stdin': base64.b64encode(b'x').decode()}, ['python3', '-u', probe])
        self.request(152, {}, ['python3', '-u', probe, 'argument'])
        self.request(153, {}, ['python3', probe])
        for exec_id, out in self.results((151, 152, 153)).items():
            self.assertNotEqual(int(out.split()[3]), spare, exec_id)
        self.request(154, {'pty': {'rows': 24, 'cols': 80}}, ['python3', '-u', probe])
        self.assertNotIn(str(spare).encode(), self.result(154)[0])
        self.assertIn(spare, self.spares())
        # Another working directory: cold.
        self.send(155, launcher.EXEC, {'argv': ['python3', '-u', probe], 'env': {}, 'cwd': self.workspace, 'maxOutputBytes': 1 << 20})
        _, _, cwd, pid = self.result(155)[0].split()
        self.assertEqual((cwd, int(pid) != spare), (self.workspace.encode(), True))

    def test_an_environment_set_later_throws_the_spares_away(self):
        self.warm(['bash', self.program('warm.sh', 'true\n')])
        spare = self.spare('bash')
        self.send(160, launcher.CONTROL, {'op': 'environment', 'env': {'AGENT_TOKEN': 's3cret'}})
        self.reply(160)
        deadline = time.monotonic() + 5
        while spare in self.spares() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertNotIn(spare, self.spares())
        out, _, _ = self.run_exec(['bash', self.program('token.sh', 'echo "$AGENT_TOKEN"\n')])
        self.assertEqual(out, b's3cret\n')
        out, _, _ = self.run_exec(['bash', self.program('token.sh', 'echo "$AGENT_TOKEN $$"\n')])
        self.assertEqual(out.split()[0], b's3cret')

    def test_a_spare_that_died_is_replaced_never_used(self):
        probe = self.program('pid.sh', 'echo $$\n')
        self.warm(['bash', probe])
        spare = self.spare('bash')
        os.kill(spare, signal.SIGKILL)
        deadline = time.monotonic() + 5  # dead: reaped, or a zombie not reaped yet (its pipe broken)
        while process_state(spare) not in (None, 'Z'):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.005)
        out, err, outcome = self.run_exec(['bash', probe])
        self.assertEqual((err, outcome['exitCode']), (b'', 0))
        self.assertNotEqual(int(out), spare)
        self.assertNotEqual(self.spare('bash'), spare)

    def test_the_limit_the_cap_and_a_cancel_reach_a_spares_program(self):
        sleeper = self.program('sleeper.py', 'import subprocess, sys\nprint("out"); print("err", file=sys.stderr)\nsubprocess.run(["sleep", "30"])\n')
        self.warm(['python3', '-u', self.program('warm.py', '')])
        spare = self.spare('python')
        started = time.monotonic()
        out, err, outcome = self.run_exec(['python3', '-u', sleeper], limit_ms=500)
        self.assertLess(time.monotonic() - started, 5)
        self.assertEqual((out, err, outcome['outcome'], outcome['signal']), (b'out\n', b'err\n', 'timedOut', signal.SIGTERM))
        self.assertNotIn(spare, self.spares())
        spare = self.spare('python')
        out, _, outcome = self.run_exec(['python3', '-u', self.program('loud.py', 'print("x" * 100000)\n')], cap=1000)
        self.assertEqual((len(out), outcome['dropped']), (1000, [99001, 0]))
        self.assertNotIn(spare, self.spares())  # it ran there
        spare = self.spare('python')
        self.exec(170, ['python3', '-u', sleeper])
        self.assertEqual(self.frames(1)[0][:2], (170, launcher.STDOUT))
        self.send(170, launcher.CANCEL, b'')
        _, _, outcome = self.result(170)
        self.assertEqual((outcome['outcome'], outcome['signal']), ('signaled', signal.SIGKILL))

    def test_concurrent_execs_do_not_wait_for_the_spare(self):
        self.warm(['bash', self.program('warm.sh', 'true\n')])
        spare = self.spare('bash')
        barrier = self.program('barrier.sh', f"touch {self.dir}/started-$$; for i in $(seq 200); do [ $(ls {self.dir} | grep -c '^started-') = 3 ] && {{ echo $$; exit 0; }}; sleep 0.05; done; exit 1\n")
        for exec_id in (180, 181, 182):
            self.exec(exec_id, ['bash', barrier])
        pids = {}
        while len(pids) < 3:
            (frame_id, kind, payload), = self.frames(1)
            if kind == launcher.STDOUT:
                pids[frame_id] = int(payload)
            elif kind == launcher.OUTCOME:
                self.assertEqual(json.loads(payload)['exitCode'], 0)
        self.assertEqual(sorted(pids.values()).count(spare), 1)  # one took the spare, the others were spawned

    def test_no_spare_for_a_sandbox_that_never_execs_two_a_language_at_most(self):
        self.assertEqual(self.spares(), {})
        self.run_exec(['bash', '-c', 'true'])
        self.assertEqual(self.spares(), {})
        for _ in range(4):
            self.run_exec(['bash', self.program('a.sh', 'true\n')])
            self.run_exec(['python3', '-u', self.program('a.py', '')])
        self.spare('bash')
        self.spare('python')
        kinds = sorted(self.spares().values())
        self.assertLessEqual(kinds.count('bash'), launcher.MAX_SPARES)
        self.assertLessEqual(kinds.count('python'), launcher.MAX_SPARES)

    def test_execs_faster_than_a_spare_starts_keep_two_and_a_slow_one_brings_back_one(self):
        program = ['bash', self.program('a.sh', 'echo $$\n')]
        cold = int(self.run_exec(program)[0])
        # Taken at once, before it could have been waiting long: execs of its kind come fast.
        first = int(self.run_exec(program)[0])
        self.assertNotEqual(first, cold)
        second = self.spare('bash', other_than=(first,))
        third = self.spare('bash', other_than=(first, second))
        self.assertEqual(sorted(self.spares()), sorted((second, third)))
        # The oldest is handed the next exec, and the one that took its place is started behind it.
        self.assertEqual(int(self.run_exec(program)[0]), second)
        fourth = self.spare('bash', other_than=(first, second, third))
        self.assertEqual(sorted(self.spares()), sorted((third, fourth)))
        # A spare that waited past SPARE_IDLE_S: one is enough again, and the other stays for the next exec.
        time.sleep(launcher.SPARE_IDLE_S + 0.2)
        self.assertEqual(int(self.run_exec(program)[0]), third)
        time.sleep(0.3)
        self.assertEqual(list(self.spares()), [fourth])


class ImportTest(unittest.TestCase):
    def test_importing_starts_nothing(self):
        # The launcher binds its socket and ignores signals only when run as a program.
        code = 'import signal, launcher; assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL'
        subprocess.run([sys.executable, '-c', code], cwd=os.path.dirname(os.path.abspath(__file__)), check=True)


class EgressRelayTest(unittest.TestCase):
    """With --egress-relay the launcher holds the relay's port and starts the relay at its first connection."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='berth-launcher-egress-')
        self.addCleanup(shutil.rmtree, self.dir)
        self.proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proxy.bind(os.path.join(self.dir, 'proxy.sock'))
        self.proxy.listen(1)
        self.proxy.settimeout(10)
        self.addCleanup(self.proxy.close)
        with socket.socket() as probe:
            probe.bind(('127.0.0.1', 0))
            self.port = probe.getsockname()[1]
        env = dict(os.environ, BERTH_LAUNCHER_CHANNEL=os.path.join(self.dir, 'no-channel.sock'),
                   BERTH_LAUNCHER_SOCKET=f'berth-launcher-egress-unittest-{os.getpid()}',
                   BERTH_EGRESS_PORT=str(self.port), BERTH_EGRESS_SOCKET=os.path.join(self.dir, 'proxy.sock'))
        self.process = subprocess.Popen([sys.executable, '-I', '-S', launcher.__file__, '--egress-relay'], env=env, stdin=subprocess.DEVNULL)
        self.addCleanup(self.stop)

    def stop(self):
        for pid in self.relays():
            os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait()

    def relays(self):
        found = []
        for entry in os.listdir('/proc'):
            try:
                with open(f'/proc/{entry}/stat') as stat:
                    parent = int(stat.read().rsplit(')', 1)[1].split()[1])
                with open(f'/proc/{entry}/cmdline', 'rb') as cmdline:
                    argv = cmdline.read().split(b'\0')
            except (OSError, ValueError):
                continue
            if parent == self.process.pid and argv[0] == launcher.EGRESS_RELAY_NAME.encode():
                found.append(int(entry))
        return found

    def connect(self):
        deadline = time.monotonic() + 10
        while True:
            try:
                return socket.create_connection(('127.0.0.1', self.port), timeout=10)
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def round_trip(self):
        with self.connect() as client:
            client.sendall(b'CONNECT example.com:443 HTTP/1.1\r\n\r\n')
            upstream, _ = self.proxy.accept()
            with upstream:
                upstream.settimeout(10)
                self.assertEqual(upstream.recv(100), b'CONNECT example.com:443 HTTP/1.1\r\n\r\n')
                upstream.sendall(b'HTTP/1.1 200 OK\r\n\r\n')
                self.assertEqual(client.recv(100), b'HTTP/1.1 200 OK\r\n\r\n')

    def listening(self):
        with open('/proc/net/tcp') as table:
            return any(f':{self.port:04X} ' in line and line.split()[3] == '0A' for line in table)

    def test_the_relay_starts_at_the_first_connection_and_carries_it(self):
        deadline = time.monotonic() + 10
        while not self.listening():
            self.assertLess(time.monotonic(), deadline, 'the launcher never listened on the relay port')
            time.sleep(0.02)
        time.sleep(0.2)
        self.assertEqual(self.relays(), [])
        self.round_trip()
        self.assertEqual(len(self.relays()), 1)
        self.round_trip()
        self.assertEqual(len(self.relays()), 1)

    def test_a_relay_that_ends_is_started_again_at_the_next_connection(self):
        self.round_trip()
        first, = self.relays()
        os.kill(first, signal.SIGKILL)
        # Until the launcher reaps it, a connection could still land in the dying relay's backlog.
        deadline = time.monotonic() + 10
        while os.path.exists(f'/proc/{first}'):
            self.assertLess(time.monotonic(), deadline, 'the launcher never reaped the relay')
            time.sleep(0.02)
        self.round_trip()
        self.assertNotEqual(self.relays(), [first])


if __name__ == '__main__':
    unittest.main()
