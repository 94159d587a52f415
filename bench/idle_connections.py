#!/usr/bin/python3
"""Latency of a new request while N idle keep-alive TLS connections are open.

Usage: idle_connections.py PORT CA_FILE BODY_FILE [N]
Opens N TLS connections to 127.0.0.1:PORT, sends one request on each (so each sits in the
server's keep-alive wait), then times 50 requests on fresh connections (TCP + TLS handshake +
POST) and 50 on one warm keep-alive connection, and prints the medians and p99 next to the same
figures measured before the idle connections were opened.
"""

import http.client
import resource
import ssl
import sys
import time


def main():
    port, ca, body_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * n + 64)), hard))
    body = open(body_file, "rb").read()
    ctx = ssl.create_default_context(cafile=ca)
    headers = {"Content-Type": "application/json"}

    def post(conn):
        conn.request("POST", "/mutate/gameservers", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200, resp.status

    def fresh():
        start = time.perf_counter()
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        post(conn)
        elapsed = time.perf_counter() - start
        conn.close()
        return elapsed

    def measure():
        f = sorted(fresh() for _ in range(50))
        warm = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        post(warm)
        w = []
        for _ in range(50):
            start = time.perf_counter()
            post(warm)
            w.append(time.perf_counter() - start)
        warm.close()
        w.sort()
        return f[25] * 1e3, f[49] * 1e3, w[25] * 1e3, w[49] * 1e3

    before = measure()
    idle = []
    for _ in range(n):
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        post(conn)
        idle.append(conn)
    time.sleep(1.0)
    after = measure()
    for conn in idle:
        conn.close()
    print("IDLE connections=%d" % n)
    print("IDLE before: new-connection p50=%.2fms max=%.2fms, keep-alive p50=%.2fms max=%.2fms" % before)
    print("IDLE after:  new-connection p50=%.2fms max=%.2fms, keep-alive p50=%.2fms max=%.2fms" % after)


if __name__ == "__main__":
    main()
