"""Command line and process lifecycle: --help, bad flags, graceful shutdown."""

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import ROOT, aw_bin, load_review, signal_and_wait

EVERY_FLAG = [
    "port", "health-port", "bind-address", "tls-cert-file", "tls-key-file", "log-level",
    "log-format", "trusted-users", "agones-controller-users", "crd-accepts-allocating",
    "default-timeout", "min-timeout", "max-timeout", "default-probe-period", "min-probe-period",
    "max-probe-period", "max-connections", "read-timeout", "write-timeout", "keep-alive-timeout",
    "max-body-bytes", "cert-reload-interval", "shutdown-grace", "io-threads", "handshake-timeout",
    "max-request-line-bytes", "max-header-bytes", "max-header-count", "health-max-connections",
]


def run(*args):
    return subprocess.run([aw_bin(), *args], capture_output=True, timeout=10)


def test_help_lists_every_flag_with_default():
    res = run("--help")
    assert res.returncode == 0
    out = res.stdout.decode()
    for flag in EVERY_FLAG:
        assert f"--{flag}\n" in out, flag
    assert "(default 8443)" in out and "(default 8081)" in out
    assert "(default 30s)" in out and "(default 10m0s)" in out and "(default 250ms)" in out
    assert "(default system:serviceaccount:agones-system:agones-controller)" in out
    assert "(default false)" in out


@pytest.mark.parametrize("args,needle", [
    (["--no-such-flag"], "unknown flag: --no-such-flag"),
    (["--port=abc"], "--port"),
    (["--port", "70000"], "--port"),
    (["--port"], "needs an argument"),
    (["--log-level=loud"], "--log-level"),
    (["--log-format=xml"], "--log-format"),
    (["--default-timeout=soon"], "--default-timeout"),
    (["--crd-accepts-allocating=maybe"], "--crd-accepts-allocating"),
    (["positional"], "unexpected argument"),
    ([], "--tls-cert-file"),
])
def test_bad_command_line_exits_2(args, needle):
    res = run(*args)
    assert res.returncode == 2, res
    assert needle.encode() in res.stderr, res.stderr


def test_space_separated_values(start_webhook):
    wh = start_webhook(["--log-format", "text", "--default-timeout", "45s"])
    assert wh.health_get("/healthz")[0] == 200
    first = wh.logs().splitlines()[0]
    assert not first.startswith("{") and " info " in first, first


def test_json_logs_by_default(webhook):
    records = webhook.log_records()
    assert records
    assert all({"ts", "level", "msg"} <= r.keys() for r in records), records[:3]


def test_sigterm_finishes_in_flight_and_exits_0(start_webhook):
    wh = start_webhook()
    body = json.dumps(load_review("v1-allocator-update.json")).encode()
    # A request whose body is still arriving when SIGTERM comes; it must still be answered.
    conn = wh.connection(timeout=10)
    conn.putrequest("POST", "/mutate/gameservers")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body[:100])
    time.sleep(0.2)
    result = {}

    def finish():
        time.sleep(0.3)
        conn.send(body[100:])
        resp = conn.getresponse()
        result["status"] = resp.status
        resp.read()

    t = threading.Thread(target=finish)
    t.start()
    wh.proc.send_signal(signal.SIGTERM)
    t.join(timeout=10)
    assert wh.proc.wait(timeout=10) == 0
    assert result.get("status") == 200, wh.logs()[-2000:]
    assert "shutting down" in wh.logs()


def test_sigint_with_idle_connections_exits_0_promptly(start_webhook):
    wh = start_webhook()
    conns = []
    for _ in range(5):
        c = wh.connection()
        wh.post("/mutate/gameservers", load_review("v1-allocator-update.json"), conn=c)
        conns.append(c)
    start = time.monotonic()
    assert signal_and_wait(wh.proc, signal.SIGINT) == 0
    assert time.monotonic() - start < 5
    for c in conns:
        c.close()


def _version_file():
    return (ROOT / "VERSION").read_text().splitlines()[0].strip()


@pytest.mark.parametrize("binary", ["allocating-webhook", "allocation-gateway"])
def test_version_prints_version_commit_and_build_date(binary):
    # Both binaries answer --version without any other flag (the gateway otherwise requires
    # --allocator-address), exit 0, and print the VERSION file's version.
    path = os.path.join(os.path.dirname(aw_bin()), binary)
    res = subprocess.run([path, "--version"], capture_output=True, timeout=10)
    assert res.returncode == 0, res
    lines = res.stdout.decode().splitlines()
    assert lines[0] == f"{binary} {_version_file()}", lines
    assert re.fullmatch(r"commit: ([0-9a-f]{12,40}(-dirty)?|unknown)", lines[1]), lines
    assert re.fullmatch(r"build date: (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|unknown)", lines[2]), lines
    assert res.stderr == b""


def test_build_info_metric_matches_version(webhook):
    out = subprocess.run([aw_bin(), "--version"], capture_output=True, timeout=10).stdout.decode()
    version, commit, date = (line.split(" ", 1)[1] if i == 0 else line.split(": ", 1)[1]
                             for i, line in enumerate(out.splitlines()[:3]))
    key = (f'allocating_webhook_build_info{{build_date="{date}",commit="{commit}",'
           f'version="{version}"}}')
    assert webhook.metrics().get(key) == 1, [k for k in webhook.metrics() if "build_info" in k]
