"""Schemathesis hooks for the broker's OpenAPI document (loaded through SCHEMATHESIS_HOOKS=hooks).

- Bodies that are not JSON: NDJSON chunk POSTs (`application/x-ndjson`, a string of lines) and OTLP protobuf
  exports (`application/x-protobuf`, bytes) go on the wire as they are generated.
- Slack's and GitHub's inbound routes take only signed requests. The broker under test is started with
  WEBHOOK_SECRET as its Slack signing secret and GitHub webhook secret; most cases are signed here, after
  their body is serialised, so they reach the routes' handling of the payload, and some are left as
  generated (signatures the fuzzer made up), so the refusal is fuzzed too.
"""

import hashlib
import hmac
import json
import os
import time
import urllib.parse
import zlib

import schemathesis
from schemathesis.core import NotSet

WEBHOOK_SECRET = os.environ.get("WEBHOOK_SECRET", "fuzz-webhook-secret")


def _as_bytes(value):
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    # Anything else the generator makes: one JSON value per line.
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(item) + "\n" for item in items).encode("utf-8", "surrogatepass")


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    return _as_bytes(value)


@schemathesis.serializer("application/x-protobuf")
def protobuf(ctx, value):
    return _as_bytes(value)


def _body_bytes(case):
    body = case.body
    if case.media_type == "application/x-www-form-urlencoded" and isinstance(body, dict):
        return urllib.parse.urlencode({str(k): str(v) for k, v in body.items()}).encode("utf-8", "surrogatepass")
    if isinstance(body, (bytes, str)):
        return _as_bytes(body)
    return json.dumps(body).encode("utf-8", "surrogatepass")


def _sign(secret, message):
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


@schemathesis.hook
def before_call(ctx, case, kwargs):
    path = case.operation.path
    if not path.startswith("/channels/") or isinstance(case.body, NotSet):
        return
    try:
        body = _body_bytes(case)
    except (TypeError, ValueError):
        return
    # One case in five keeps what the fuzzer made up, deterministically.
    if zlib.crc32(body) % 5 == 0:
        return
    kwargs["data"] = body
    headers = case.headers if case.headers is not None else {}
    if path == "/channels/github/webhook":
        headers["X-Hub-Signature-256"] = "sha256=" + _sign(WEBHOOK_SECRET, body)
    else:
        timestamp = str(int(time.time()))
        headers["X-Slack-Request-Timestamp"] = timestamp
        headers["X-Slack-Signature"] = "v0=" + _sign(WEBHOOK_SECRET, f"v0:{timestamp}:".encode() + body)
    case.headers = headers
