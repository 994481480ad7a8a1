"""A spare Python interpreter (ADR 56): started by the launcher ahead of need, run as
`python3 -u spare.py` with the environment, working directory, output pipes and session of the
exec it will serve, it blocks on descriptor 3 until the launcher writes there the path of the
program to run (one line), then runs that program as `python3 -u PATH` would: a fresh `__main__`,
sys.argv [PATH], sys.path[0] its directory, a traceback without this file's frame and exit status 1
on an uncaught exception. The launcher closing descriptor 3 without a path throws it away.

Only os and sys are imported here, both imported by every interpreter's start anyway, so the
program finds the modules it would find loaded cold.
"""
import os
import sys


def read_path(fd):
    """The program's path from the launcher, or None when it gave up on this spare."""
    request = b''
    while not request.endswith(b'\n'):
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        request += chunk
    return os.fsdecode(request[:-1])


def main_module(path, loader_type):
    """The `__main__` of `python3 PATH`: what the interpreter gives a script, nothing more."""
    module = type(sys)('__main__')
    module.__loader__ = loader_type('__main__', path)
    module.__annotations__ = {}
    module.__builtins__ = sys.modules['builtins']
    module.__file__ = path
    module.__cached__ = None
    return module


def uncaught(error):
    """As the interpreter ends on an uncaught exception: the traceback from the program's own frame
    down, then status 1; KeyboardInterrupt ends the process by SIGINT, as it does cold."""
    traceback = error.__traceback__.tb_next if error.__traceback__ is not None else None
    error.__traceback__ = traceback
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, traceback
    sys.excepthook(type(error), error, traceback)
    if not isinstance(error, KeyboardInterrupt):
        return 1
    import atexit
    import signal
    threading = sys.modules.get('threading')
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    return 1


def run(path, loader_type):
    module = main_module(path, loader_type)
    sys.modules['__main__'] = module
    sys.argv = [path]
    sys.orig_argv = sys.orig_argv[:-1] + [path]
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    try:
        with open(path, 'rb') as file:
            source = file.read()
    except OSError as error:
        # What the interpreter says of a script it cannot open, with its status.
        print(f"{sys.orig_argv[0]}: can't open file {path!r}: [Errno {error.errno}] {error.strerror}", file=sys.stderr)
        return 2
    try:
        exec(compile(source, path, 'exec'), module.__dict__)
    except SystemExit:
        raise
    except BaseException as error:
        return uncaught(error)
    return 0


def main():
    path = read_path(3)
    os.close(3)
    if path is None:
        return 0
    loader_type = type(sys.modules['__main__'].__loader__)
    return run(path, loader_type)


if __name__ == '__main__':
    sys.exit(main())
