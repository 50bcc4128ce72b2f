#!/usr/bin/env python3
"""`mcp:caller`: the official MCP Python SDK 2.x as an MCP host with a scripted person, against three replicas.

Uses mcp==2.3.0: `mcp.Client(transport, mode=..., elicitation_callback=...)`. The client's HTTP goes through a
round-robin transport over replicas A, B and C (as a Kubernetes Service spreads requests), so the call, the
elicitation's reply and any retry reach different replicas. In each mode — "auto" (2026-07-28: the call's
`InputRequiredResult`, answered by retrying with `inputResponses`) and "legacy" (2025-11-25: `elicitation/create`
on the call's own response stream, the reply POSTed to another replica) — it checks:

  - a client without an elicitation callback gets a tool error naming `mcp:caller`, and nothing is stored;
  - the person answers the form (a free-text question, and a typed one whose form is its responseSchema); the
    history says the answer came via `mcp:caller`;
  - the person declines: the question is declined, the call's result says so;
  - the page and Slack (a reply in the question's thread, through the test's fake Slack: SLACK_PERSON) answer
    while the person is still looking at the form: the first answer wins, exactly once, and the person's late
    answer changes nothing;
  - a long question is asked as a link to its page (URL mode): the person opens it and answers there.

Environment: MCP_A/B/C, REST_A/B/C as for client_modes.py; SLACK_PERSON (`POST {it}/reply/{question id}` replies in
the question's Slack thread); MCP_TEST_TIMEOUT (default 20).
Prints `ok - <check>` per check and `N passed, 0 failed`; exits 1 at the first failure.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import uuid
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from client_modes import (
    TIMEOUT,
    CheckFailed,
    Reporter,
    env,
    expect,
    main_with,
    tool_payload,
    within,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult, TextContent

RECIPIENT = "ark://users/dave"
CALLER = ["mcp:caller"]


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next replica's MCP port, as a Service in front of them would."""

    def __init__(self, urls: list[str]) -> None:
        self.ports = itertools.cycle([urlsplit(url).port for url in urls])
        self.inner = httpx2.AsyncHTTPTransport()
        self.seen: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self.ports)
        self.seen.append(port)
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"{request.url.host}:{port}"
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Person:
    """The person at the client: answers each elicitation as the scenario scripts it, and records what it saw."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.reply = lambda params: ElicitResult(action="decline")

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.seen.append(params)
        outcome = self.reply(params)
        return await outcome if asyncio.iscoroutine(outcome) else outcome


class Rest:
    def __init__(self, http: httpx2.AsyncClient) -> None:
        self.http = http

    async def question(self, base: str, content: str) -> dict[str, Any] | None:
        r = await self.http.get(f"{base}/questions", params={"limit": "200"})
        expect(r.status_code == 200, f"GET {base}/questions: HTTP {r.status_code}")
        found = [q for q in r.json()["items"] if q.get("content") == content]
        expect(len(found) <= 1, f"{len(found)} questions with content {content[:60]!r}")
        return found[0] if found else None

    async def pending(self, base: str, content: str) -> dict[str, Any]:
        async def poll() -> dict[str, Any]:
            while (found := await self.question(base, content)) is None or found["status"] != "pending":
                await asyncio.sleep(0.05)
            return found

        return await within(f"question {content[:40]!r} pending on {base}", poll())

    async def history(self, base: str, qid: str) -> list[dict[str, Any]]:
        r = await self.http.get(f"{base}/questions/{qid}/history")
        expect(r.status_code == 200, f"history of {qid}: HTTP {r.status_code}")
        return r.json()["items"]

    async def answer_on_page(self, base: str, qid: str, response: str) -> None:
        r = await self.http.post(f"{base}/ui/questions/{qid}/answer", data={"response": response})
        expect(r.status_code in (200, 303), f"page answer of {qid}: HTTP {r.status_code}: {r.text[:200]}")


def client(urls: list[str], mode: str, person: Person | None) -> Client:
    http = httpx2.AsyncClient(transport=RoundRobin(urls), timeout=httpx2.Timeout(TIMEOUT, read=5 * TIMEOUT))
    transport = streamable_http_client(urls[0], http_client=http)
    return Client(transport, mode=mode, read_timeout_seconds=5 * TIMEOUT, elicitation_callback=person)


async def ask(mcp: Client, content: str, **arguments: Any) -> Any:
    args = {"recipient": RECIPIENT, "content": content, "channels": CALLER, **arguments}
    return await within(f"ask_question {content[:40]!r}", mcp.call_tool("ask_question", args), 5 * TIMEOUT)


def text(result: Any) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


async def decided_via_caller(rest: Rest, base: str, qid: str, step: str) -> None:
    steps = [item for item in await rest.history(base, qid) if item.get("step") == step]
    expect(len(steps) == 1, f"{qid}: {len(steps)} '{step}' steps in its history: {steps}")
    expect(steps[0].get("channel") == "mcp:caller", f"{qid}: '{step}' via {steps[0].get('channel')!r}")


async def checks(report: Reporter, rest: Rest, mode: str, urls: list[str], bases: list[str]) -> None:
    a, b, c = bases

    report.start(f"[{mode}] without the elicitation capability: a tool error naming mcp:caller, nothing stored")
    content = f"elicitation.py {mode} no capability {uuid.uuid4()}"
    async with client(urls, mode, None) as mcp:
        result = await ask(mcp, content)
    expect(result.is_error and "mcp:caller" in text(result), f"not a tool error naming mcp:caller: {result!r}")
    expect(await rest.question(c, content) is None, "a question was stored")
    report.ok()

    person = Person()
    async with client(urls, mode, person) as mcp:
        report.start(f"[{mode}] the person answers the form at the client; recorded via mcp:caller")
        content = f"elicitation.py {mode} free text {uuid.uuid4()}"
        person.reply = lambda params: ElicitResult(action="accept", content={"answer": "from the client"})
        payload = tool_payload(await ask(mcp, content))
        expect(payload.get("response") == "from the client", f"response {payload}")
        asked = person.seen[-1]
        expect(isinstance(asked, ElicitRequestFormParams), f"not a form: {asked!r}")
        expect(asked.message == content, f"the form's message {asked.message!r}")
        expect("answer" in asked.requested_schema["properties"], f"schema {asked.requested_schema}")
        await decided_via_caller(rest, b, payload["questionId"], "answered")
        report.ok()

        report.start(f"[{mode}] a typed question's form is its responseSchema")
        schema = {"type": "object", "properties": {"approve": {"type": "boolean"}, "replicas": {"type": "integer"}},
                  "required": ["approve"]}
        person.reply = lambda params: ElicitResult(action="accept", content={"approve": True, "replicas": 3})
        payload = tool_payload(await ask(mcp, f"elicitation.py {mode} typed {uuid.uuid4()}", responseSchema=schema))
        expect(payload.get("response") == {"approve": True, "replicas": 3}, f"response {payload}")
        expect(person.seen[-1].requested_schema == schema, f"schema {person.seen[-1].requested_schema}")
        report.ok()

        report.start(f"[{mode}] declining at the client declines the question")
        content = f"elicitation.py {mode} decline {uuid.uuid4()}"
        person.reply = lambda params: ElicitResult(action="decline")
        result = await ask(mcp, content)
        expect(result.is_error and "declined" in text(result), f"not a decline: {result!r}")
        question = await rest.question(a, content)
        expect(question and question["status"] == "declined", f"stored as {question}")
        await decided_via_caller(rest, c, question["id"], "declined")
        report.ok()

        report.start(f"[{mode}] the page and Slack race the person; the first answer wins, once")
        slack_person = os.environ.get("SLACK_PERSON", "").rstrip("/")
        expect(slack_person, "SLACK_PERSON (a person in the fake Slack) is not set")
        content = f"elicitation.py {mode} race {uuid.uuid4()}"
        looking, release = asyncio.Event(), asyncio.Event()

        async def slow(params: Any) -> ElicitResult:
            looking.set()
            await release.wait()
            return ElicitResult(action="accept", content={"answer": "late from the client"})

        person.reply = slow
        call = asyncio.create_task(ask(mcp, content, channels=[*CALLER, "slack:#ops"]))
        await within("the form at the client", looking.wait())
        question = await rest.pending(b, content)
        from_slack = rest.http.post(f"{slack_person}/reply/{question['id']}", content="from Slack")
        await asyncio.gather(rest.answer_on_page(c, question["id"], "from the page"), from_slack)
        release.set()
        payload = tool_payload(await call)
        stored = await rest.question(a, content)
        expect(payload.get("response") == stored["response"], f"the call says {payload}, the broker {stored}")
        steps = [item for item in await rest.history(a, question["id"]) if item.get("step") == "answered"]
        expect(len(steps) == 1, f"answered steps {steps}")
        winner = {"page": "from the page", "slack": "from Slack"}.get(steps[0].get("channel"))
        expect(winner == stored["response"], f"answered via {steps[0].get('channel')!r} with {stored['response']!r}")
        print(f"# [{mode}] the race went to {steps[0].get('channel')}", flush=True)
        report.ok()

        report.start(f"[{mode}] a long question is a link to its page (URL mode), answered there")
        content = f"elicitation.py {mode} long {uuid.uuid4()} " + "Context. " * 300

        async def open_page(params: Any) -> ElicitResult:
            expect(isinstance(params, ElicitRequestURLParams), f"not URL mode: {params!r}")
            page = await rest.http.get(params.url)
            expect(page.status_code == 200, f"GET {params.url}: HTTP {page.status_code}")
            qid = params.url.rsplit("/", 1)[-1]
            expect(qid in page.text and params.elicitation_id == qid, f"the page of {qid}")
            await rest.answer_on_page(a, qid, "answered on its page")
            return ElicitResult(action="accept")

        person.reply = open_page
        payload = tool_payload(await ask(mcp, content))
        expect(payload.get("response") == "answered on its page", f"response {payload}")
        report.ok()


async def run(report: Reporter) -> None:
    urls = [env("MCP_A"), env("MCP_B"), env("MCP_C")]
    bases = [env("REST_A"), env("REST_B"), env("REST_C")]
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        rest = Rest(http)
        for mode in ("auto", "legacy"):
            try:
                with anyio.fail_after(30 * TIMEOUT):
                    await checks(report, rest, mode, urls, bases)
            except TimeoutError:
                raise CheckFailed(f"timed out in mode {mode!r}") from None


if __name__ == "__main__":
    sys.exit(main_with(run))
