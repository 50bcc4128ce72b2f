"""ark-api's OpenAI-compatible endpoint (`POST /openai/v1/chat/completions` with `stream: true`) in front of the
broker's replicas, driven by the official `openai` client, with an executor writing the Query's stream as Ark's
newest Go executor does.

Usage: openai_app.py SERVICE BROKER_A BROKER_B NAMESPACE

ark-api is not published on PyPI, so its endpoint's streaming branch is written here as ark-api's
`api/v1/openai.py` behaves (not copied): create the Query (streaming annotation on) with ark-sdk's own client;
find the broker with ark-sdk's own `get_streaming_config` and `get_streaming_base_url` (the
`ark-config-streaming` ConfigMap, then the Service's port named in it); read
`GET {base}/stream/{query}?from-beginning=true&wait-for-query={timeout}` with httpx, passing every non-empty
line on followed by a blank line; on a non-200 answer, send one SSE frame
`{"error": {"status", "message", "type", "code"}}` taken from the broker's `{"error": {"message", "type",
"code"?}}` body, or "<status> <reason>" when the body is not of that shape.

How it is pointed without a cluster:
- Kubernetes: a fake API server here serves the ConfigMap (the chart's exact data), the Service (ports `http`
  80 and `mcp` 8081) and Query creation; KUBECONFIG points the clients at it.
- The Service: the base URL the SDK builds (`http://ark-broker.<ns>.svc.cluster.local:80`) cannot resolve
  here, so httpx reaches it through HTTP_PROXY (httpx's own documented seam) = SERVICE, an HTTP proxy that
  sends each request to the next replica, as a Service spreads connections.
- The executor: once the Query is created, a thread writes its answer as Ark 0.1.70's Go executor does — one
  chunked POST to BROKER_A, never reopened — and then POSTs `/complete` to BROKER_B.

Prints one JSON line: the query's name, the content deltas the `openai` client yielded, the error it raised
(if any: its message and the error object), and the fake API's requests.
"""

import asyncio
import http.client
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from executor_app import kubeconfig, serve

STREAMING_ENABLED_ANNOTATION = "ark.mckinsey.com/streaming-enabled"
SERVICE = "ark-broker"
ANSWER = ["Sunny", " and", " 21°C"]


def chunk(query, delta, finish_reason=None, completed=False):
    line = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()), "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    if completed:
        line["choices"] = []
        line["ark"] = {"query": query, "completedQuery": {"metadata": {"name": query}, "status": {"phase": "done"}}}
    return json.dumps(line)


