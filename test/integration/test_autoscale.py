"""The Buffer autoscaling endpoint over real TLS against the binary: bad input gets a clear 4xx,
never a crash; without a Kubernetes config a valid review gets 503 (no counts to answer from);
the route exists only with --autoscale-buffer; reviews are counted on /metrics."""

import json

import pytest

PATH = "/autoscale/buffer/bufferSize=2/maxReplicas=100"


def review(**status):
    st = {"replicas": 3, "readyReplicas": 1, "reservedReplicas": 0, "allocatedReplicas": 2}
    st.update(status)
    return {"request": {"uid": "u-1", "name": "fleet", "namespace": "default", "status": st},
            "response": None}


@pytest.fixture(scope="module")
def autoscaler(tmp_path_factory, certs):
    from conftest import Webhook
    wh = Webhook(tmp_path_factory.mktemp("autoscale"), certs, ["--autoscale-buffer"])
    yield wh
    wh.stop()


def assert_message(status, headers, data, want_status, needle):
    assert status == want_status, (status, data)
    assert headers["content-type"].startswith("text/plain")
    assert needle in data.decode(), data


@pytest.mark.parametrize("body,needle", [
    ("", "not valid JSON"),
    ("{", "not valid JSON"),
    ("[]", "expected a FleetAutoscaleReview object"),
    ("{}", "body.request is missing"),
    (json.dumps({"request": {"name": "f", "namespace": "n", "status": {}}}), "request.uid is missing"),
    (json.dumps({"request": {"uid": "u", "name": "f", "namespace": "n"}}), "request.status is missing"),
    (json.dumps(review(allocatedReplicas=-1)), "request.status.allocatedReplicas is -1"),
    (json.dumps(review(replicas=-5)), "request.status.replicas is -5"),
    (json.dumps(review(readyReplicas=1.5)), "fraction"),
    ('{"request":{"uid":"a","uid":"b"}}', "duplicate key"),
    ("[" * 100000, "deeper than 64 levels"),
])
def test_bad_reviews_are_400(autoscaler, body, needle):
    status, headers, data = autoscaler.post(PATH, body)
    assert_message(status, headers, data, 400, needle)
    assert data.startswith(b"bad FleetAutoscaleReview: "), data


@pytest.mark.parametrize("path,needle", [
    ("/autoscale/buffer", "bufferSize is missing"),
    ("/autoscale/buffer/bufferSize=5", "maxReplicas is missing"),
    ("/autoscale/buffer/bufferSize=0/maxReplicas=10", "bufferSize is 0"),
    ("/autoscale/buffer/bufferSize=100%25/minReplicas=1/maxReplicas=10", "between 1% and 99%"),
    ("/autoscale/buffer/bufferSize=20%25/maxReplicas=10", "at least 1"),
    ("/autoscale/buffer/bufferSize=5/maxReplicas=abc", "maxReplicas is \"abc\""),
    ("/autoscale/buffer/bufferSize=5/maxReplicas=10/nope=1", "unknown parameter \"nope\""),
    ("/autoscale/buffer?bufferSize=5&bufferSize=6&maxReplicas=10", "more than once"),
])
def test_bad_parameters_are_400(autoscaler, path, needle):
    assert_message(*autoscaler.post(path, review()), 400, needle)


def test_http_errors(autoscaler):
    assert_message(*autoscaler.request("GET", PATH), 405, "POST")
    assert_message(*autoscaler.post(PATH, review(), content_type="text/plain"), 415, "application/json")
    big = json.dumps(review()) + " " * (2 * 1024 * 1024)
    assert_message(*autoscaler.post(PATH, big), 413, "larger than")


def test_valid_review_without_counts_is_503(autoscaler):
    for path in (PATH, "/autoscale/buffer?bufferSize=2&maxReplicas=100",
                 "/autoscale/buffer%3FbufferSize=20%25&minReplicas=1&maxReplicas=100"):
        assert_message(*autoscaler.post(path, review()), 503, "not synced")


def test_still_serves_and_counts(autoscaler):
    m = autoscaler.metrics()
    bad = [v for k, v in m.items()
           if k.startswith("allocating_webhook_autoscale_reviews_total") and "bad_request" in k]
    unavailable = [v for k, v in m.items()
                   if k.startswith("allocating_webhook_autoscale_reviews_total") and "unavailable" in k]
    assert bad and bad[0] >= 1, m
    assert unavailable and unavailable[0] >= 1, m
    assert autoscaler.proc.poll() is None


def test_route_absent_without_flag(webhook):
    status, _, _ = webhook.post(PATH, review())
    assert status == 404
