"""The code interpreter of the E2B-compatible surface (ADR 44): the protocol of E2B's code
interpreter server (e2b-dev/code-interpreter, Apache-2.0; see apiserver/src/e2b/NOTICE) on port
49999 of the sandbox's loopback, which Berth reaches through the launcher's port tunnel.

    python3 code_interpreter.py [port]     the HTTP server (what an E2B create of the template
                                           code-interpreter-v1 starts as a background process)
    python3 code_interpreter.py kernel     one context's kernel (the server starts it)

Routes: GET /health; POST /execute {code, context_id?, language?, env_vars?}, answered as a
stream of JSON lines (stdout, stderr, result, error, number_of_executions, end_of_execution);
GET and POST /contexts, DELETE /contexts/<id>, POST /contexts/<id>/restart.

A context is a kernel: a python process of its own whose globals persist between executions, as
a Jupyter kernel's do. The kernel answers the server in length-prefixed JSON records on a pipe of
its own (never mixed with the program's output); the program's stdout and stderr, its children's
included, are the kernel's descriptors 1 and 2, read as they are written and sent as messages in
the order they came. The last expression's value is the main result (its text, and the rich forms
its _repr_*_ methods give); matplotlib figures left open are PNG results.
"""
import ast
import base64
import codecs
import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = 49999
WORKSPACE = '/workspace'
# E2B's home of the default user: here, the workspace (as the surface maps it for files).
E2B_HOME = '/home/user'
LANGUAGES = ('python',)
# The rich forms of a value a result carries, by the IPython display method that gives each.
REPRS = (('html', '_repr_html_'), ('markdown', '_repr_markdown_'), ('svg', '_repr_svg_'), ('png', '_repr_png_'),
         ('jpeg', '_repr_jpeg_'), ('latex', '_repr_latex_'), ('json', '_repr_json_'), ('javascript', '_repr_javascript_'))
MAX_BODY = 16 * 1024 * 1024


class BadRequest(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def write_record(fd, record):
    body = json.dumps(record).encode()
    data = str(len(body)).encode() + b'\n' + body
    while data:
        data = data[os.write(fd, data):]


def read_record(stream):
    """The next length-prefixed JSON record of a binary stream; None at its end."""
    header = stream.readline()
    if not header:
        return None
    body = stream.read(int(header))
    if len(body) != int(header):
        return None
    return json.loads(body)


def map_cwd(cwd):
    if cwd is None:
        return WORKSPACE
    if not isinstance(cwd, str) or not cwd.startswith('/'):
        raise BadRequest(400, 'cwd: an absolute path')
    if cwd == E2B_HOME or cwd.startswith(E2B_HOME + '/'):
        cwd = WORKSPACE + cwd[len(E2B_HOME):]
    if not os.path.isdir(cwd):
        raise BadRequest(400, f'cwd: {cwd} is not a directory in the sandbox')
    return cwd


# The kernel: one context's interpreter.

class Kernel:
    """Runs executions in one namespace; messages go to `out` (a descriptor) as length-prefixed JSON."""

    def __init__(self, out):
        self.out = out
        self.send_lock = threading.Lock()
        self.namespace = {'__name__': '__main__', '__builtins__': __builtins__}
        self.count = 0
        # Descriptors 1 and 2 become pipes this kernel reads: what the program and its children
        # write there is sent as stdout and stderr messages.
        self.streams = []
        for fd, kind in ((1, 'stdout'), (2, 'stderr')):
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            os.set_blocking(read_end, False)
            stream = {'fd': read_end, 'kind': kind, 'lock': threading.Lock(), 'decoder': codecs.getincrementaldecoder('utf-8')('replace')}
            self.streams.append(stream)
            threading.Thread(target=self.pump, args=(stream,), daemon=True).start()
        sys.stdout = io.TextIOWrapper(io.FileIO(1, 'w', closefd=False), encoding='utf-8', errors='replace', line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, 'w', closefd=False), encoding='utf-8', errors='replace', line_buffering=True)

    def send(self, message):
        with self.send_lock:
            write_record(self.out, message)

    def take(self, stream):
        """Sends what the stream's pipe holds now; the caller holds its lock, so chunks keep their order."""
        while True:
            try:
                data = os.read(stream['fd'], 65536)
            except BlockingIOError:
                return
            if not data:
                return
            text = stream['decoder'].decode(data)
            if text:
                self.send({'type': stream['kind'], 'text': text, 'timestamp': int(time.time() * 1e6)})

    def pump(self, stream):
        while True:
            select.select([stream['fd']], [], [])
            with stream['lock']:
                self.take(stream)

    def drain(self):
        """Everything written to stdout and stderr so far, sent before the execution's end."""
        for handle in (sys.stdout, sys.stderr):
            try:
                handle.flush()
            except (OSError, ValueError):
                pass
        for stream in self.streams:
            with stream['lock']:
                self.take(stream)

    def execute(self, code, env):
        self.count += 1
        self.send({'type': 'number_of_executions', 'execution_count': self.count})
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            value = self.run(code)
            self.drain()
            self.send_figures()
            if value is not None:
                self.send(dict(rich_forms(value), type='result', is_main_result=True))
        except BaseException as error:  # KeyboardInterrupt too: an interrupted execution is an error of its own
            self.drain()
            self.send_figures()
            self.send(error_message(error))
        finally:
            for name, old in saved.items():
                if old is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = old
        self.send({'type': 'end_of_execution'})

    def run(self, code):
        """Runs the cell; the value of its last statement when that is an expression."""
        tree = ast.parse(code, '<cell>', 'exec')
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, '<cell>', 'exec'), self.namespace)
        if last is None:
            return None
        return eval(compile(last, '<cell>', 'eval'), self.namespace)

    def send_figures(self):
        """The matplotlib figures the cell left open, as PNG results, then closed (as an inline backend shows them)."""
        pyplot = sys.modules.get('matplotlib.pyplot')
        if pyplot is None:
            return
        for number in pyplot.get_fignums():
            figure = pyplot.figure(number)
            buffer = io.BytesIO()
            figure.savefig(buffer, format='png')
            self.send({'type': 'result', 'is_main_result': False, 'text': repr(figure),
                       'png': base64.b64encode(buffer.getvalue()).decode()})
        pyplot.close('all')


