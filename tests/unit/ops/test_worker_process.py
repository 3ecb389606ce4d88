import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from credence.config import load_settings
from credence.streams.ops.worker_process import WorkerProcess


class _Status(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    peers: ClassVar[list] = []

    def do_GET(self):
        self.peers.append(self.client_address)
        body = json.dumps({"ready": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_questions_to_a_worker_share_one_kept_connection(tmp_path):
    # A benchmark polls /status every 0.1 s: a client (and a TLS context) per question cost the measuring
    # process ~25 ms of CPU each, taken from the worker under measurement on a 2-core machine.
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = load_settings(web_host="127.0.0.1", web_port=server.server_address[1], data_dir=tmp_path)
        worker = WorkerProcess(settings, "127.0.0.1:9", tmp_path / "w.log")
        assert [worker.get("/status")["ready"] for _ in range(5)] == [True] * 5
        assert len(set(_Status.peers)) == 1  # one connection, kept alive
        worker.stop()  # never started: only the client is closed
        assert worker.get("/status")["ready"]  # and a later question opens a new one
        assert len(set(_Status.peers)) == 2
    finally:
        server.shutdown()
        server.server_close()
