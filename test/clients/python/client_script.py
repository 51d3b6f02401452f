"""castellan_client against a real daemon (run by python_client_test.cpp).

The daemon's config has a unix socket, a plain loopback TCP listener and a
TLS listener with a tokens file, the pool "default" (2 workers) and the pool
"tiny" (1 worker, a queue of 1). The environment names them: CASTELLAN_SOCKET,
CASTELLAN_TCP (http://127.0.0.1:PORT), CASTELLAN_TLS_PORT, CASTELLAN_CA_FILE
(the TLS listener's self-signed certificate, for localhost and 127.0.0.1) and
CASTELLAN_TOKEN (a token of the tokens file).
Every check is a unittest assertion; any failure exits non-zero.
"""

import base64
import os
import re
import ssl
import sys
import threading
import time
import unittest

import castellan_client
from castellan_client import BusyError, CastellanError, Client, Result
from castellan_client.transport import parse_address

SOCKET = os.environ["CASTELLAN_SOCKET"]
TCP = os.environ["CASTELLAN_TCP"]
TOKEN = os.environ["CASTELLAN_TOKEN"]
TLS_PORT = os.environ["CASTELLAN_TLS_PORT"]
CA_FILE = os.environ["CASTELLAN_CA_FILE"]

#: How long a wait for the daemon may last before the test fails.
SAFETY_NET_S = 30


def until(what, check):
    """Calls check() until it returns a true value (SAFETY_NET_S), and returns it."""
    deadline = time.monotonic() + SAFETY_NET_S
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def cancelled_count(client):
    m = re.search(r'^castellan_execs_total\{error_class="cancelled",pool="default"\} (\d+)$',
                  client.metrics(), re.M)
    return int(m.group(1)) if m else 0


class InBackground:
    """A call made in a thread: its return value or its exception."""

    def __init__(self, fn):
        self.value = None
        self.error = None
        self._thread = threading.Thread(target=self._run, args=(fn,))
        self._thread.start()

    def _run(self, fn):
        try:
            self.value = fn()
        except BaseException as e:  # reported by join()
            self.error = e

    def join(self):
        self._thread.join(SAFETY_NET_S)
        if self._thread.is_alive():
            raise AssertionError("the call in the background never returned")
        return self


def cancel_when_in_flight(client, exec_id):
    """Cancels `exec_id` as soon as the daemon has it in flight."""
    def attempt():
        try:
            return client.cancel(exec_id)
        except CastellanError as e:
            if e.code == "no_such_exec":
                return None
            raise
    return until(f"exec {exec_id} in flight", attempt)


