"""Unit tests of the file tools (files.py), in a temporary directory standing in for /workspace."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import files  # noqa: E402


def record(stdout):
    header, _, body = stdout.partition(b'\n')
    assert int(header) == len(body), (header, len(body))
    return json.loads(body)


class FilesTest(unittest.TestCase):
    def setUp(self):
        self.workspace = tempfile.mkdtemp()
        self.saved = files.WORKSPACE
        files.WORKSPACE = self.workspace

    def tearDown(self):
        files.WORKSPACE = self.saved
        subprocess.run(['rm', '-rf', self.workspace], check=True)

    def test_write_then_read_relative_to_the_workspace(self):
        written = files.write_file('notes/a.txt', 'h\u00e9llo')
        self.assertEqual(written, {'path': os.path.join(self.workspace, 'notes/a.txt'), 'bytes': 6})
        self.assertEqual(files.read_file('notes/a.txt', 100), {'text': 'h\u00e9llo', 'truncated': False, 'limit': 100})

    def test_read_cuts_at_the_limit_and_replaces_bad_bytes(self):
        with open(os.path.join(self.workspace, 'b.bin'), 'wb') as file:
            file.write(b'\xff' + b'x' * 20)
        self.assertEqual(files.read_file('b.bin', 5), {'text': '\ufffdxxxx', 'truncated': True, 'limit': 5})

    def test_list(self):
        files.write_file('b/c.txt', 'abc')
        files.write_file('a.txt', '')
        self.assertEqual(files.list_files('.', False, 10), {'entries': [{'path': 'b/'}, {'path': 'a.txt', 'bytes': 0}], 'more': 0})
        listing = files.list_files('.', True, 2)
        self.assertEqual(listing['more'], 1)
        with self.assertRaises(files.ToolError):
            files.list_files('a.txt', False, 10)

    def test_changed_files_leave_hidden_directories_out(self):
        files.write_file('new.txt', 'x')
        files.write_file('.git/HEAD', 'x')
        old = files.write_file('old.txt', 'x')['path']
        os.utime(old, (time.time() - 3600, time.time() - 3600))
        self.assertEqual(files.changed_files(time.time() - 60, 10), {'paths': [os.path.join(self.workspace, 'new.txt')]})


class ProtocolTest(unittest.TestCase):
    def run_program(self, request):
        return subprocess.run([sys.executable, os.path.join(HERE, 'files.py'), json.dumps(request)], capture_output=True)

    def test_answers_one_record_with_exit_0(self):
        done = self.run_program({'action': 'list_files', 'args': {'path': HERE, 'recursive': False, 'limit': 1}})
        self.assertEqual(done.returncode, files.EXIT_OK)
        self.assertEqual(record(done.stdout)['ok'], True)

    def test_a_tool_failure_is_a_record_with_exit_1(self):
        done = self.run_program({'action': 'read_file', 'args': {'path': '/no/such/file', 'limit': 10}})
        self.assertEqual(done.returncode, files.EXIT_TOOL_ERROR)
        answer = record(done.stdout)
        self.assertEqual(answer['ok'], False)
        self.assertIn('No such file', answer['error'])
        self.assertEqual(done.stderr, b'')

    def test_the_request_may_come_before_the_program(self):
        with open(os.path.join(HERE, 'files.py')) as file:
            source = file.read()
        prelude = 'BERTH_REQUEST = ' + json.dumps(json.dumps({'action': 'nothing', 'args': {}})) + '\n'
        done = subprocess.run([sys.executable, '-c', prelude + source], capture_output=True)
        self.assertEqual(done.returncode, files.EXIT_TOOL_ERROR)
        self.assertEqual(record(done.stdout), {'ok': False, 'error': "unknown action 'nothing'"})


if __name__ == '__main__':
    unittest.main()
