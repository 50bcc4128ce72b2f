#!/usr/bin/env python3
"""Runs deploy/nginx/ark-broker.conf (the compose setup's nginx config) in front of three live local broker
replicas and drives the whole broker through nginx only: NDJSON chunk POSTs round-robined over the replicas,
a streamed POST whose lines reach a reader while its body is still open, SSE replay and live delivery to the
end, the questions watch, answering, and MCP `initialize`.

Env: BROKERS = "http_port:mcp_port,..." of three replicas on 127.0.0.1 sharing one database; NGINX = the
nginx binary (default: `nginx` on PATH, else /usr/sbin/nginx). Standard library only. Starts nginx as a foreground child on a free port and
stops it at the end, also on failure. Prints `ok - ...` per check and `N passed, M failed`.
"""

import http.client
import json
import os
import pathlib
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE_CONF = ROOT / "deploy" / "nginx" / "ark-broker.conf"
PATIENCE = 10.0  # seconds any single expected event may take

passed, failed = 0, 0


def ok(name):
    global passed
    passed += 1
    print(f"ok - {name}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- nginx ----------------------------------------------------------------------------------------------------

def write_config(tmp, brokers, port):
    """The compose config with loopback upstreams: the same site file, only its `listen 8080;` line moved."""
    upstreams = "".join(
        f"upstream {name} {{\n" + "".join(f"    server 127.0.0.1:{ports[i]};\n" for ports in brokers)
        + "    keepalive 32;\n}\n"
        for i, name in enumerate(["ark_broker_http", "ark_broker_mcp"]))
    (tmp / "upstreams.conf").write_text(upstreams)
    site, count = re.subn(r"(?m)^(\s*)listen 8080;$", rf"\1listen 127.0.0.1:{port};", SITE_CONF.read_text())
    assert count == 1, f"{SITE_CONF} must have exactly one `listen 8080;` line"
    (tmp / "ark-broker.conf").write_text(site)
    (tmp / "nginx.conf").write_text(f"""
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{}}
http {{
    log_format upstream '$request_method $uri $status $upstream_addr';
    access_log {tmp}/access.log upstream;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/upstreams.conf;
    include {tmp}/ark-broker.conf;
}}
""")


def nginx_binary():
    """$NGINX, else nginx on PATH, else Debian's /usr/sbin/nginx (not on a non-root user's PATH)."""
    return os.environ.get("NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"


def start_nginx(tmp, port):
    binary = nginx_binary()
    assert shutil.which(binary), f"{binary} not found (apt-get install nginx; scripts/test does it as root)"
    tmp.chmod(0o755)  # nginx workers run as an unprivileged user when started as root
    process = subprocess.Popen([binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf")],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"nginx exited with {process.returncode}: {read(tmp / 'error.log')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    raise AssertionError("nginx did not listen in time")


def stop_nginx(process):
    if process and process.poll() is None:
        process.send_signal(signal.SIGTERM)  # fast shutdown: open SSE connections do not hold it up
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read(path):
    try:
        return path.read_text()
    except OSError:
        return ""


# -- HTTP through nginx ---------------------------------------------------------------------------------------

class Proxy:
    def __init__(self, port):
        self.port = port

    def connection(self, timeout=PATIENCE):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        """One request on a fresh connection; returns (status, headers, parsed JSON or text)."""
        conn = self.connection()
        try:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            hdrs = {"content-type": "application/json"} if isinstance(body, (dict, list)) else {}
            conn.request(method, path, body=data, headers={**hdrs, **(headers or {})})
            response = conn.getresponse()
            text = response.read().decode()
            kind = response.getheader("content-type", "")
            return response.status, response, json.loads(text) if "json" in kind and text else text
        finally:
            conn.close()

    def sse(self, path, headers=None):
        return SseReader(self, path, headers)


class SseReader:
    """Reads an SSE response on a thread; events (dicts with event/id/data) arrive on a queue, then "EOF"."""

    def __init__(self, proxy, path, headers=None):
        self.conn = proxy.connection(timeout=60)
        self.conn.request("GET", path, headers={"accept": "text/event-stream", **(headers or {})})
        self.sock = self.conn.sock
        self.response = self.conn.getresponse()
        assert self.response.status == 200, f"GET {path}: {self.response.status} {self.response.read()[:300]}"
        kind = self.response.getheader("content-type", "")
        assert kind.startswith("text/event-stream"), f"GET {path}: content-type {kind}"
        self.events = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        event = {}
        try:
            while True:
                line = self.response.readline()
                if not line:
                    break
                line = line.decode().rstrip("\r\n")
                if not line:
                    if "data" in event or "event" in event:
                        self.events.put(event)
                    event = {}
                elif not line.startswith(":"):
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    event[field] = event[field] + "\n" + value if field == "data" and field in event else value
        except Exception as error:  # noqa: BLE001 - includes reads cut short by close()
            self.events.put({"error": repr(error)})
        self.events.put("EOF")

    def next(self, what):
        try:
            event = self.events.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError(f"timed out after {PATIENCE}s waiting for {what}") from None
        assert not (isinstance(event, dict) and "error" in event), f"{what}: read failed: {event['error']}"
        return event

    def nothing_within(self, seconds):
        try:
            return self.events.get(timeout=seconds)
        except queue.Empty:
            return None

    def close(self):
        # Shut the socket down first: the reading thread holds the response's buffer lock until a read returns.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


def upstreams_of(tmp, method, path, count):
    """Upstream addresses nginx's access log recorded for method + path, in order, once there are `count` (nginx
    writes the line when it finalizes the request, which may be just after the client has the response)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        found = [line.split()[3] for line in read(tmp / "access.log").splitlines() if line.split()[:2] == [method, path]]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


# -- the scenario ---------------------------------------------------------------------------------------------

def streams(proxy, tmp):
    stream = f"lb-{uuid.uuid4().hex[:12]}"
    path = f"/stream/{stream}"
    chunks = [{"n": n, "text": f"chunk {n}"} for n in range(1, 10)]
    ndjson = {"content-type": "application/x-ndjson"}

    for pair in (chunks[0:2], chunks[2:4], chunks[4:6]):
        body = "".join(json.dumps(c) + "\n" for c in pair).encode()
        status, _, reply = proxy.request("POST", path, body, ndjson)
        assert status == 200 and reply["chunks_received"] == 2, (status, reply)
    used = upstreams_of(tmp, "POST", path, 3)
    assert len(used) == 3 and len(set(used)) == 3, f"POSTs went to {used}"
    ok(f"three NDJSON POSTs through nginx were round-robined over all three replicas ({', '.join(used)})")

    reader = proxy.sse(f"{path}?from-beginning=true")
    try:
        for expected in chunks[:6]:
            event = reader.next(f"replayed chunk {expected['n']}")
            assert json.loads(event["data"]) == expected, event
        ok("GET /stream/{id}?from-beginning=true through nginx replays every chunk in order")

        started = time.monotonic()
        status, _, reply = proxy.request("POST", path, (json.dumps(chunks[6]) + "\n").encode(), ndjson)
        assert status == 200 and reply["chunks_received"] == 1, (status, reply)
        event = reader.next("a chunk POSTed while the reader is connected")
        assert json.loads(event["data"]) == chunks[6], event
        ok(f"SSE is not buffered: a chunk POSTed while a reader is connected reached it before completion "
           f"({time.monotonic() - started:.2f}s)")

        # One POST with a chunked request body, held open: its first line must reach the reader before the
        # body ends (proxy_request_buffering off).
        conn = proxy.connection()
        conn.putrequest("POST", path)
        conn.putheader("content-type", "application/x-ndjson")
        conn.putheader("transfer-encoding", "chunked")
        conn.endheaders()

        def send_chunk(data):
            conn.send(b"%x\r\n%s\r\n" % (len(data), data))

        started = time.monotonic()
        send_chunk((json.dumps(chunks[7]) + "\n").encode())
        event = reader.next("a line whose POST body is still open")
        assert json.loads(event["data"]) == chunks[7], event
        ok(f"request bodies are not buffered: a line of a POST whose body is still open reached the reader "
           f"({time.monotonic() - started:.2f}s)")
        send_chunk((json.dumps(chunks[8]) + "\n").encode())
        event = reader.next("the second line of the open POST")
        assert json.loads(event["data"]) == chunks[8], event
        conn.send(b"0\r\n\r\n")
        response = conn.getresponse()
        reply = json.loads(response.read())
        conn.close()
        assert response.status == 200 and reply["chunks_received"] == 2, (response.status, reply)
        ok("the streamed NDJSON POST (chunked, body held open) was stored line by line and answered at its end")

        assert reader.nothing_within(0.3) is None, "no event before completion"
        status, _, reply = proxy.request("POST", f"{path}/complete", {})
        assert status == 200 and reply["status"] == "completed", (status, reply)
        event = reader.next("[DONE]")
        assert event.get("data") == "[DONE]", event
        assert reader.next("the end of the SSE response") == "EOF"
        ok("completing the stream through nginx delivers `data: [DONE]` and ends the SSE response")
    finally:
        reader.close()

    late = proxy.sse(f"{path}?from-beginning=true")
    try:
        got = []
        while (event := late.next("a late reader's replay")) != "EOF":
            got.append(event["data"])
        assert [json.loads(d) for d in got[:-1]] == chunks and got[-1] == "[DONE]", got
        ok(f"a late reader through nginx gets all {len(chunks)} chunks, [DONE], and the end of the response")
    finally:
        late.close()


def questions(proxy):
    status, _, listing = proxy.request("GET", "/questions")
    assert status == 200, (status, listing)
    watch = proxy.sse(f"/questions?watch=true&resourceVersion={listing['resourceVersion']}")
    try:
        body = {"sender": "ark://agents/lb-test", "recipient": "ark://users/dave", "content": "Ship it via nginx?"}
        status, _, question = proxy.request("POST", "/questions", body)
        assert status == 201, (status, question)
        event = watch.next("event: question_created")
        assert event.get("event") == "question_created", event
        assert json.loads(event["data"])["id"] == question["id"], event
        ok("GET /questions?watch=true through nginx sees `event: question_created` for a question created through it")

        answer = {"response": "yes", "answeredBy": "lb-test"}
        status, _, answered = proxy.request("POST", f"/questions/{question['id']}/answer", answer)
        assert status == 200 and answered["status"] == "answered", (status, answered)
        event = watch.next("event: question_answered")
        assert event.get("event") == "question_answered", event
        assert json.loads(event["data"])["response"] == "yes", event
        ok("answering through nginx is stored and the watch sees `event: question_answered`")
    finally:
        watch.close()


def mcp(proxy, tmp):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "nginx-scenario", "version": "1"}}}
    headers = {"accept": "application/json, text/event-stream"}
    status, response, reply = proxy.request("POST", "/mcp", body, headers)
    if isinstance(reply, str):  # an SSE-framed reply: the JSON-RPC message is the last data line
        reply = json.loads([line[5:].strip() for line in reply.splitlines() if line.startswith("data:")][-1])
    assert status == 200, (status, reply)
    result = reply["result"]
    assert result["protocolVersion"] == "2025-11-25" and "tasks" in result["capabilities"], result
    assert response.getheader("mcp-session-id") is None, "stateless: no session id"
    used = upstreams_of(tmp, "POST", "/mcp", 1)
    assert used and all(addr.split(":")[1] in MCP_PORTS for addr in used), f"/mcp went to {used}"
    ok("POST /mcp initialize (2025-11-25) through nginx reaches a replica's MCP port: 200 with capabilities.tasks")

    status, _, reply = proxy.request("GET", "/health")
    assert status == 200 and upstreams_of(tmp, "GET", "/health", 1)[0].split(":")[1] in HTTP_PORTS, status
    ok("everything else (GET /health) goes to a replica's HTTP port")


def main():
    global HTTP_PORTS, MCP_PORTS
    raw = os.environ.get("BROKERS", "")
    brokers = [tuple(part.split(":")) for part in raw.split(",") if part]
    if len(brokers) != 3 or any(len(b) != 2 for b in brokers):
        sys.exit(f"BROKERS must list three http_port:mcp_port pairs, got {raw!r}")
    HTTP_PORTS, MCP_PORTS = {b[0] for b in brokers}, {b[1] for b in brokers}
    port = free_port()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ark-nginx-"))  # removed in the `finally` below
    nginx = None
    try:
        write_config(tmp, brokers, port)
        nginx = start_nginx(tmp, port)
        ok(f"nginx ({subprocess.run([nginx_binary(), '-v'], capture_output=True, text=True).stderr.strip()}) "
           f"serves deploy/nginx/ark-broker.conf on 127.0.0.1:{port} in front of {len(brokers)} replicas")
        proxy = Proxy(port)
        for group in (lambda: streams(proxy, tmp), lambda: questions(proxy), lambda: mcp(proxy, tmp)):
            try:
                group()
            except Exception as error:  # noqa: BLE001 - report, count, go on with the next group
                global failed
                failed += 1
                print(f"not ok - {type(error).__name__}: {error}", flush=True)
    except Exception as error:  # noqa: BLE001
        failed += 1
        print(f"not ok - {type(error).__name__}: {error}", flush=True)
    finally:
        stop_nginx(nginx)
        if failed:
            print("# nginx error log:\n" + "\n".join("#   " + line for line in read(tmp / "error.log").splitlines()[-30:]))
            print("# nginx access log:\n" + "\n".join("#   " + line for line in read(tmp / "access.log").splitlines()))
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
