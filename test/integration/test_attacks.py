"""Hostile and slow clients (issue 10): each attack against the real binary over TLS, bounded in
time, asserting the issue's figure.

  - 40,000 x 8 KB header lines on one connection: closed or 431 before RSS passes 64 MB;
  - 1,100 slowloris connections (1 byte / 3 s) for 40 s: every new client from 12 s on is answered
    within 1 s; threads < 64; the health port keeps answering meanwhile;
  - 900 stalled keep-alive connections: 5 new clients answered within 500 ms each;
  - 64 slow connections on the health port: /healthz within 200 ms;
  - SIGTERM with 5 requests in flight: 5 answers, exit 0; SIGHUP/SIGUSR1/... are not fatal;
  - limits: 413 before the body, 100-continue -> 413 (and 100 within the limit), 414, 431.
"""

import concurrent.futures
import json
import os
import resource
import selectors
import signal
import socket
import ssl
import threading
import time

import pytest

from conftest import load_review

MiB = 1024 * 1024
BODY = json.dumps(load_review("v1-allocator-update.json")).encode()


@pytest.fixture(autouse=True)
def many_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 16384)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def rss_mb(pid, key="VmRSS"):
    return int(proc_status(pid)[key].split()[0]) / 1024


def threads(pid):
    return int(proc_status(pid)["Threads"])