def rich_forms(value):
    """A value's text (its repr) and the rich forms its IPython display methods give."""
    forms = {'text': repr(value)}
    for name, method in REPRS:
        render = getattr(type(value), method, None)
        if render is None:
            continue
        try:
            rendered = render(value)
        except Exception:
            continue
        if rendered is None:
            continue
        if isinstance(rendered, bytes):
            rendered = base64.b64encode(rendered).decode()
        forms[name] = rendered
    return forms


def error_message(error):
    # The cell's frames only: the kernel's own (run, exec) are left out, as Jupyter leaves out its own.
    frames = traceback.extract_tb(error.__traceback__)
    cell = [frame for frame in frames if frame.filename != __file__]
    lines = ['Traceback (most recent call last):\n'] if cell else []
    lines += traceback.format_list(cell) + traceback.format_exception_only(type(error), error)
    return {'type': 'error', 'name': type(error).__name__, 'value': str(error), 'traceback': ''.join(lines)}


def kernel_main(out):
    # `out` carries the kernel's records; descriptor 0 its requests, moved aside so that the
    # program's stdin is empty (input() meets its end, not the next request).
    requests = os.fdopen(os.dup(0), 'rb')
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    kernel = Kernel(out)
    # plt.show() under the Agg backend: figures are sent at the cell's end, nothing to warn of.
    warnings.filterwarnings('ignore', message='.*non-interactive.*')
    write_record(out, {'type': 'ready'})
    while True:
        try:
            request = read_record(requests)
        except KeyboardInterrupt:
            continue
        if request is None:
            return
        try:
            kernel.execute(request['code'], request.get('env') or {})
        except KeyboardInterrupt:
            kernel.send({'type': 'end_of_execution'})


# The server: contexts, each with its kernel process.

