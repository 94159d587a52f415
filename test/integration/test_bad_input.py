"""Every kind of bad input gets a clear 4xx message and the process keeps serving."""

import http.client
import json
import socket
import ssl
import time

import pytest

from conftest import load_review

MiB = 1024 * 1024


def assert_text_message(status, headers, data, expected_status):
    assert status == expected_status, (status, data)
    assert headers["content-type"].startswith("text/plain")
    assert len(data.strip()) > 5, "a clear message"


def still_serving(wh):
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "alive", "operation": "DELETE", "object": None,
                        "userInfo": {"username": "alice"}}}
    status, _, data = wh.post("/validate/gameservers", body)
    assert status in (200, 400), data


@pytest.mark.parametrize("body,what", [
    (b"{not json", "malformed JSON"),
    (b"", "empty body"),
    (b"[1,2,3]", "not an object"),
    (b'{"kind":"Pod","apiVersion":"v1"}', "not an AdmissionReview"),
    (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}', "missing request"),
    (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}', "missing uid"),
    (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}',
     "uid of the wrong type"),
    (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}',
     "request of the wrong type"),
    (b"\xff\xfe\x00garbage", "binary garbage"),
])
def test_malformed_reviews_get_400(webhook, body, what):
    for route in ("/mutate/gameservers", "/validate/gameservers", "/validate/fleets",
                  "/validate/gameserversets", "/validate/gameserverallocations"):
        status, headers, data = webhook.post(route, body)
        assert 400 <= status < 500, (what, route, status, data)
        assert len(data.strip()) > 5, (what, route, data)
    still_serving(webhook)


def _mutilate(obj, path, value):
    cur = obj
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value


@pytest.mark.parametrize("path,value", [
    (("request", "object"), "a string"),
    (("request", "object", "metadata"), 42),
    (("request", "object", "metadata", "annotations"), ["list"]),
    (("request", "object", "metadata", "labels"), "x"),
    (("request", "object", "status"), [1]),
    (("request", "object", "status", "state"), 5),
    (("request", "oldObject", "status", "state"), {"a": 1}),
    (("request", "userInfo"), "root"),
    (("request", "operation"), 3),
])
def test_wrong_types_inside_the_object(webhook, path, value):
    review = load_review("v1-allocator-update.json")
    _mutilate(review, path, value)
    status, _, data = webhook.post("/mutate/gameservers", review)
    assert status in (200, 400), (path, status, data)
    if status == 200:
        assert json.loads(data)["response"]["uid"] == review["request"]["uid"]
    still_serving(webhook)


@pytest.mark.parametrize("ctype", ["text/plain", "application/yaml", None,
                                   "application/x-www-form-urlencoded"])
def test_wrong_content_type_415(webhook, ctype):
    review = load_review("v1-allocator-update.json")
    status, headers, data = webhook.post("/mutate/gameservers", review, content_type=ctype)
    assert_text_message(status, headers, data, 415)
    assert b"application/json" in data


def test_json_content_type_with_charset_accepted(webhook):
    review = load_review("v1-allocator-update.json")
    status, _, _ = webhook.post("/mutate/gameservers", review,
                                content_type="application/json; charset=utf-8")
    assert status == 200


def test_body_over_limit_413_content_length(webhook):
    conn = webhook.connection(timeout=30)
    status, headers, data = webhook.post("/mutate/gameservers", b"a" * (7 * MiB + 1), conn=conn)
    assert_text_message(status, headers, data, 413)
    # The connection stays usable: the oversized body was skipped.
    review = load_review("v1-allocator-update.json")
    status, _, _ = webhook.post("/mutate/gameservers", review, conn=conn)
    assert status == 200
    conn.close()


def test_body_at_limit_is_read(webhook):
    body = b" " * (7 * MiB - 2) + b"{}"
    status, _, data = webhook.post("/mutate/gameservers", body)
    assert status == 400, data  # parsed (and refused as not an AdmissionReview), not 413


def _chunks(total, size=64 * 1024):
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield b"a" * n
        sent += n


def test_body_over_limit_413_chunked(webhook):
    conn = webhook.connection(timeout=30)
    conn.putrequest("POST", "/mutate/gameservers")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for chunk in _chunks(7 * MiB + 1):
        conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    conn.send(b"0\r\n\r\n")
    resp = conn.getresponse()
    data = resp.read()
    assert resp.status == 413, data
    assert b"limit" in data
    conn.close()
    still_serving(webhook)