class Execs(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_exec_returns_the_result(self):
        r = self.c.exec("print(6*7)")
        self.assertIsInstance(r, Result)
        self.assertEqual(r.error_class, "ok")
        self.assertTrue(r.ok)
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.stdout, b"42\n")
        self.assertEqual(r.stdout_text, "42\n")
        self.assertEqual(r.stderr, b"")
        self.assertIsNone(r.exception)
        self.assertEqual(r.events, [])
        self.assertEqual(r.detail, "")
        self.assertIsNone(r.id)
        self.assertGreater(r.exec_id, 0)
        self.assertEqual(set(r.timing), {"queue_us", "run_us"})
        self.assertGreater(r.timing["run_us"], 0)
        self.assertEqual(set(r.usage), {"cpu_us", "peak_memory_bytes"})
        self.assertEqual(r.raw["v"], 1)

    def test_an_exception_is_a_result(self):
        r = self.c.exec("raise ValueError(42)", timeout_ms=20000)
        self.assertEqual((r.error_class, r.exit_code), ("exception", 1))
        self.assertEqual(r.exception["type"], "ValueError")
        self.assertEqual(r.exception["message"], "42")
        self.assertIn("ValueError", r.exception["traceback"])
        self.assertFalse(r.ok)

    def test_run_runs_argv(self):
        r = self.c.run(["/usr/bin/python3", "-c", "import sys; print(sys.argv)", "a"])
        self.assertEqual(r.error_class, "ok", r)
        self.assertEqual(r.stdout_text, "['-c', 'a']\n")
        with self.assertRaises(TypeError):
            self.c.run("/usr/bin/python3")

    def test_the_deadline_ends_an_exec(self):
        r = self.c.exec("while True: pass", timeout_ms=300)
        self.assertEqual((r.error_class, r.exit_code), ("timeout", 124))
        self.assertEqual(r.detail, "deadline of 300 ms reached")

    def test_an_exec_is_cancelled_by_its_id_from_another_thread(self):
        sleeping = InBackground(
            lambda: self.c.exec("import time; time.sleep(60)", id="py-sleeper"))
        answer = cancel_when_in_flight(self.c, "py-sleeper")
        self.assertTrue(answer["cancelled"], answer)
        self.assertEqual(answer["id"], "py-sleeper")
        self.assertIn(answer["outcome"], ("cancelled_running", "cancelled_queued"))
        sleeping.join()
        self.assertIsNone(sleeping.error)
        r = sleeping.value
        self.assertEqual((r.error_class, r.exit_code), ("cancelled", 125))
        self.assertEqual(r.id, "py-sleeper")
        self.assertEqual(r.exec_id, answer["exec_id"])
        # Answered: nothing in flight has that id any more.
        with self.assertRaises(CastellanError) as e:
            self.c.cancel("py-sleeper")
        self.assertEqual((e.exception.status, e.exception.code), (404, "no_such_exec"))

    def test_an_exec_is_cancelled_by_its_number(self):
        sleeping = InBackground(lambda: self.c.exec("import time; time.sleep(60)"))
        # The exec_id is not known before the answer: the pool says when it runs.
        until("the exec runs",
              lambda: any(p["busy"] > 0 for p in self.c.pools() if p["name"] == "default"))
        metrics = self.c.metrics()
        self.assertIn("castellan_execs_total", metrics)
        cancelled = None
        for n in range(1, 1000):
            try:
                cancelled = self.c.cancel(n)
                break
            except CastellanError as e:
                self.assertEqual(e.code, "no_such_exec")
        self.assertIsNotNone(cancelled)
        sleeping.join()
        self.assertEqual(sleeping.value.exec_id, cancelled["exec_id"])
        self.assertEqual(sleeping.value.error_class, "cancelled")


class Errors(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_an_unknown_pool_names_its_field(self):
        with self.assertRaises(CastellanError) as e:
            self.c.exec("print(1)", pool="gpu")
        err = e.exception
        self.assertNotIsInstance(err, BusyError)
        self.assertEqual((err.status, err.code, err.field), (404, "unknown_pool", "/pool"))
        self.assertEqual(err.message, "exec: no pool named 'gpu'")
        self.assertEqual(str(err), "404 unknown_pool at /pool: exec: no pool named 'gpu'")

    def test_an_invalid_id_names_its_field(self):
        with self.assertRaises(CastellanError) as e:
            self.c.exec("print(1)", id="123")
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field),
                         (400, "invalid_field", "/id"))

    def test_a_duplicate_id_is_refused_while_in_flight(self):
        sleeping = InBackground(
            lambda: self.c.exec("import time; time.sleep(60)", id="py-twice"))
        until("the first exec is in flight",
              lambda: any(p["busy"] > 0 for p in self.c.pools() if p["name"] == "default"))
        with self.assertRaises(CastellanError) as e:
            self.c.exec("print(1)", id="py-twice")
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field),
                         (409, "duplicate_id", "/id"))
        self.c.cancel("py-twice")
        self.assertEqual(sleeping.join().value.error_class, "cancelled")

    def test_a_full_pool_is_a_busy_error(self):
        # "tiny": one worker and a queue of one.
        def tiny():
            return next(p for p in self.c.pools() if p["name"] == "tiny")
        running = InBackground(
            lambda: self.c.exec("import time; time.sleep(60)", pool="tiny", id="py-tiny-a"))
        until("the tiny pool runs an exec", lambda: tiny()["busy"] == 1)
        queued = InBackground(
            lambda: self.c.exec("import time; time.sleep(60)", pool="tiny", id="py-tiny-b"))
        until("the tiny pool queues an exec", lambda: tiny()["queued"] == 1)
        with self.assertRaises(BusyError) as e:
            self.c.exec("print(1)", pool="tiny")
        self.assertEqual((e.exception.status, e.exception.code), (503, "busy"))
        self.assertEqual(self.c.cancel("py-tiny-b")["outcome"], "cancelled_queued")
        self.assertEqual(self.c.cancel("py-tiny-a")["outcome"], "cancelled_running")
        self.assertEqual(queued.join().value.error_class, "cancelled")
        self.assertEqual(running.join().value.error_class, "cancelled")

    def test_a_missing_socket_is_an_os_error(self):
        with self.assertRaises(FileNotFoundError):
            Client("unix:" + SOCKET + ".absent").health()

    def test_addresses(self):
        self.assertEqual(parse_address("unix:/run/x.sock").host, "/run/x.sock")
        self.assertEqual(parse_address("tcp:127.0.0.1:8080"), parse_address("http://127.0.0.1:8080"))
        self.assertEqual(parse_address("https://localhost").port, 443)
        for bad in ("unix:relative.sock", "ftp://host", "http://h:1/v1", "http://u:p@h:1", "h:1"):
            with self.assertRaises(ValueError, msg=bad):
                Client(bad)
        with self.assertRaises(ValueError):
            Client("http://127.0.0.1:1", ca_file="/etc/ssl/certs/ca-certificates.crt")


