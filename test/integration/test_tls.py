"""TLS: versions, ciphers, ALPN, with Python's ssl (OpenSSL) and curl."""

import shutil
import socket
import ssl
import subprocess

import pytest


def handshake(wh, **ctx_kw):
    ctx = wh.context()
    for k, v in ctx_kw.items():
        if k == "ciphers":
            ctx.set_ciphers(v)
        elif k == "alpn":
            ctx.set_alpn_protocols(v)
        else:
            setattr(ctx, k, v)
    raw = socket.create_connection(("127.0.0.1", wh.port), timeout=10)
    try:
        tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    except Exception:
        raw.close()
        raise
    info = (tls.version(), tls.cipher(), tls.selected_alpn_protocol())
    tls.close()
    return info


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls12_and_13_accepted(webhook, version):
    got, cipher, _ = handshake(webhook, minimum_version=version, maximum_version=version)
    assert got == {"TLSv1_2": "TLSv1.2", "TLSv1_3": "TLSv1.3"}[version.name]
    if version == ssl.TLSVersion.TLSv1_2:
        assert cipher[0].startswith("ECDHE-") and ("GCM" in cipher[0] or "CHACHA20" in cipher[0])


def _openssl_s_client(wh, *args):
    return subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{wh.port}", "-CAfile", str(wh.ca_file),
         *args], input=b"", capture_output=True, timeout=20)


@pytest.mark.parametrize("flag", ["-tls1", "-tls1_1"])
def test_old_tls_refused_by_server(webhook, flag):
    # Lower the client's own security level so the refusal is the server's.
    res = _openssl_s_client(webhook, flag, "-cipher", "DEFAULT:@SECLEVEL=0")
    out = (res.stdout + res.stderr).decode(errors="replace")
    assert res.returncode != 0, out
    assert "protocol version" in out or "unsupported protocol" in out, out
    assert "no protocols available" not in out, "the client refused on its own: test is void"


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_old_tls_refused_python(webhook, version):
    ctx_kw = {"minimum_version": version, "maximum_version": version, "ciphers": "ALL:@SECLEVEL=0"}
    with pytest.raises((ssl.SSLError, ConnectionError)):
        handshake(webhook, **ctx_kw)


@pytest.mark.parametrize("cipher", ["AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA",
                                    "ECDHE-ECDSA-AES128-SHA256", "AES256-SHA"])
def test_weak_tls12_ciphers_refused(webhook, cipher):
    with pytest.raises(ssl.SSLError):
        handshake(webhook, maximum_version=ssl.TLSVersion.TLSv1_2, ciphers=cipher)


def test_alpn_http11(webhook):
    _, _, alpn = handshake(webhook, alpn=["h2", "http/1.1"])
    assert alpn == "http/1.1"
    _, _, alpn = handshake(webhook, alpn=["http/1.1"])
    assert alpn == "http/1.1"


def test_alpn_h2_only_client_gets_no_alpn(webhook):
    _, _, alpn = handshake(webhook, alpn=["h2"])
    assert alpn is None


def test_ecdsa_certificate(webhook):
    res = _openssl_s_client(webhook, "-brief")
    out = (res.stdout + res.stderr).decode(errors="replace")
    assert "ECDSA" in out or "EC" in out, out


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_round_trip(webhook):
    from conftest import FIXTURES
    body = FIXTURES / "reviews" / "v1-allocator-update.json"
    res = subprocess.run(
        ["curl", "-sS", "--cacert", str(webhook.ca_file), "-H", "Content-Type: application/json",
         "--data-binary", f"@{body}", "-w", "\n%{http_code} %{http_version}",
         f"https://127.0.0.1:{webhook.port}/mutate/gameservers?timeout=10s"],
        capture_output=True, timeout=20)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.decode().rsplit("\n", 1)
    assert lines[1] == "200 1.1"
    assert '"response"' in lines[0]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_refuses_untrusted(webhook, tmp_path):
    from conftest import gen_certs
    other = gen_certs(tmp_path / "other")
    res = subprocess.run(
        ["curl", "-sS", "--cacert", str(other / "ca.crt"), "-d", "{}",
         f"https://127.0.0.1:{webhook.port}/mutate/gameservers"], capture_output=True, timeout=20)
    assert res.returncode != 0
