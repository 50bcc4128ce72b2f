"""Runs ark-sdk's own executor app (ExecutorApp, A2AExecutorAdapter) with two test executors and drives each
with the A2A request Ark's controller sends, so the adapter streams to a broker through BrokerClient.

Usage: executor_app.py BROKER_URL NAMESPACE STREAMING_QUERY STREAMING_CONVERSATION PLAIN_QUERY PLAIN_CONVERSATION

- `StreamingExecutor` streams "Sunny", a `get_weather` tool call and " and 21°C" (BaseExecutor.stream_chunk and
  stream_tool_call), then returns the answer; `PlainExecutor` streams nothing and returns its answer, so the
  adapter sends it as one chunk. No LLM: the answers are fixed.
- Each runs in its own ExecutorApp (the SDK's Starlette app, served by uvicorn in this process on a free port).
- The request is what the Go controller's `NewQueryExtensionMessage` + `SendQueryExtensionMessage` send:
  JSON-RPC `message/send` (the pre-1.0 method name its trpc-a2a-go client uses), blocking, a user text part,
  the conversation as `contextId`, the query ref `{name, namespace}` under the query extension's metadata key,
  and the extension's URI in `extensions`.
- Kubernetes: the adapter resolves the Query and its Agent from the cluster (kubernetes client). A fake API
  server here serves those two objects, and KUBECONFIG points the SDK at it: the client's own documented seam.
- The broker: the adapter asks `discover_broker_url` (the `ark-config-streaming` ConfigMap, then the Service,
  giving `http://<svc>.<ns>.svc.cluster.local:<port>`, cached per process). That name cannot resolve here, so
  the cache is set to BROKER_URL before the first request, as the SDK's own tests (test_broker.py) set it.

Prints one JSON line: each A2A reply's `result`, the fake API's requests and the warnings. Exits 1 if the
SDK's broker client or adapter logged a warning or error (it swallows broker failures and only logs them), or
if an A2A reply is not a plain result.
"""

import asyncio
import atexit
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

QUERY_EXTENSION_URI = "https://github.com/mckinsey/agents-at-scale-ark/tree/main/ark/api/extensions/query/v1"
AGENT = "weather-agent"


class Collect(logging.Handler):
    """Warnings and errors of the SDK's broker client and executor adapter (not the A2A library's notes on the
    SDK's agent card, nor the Kubernetes client falling back from in-cluster config to KUBECONFIG)."""

    WATCHED = ("ark_sdk.broker", "ark_sdk.executor", "ark_sdk.executor_app", "ark_sdk.extensions")

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        if record.name in self.WATCHED or record.name.startswith("ark_sdk.extensions."):
            self.messages.append(f"{record.name}: {record.getMessage()}")


def fake_kubernetes(namespace, queries):
    """A kube-apiserver serving GET of the given Queries and of the Agent they target; 404 otherwise."""
    objects = {}
    for name, text in queries.items():
        objects[f"/apis/ark.mckinsey.com/v1alpha1/namespaces/{namespace}/queries/{name}"] = {
            "apiVersion": "ark.mckinsey.com/v1alpha1", "kind": "Query",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"input": text, "target": {"type": "agent", "name": AGENT}},
        }
    objects[f"/apis/ark.mckinsey.com/v1alpha1/namespaces/{namespace}/agents/{AGENT}"] = {
        "apiVersion": "ark.mckinsey.com/v1alpha1", "kind": "Agent",
        "metadata": {"name": AGENT, "namespace": namespace},
        "spec": {"prompt": "You report the weather.", "description": "Weather"},
    }
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(f"GET {self.path}")
            found = objects.get(self.path.split("?")[0])
            body = found or {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
            payload = json.dumps(body).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def kubeconfig(api_url, namespace):
    """Writes the kubeconfig into a fresh temp directory, removed when the process exits (read until then)."""
    folder = tempfile.mkdtemp(prefix="ark-sdk-kube-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "config")
    with open(path, "w") as f:
        json.dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": api_url}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }, f)
    return path


def controller_request(query, namespace, conversation, text):
    message = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "contextId": conversation,
        "metadata": {f"{QUERY_EXTENSION_URI}/ref": {"name": query, "namespace": namespace}},
        "extensions": [QUERY_EXTENSION_URI],
    }
    return {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "message/send",
            "params": {"message": message, "configuration": {"blocking": True}}}


async def serve(app):
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.02)
    return server, task, f"http://127.0.0.1:{sock.getsockname()[1]}"


async def main():
    broker_url, namespace = sys.argv[1], sys.argv[2]
    streaming_query, streaming_conversation, plain_query, plain_conversation = sys.argv[3:7]
    questions = {streaming_query: "What is the weather in Paris?", plain_query: "And in Rome?"}
    api, api_requests = fake_kubernetes(namespace, questions)
    os.environ["KUBECONFIG"] = kubeconfig(f"http://127.0.0.1:{api.server_address[1]}", namespace)

    import ark_sdk.broker
    from ark_sdk.executor import BaseExecutor, Message
    from ark_sdk.executor_app import ExecutorApp

    class StreamingExecutor(BaseExecutor):
        async def execute_agent(self, request):
            assert request.agent.name == AGENT and request.userInput.content == questions[streaming_query], request
            await self.stream_chunk("Sunny")
            await self.stream_tool_call("get_weather", {"city": "Paris"}, tool_call_id="call_weather_1")
            await self.stream_chunk(" and 21°C")
            return [Message(role="assistant", content="Sunny and 21°C")]

    class PlainExecutor(BaseExecutor):
        async def execute_agent(self, request):
            assert request.agent.name == AGENT and request.userInput.content == questions[plain_query], request
            return [Message(role="assistant", content="Rain in Rome")]

    ark_sdk.broker._cached_broker_url = broker_url
    ark_sdk.broker._broker_url_cached = True

    import httpx

    replies = {}
    for executor, query, conversation in [
        (StreamingExecutor("streaming-test"), streaming_query, streaming_conversation),
        (PlainExecutor("plain-test"), plain_query, plain_conversation),
    ]:
        app = ExecutorApp(executor, executor.engine_name).create_app()
        server, task, url = await serve(app)
        async with httpx.AsyncClient(timeout=30) as client:
            card = await client.get(f"{url}/.well-known/agent.json")
            assert card.status_code == 200, card.text
            reply = await client.post(url + "/", json=controller_request(query, namespace, conversation, questions[query]))
        server.should_exit = True
        await task
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert "result" in body, body
        replies[query] = body["result"]
    api.shutdown()
    return replies, api_requests


if __name__ == "__main__":
    collected = Collect()
    logging.getLogger().addHandler(collected)
    replies, api_requests = asyncio.run(main())
    print(json.dumps({"replies": replies, "kubernetes": api_requests, "warnings": collected.messages}))
    sys.exit(1 if collected.messages else 0)