def tls_socket(wh, timeout=10):
    raw = socket.create_connection(("127.0.0.1", wh.port), timeout=timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        return wh.context().wrap_socket(raw, server_hostname="127.0.0.1")
    except Exception:
        raw.close()
        raise


def plain_socket(wh, timeout=10):
    s = socket.create_connection(("127.0.0.1", wh.health_port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request_bytes(path="/mutate/gameservers", body=BODY, extra=b""):
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: webhook\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
            b"\r\n" + extra + b"\r\n" + body)


def read_response(sock):
    """(status, headers dict, body) of one HTTP/1.1 response with Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a response: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:length]


def timed_new_client(wh):
    """A new TLS connection and one admission request; (status, seconds)."""
    start = time.perf_counter()
    s = tls_socket(wh, timeout=5)
    try:
        s.sendall(request_bytes())
        status, _, _ = read_response(s)
    finally:
        s.close()
    return status, time.perf_counter() - start


def timed_healthz(wh):
    start = time.perf_counter()
    s = plain_socket(wh, timeout=5)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, body = read_response(s)
    finally:
        s.close()
    return status, time.perf_counter() - start


# --- memory: one connection sending endless header lines ---------------------------------------

def header_flood(wh, sock, lines=40_000, line_bytes=8 * 1024):
    """Sends a request head of `lines` header lines; returns (lines sent, answer or None, peak
    sampled RSS MB)."""
    pid = wh.proc.pid
    peak = [rss_mb(pid)]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    sock.settimeout(10)
    line = b"X-Flood: " + b"a" * (line_bytes - 11) + b"\r\n"
    sent = 0
    answer = None
    try:
        sock.sendall(b"POST /mutate/gameservers HTTP/1.1\r\nHost: x\r\n")
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ)
        while sent < lines:
            sock.sendall(line * 8)
            sent += 8
            if sel.select(0) or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                answer = sock.recv(65536)
                break
    except (OSError, ssl.SSLError):
        pass  # closed by the server
    finally:
        stop.set()
        sampler.join()
    return sent, answer, peak[0]


# Under ASan (scripts/test --sanitize) the idle process alone is ~60 MB of shadow memory: there the
# figure is applied to the growth above the idle RSS, with the same headroom as the real binary has.
SANITIZED = "ASAN_OPTIONS" in os.environ
# Under ThreadSanitizer (scripts/test --tsan) every memory access is instrumented (5 to 15 times
# slower): the attacks still run, for the races they exercise, but a new client's latency bound
# is the real binary's figure times LATENCY_FACTOR (a TLS handshake alone measured up to 1.14 s
# there, on 2 shared cores, during a slowloris).
LATENCY_FACTOR = 4.0 if "TSAN_OPTIONS" in os.environ else 1.0


@pytest.mark.parametrize("port", ["admission", "health"])
def test_header_flood_is_cut_before_64mb(start_webhook, port):
    wh = start_webhook(["--log-level=warn"])
    limit = 64.0
    if SANITIZED:
        limit = rss_mb(wh.proc.pid) + 64.0 - 12.0
    sock = tls_socket(wh) if port == "admission" else plain_socket(wh)
    start = time.monotonic()
    try:
        sent, answer, peak = header_flood(wh, sock)
    finally:
        sock.close()
    elapsed = time.monotonic() - start
    status_line = answer.split(b"\r\n")[0] if answer else None
    print(f"header flood ({port}): {sent} lines of 8 KB sent, answer "
          f"{status_line}, RSS sampled peak {peak:.1f} MB, "
          f"VmHWM {rss_mb(wh.proc.pid, 'VmHWM'):.1f} MB, {elapsed:.1f} s")
    assert sent < 40_000, "the server read all 320 MB of header lines"
    assert answer is None or answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert peak < limit, f"RSS reached {peak:.1f} MB"
    time.sleep(0.5)
    assert rss_mb(wh.proc.pid) < limit
    assert rss_mb(wh.proc.pid, "VmHWM") < limit, f"peak RSS (VmHWM) over {limit:.0f} MB"
    assert elapsed < 15
    # Still serving.
    assert timed_new_client(wh)[0] == 200
    assert timed_healthz(wh)[0] == 200


# --- slowloris ----------------------------------------------------------------------------------

class Slowloris:
    """`n` TLS connections sending a request one byte every `period` seconds; a connection the
    server closes is replaced by a new one, so the pressure stays at `n`."""

    PAYLOAD = (b"POST /mutate/gameservers HTTP/1.1\r\nHost: webhook\r\nContent-Type: "
               b"application/json\r\nX-Slow: " + b"s" * 4096)

    def __init__(self, wh, n, period=3.0, tls=True):
        self.wh, self.n, self.period, self.tls = wh, n, period, tls
        self.lock = threading.Lock()
        self.conns = {}  # socket -> bytes sent
        self.opened = 0
        self.cut = 0
        self.stop = threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open_one(self):
        if self.stop.is_set():
            return
        try:
            s = tls_socket(self.wh, timeout=10) if self.tls else plain_socket(self.wh)
            s.sendall(self.PAYLOAD[:1])
            s.setblocking(False)
        except (OSError, ssl.SSLError):
            if not self.stop.is_set():
                self.pool.submit(self.open_one)
            return
        with self.lock:
            self.conns[s] = 1
            self.opened += 1

    def start(self):
        for _ in range(self.n):
            self.pool.submit(self.open_one)
        self.thread.start()
        return self

    def run(self):
        while not self.stop.wait(self.period):
            with self.lock:
                conns = list(self.conns.items())
            dead = []
            for s, sent in conns:
                try:
                    # Readable means closed (or an answer): either way the server let go.
                    if s.recv(1):
                        raise ConnectionError
                except (BlockingIOError, ssl.SSLWantReadError):
                    pass
                except (OSError, ssl.SSLError, ConnectionError):
                    dead.append(s)
                    continue
                try:
                    s.send(self.PAYLOAD[sent % len(self.PAYLOAD):][:1])
                    with self.lock:
                        self.conns[s] = sent + 1
                except (BlockingIOError, ssl.SSLWantWriteError):
                    pass
                except (OSError, ssl.SSLError):
                    dead.append(s)
            for s in dead:
                with self.lock:
                    self.conns.pop(s, None)
                    self.cut += 1
                s.close()
                self.pool.submit(self.open_one)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)
        self.pool.shutdown(wait=True, cancel_futures=True)
        with self.lock:
            for s in self.conns:
                s.close()
            self.conns.clear()


def test_slowloris_1100_connections_40s(start_webhook):
    wh = start_webhook(["--log-level=error"])
    attack = Slowloris(wh, 1100).start()
    start = time.monotonic()
    late = []
    samples = []
    health = []
    max_threads = 0
    try:
        while time.monotonic() - start < 40:
            time.sleep(1.0)
            max_threads = max(max_threads, threads(wh.proc.pid))
            t = time.monotonic() - start
            if t < 12:
                continue
            try:
                status, elapsed = timed_new_client(wh)
            except (OSError, ssl.SSLError) as e:
                status, elapsed = repr(e), 99
            samples.append(elapsed)
            if status != 200 or elapsed >= 1.0 * LATENCY_FACTOR:
                late.append((round(t, 1), status, round(elapsed, 3)))
            health.append(timed_healthz(wh)[1])
        with attack.lock:
            held = len(attack.conns)
    finally:
        attack.close()
    print(f"slowloris: {attack.opened} connections opened, {attack.cut} cut by the server, "
          f"{held} open at the end; new clients: {len(samples)}, max "
          f"{max(samples) * 1000:.0f} ms; healthz max {max(health) * 1000:.0f} ms; "
          f"threads max {max_threads}; server RSS peak (VmHWM) "
          f"{rss_mb(wh.proc.pid, 'VmHWM'):.0f} MB")
    assert attack.opened >= 1100
    assert len(samples) >= 20
    assert not late, f"new clients not answered within 1 s: {late}"
    assert max_threads < 64
    assert max(health) < 0.2 * LATENCY_FACTOR
    assert wh.proc.poll() is None


# --- stalled keep-alive connections --------------------------------------------------------------

def test_900_stalled_keep_alive_connections(start_webhook):
    wh = start_webhook(["--log-level=error"])

    def open_stalled(_):
        s = tls_socket(wh, timeout=20)
        s.sendall(request_bytes())
        status, headers, _ = read_response(s)
        assert status == 200 and headers.get("connection", "") != "close"
        return s

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        conns = list(pool.map(open_stalled, range(900)))
    try:
        for s in conns:
            s.sendall(b"P")  # one byte of the next request, then nothing
        time.sleep(0.2)
        times = []
        for _ in range(5):
            status, elapsed = timed_new_client(wh)
            assert status == 200
            times.append(elapsed)
        print("stalled keep-alive: new clients answered in "
              + ", ".join(f"{t * 1000:.1f}" for t in times) + " ms; threads "
              + str(threads(wh.proc.pid)))
        assert max(times) < 0.5 * LATENCY_FACTOR, times
        assert threads(wh.proc.pid) < 64
    finally:
        for s in conns:
            s.close()


# --- health port ---------------------------------------------------------------------------------

def test_64_slow_connections_on_the_health_port(start_webhook):
    wh = start_webhook(["--log-level=error"])
    slow = []
    for _ in range(64):
        s = plain_socket(wh)
        s.sendall(b"G")
        slow.append(s)
    try:
        time.sleep(0.3)
        times = []
        for _ in range(5):
            status, elapsed = timed_healthz(wh)
            assert status == 200
            times.append(elapsed)
        print("health port with 64 slow connections: /healthz in "
              + ", ".join(f"{t * 1000:.1f}" for t in times) + " ms")
        assert max(times) < 0.2 * LATENCY_FACTOR, times
    finally:
        for s in slow:
            s.close()


# --- signals -------------------------------------------------------------------------------------

def test_sigterm_answers_5_requests_in_flight_and_exits_0(start_webhook):
    wh = start_webhook(["--shutdown-grace=10s"])
    # An idle keep-alive connection: closed at once on SIGTERM.
    idle = tls_socket(wh)
    idle.sendall(request_bytes())
    assert read_response(idle)[0] == 200
    # Five requests whose bodies are still arriving when SIGTERM comes.
    conns = []
    for _ in range(5):
        s = tls_socket(wh)
        s.sendall(request_bytes()[:-100])
        conns.append(s)
    time.sleep(0.2)
    start = time.monotonic()
    wh.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    statuses = []
    for s in conns:
        s.sendall(request_bytes()[-100:])
    for s in conns:
        status, headers, _ = read_response(s)
        statuses.append((status, headers.get("connection")))
        s.close()
    assert statuses == [(200, "close")] * 5, statuses
    assert idle.recv(1) == b""
    assert wh.proc.wait(timeout=10) == 0
    assert time.monotonic() - start < 10
    idle.close()


def test_drain_delay_answers_pooled_and_new_connections_then_stops(start_webhook):
    """--drain-delay: after SIGTERM, readiness fails at once, but for the delay a keep-alive
    connection made before the signal (kube-apiserver's pooled one) is kept open and its next
    request answered, with Connection: close, and a new connection is still accepted; then the
    listener stops and the process exits 0 within --shutdown-grace."""
    wh = start_webhook(["--shutdown-grace=12s", "--drain-delay=4s"])
    pooled = [tls_socket(wh) for _ in range(2)]
    for s in pooled:
        s.sendall(request_bytes())
        assert read_response(s)[0] == 200
    assert wh.health_get("/readyz")[0] == 200
    start = time.monotonic()
    wh.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 1
    while wh.health_get("/readyz")[0] == 200:
        assert time.monotonic() < deadline, "readiness still passes 1 s after SIGTERM"
        time.sleep(0.02)
    # The pooled connections are still open and answered, each closed after its answer.
    time.sleep(0.5)
    for s in pooled:
        s.sendall(request_bytes())
        status, headers, _ = read_response(s)
        assert (status, headers.get("connection")) == (200, "close"), wh.logs()[-2000:]
        assert s.recv(1) == b""
        s.close()
    # A new connection during the delay is accepted and answered (with Connection: close).
    fresh = tls_socket(wh)
    fresh.sendall(request_bytes())
    status, headers, _ = read_response(fresh)
    assert (status, headers.get("connection")) == (200, "close")
    fresh.close()
    assert time.monotonic() - start < 4, "the delay was over before the checks"
    # An idle connection opened during the delay is closed when the listener stops.
    idle = tls_socket(wh)
    assert wh.proc.wait(timeout=12) == 0
    elapsed = time.monotonic() - start
    assert 4 <= elapsed < 12, elapsed
    assert idle.recv(1) == b""
    idle.close()
    with pytest.raises(OSError):
        tls_socket(wh, timeout=2)
    assert "draining" in wh.logs()


def test_drain_delay_must_be_shorter_than_the_grace(start_webhook):
    with pytest.raises(AssertionError, match="--drain-delay must be at least 0 and less than --shutdown-grace"):
        start_webhook(["--shutdown-grace=5s", "--drain-delay=5s"])


def test_non_terminating_signals_are_not_fatal(start_webhook):
    wh = start_webhook()
    for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE):
        wh.proc.send_signal(sig)
    time.sleep(0.3)
    assert wh.proc.poll() is None, wh.logs()[-2000:]
    assert timed_new_client(wh)[0] == 200
    assert "signal ignored" in wh.logs()
    assert "SIGHUP" in wh.logs() and "SIGUSR1" in wh.logs()


# --- limits --------------------------------------------------------------------------------------

def test_413_before_the_body_is_sent(start_webhook):
    wh = start_webhook()
    s = tls_socket(wh, timeout=5)
    s.sendall(b"POST /mutate/gameservers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              b"\r\nContent-Length: %d\r\n\r\n" % (8 * MiB))
    start = time.monotonic()
    status, _, body = read_response(s)  # no body byte sent
    assert status == 413 and b"limit" in body
    assert time.monotonic() - start < 1
    s.close()


def test_expect_100_continue_over_the_limit_gets_413(start_webhook):
    wh = start_webhook()
    s = tls_socket(wh, timeout=5)
    s.sendall(b"POST /mutate/gameservers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              b"\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (8 * MiB))
    status, headers, _ = read_response(s)
    assert status == 413
    assert headers.get("connection") == "close"
    s.close()


def test_expect_100_continue_within_the_limit(start_webhook):
    wh = start_webhook()
    s = tls_socket(wh, timeout=5)
    head = request_bytes()[:-len(BODY)]
    s.sendall(head.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
    first = s.recv(4096)
    assert first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), first
    s.sendall(BODY)
    status, _, body = read_response(s)
    assert status == 200 and b'"response"' in body
    s.close()


@pytest.mark.parametrize("target_len", [12 * 1024, 40 * 1024])
def test_414_request_line(start_webhook, target_len):
    wh = start_webhook()
    s = tls_socket(wh, timeout=5)
    s.sendall(b"POST /" + b"a" * target_len + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, body = read_response(s)
    assert status == 414 and b"request line" in body
    s.close()
    assert timed_new_client(wh)[0] == 200


def test_431_header_bytes(start_webhook):
    wh = start_webhook()
    s = tls_socket(wh, timeout=5)
    s.sendall(request_bytes(extra=b"".join(b"X-Big-%d: %s\r\n" % (i, b"b" * 1024)
                                           for i in range(40))))
    status, _, body = read_response(s)
    assert status == 431 and b"bytes" in body
    s.close()


def test_431_header_count(start_webhook):
    wh = start_webhook()
    s = tls_socket(wh, timeout=5)
    s.sendall(request_bytes(extra=b"".join(b"X-%d: 1\r\n" % i for i in range(150))))
    status, _, body = read_response(s)
    assert status == 431 and b"header fields than" in body
    s.close()
    metrics = wh.metrics()
    assert metrics['allocating_webhook_http_errors_total{code="431"}'] == 1