class Daemon(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_pools_health_and_metrics(self):
        pools = {p["name"]: p for p in self.c.pools()}
        self.assertEqual(sorted(pools), ["default", "tiny"])
        self.assertEqual(pools["default"]["size"], 2)
        self.assertEqual(pools["tiny"]["queue_limit"], 1)
        self.assertEqual(self.c.health(), "ok")
        self.c.exec("print(1)")
        self.assertRegex(self.c.metrics(),
                         r'(?m)^castellan_execs_total\{error_class="ok",pool="default"\} [1-9]')


class Audit(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_live_records_and_history(self):
        seen = []
        stream = self.c.audit(kinds=["exec_end"])

        def consume():
            for rec in stream:
                seen.append(rec)
                if len(seen) >= 1:
                    return

        t = threading.Thread(target=consume)
        t.start()
        # Execs until one is seen: the first may come before the subscription.
        ids = []

        def one_seen():
            ids.append(self.c.exec("print(1)").exec_id)
            t.join(0.05)
            return seen
        until("an exec_end on the live stream", one_seen)
        t.join()
        stream.close()
        self.assertEqual(seen[0]["kind"], "exec_end")
        self.assertIn(seen[0]["exec_id"], ids)
        # History: what the file holds since then, one exec's records.
        history = list(self.c.audit(exec_id=ids[-1], since="1h", follow=False))
        self.assertEqual([r["kind"] for r in history], ["exec_start", "exec_end"])
        with self.assertRaises(CastellanError) as bad:
            next(self.c.audit(kinds=["exec_stop"]))
        self.assertEqual((bad.exception.status, bad.exception.field), (400, "kind"))


class Policies(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_status(self):
        st = self.c.status()
        self.assertFalse(st["draining"])
        self.assertGreaterEqual(st["connections"], 1)
        self.assertIsInstance(st["in_flight"], int)
        self.assertEqual(sorted(p["name"] for p in st["pools"]), ["default", "tiny"])
        self.assertIn("summary", st)
        self.assertTrue(st["version"])

    def test_check_policy(self):
        ok = self.c.check_policy({"version": 1, "extends": ["default"]})
        self.assertTrue(ok["valid"], ok)
        bad = self.c.check_policy({"version": 1, "descripton": "typo",
                                   "fs": {"rules": [{"action": "allow", "path": "srv",
                                                     "perms": ["read_file"]}]}})
        self.assertFalse(bad["valid"])
        self.assertEqual([e["pointer"] for e in bad["errors"]], ["/descripton", "/fs/rules/0/path"])
        with self.assertRaises(CastellanError) as e:
            self.c.check_policy({"version": 1, "extends": ["../../etc/shadow"]})
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field),
                         (400, "invalid_field", "/policy/extends/0"))

    def test_explain_policy(self):
        answer = self.c.explain_policy(
            {"version": 1, "extends": ["default"],
             "fs": {"rules": [{"action": "deny", "path": "/etc/passwd", "perms": ["read_file"]}]}},
            fs=["read_file:/etc/passwd"], exec="/usr/bin/python3")
        self.assertEqual([(d["kind"], d["query"], d["decision"]) for d in answer["decisions"]],
                         [("fs", "read_file:/etc/passwd", "deny"),
                          ("exec", "/usr/bin/python3", "allow")])
        by_name = self.c.explain_policy(name="default", exec="/usr/bin/id")
        self.assertEqual(by_name["policy"], "default")
        self.assertEqual(by_name["decisions"][0]["decision"], "deny")
        with self.assertRaises(CastellanError) as e:
            self.c.explain_policy(name="no-such-policy", exec="/usr/bin/id")
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field),
                         (404, "unknown_policy", "/name"))
        with self.assertRaises(ValueError):
            self.c.explain_policy(exec="/usr/bin/id")


