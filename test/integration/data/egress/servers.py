"""Loopback servers for the egress integration tests.

Serves HTTP and HTTPS (a throwaway self-signed certificate made with the
openssl command) on 127.0.0.2, on ports the kernel picks, and prints
"<pid> <http port> <https port>" once both listen. Every GET is answered with
"hello <path>". Runs until it is killed or its stdin closes.
"""

import http.server
import os
import ssl
import subprocess
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = ("hello " + self.path + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    workdir = sys.argv[1]
    cert = os.path.join(workdir, "cert.pem")
    key = os.path.join(workdir, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
         "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.2"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    plain = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    tls = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    for server in (plain, tls):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(os.getpid(), plain.server_address[1], tls.server_address[1], flush=True)
    sys.stdin.read()  # until the test closes our stdin (or kills us)


if __name__ == "__main__":
    main()
