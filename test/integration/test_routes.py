"""Each admission route with the realistic fixture reviews, over real TLS."""

import base64
import json
import time

import pytest

from conftest import FIXTURES, context_args, Webhook


def _reviews():
    index_path = FIXTURES / "index.json"
    if not index_path.exists():
        return []
    return json.loads(index_path.read_text())["reviews"]


@pytest.fixture(scope="module")
def fixture_webhook(tmp_path_factory, certs, fixture_index):
    wh = Webhook(tmp_path_factory.mktemp("routes"), certs, context_args(fixture_index["context"]))
    yield wh
    wh.stop()


@pytest.mark.parametrize("case", _reviews(), ids=lambda c: c["file"].split("/")[-1])
def test_fixture_review(fixture_webhook, case):
    body = (FIXTURES / case["file"]).read_bytes()
    review = json.loads(body)
    status, headers, data = fixture_webhook.post(case["route"] + "?timeout=10s", body)
    assert status == case["http_status"], data
    if status != 200:
        return
    assert headers["content-type"].startswith("application/json")
    answer = json.loads(data)
    assert answer["apiVersion"] == review["apiVersion"], "answered in the request's apiVersion"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is case["allowed"], response
    assert ("patch" in response) is case["patched"], response
    if case["patched"]:
        assert response["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(response["patch"]))
        assert isinstance(ops, list) and ops
    if not case["allowed"]:
        assert response["status"]["message"], "a denial says why"


def test_every_route_is_served(fixture_webhook):
    routes = {"/mutate/gameservers", "/validate/gameservers", "/validate/fleets",
              "/validate/gameserversets", "/validate/gameserverallocations"}
    assert routes <= {c["route"] for c in _reviews()}


def test_decision_log_lines(fixture_webhook):
    body = (FIXTURES / "reviews" / "v1-allocator-update.json").read_bytes()
    uid = json.loads(body)["request"]["uid"]
    status, _, _ = fixture_webhook.post("/mutate/gameservers", body)
    assert status == 200
    # The admission threads write a round's info lines after its handlers ran (docs/operations.md,
    # "Logs"): the line may reach the file a moment after the answer reached us.
    deadline = time.monotonic() + 5
    while True:
        records = [r for r in fixture_webhook.log_records() if r.get("uid") == uid]
        if records or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert records, fixture_webhook.logs()[-2000:]
    rec = records[-1]
    for key in ("namespace", "name", "route", "decision", "reason", "latency_ms"):
        assert key in rec, rec
    assert rec["route"] == "mutate_gameservers"
    assert rec["decision"] == "rewritten"
    assert rec["name"]


def test_fail_open_when_crd_lacks_allocating(start_webhook, fixture_index):
    ctx = dict(fixture_index["context"], crd_accepts_allocating=False)
    wh = start_webhook(context_args(ctx))
    body = (FIXTURES / "reviews" / "v1-allocator-update.json").read_bytes()
    status, _, data = wh.post("/mutate/gameservers", body)
    assert status == 200
    response = json.loads(data)["response"]
    assert response["allowed"] is True
    assert "patch" not in response
    assert response.get("warnings"), "fail-open carries a warning"
    metrics = wh.metrics()
    assert metrics['allocating_webhook_fail_open_total{route="mutate_gameservers"}'] == 1