class Context:
    def __init__(self, language, cwd):
        self.id = str(uuid.uuid4())
        self.language, self.cwd = language, cwd
        self.lock = threading.Lock()
        self.process = None
        self.start()

    def describe(self):
        return {'id': self.id, 'language': self.language, 'cwd': self.cwd}

    def start(self):
        read_end, write_end = os.pipe()
        env = dict(os.environ, MPLBACKEND='Agg', PYTHONUNBUFFERED='1')
        self.process = subprocess.Popen([sys.executable, '-B', os.path.abspath(__file__), 'kernel', str(write_end)],
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        pass_fds=(write_end,), cwd=self.cwd, env=env, start_new_session=True)
        os.close(write_end)
        self.records = os.fdopen(read_end, 'rb')
        self.ready = False

    def stop(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        self.process.wait()
        self.process.stdin.close()
        self.records.close()

    def restart(self):
        with self.lock:
            self.stop()
            self.start()

    def wait_ready(self):
        """Waits for the kernel's first record; the caller holds the lock."""
        if not self.ready:
            if read_record(self.records) is None:
                self.stop()
                self.start()
                raise BadRequest(500, 'the context\'s kernel did not start')
            self.ready = True

    def execute(self, code, env, emit):
        """Runs code, passing each message to emit; emit raising (the client went away) interrupts the cell.
        The caller holds the lock and saw the kernel ready."""
        write_record(self.process.stdin.fileno(), {'code': code, 'env': env})
        interrupted = False
        while True:
            message = read_record(self.records)
            if message is None:
                # The kernel died (the cell ended it: os._exit, a crash): the context starts again, empty.
                self.stop()
                self.start()
                if not interrupted:
                    emit({'type': 'error', 'name': 'KernelDied', 'value': 'the kernel ended during the execution; the context was restarted', 'traceback': ''})
                    emit({'type': 'end_of_execution'})
                return
            if interrupted:
                if message['type'] == 'end_of_execution':
                    return
                continue
            try:
                emit(message)
            except OSError:
                interrupted = True
                os.kill(self.process.pid, signal.SIGINT)
                continue
            if message['type'] == 'end_of_execution':
                return


class Contexts:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_id = {}
        self.default = None

    def create(self, language, cwd):
        context = Context(language, map_cwd(cwd))
        with self.lock:
            self.by_id[context.id] = context
        return context

    def default_context(self):
        with self.lock:
            if self.default is None or self.default.id not in self.by_id:
                self.default = Context('python', WORKSPACE)
                self.by_id[self.default.id] = self.default
            return self.default

    def get(self, context_id):
        with self.lock:
            context = self.by_id.get(context_id)
        if context is None:
            raise BadRequest(404, f'context {context_id} not found')
        return context

    def remove(self, context_id):
        context = self.get(context_id)
        with self.lock:
            self.by_id.pop(context_id, None)
        context.stop()


def check_fields(body, allowed):
    if not isinstance(body, dict):
        raise BadRequest(400, 'the body must be a JSON object')
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise BadRequest(400, f'{unknown[0]}: not a field this server takes')


def check_language(language):
    if language is not None and language not in LANGUAGES:
        raise BadRequest(400, f'language: "{language}" is not served here (only python)')


def execute_request(contexts, body):
    """Checks an /execute body; the context and the code and environment to run."""
    check_fields(body, ('code', 'context_id', 'language', 'env_vars'))
    code, context_id, language, env = body.get('code'), body.get('context_id'), body.get('language'), body.get('env_vars')
    if not isinstance(code, str):
        raise BadRequest(400, 'code: a string')
    if context_id is not None and language is not None:
        raise BadRequest(400, 'context_id and language: give one, not both')
    check_language(language)
    if env is not None and not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise BadRequest(400, 'env_vars: an object of strings')
    context = contexts.get(context_id) if context_id is not None else contexts.default_context()
    return context, code, env or {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    contexts = None

    def log_message(self, format, *args):
        pass

    def answer(self, status, body=None):
        data = b'' if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get('Content-Length') or 0)
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            raw = b''
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
                if len(raw) > MAX_BODY:
                    raise BadRequest(413, 'the body is too large')
        elif length > MAX_BODY:
            raise BadRequest(413, 'the body is too large')
        else:
            raw = self.rfile.read(length)
        try:
            return json.loads(raw or b'{}')
        except ValueError:
            raise BadRequest(400, 'the body is not JSON')

    def route(self, method):
        path, _, query = self.path.partition('?')
        if query:
            raise BadRequest(400, f'query: this server takes none ({query.split("=")[0]})')
        parts = [part for part in path.split('/') if part]
        if method == 'GET' and parts == ['health']:
            return self.answer(200, {'status': 'ok'})
        if parts == ['execute'] and method == 'POST':
            return self.execute(self.body())
        if parts == ['contexts'] and method == 'GET':
            return self.answer(200, [context.describe() for context in list(self.contexts.by_id.values())])
        if parts == ['contexts'] and method == 'POST':
            body = self.body()
            check_fields(body, ('language', 'cwd'))
            check_language(body.get('language'))
            return self.answer(200, self.contexts.create(body.get('language') or 'python', body.get('cwd')).describe())
        if len(parts) == 2 and parts[0] == 'contexts' and method == 'DELETE':
            self.contexts.remove(parts[1])
            return self.answer(204)
        if len(parts) == 3 and parts[0] == 'contexts' and parts[2] == 'restart' and method == 'POST':
            self.contexts.get(parts[1]).restart()
            return self.answer(204)
        raise BadRequest(404, f'{method} {path}: no such route')

    def execute(self, body):
        context, code, env = execute_request(self.contexts, body)
        # One execution at a time in a context, as in a Jupyter kernel: a second one waits its turn.
        with context.lock:
            context.wait_ready()
            self.stream(context, code, env)

    def stream(self, context, code, env):
        self.send_response(200)
        self.send_header('Content-Type', 'application/x-ndjson')
        self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()

        def emit(message):
            line = json.dumps(message).encode() + b'\n'
            self.wfile.write(b'%x\r\n%s\r\n' % (len(line), line))
            self.wfile.flush()

        context.execute(code, env, emit)
        self.wfile.write(b'0\r\n\r\n')

    def handle_method(self, method):
        try:
            self.route(method)
        except BadRequest as error:
            self.answer(error.status, {'error': str(error)})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self):
        self.handle_method('GET')

    def do_POST(self):
        self.handle_method('POST')

    def do_DELETE(self):
        self.handle_method('DELETE')


def make_server(port):
    contexts = Contexts()
    handler = type('ContextsHandler', (Handler,), {'contexts': contexts})
    # The default context's kernel starts now, so that the first execution does not wait for it.
    contexts.default_context()
    server = ThreadingHTTPServer(('127.0.0.1', port), handler)
    server.daemon_threads = True
    server.contexts = contexts
    return server


def main(argv):
    if argv[1:2] == ['kernel']:
        return kernel_main(int(argv[2]))
    make_server(int(argv[1]) if len(argv) > 1 else PORT).serve_forever()


if __name__ == '__main__':
    main(sys.argv)
