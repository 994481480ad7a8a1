"""Tests of the code interpreter (code_interpreter.py): its server on a free port of this host, its
kernels real python processes, a temporary directory standing in for /workspace."""
import base64
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import code_interpreter  # noqa: E402

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


class CodeInterpreterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workspace = tempfile.mkdtemp()
        cls.saved = code_interpreter.WORKSPACE
        code_interpreter.WORKSPACE = cls.workspace
        cls.server = code_interpreter.make_server(0)
        cls.port = cls.server.server_address[1]
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        for context in list(cls.server.contexts.by_id.values()):
            context.stop()
        cls.server.server_close()
        code_interpreter.WORKSPACE = cls.saved
        shutil.rmtree(cls.workspace)

    def request(self, method, path, body=None):
        connection = http.client.HTTPConnection('127.0.0.1', self.port, timeout=30)
        connection.request(method, path, body=None if body is None else json.dumps(body), headers={'Content-Type': 'application/json'})
        response = connection.getresponse()
        data = response.read()
        connection.close()
        return response.status, data

    def execute(self, code, **fields):
        status, data = self.request('POST', '/execute', dict(fields, code=code))
        self.assertEqual(status, 200, data)
        messages = [json.loads(line) for line in data.decode().splitlines()]
        self.assertEqual(messages[-1], {'type': 'end_of_execution'})
        return messages

    def of_type(self, messages, kind):
        return [message for message in messages if message['type'] == kind]

    def test_the_last_expression_is_the_main_result(self):
        messages = self.execute('x = 40\nx + 2')
        self.assertEqual(self.of_type(messages, 'result'), [{'type': 'result', 'text': '42', 'is_main_result': True}])
        self.assertEqual(self.of_type(messages, 'number_of_executions')[0]['type'], 'number_of_executions')
        self.assertEqual(self.of_type(self.execute('y = 1'), 'result'), [])
        self.assertEqual(self.of_type(self.execute('None'), 'result'), [])

    def test_state_persists_between_executions_of_a_context(self):
        self.execute('counter = 1')
        self.execute('counter += 1')
        self.assertEqual(self.of_type(self.execute('counter'), 'result')[0]['text'], '2')

    def test_stdout_and_stderr_come_as_messages_in_order_children_included(self):
        messages = self.execute('import os, sys\nprint("one")\nsys.stdout.flush()\nos.system("echo two")\nprint("three", file=sys.stderr)')
        self.assertEqual(''.join(message['text'] for message in self.of_type(messages, 'stdout')), 'one\ntwo\n')
        self.assertEqual(''.join(message['text'] for message in self.of_type(messages, 'stderr')), 'three\n')
        # Output comes before the end and the error or result.
        kinds = [message['type'] for message in messages if message['type'] != 'number_of_executions']
        self.assertEqual(kinds[-1], 'end_of_execution')

    def test_an_error_has_its_name_value_and_the_cells_traceback(self):
        messages = self.execute('def f():\n    return 1 / 0\nprint("before")\nf()')
        [error] = self.of_type(messages, 'error')
        self.assertEqual(error['name'], 'ZeroDivisionError')
        self.assertEqual(error['value'], 'division by zero')
        self.assertIn('<cell>', error['traceback'])
        self.assertNotIn('code_interpreter.py', error['traceback'])
        self.assertEqual(self.of_type(messages, 'stdout')[0]['text'], 'before\n')
        [syntax] = self.of_type(self.execute('def ('), 'error')
        self.assertEqual(syntax['name'], 'SyntaxError')

    def test_rich_forms_of_a_value(self):
        png = base64.b64encode(PNG_SIGNATURE + b'rest').decode()
        code = ('class Picture:\n'
                '    def __repr__(self): return "<picture>"\n'
                '    def _repr_png_(self): return base64.b64decode(%r)\n'
                '    def _repr_html_(self): return "<b>p</b>"\n'
                'import base64\nPicture()') % png
        [result] = self.of_type(self.execute(code), 'result')
        self.assertEqual(result, {'type': 'result', 'is_main_result': True, 'text': '<picture>', 'png': png, 'html': '<b>p</b>'})

    def test_env_vars_hold_for_one_execution(self):
        messages = self.execute('import os\nos.environ["GREETING"]', env_vars={'GREETING': 'hi'})
        self.assertEqual(self.of_type(messages, 'result')[0]['text'], "'hi'")
        self.assertEqual(self.of_type(self.execute('os.environ.get("GREETING")'), 'result'), [])

    def test_stdin_is_empty(self):
        [error] = self.of_type(self.execute('input()'), 'error')
        self.assertEqual(error['name'], 'EOFError')
        self.assertEqual(self.of_type(self.execute('1 + 1'), 'result')[0]['text'], '2')

    def test_contexts_are_separate_and_restart_empties_one(self):
        status, data = self.request('POST', '/contexts', {'language': 'python', 'cwd': '/home/user'})
        self.assertEqual(status, 200)
        context = json.loads(data)
        self.assertEqual((context['language'], context['cwd']), ('python', self.workspace))
        self.execute('mine = "a"', context_id=context['id'])
        self.assertEqual(self.of_type(self.execute('"mine" in globals()'), 'result')[0]['text'], 'False')
        self.assertEqual(self.of_type(self.execute('import os\nmine, os.getcwd()', context_id=context['id']), 'result')[0]['text'], repr(('a', self.workspace)))
        listed = json.loads(self.request('GET', '/contexts')[1])
        self.assertIn(context, listed)
        self.assertEqual(self.request('POST', f'/contexts/{context["id"]}/restart')[0], 204)
        self.assertEqual(self.of_type(self.execute('"mine" in globals()', context_id=context['id']), 'result')[0]['text'], 'False')
        self.assertEqual(self.request('DELETE', f'/contexts/{context["id"]}')[0], 204)
        self.assertEqual(self.request('POST', '/execute', {'code': '1', 'context_id': context['id']})[0], 404)

    def test_a_kernel_that_dies_is_started_again(self):
        [error] = self.of_type(self.execute('import os\nos._exit(3)'), 'error')
        self.assertEqual(error['name'], 'KernelDied')
        self.assertEqual(self.of_type(self.execute('2 * 3'), 'result')[0]['text'], '6')

    def test_refuses_what_it_does_not_serve(self):
        cases = [
            ({'code': '1', 'language': 'javascript'}, 'language'),
            ({'code': '1', 'language': 'python', 'context_id': 'x'}, 'context_id'),
            ({'code': '1', 'unknown': True}, 'unknown'),
            ({'code': 1}, 'code'),
            ({'code': '1', 'env_vars': {'A': 1}}, 'env_vars'),
        ]
        for body, named in cases:
            status, data = self.request('POST', '/execute', body)
            self.assertEqual(status, 400, body)
            self.assertIn(named, json.loads(data)['error'])
        self.assertEqual(self.request('POST', '/contexts', {'language': 'r'})[0], 400)
        self.assertEqual(self.request('POST', '/contexts', {'cwd': '/no/such/dir'})[0], 400)
        self.assertEqual(self.request('GET', '/execute?source=x')[0], 400)
        self.assertEqual(self.request('GET', '/nothing')[0], 404)


if __name__ == '__main__':
    unittest.main()
