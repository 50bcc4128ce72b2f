"""Asks an Ark Broker a question from inside a trace of the official OpenTelemetry Python SDK, as an agent's
tool call would, and exports the caller's spans to the broker's POST /v1/traces (OTLP/HTTP protobuf).

Usage: ask_in_trace.py BASE_URL SESSION_ID QUERY_NAME

The trace has a `query` span and, inside it, the tool call's CLIENT span `tools/call ask_question`. While that
span is current, the SDK's W3C propagator writes its context into the `traceparent` header of `POST
/questions`; the question is then answered over REST (a person) and the spans end and are exported. Prints the
trace as the SDK saw it (hex ids) and the question's id as one JSON line; exits 1 if a request or an export
failed.
"""

import json
import sys
import urllib.request

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult


class Recording(OTLPSpanExporter):
    """The protobuf exporter, remembering each export's result."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.results = []

    def export(self, spans):
        result = super().export(spans)
        self.results.append(result)
        return result


def post(url, body, headers=None):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.loads(response.read())


def main():
    base, session, query = sys.argv[1], sys.argv[2], sys.argv[3]
    recording = Recording(endpoint=f"{base}/v1/traces")
    provider = TracerProvider(resource=Resource.create({"service.name": "ark-executor"}))
    provider.add_span_processor(BatchSpanProcessor(recording))
    tracer = provider.get_tracer("ark-broker-tests")
    attributes = {"ark.session.id": session, "query.name": query}
    with tracer.start_as_current_span("query", attributes=attributes) as query_span:
        with tracer.start_as_current_span("tools/call ask_question", kind=trace.SpanKind.CLIENT,
                                          attributes=attributes) as call:
            headers = {}
            propagate.inject(headers)
            asked = post(f"{base}/questions", {
                "sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy?",
                "query": {"namespace": "default", "name": query}}, headers)
            post(f"{base}/questions/{asked['id']}/answer", {"response": "yes", "answeredBy": "dave"})
    provider.shutdown()
    ok = recording.results and all(r == SpanExportResult.SUCCESS for r in recording.results)
    print(json.dumps({
        "traceId": format(call.get_span_context().trace_id, "032x"),
        "querySpanId": format(query_span.get_span_context().span_id, "016x"),
        "callSpanId": format(call.get_span_context().span_id, "016x"),
        "traceparent": headers.get("traceparent"),
        "questionId": asked["id"],
    }))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
