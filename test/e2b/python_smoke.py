"""The Python SDK (PyPI e2b) against the E2B-compatible surface: create, commands.run, a
non-zero exit, stdin sent to a command and closed, files written, read, listed and watched (the sync SDK's polling watcher), kill. Configured by the SDK's environment (E2B_API_URL, E2B_SANDBOX_URL,
E2B_API_KEY); prints one JSON object for the test to check."""
import json
import sys
import time

from e2b import CommandExitException, Sandbox


def main() -> int:
    sandbox = Sandbox.create(metadata={"suite": "e2b-python"}, timeout=120)
    result = sandbox.commands.run("echo py-out; echo py-err >&2")
    try:
        sandbox.commands.run("exit 5")
        failed = None
    except CommandExitException as error:
        failed = error.exit_code
    reader = sandbox.commands.run("cat", background=True, stdin=True)
    sandbox.commands.send_stdin(reader.pid, "from python stdin\n")
    sandbox.commands.close_stdin(reader.pid)
    from_stdin = reader.wait().stdout
    sandbox.files.write("/home/user/py/hello.txt", "from python")
    read_back = sandbox.files.read("py/hello.txt")
    listed = [entry.name for entry in sandbox.files.list("/home/user/py")]
    exists = sandbox.files.exists("/home/user/py/hello.txt")
    watcher = sandbox.files.watch_dir("/home/user/py")
    sandbox.files.write("/home/user/py/watched.txt", "seen")
    events = []
    deadline = time.monotonic() + 15
    while ("write", "watched.txt") not in events and time.monotonic() < deadline:
        events += [(event.type.value, event.name) for event in watcher.get_new_events()]
        time.sleep(0.1)
    watcher.stop()
    info = sandbox.get_info()
    killed = sandbox.kill()
    json.dump(
        {
            "sandboxId": sandbox.sandbox_id,
            "templateId": info.template_id,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "exitCode": result.exit_code,
            "failedExitCode": failed,
            "fromStdin": from_stdin,
            "readBack": read_back,
            "listed": listed,
            "exists": exists,
            "watched": [f"{kind} {name}" for kind, name in events],
            "killed": killed,
            "killedAgain": Sandbox.kill(sandbox.sandbox_id),
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
