"""The plain-HTTP port: /healthz, /readyz (really checks the HTTPS listener), /metrics."""

import json
import socket

from conftest import load_review


def test_healthz(webhook):
    assert webhook.health_get("/healthz") == (200, "ok\n")


def test_readyz_verbose(webhook):
    status, body = webhook.health_get("/readyz?verbose")
    assert status == 200
    assert "[+] certificate ok" in body and "[+] https-listener ok" in body


def test_health_unknown_path(webhook):
    status, body = webhook.health_get("/nope")
    assert status == 404 and body


def test_metrics_reflect_requests(webhook):
    before = webhook.metrics()
    review = load_review("v1-allocator-update.json")
    for _ in range(3):
        assert webhook.post("/mutate/gameservers", review)[0] == 200
    denied = load_review("v1-gsa-create-owned-key.json")
    status, _, data = webhook.post("/validate/gameserverallocations", denied)
    assert status == 200 and json.loads(data)["response"]["allowed"] is False
    webhook.post("/validate/fleets", b"{bad")
    after = webhook.metrics()

    def delta(key):
        return after.get(key, 0) - before.get(key, 0)

    req = "allocating_webhook_admission_requests_total"
    assert delta(f'{req}{{outcome="rewritten",route="mutate_gameservers"}}') == 3
    assert delta(f'{req}{{outcome="denied",route="validate_gameserverallocations"}}') == 1
    assert delta(f'{req}{{outcome="error",route="validate_fleets"}}') == 1
    hist = "allocating_webhook_admission_duration_seconds"
    assert delta(f'{hist}_count{{route="mutate_gameservers"}}') == 3
    # Sub-millisecond buckets exist.
    assert f'{hist}_bucket{{route="mutate_gameservers",le="0.0001"}}' in after
    assert after["allocating_webhook_admission_in_flight"] == 0
    for name in ("allocating_webhook_certificate_reloads_total",
                 "allocating_webhook_certificate_reload_failures_total",
                 "allocating_webhook_certificate_expiry_timestamp_seconds"):
        assert name in after, name
    # Every route/outcome series exists from the start.
    for route in ("mutate_gameservers", "validate_gameservers", "validate_fleets",
                  "validate_gameserversets", "validate_gameserverallocations"):
        for outcome in ("allowed", "rewritten", "denied", "error"):
            assert f'{req}{{outcome="{outcome}",route="{route}"}}' in after
        assert f'allocating_webhook_fail_open_total{{route="{route}"}}' in after


def test_metrics_content_type(webhook):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", webhook.health_port, timeout=5)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    assert resp.getheader("Content-Type").startswith("text/plain; version=0.0.4")
    text = resp.read().decode()
    assert "# TYPE allocating_webhook_admission_requests_total counter" in text
    assert "# TYPE allocating_webhook_admission_duration_seconds histogram" in text
    conn.close()


def test_readyz_fails_when_https_port_is_taken(start_webhook, certs, tmp_path):
    """Start-up refuses to run without its HTTPS listener (port busy): exit 1, clear message."""
    import subprocess
    from conftest import aw_bin, free_port
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    try:
        res = subprocess.run([aw_bin(), "--bind-address=127.0.0.1", f"--port={port}",
                              f"--health-port={free_port()}",
                              f"--tls-cert-file={certs / 'tls.crt'}",
                              f"--tls-key-file={certs / 'tls.key'}"],
                             capture_output=True, timeout=10)
        assert res.returncode == 1
        assert b"cannot listen" in res.stderr
    finally:
        blocker.close()