class Tcp(unittest.TestCase):
    def test_a_token_is_needed_and_sent(self):
        with Client(TCP, token=TOKEN) as c:
            r = c.exec("print('over tcp')")
            self.assertEqual(r.stdout_text, "over tcp\n")
            self.assertEqual(c.health(), "ok")
            self.assertIn("castellan_execs_total", c.metrics())
        for token in (None, TOKEN[:-1] + ("x" if TOKEN[-1] != "x" else "y")):
            with self.assertRaises(CastellanError) as e:
                Client(TCP, token=token).pools()
            self.assertEqual((e.exception.status, e.exception.code), (401, "unauthorized"))


class Tls(unittest.TestCase):
    def test_https_with_the_ca_file_and_a_token(self):
        for address in (f"https://localhost:{TLS_PORT}", f"tls:127.0.0.1:{TLS_PORT}"):
            with Client(address, token=TOKEN, ca_file=CA_FILE) as c:
                self.assertEqual(c.exec("print('over tls')").stdout_text, "over tls\n", address)
                self.assertEqual(c.health(), "ok")
        with self.assertRaises(CastellanError) as e:
            Client(f"https://localhost:{TLS_PORT}", ca_file=CA_FILE).health()
        self.assertEqual((e.exception.status, e.exception.code), (401, "unauthorized"))

    def test_an_unknown_certificate_is_refused(self):
        # Without the CA file the system's CAs do not know the self-signed one.
        with self.assertRaises(ssl.SSLCertVerificationError):
            Client(f"https://localhost:{TLS_PORT}", token=TOKEN).health()


class Close(unittest.TestCase):
    def test_close_ends_the_calls_in_flight_and_their_execs(self):
        c = Client("unix:" + SOCKET)
        observer = Client("unix:" + SOCKET)
        before = cancelled_count(observer)
        sleeping = InBackground(lambda: c.exec("import time; time.sleep(60)", id="py-closed"))
        until("the exec is in flight",
              lambda: any(p["busy"] > 0 for p in observer.pools() if p["name"] == "default"))
        c.close()
        sleeping.join()
        self.assertIsNotNone(sleeping.error)
        self.assertIsNone(sleeping.value)
        # The daemon cancels an exec whose connection closed.
        until("the daemon cancels the exec", lambda: cancelled_count(observer) > before)
        with self.assertRaises(ValueError):
            c.health()