def execute(query, broker_a, broker_b, outcome):
    """The Go executor: the whole answer in one chunked POST to A, then `/complete` on B, whatever A said."""
    a, b = urlparse(broker_a), urlparse(broker_b)
    lines = [chunk(query, {"role": "assistant", "content": ""})]
    lines += [chunk(query, {"content": text}) for text in ANSWER]
    lines += [chunk(query, {}, "stop"), chunk(query, {}, completed=True)]
    connection = http.client.HTTPConnection(a.hostname, a.port, timeout=30)
    connection.putrequest("POST", f"/stream/{query}")
    connection.putheader("Content-Type", "application/x-ndjson")
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    try:
        for line in lines:
            data = (line + "\n").encode()
            connection.send(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        connection.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        # A replica that refuses the request (401) answers before reading the body and closes; as Go's
        # transport does, the executor still reads the answer it was sent.
        pass
    outcome["post"] = connection.getresponse().status
    connection.close()
    connection = http.client.HTTPConnection(b.hostname, b.port, timeout=30)
    connection.request("POST", f"/stream/{query}/complete", body=b"{}", headers={"Content-Type": "application/json"})
    outcome["complete"] = connection.getresponse().status
    connection.close()


def fake_kubernetes(namespace, on_query):
    """GET of the chart's ark-config-streaming ConfigMap and of the Service; POST of a Query (201, echoed)."""
    objects = {
        f"/api/v1/namespaces/{namespace}/configmaps/ark-config-streaming": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ark-config-streaming", "namespace": namespace},
            "data": {"enabled": "true", "serviceRef": f'name: {SERVICE}\nport: "http"'},
        },
        f"/api/v1/namespaces/{namespace}/services/{SERVICE}": {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": namespace},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                               {"name": "mcp", "port": 8081, "targetPort": 8081, "protocol": "TCP"}]},
        },
    }
    queries = f"/apis/ark.mckinsey.com/v1alpha1/namespaces/{namespace}/queries"
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def reply(self, status, body):
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):
            seen.append(f"GET {self.path}")
            found = objects.get(self.path.split("?")[0])
            self.reply(200 if found else 404, found or {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                          "reason": "NotFound", "code": 404})

        def do_POST(self):
            seen.append(f"POST {self.path}")
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path.split("?")[0] != queries:
                self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})
                return
            body["metadata"]["uid"] = str(uuid.uuid4())
            self.reply(201, body)
            on_query(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def openai_endpoint(namespace):
    """The endpoint's streaming branch, as ark-api's `chat_completions` behaves with `stream: true`."""
    import httpx
    from ark_sdk import QueryV1alpha1Spec
    from ark_sdk.client import with_ark_client
    from ark_sdk.models.query_v1alpha1 import QueryV1alpha1
    from ark_sdk.streaming_config import get_streaming_base_url, get_streaming_config
    from fastapi import FastAPI, Request
    from fastapi.responses import StreamingResponse
    from kubernetes_asyncio import client as k8s_client

    app = FastAPI()

    async def relay(url):
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None)) as client:
            async with client.stream("GET", url) as response:
                if response.status_code != 200:
                    body = await response.aread()
                    try:
                        error = json.loads(body)["error"]
                        if not isinstance(error.get("message"), str) or not isinstance(error.get("type"), str):
                            raise ValueError("message and type must be strings")
                        frame = {"status": response.status_code, "message": error["message"], "type": error["type"],
                                 "code": error.get("code", "server_error")}
                    except (ValueError, KeyError, TypeError, AttributeError):
                        frame = {"status": response.status_code, "type": "server_error", "code": "server_error",
                                 "message": f"{response.status_code} {response.reason_phrase}"}
                    yield f"data: {json.dumps({'error': frame})}\n\n"
                    return
                async for line in response.aiter_lines():
                    if line.strip():
                        yield line + "\n\n"

    @app.post("/openai/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await request.json()
        assert body.get("stream") is True, body
        kind, _, name = body["model"].partition("/")
        query = f"openai-query-{uuid.uuid4().hex[:8]}"
        metadata = {"name": query, "namespace": namespace, "annotations": {STREAMING_ENABLED_ANNOTATION: "true"}}
        # ark-sdk 0.1.72 knows no `type: messages`; the newest ark-api leaves `type` out and passes the messages on.
        spec = QueryV1alpha1Spec(input=body["messages"], targets=[{"type": kind, "name": name}])
        async with with_ark_client(namespace, "v1alpha1") as ark:
            await ark.queries.a_create(QueryV1alpha1(metadata=metadata, spec=spec))
        timeout_seconds = 300  # the Query names no timeout
        async with k8s_client.ApiClient() as api:
            core = k8s_client.CoreV1Api(api)
            config = await get_streaming_config(core, namespace)
            base = await get_streaming_base_url(config, namespace, core)
        url = f"{base}/stream/{query}?from-beginning=true&wait-for-query={timeout_seconds}"
        return StreamingResponse(relay(url), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "Connection": "keep-alive"})

    return app


async def main():
    service, broker_a, broker_b, namespace = sys.argv[1:5]
    executed = {}

    def on_query(query):
        name = query["metadata"]["name"]
        executed["query"] = name
        executed["annotations"] = query["metadata"].get("annotations", {})
        executed["thread"] = threading.Thread(target=execute, args=(name, broker_a, broker_b, executed), daemon=True)
        executed["thread"].start()

    api, api_requests = fake_kubernetes(namespace, on_query)
    os.environ["KUBECONFIG"] = kubeconfig(f"http://127.0.0.1:{api.server_address[1]}", namespace)
    # The SDK's Service URL goes through the proxy; everything on this machine directly.
    os.environ["HTTP_PROXY"] = service
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    from kubernetes_asyncio import config as k8s_config

    await k8s_config.load_kube_config()
    import openai

    server, task, url = await serve(openai_endpoint(namespace))
    client = openai.AsyncOpenAI(base_url=f"{url}/openai/v1", api_key="unused")
    content, error = [], None
    try:
        stream = await client.chat.completions.create(
            model="agent/weather-agent", messages=[{"role": "user", "content": "Weather in Paris?"}], stream=True)
        async for part in stream:
            for choice in part.choices:
                if choice.delta.content:
                    content.append(choice.delta.content)
    except openai.APIError as e:
        error = {"message": e.message, "body": e.body}
    server.should_exit = True
    await task
    if "thread" in executed:
        executed["thread"].join(timeout=30)
    api.shutdown()
    return {"query": executed.get("query"), "annotations": executed.get("annotations"),
            "executor": {k: executed.get(k) for k in ("post", "complete")},
            "content": content, "error": error, "kubernetes": api_requests}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