def test_unknown_path_404(webhook):
    for path in ("/", "/mutate", "/mutate/pods", "/validate/gameservers/extra", "/metrics"):
        status, headers, data = webhook.post(path, b"{}")
        assert_text_message(status, headers, data, 404)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_other_methods_405(webhook, method):
    status, headers, data = webhook.request(method, "/mutate/gameservers",
                                            b"{}" if method != "GET" else None)
    assert_text_message(status, headers, data, 405)
    assert headers.get("allow") == "POST"


def test_garbage_http(webhook):
    raw = socket.create_connection(("127.0.0.1", webhook.port), timeout=10)
    tls = webhook.context().wrap_socket(raw, server_hostname="127.0.0.1")
    tls.sendall(b"THIS IS NOT HTTP\r\n\r\n")
    data = tls.recv(4096)
    assert data.startswith(b"HTTP/1.1 400"), data
    tls.close()
    still_serving(webhook)


def test_plain_http_on_tls_port(webhook):
    conn = http.client.HTTPConnection("127.0.0.1", webhook.port, timeout=10)
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        conn.request("POST", "/mutate/gameservers", body=b"{}")
        conn.getresponse().read()
    conn.close()
    still_serving(webhook)


def test_bad_input_is_counted(webhook):
    before = webhook.metrics()
    webhook.post("/mutate/gameservers", b"{nope")
    webhook.post("/mutate/gameservers", b"{}", content_type="text/plain")
    after = webhook.metrics()
    key = 'allocating_webhook_admission_requests_total{outcome="error",route="mutate_gameservers"}'
    assert after[key] - before.get(key, 0) == 2
    assert after['allocating_webhook_http_errors_total{code="415"}'] >= 1


# --- duplicate JSON keys (kube-apiserver's decoder keeps the last, RapidJSON the first) -------------

def _review_text(review):
    return json.dumps(review, separators=(",", ":"))


def _insert_after(text, marker, insert):
    at = text.index(marker) + len(marker)
    return text[:at] + insert + text[at:]


def _duplicate_state(text):
    marker = '"status":{'
    first = text.index(marker)  # request.object comes before request.oldObject
    return text[:first + len(marker)] + '"state":"Ready",' + text[first + len(marker):]


def _duplicate_annotation(text):
    return _insert_after(text, '"annotations":{', '"allocating.agones.dev/timeout":"5s",')


def _duplicate_uid(text):
    return _insert_after(text, '"request":{', '"uid":"other",')


def _duplicate_in_nested_arrays(text):
    return _insert_after(text, '"spec":{', '"extra":[[{"a":1}],[{"b":1},{"c":[{"d":1,"d":2}]}]],')


@pytest.mark.parametrize("edit,message", [
    (_duplicate_state, 'request.object.status: duplicate key "state"'),
    (_duplicate_annotation,
     'request.object.metadata.annotations: duplicate key "allocating.agones.dev/timeout"'),
    (_duplicate_uid, 'request: duplicate key "uid"'),
    (_duplicate_in_nested_arrays, 'request.object.spec.extra[1][1].c[0]: duplicate key "d"'),
])
def test_duplicate_keys_get_400_naming_path_and_key(webhook, edit, message):
    review = load_review("v1-allocator-update.json")
    assert review["request"]["object"]["status"]["state"] == "Allocated"
    body = edit(_review_text(review))
    for route in ("/mutate/gameservers", "/validate/gameservers", "/validate/fleets",
                  "/validate/gameserversets", "/validate/gameserverallocations"):
        status, headers, data = webhook.post(route, body)
        assert_text_message(status, headers, data, 400)
        assert message in data.decode(), (route, data)
    still_serving(webhook)


def test_hundred_thousand_distinct_keys_are_answered(webhook):
    review = load_review("v1-allocator-update.json")
    review["request"]["object"]["spec"]["big"] = {f"key-{i}": "v" for i in range(100_000)}
    body = _review_text(review)
    assert len(body) < 7 * MiB
    start = time.monotonic()
    status, _, data = webhook.post("/mutate/gameservers", body)
    elapsed = time.monotonic() - start
    assert status == 200, data[:200]
    assert json.loads(data)["response"]["uid"] == review["request"]["uid"]
    assert elapsed < 5, f"{elapsed:.2f}s for 100k keys"  # generous: a shared CI core
    # The same object with one key repeated at its end.
    dup = body.replace('"key-99999":"v"', '"key-99999":"v","key-12345":"w"', 1)
    status, headers, data = webhook.post("/mutate/gameservers", dup)
    assert_text_message(status, headers, data, 400)
    assert 'request.object.spec.big: duplicate key "key-12345"' in data.decode()
    still_serving(webhook)
