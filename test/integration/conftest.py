"""Integration-test harness: the real allocating-webhook binary over real TLS.

Environment: AW_BIN (the binary; default build/allocating-webhook), AW_BUILD_DIR (unused here but
set by scripts/test). Every test picks free loopback ports and every process started here is
killed at teardown, whatever the test outcome.
"""

import http.client
import json
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures"
GEN_CERTS = ROOT / "scripts" / "gen-certs"
RESOLVER = "system:serviceaccount:allocating-system:allocating-webhook"


def aw_bin():
    path = os.environ.get("AW_BIN") or str(ROOT / "build" / "allocating-webhook")
    if not os.access(path, os.X_OK):
        pytest.fail(f"webhook binary not found at {path} (set AW_BIN)")
    return path


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gen_certs(directory, *sans, reuse_ca=False):
    env = dict(os.environ)
    if reuse_ca:
        env["REUSE_CA"] = "1"
    subprocess.run([str(GEN_CERTS), str(directory), *(sans or ("127.0.0.1", "localhost"))],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return pathlib.Path(directory)


def client_context(ca_file, **kw):
    ctx = ssl.create_default_context(cafile=str(ca_file))
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


class Webhook:
    """One running webhook process."""

    def __init__(self, tmp, cert_dir, extra_args=(), cert_file=None, key_file=None):
        self.port = free_port()
        self.health_port = free_port()
        while self.health_port == self.port:
            self.health_port = free_port()
        self.ca_file = cert_dir / "ca.crt"
        self.log_path = tmp / f"webhook-{self.port}.log"
        self.args = [
            aw_bin(),
            "--bind-address=127.0.0.1",
            f"--port={self.port}",
            f"--health-port={self.health_port}",
            f"--tls-cert-file={cert_file or cert_dir / 'tls.crt'}",
            f"--tls-key-file={key_file or cert_dir / 'tls.key'}",
            *extra_args,
        ]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"webhook exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                status, _ = self.health_get("/readyz")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"webhook not ready after {timeout}s:\n{self.logs()}")

    def logs(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def log_records(self):
        out = []
        for line in self.logs().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()

    # --- clients -------------------------------------------------------------------------
    def context(self, **kw):
        return client_context(self.ca_file, **kw)

    def connection(self, timeout=10, **ctx_kw):
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=self.context(**ctx_kw))

    def request(self, method, path, body=None, content_type="application/json", headers=None,
                conn=None):
        """One request; returns (status, headers dict, body bytes)."""
        own = conn is None
        conn = conn or self.connection()
        try:
            hdrs = dict(headers or {})
            if content_type is not None:
                hdrs["Content-Type"] = content_type
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            elif isinstance(body, str):
                body = body.encode()
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            if own:
                conn.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def health_get(self, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.health_port, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def metrics(self):
        """Parses /metrics into {'name{labels}': value} (labels sorted as exposed)."""
        status, text = self.health_get("/metrics")
        assert status == 200
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
        return out


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    return gen_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def fixture_index():
    index_path = FIXTURES / "index.json"
    if not index_path.exists():
        pytest.skip("test/fixtures/index.json not present")
    return json.loads(index_path.read_text())


def context_args(context):
    args = []
    if context.get("trusted_users"):
        args.append("--trusted-users=" + ",".join(context["trusted_users"]))
    if context.get("agones_controller_users"):
        args.append("--agones-controller-users=" + ",".join(context["agones_controller_users"]))
    args.append("--crd-accepts-allocating=" + ("true" if context.get("crd_accepts_allocating")
                                               else "false"))
    return args


@pytest.fixture(scope="module")
def webhook(tmp_path_factory, certs):
    """A webhook configured like the fixtures' context (resolver trusted, CRD accepts)."""
    tmp = tmp_path_factory.mktemp("wh")
    wh = Webhook(tmp, certs, [f"--trusted-users={RESOLVER}", "--crd-accepts-allocating=true"])
    yield wh
    wh.stop()


@pytest.fixture
def start_webhook(tmp_path, certs):
    """Factory for tests that need their own process (flags, certificates, signals)."""
    started = []

    def start(extra_args=(), cert_dir=None, **kw):
        wh = Webhook(tmp_path, cert_dir or certs, extra_args, **kw)
        started.append(wh)
        return wh

    yield start
    for wh in started:
        wh.stop()


def load_review(name):
    return json.loads((FIXTURES / "reviews" / name).read_text())


def signal_and_wait(proc, sig=signal.SIGTERM, timeout=10):
    proc.send_signal(sig)
    return proc.wait(timeout=timeout)
