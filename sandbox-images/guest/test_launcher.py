"""Unit tests of the launcher's pure parts; providers/src/local/launcher.test.ts runs it with its client."""
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launcher  # noqa: E402


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


class ImportTest(unittest.TestCase):
    def test_importing_starts_nothing(self):
        # The launcher binds its socket and ignores signals only when run as a program.
        code = 'import signal, launcher; assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL'
        subprocess.run([sys.executable, '-c', code], cwd=os.path.dirname(os.path.abspath(__file__)), check=True)


if __name__ == '__main__':
    unittest.main()