class Files(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_files_in_and_out(self):
        code = ("import os\n"
                "d = open('data/in.bin', 'rb').read()\n"
                "print(os.getcwd(), open('note.txt').read(), len(d))\n"
                "open('out.bin', 'wb').write(d[::-1])\n"
                "open('out.txt', 'w').write('héllo')\n")
        r = self.c.exec(code, files_in={"data/in.bin": b"\xff\x00abc", "note.txt": "hé"},
                        files_out=["out.bin", "/tmp/out.txt", "none"])
        self.assertEqual(r.error_class, "ok", r)
        self.assertEqual(r.stdout_text, "/tmp hé 5\n")
        self.assertEqual([f.path for f in r.files], ["out.bin", "/tmp/out.txt", "none"])
        self.assertEqual((r.files[0].content, r.files[0].size), (b"cba\x00\xff", 5))
        self.assertTrue("content_base64" in r.raw["files"][0])
        self.assertEqual(r.files[1].content, "héllo".encode())
        self.assertEqual((r.files[2].content, r.files[2].error), (None, "missing"))
        self.assertTrue(r.files[2].message)
        # Without files_out, no files.
        self.assertEqual(self.c.exec("print(1)").files, [])

    def test_files_with_modes_in_run_and_the_streams(self):
        r = self.c.run(["/usr/bin/python3", "-c",
                        "import os, stat; print(oct(stat.S_IMODE(os.stat('x.sh').st_mode)))"],
                       cwd="/tmp/w", files_in=[{"path": "/tmp/w/x.sh", "content": "#!/bin/sh\n",
                                                "mode": 0o750}])
        self.assertEqual(r.stdout_text, "0o750\n", r)
        events = list(self.c.exec_stream("open('o', 'wb').write(open('i', 'rb').read() * 2)",
                                         files_in=[{"path": "i", "content": b"\x01\xff"}],
                                         files_out=["o", "/tmp/nothing"]))
        self.assertEqual(events[-1][0], "result")
        files = events[-1][1].files
        self.assertEqual([(f.path, f.content, f.error) for f in files],
                         [("o", b"\x01\xff\x01\xff", None), ("/tmp/nothing", None, "missing")])
        events = list(self.c.run_stream(["/usr/bin/python3", "-c", "print(open('i').read())"],
                                        files_in={"i": "text"}, files_out=["i"]))
        self.assertEqual(events[0], ("stdout", b"text\n"))

    def test_a_bad_path_is_the_apis_error(self):
        for call in (lambda: self.c.exec("print(1)", files_in={"/etc/x": "no"}),
                     lambda: self.c.run(["/usr/bin/python3", "-c", "1"],
                                        files_in={"ok": "", "../up": "no"}),
                     lambda: next(self.c.exec_stream("print(1)", files_in={"/etc/x": "no"}))):
            with self.assertRaises(CastellanError) as e:
                call()
            self.assertEqual((e.exception.status, e.exception.code), (400, "invalid_field"))
            self.assertRegex(e.exception.field, r"^/files_in/[01]/path$")
        with self.assertRaises(CastellanError) as e:
            self.c.exec("print(1)", files_out=["/etc/passwd"])
        self.assertEqual((e.exception.status, e.exception.field), (400, "/files_out/0"))
        with self.assertRaises(TypeError):
            self.c.exec("print(1)", files_in=[("a", "b")])
        with self.assertRaises(TypeError):
            self.c.exec("print(1)", files_in=[{"path": "a", "content": 1}])
        with self.assertRaises(TypeError):
            self.c.exec("print(1)", files_out="out.txt")


class Stdio(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_stdin_as_text_and_as_bytes(self):
        r = self.c.exec("import sys; sys.stdout.write(sys.stdin.read())", stdin="héllo\n")
        self.assertEqual(r.stdout_text, "héllo\n")
        r = self.c.exec("import sys; print(sys.stdin.buffer.read().hex())", stdin=b"\xff\x00\xfe")
        self.assertEqual(r.stdout, b"ff00fe\n")
        r = self.c.run(["/usr/bin/python3", "-c", "import sys; print(len(sys.stdin.read()))"],
                       stdin="abc")
        self.assertEqual(r.stdout, b"3\n")

    def test_env_and_cwd(self):
        r = self.c.exec("import os; print(os.environ['GREETING'], os.getcwd())",
                        env={"GREETING": "hé"}, cwd="/tmp")
        self.assertEqual(r.stdout_text, "hé /tmp\n")
        # A cwd that does not exist runs nothing (docs/api.md).
        r = self.c.exec("print(1)", cwd="/no/such/dir")
        self.assertEqual(r.exit_code, 126)
        self.assertEqual(r.stdout, b"")

    def test_output_that_is_not_utf8(self):
        r = self.c.exec("import sys; sys.stdout.buffer.write(b'\\xff\\xfeab\\n'); "
                        "sys.stderr.buffer.write(b'\\x80')")
        self.assertEqual(r.error_class, "ok")
        self.assertEqual(r.stdout, b"\xff\xfeab\n")
        self.assertTrue(r.raw["stdout_base64"])
        self.assertEqual(r.stderr, b"\x80")
        self.assertTrue(r.raw["stderr_base64"])
        self.assertEqual(r.stdout_text, "\ufffd\ufffdab\n")
        plain = self.c.exec("print('é')")
        self.assertEqual(plain.stdout, "é\n".encode())
        self.assertFalse(plain.raw["stdout_base64"])

    def test_exec_stream_yields_output_as_it_is_written(self):
        # The code prints, then sleeps far longer than the test waits: the
        # first piece arrives while the exec is still in flight, and the
        # cancel that ends it comes after.
        stream = self.c.exec_stream("import time\nprint('first')\ntime.sleep(600)\n",
                                    id="streamed")
        self.assertEqual(next(stream), ("stdout", b"first\n"))
        # Still running when its first line came: the cancel finds it so.
        self.assertEqual(self.c.cancel("streamed")["outcome"], "cancelled_running")
        rest = list(stream)
        self.assertEqual([k for k, _ in rest], ["result"])
        self.assertEqual(rest[0][1].error_class, "cancelled")
        self.assertEqual(rest[0][1].stdout, b"first\n")
        # Both streams, bytes that are not UTF-8, and a result that has all
        # of the output.
        events = list(self.c.exec_stream(
            "import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
            "sys.stdout.flush()\nsys.stdout.buffer.write(b'\\xff last\\n')\n"))
        self.assertEqual(events[-1][0], "result")
        result = events[-1][1]
        self.assertIsInstance(result, Result)
        self.assertIn(("stderr", b"err\n"), events)
        self.assertEqual(b"".join(v for k, v in events if k == "stdout"), result.stdout)
        self.assertEqual(result.stdout, b"out\n\xff last\n")

    def test_run_stream_and_refusals(self):
        events = list(self.c.run_stream(["/usr/bin/python3", "-c", "print('cmd')"]))
        self.assertEqual(events[0], ("stdout", b"cmd\n"))
        self.assertEqual(events[-1][1].exit_code, 0)
        with self.assertRaises(CastellanError) as caught:
            next(self.c.exec_stream("print(1)", pool="no-such-pool"))
        self.assertEqual(caught.exception.field, "/pool")

    def test_closing_a_stream_early_cancels_its_exec(self):
        observer = Client("unix:" + SOCKET)
        before = cancelled_count(observer)
        stream = self.c.exec_stream("import time\nprint('up')\ntime.sleep(600)\n")
        self.assertEqual(next(stream), ("stdout", b"up\n"))
        stream.close()
        until("the daemon cancels the exec", lambda: cancelled_count(observer) > before)

    def test_base64_output_is_decoded(self):
        doc = {"exec_id": 3, "exit_code": 0, "error_class": "ok",
               "stdout": base64.b64encode(b"\xff\x00").decode(), "stdout_base64": True,
               "stderr": "plain", "stderr_base64": False}
        r = Result.from_json(doc)
        self.assertEqual((r.stdout, r.stderr), (b"\xff\x00", b"plain"))


class Sessions(unittest.TestCase):
    def setUp(self):
        self.c = Client("unix:" + SOCKET)

    def test_a_session_keeps_its_state_and_another_does_not(self):
        with self.c.create_session(idle_ttl_ms=60000) as s, self.c.create_session() as other:
            self.assertIsInstance(s, castellan_client.Session)
            self.assertRegex(s.id, r"^s-[0-9a-f]{16}$")
            self.assertEqual(s.info["pool"], "default")
            self.assertEqual(s.info["idle_ttl_ms"], 60000)
            self.assertEqual(s.exec("x = 41\nimport os\nos.chdir('/tmp')").error_class, "ok")
            s.exec("pass", env={"KEPT": "yes"})
            r = s.exec("print(x + 1, os.getcwd(), os.environ['KEPT'])")
            self.assertEqual(r.stdout_text, "42 /tmp yes\n")
            self.assertEqual(s.run(["/usr/bin/python3", "-c", "import os; print(os.getcwd())"])
                             .stdout, b"/tmp\n")
            events = list(s.exec_stream("print(x)\nprint(x + 1)"))
            self.assertEqual(events[0], ("stdout", b"41\n"))
            self.assertEqual(events[-1][0], "result")
            self.assertEqual(events[-1][1].stdout, b"41\n42\n")
            self.assertEqual(other.exec("print('x' in globals())").stdout, b"False\n")
            stats = s.stats()
            self.assertEqual(stats["state"], "ready")
            self.assertEqual(stats["execs"], 5)
            self.assertGreater(stats["worker"]["memory_bytes"], 0)
            listed = {x["id"] for x in self.c.sessions()}
            self.assertTrue({s.id, other.id} <= listed)
            # The same session by its id, from another client.
            again = Client("unix:" + SOCKET).session(s.id)
            self.assertEqual(again.exec("print(x)").stdout, b"41\n")
            # pool and policy are not an exec's in a session.
            with self.assertRaises(TypeError):
                s.exec("1", pool="default")
        # Left the with block: both destroyed.
        with self.assertRaises(CastellanError) as caught:
            s.exec("print(x)")
        self.assertEqual((caught.exception.status, caught.exception.code),
                         (404, "no_such_session"))
        self.assertNotIn(s.id, {x["id"] for x in self.c.sessions()})

    def test_a_timeout_ends_the_session(self):
        s = self.c.create_session()
        s.exec("state = 1")
        r = s.exec("while True: pass", timeout_ms=300)
        self.assertEqual((r.error_class, r.exit_code), ("timeout", 124))
        with self.assertRaises(CastellanError) as caught:
            s.exec("print(state)")
        self.assertEqual((caught.exception.status, caught.exception.code),
                         (410, "session_ended"))
        self.assertEqual(s.stats()["state"], "ended")
        final = s.destroy()
        self.assertIn("timeout", final["end_reason"])
        with self.assertRaises(CastellanError) as caught:
            s.destroy()
        self.assertEqual(caught.exception.code, "no_such_session")

    def test_bad_options_name_their_field(self):
        with self.assertRaises(CastellanError) as caught:
            self.c.create_session(idle_ttl_ms=10**12)
        self.assertEqual((caught.exception.code, caught.exception.field),
                         ("invalid_field", "/idle_ttl_ms"))
        with self.assertRaises(CastellanError) as caught:
            self.c.create_session(pool="no-such-pool")
        self.assertEqual(caught.exception.code, "unknown_pool")

    def test_workspaces_without_a_store(self):
        # The test's daemon has no workspace store ([workspaces] enabled =
        # false): every call says so.
        for call in (self.c.workspaces, lambda: self.c.create_workspace("data", 8 << 20),
                     lambda: self.c.remove_workspace("data"),
                     lambda: self.c.create_session(workspace="data")):
            with self.assertRaises(CastellanError) as caught:
                call()
            self.assertEqual((caught.exception.status, caught.exception.code),
                             (501, "workspaces_disabled"))
        with self.assertRaises(CastellanError) as caught:
            self.c.create_workspace("Not/a/name")
        self.assertEqual(caught.exception.field, "/name")

    def test_a_token_over_tcp_makes_its_own_sessions(self):
        with Client(TCP, token=TOKEN) as tc:
            with tc.create_session() as s:
                self.assertNotEqual(s.info["owner"], "")
                self.assertEqual(s.exec("print(6*7)").stdout, b"42\n")
                self.assertIn(s.id, {x["id"] for x in tc.sessions()})


if __name__ == "__main__":
    print("castellan_client", castellan_client.__version__, "from", castellan_client.__file__,
          file=sys.stderr)
    unittest.main(verbosity=2)
