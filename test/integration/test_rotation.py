"""Certificate rotation like a Kubernetes Secret volume: an atomic swap of the `..data` symlink.

Requests keep flowing (new connections and keep-alive ones) during the swap: none may fail, and
new handshakes serve the new certificate afterwards. A broken pair (key of another certificate)
is rejected and counted while the previous certificate keeps serving.
"""

import os
import shutil
import socket
import ssl
import threading
import time

from conftest import gen_certs, load_review


class SecretVolume:
    """DIR/tls.crt -> ..data/tls.crt, DIR/..data -> ..<version>/ (what the kubelet writes)."""

    def __init__(self, root):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.version = 0

    def publish(self, cert_src, key_src):
        self.version += 1
        vdir = self.root / f"..2026_12_02_00_00_{self.version:02d}.{os.getpid()}"
        vdir.mkdir()
        shutil.copy(cert_src, vdir / "tls.crt")
        shutil.copy(key_src, vdir / "tls.key")
        tmp = self.root / "..data_tmp"
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(vdir.name, tmp)
        os.replace(tmp, self.root / "..data")  # atomic rename over the old symlink
        for name in ("tls.crt", "tls.key"):
            link = self.root / name
            if not link.is_symlink():
                os.symlink(f"..data/{name}", link)


def der(pem_path):
    return ssl.PEM_cert_to_DER_cert(pem_path.read_text())


def served_cert(wh):
    # No verification here: the exact DER is compared instead.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", wh.port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return tls.getpeercert(binary_form=True)


def wait_for_cert(wh, expected_der, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if served_cert(wh) == expected_der:
            return True
        time.sleep(0.05)
    return False


def test_rotation_under_load(start_webhook, tmp_path):
    # Both pairs come from the same CA, as with cert-manager or install-certs re-issuing.
    one = gen_certs(tmp_path / "one")
    two = tmp_path / "two"
    two.mkdir()
    shutil.copy(one / "ca.key", two / "ca.key")
    shutil.copy(one / "ca.crt", two / "ca.crt")
    gen_certs(two, reuse_ca=True)
    vol = SecretVolume(tmp_path / "secret")
    vol.publish(one / "tls.crt", one / "tls.key")

    wh = start_webhook(["--cert-reload-interval=100ms"], cert_dir=one,
                       cert_file=vol.root / "tls.crt", key_file=vol.root / "tls.key")
    assert served_cert(wh) == der(one / "tls.crt")
    review = load_review("v1-allocator-update.json")

    stop = threading.Event()
    failures, counts = [], [0, 0]

    def fresh_connections():
        while not stop.is_set():
            try:
                status, _, _ = wh.post("/mutate/gameservers", review)
                if status != 200:
                    failures.append(f"status {status}")
                counts[0] += 1
            except Exception as e:  # noqa: BLE001 - any failure counts
                failures.append(repr(e))

    def keep_alive():
        conn = wh.connection()
        while not stop.is_set():
            try:
                status, _, _ = wh.post("/mutate/gameservers", review, conn=conn)
                if status != 200:
                    failures.append(f"status {status}")
                counts[1] += 1
            except Exception as e:  # noqa: BLE001
                failures.append(repr(e))
        conn.close()

    threads = [threading.Thread(target=fresh_connections) for _ in range(3)]
    threads += [threading.Thread(target=keep_alive) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        vol.publish(two / "tls.crt", two / "tls.key")
        assert wait_for_cert(wh, der(two / "tls.crt")), "new certificate never served"
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=20)
    assert not failures, failures[:5]
    assert counts[0] > 20 and counts[1] > 20, counts
    metrics = wh.metrics()
    assert metrics["allocating_webhook_certificate_reloads_total"] == 1
    assert metrics["allocating_webhook_certificate_reload_failures_total"] == 0

    # A broken pair: certificate of `one` with the key of `two`. Rejected, counted, old one stays.
    vol.publish(one / "tls.crt", two / "tls.key")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if wh.metrics()["allocating_webhook_certificate_reload_failures_total"] >= 1:
            break
        time.sleep(0.05)
    metrics = wh.metrics()
    assert metrics["allocating_webhook_certificate_reload_failures_total"] == 1
    assert metrics["allocating_webhook_certificate_reloads_total"] == 1
    assert served_cert(wh) == der(two / "tls.crt")
    status, _, _ = wh.post("/mutate/gameservers", review)
    assert status == 200
    assert "reload rejected" in wh.logs()
    status, _ = wh.health_get("/readyz")
    assert status == 200

    # Fixed again: the good pair of `one` is picked up.
    vol.publish(one / "tls.crt", one / "tls.key")
    assert wait_for_cert(wh, der(one / "tls.crt"))
    assert wh.metrics()["allocating_webhook_certificate_reloads_total"] == 2


def test_in_place_file_rewrite(start_webhook, tmp_path):
    """Files rewritten in place (not a symlink swap) are picked up too."""
    one = gen_certs(tmp_path / "one")
    two = gen_certs(tmp_path / "two")
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(one / "tls.crt", live / "tls.crt")
    shutil.copy(one / "tls.key", live / "tls.key")
    wh = start_webhook(["--cert-reload-interval=100ms"], cert_dir=one,
                       cert_file=live / "tls.crt", key_file=live / "tls.key")
    shutil.copy(two / "tls.key", live / "tls.key")
    shutil.copy(two / "tls.crt", live / "tls.crt")
    assert wait_for_cert(wh, der(two / "tls.crt"))


def test_missing_files_at_start_fail(tmp_path):
    import subprocess
    from conftest import aw_bin, free_port
    res = subprocess.run([aw_bin(), "--bind-address=127.0.0.1", f"--port={free_port()}",
                          f"--health-port={free_port()}", f"--tls-cert-file={tmp_path}/nope.crt",
                          f"--tls-key-file={tmp_path}/nope.key"], capture_output=True, timeout=10)
    assert res.returncode == 1
    assert b"nope.crt" in res.stderr
