"""Exports one trace to an Ark Broker's POST /v1/traces with the official OpenTelemetry Python SDK.

Usage: export_trace.py BASE_URL protobuf|json SESSION_ID [gzip]

The trace has three nested spans (query -> agent -> llm); each carries `ark.session.id` and `query.name`
the way Ark's components set them. The exporter is the SDK's OTLP/HTTP exporter for the chosen encoding,
behind a BatchSpanProcessor, so all spans go out in one export request. Prints the trace as the SDK saw it
(hex ids, parent links) as one JSON line; exits 1 if any export failed.
"""

import json
import sys

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Recording(SpanExporter):
    """Passes spans to the real exporter and remembers each export's result."""

    def __init__(self, inner):
        self.inner = inner
        self.results = []

    def export(self, spans):
        result = self.inner.export(spans)
        self.results.append(result)
        return result

    def shutdown(self):
        self.inner.shutdown()


def exporter(base, encoding, gzip):
    endpoint = f"{base}/v1/traces"
    if encoding == "protobuf":
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        compression = Compression.Gzip if gzip else Compression.NoCompression
    else:
        # The JSON exporter's package names the same choices differently.
        from opentelemetry.exporter.otlp.common.http import Compression
        from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter

        compression = Compression.GZIP if gzip else Compression.NONE
    return OTLPSpanExporter(endpoint=endpoint, compression=compression)


def main():
    base, encoding, session = sys.argv[1], sys.argv[2], sys.argv[3]
    gzip = len(sys.argv) > 4 and sys.argv[4] == "gzip"
    recording = Recording(exporter(base, encoding, gzip))
    provider = TracerProvider(resource=Resource.create({"service.name": "ark-controller", "replica": 2}))
    provider.add_span_processor(BatchSpanProcessor(recording))
    tracer = provider.get_tracer("ark-broker-tests")
    attributes = {"ark.session.id": session, "query.name": "weather-query", "tokens": 42}
    spans = []
    with tracer.start_as_current_span("query", attributes=attributes) as query:
        spans.append(query)
        with tracer.start_as_current_span("agent", attributes=attributes) as agent:
            spans.append(agent)
            with tracer.start_as_current_span("llm", attributes=attributes) as llm:
                spans.append(llm)
    provider.shutdown()
    ok = recording.results and all(r == SpanExportResult.SUCCESS for r in recording.results)
    print(json.dumps({
        "traceId": format(spans[0].get_span_context().trace_id, "032x"),
        "spans": [{
            "name": s.name,
            "spanId": format(s.get_span_context().span_id, "016x"),
            "parentSpanId": format(s.parent.span_id, "016x") if s.parent else "",
        } for s in spans],
        "exports": len(recording.results),
    }))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
