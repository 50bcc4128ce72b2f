"""Schemathesis hooks for the broker's OpenAPI document (loaded through SCHEMATHESIS_HOOKS=hooks).

The document describes two request bodies that are not JSON: NDJSON chunk POSTs (`application/x-ndjson`, a
string of lines) and OTLP protobuf exports (`application/x-protobuf`, bytes). Schemathesis needs to be told
how to put them on the wire; everything else it sends as it generates it.
"""

import json

import schemathesis


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
