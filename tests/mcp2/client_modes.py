#!/usr/bin/env python3
"""The official MCP Python SDK 2.x high-level `Client` against three Ark Broker replicas, in both its modes.

Uses mcp==2.3.0 (HTTP through httpx2): `mcp.Client(url, mode=...)`. For each mode:
  "auto"    probes `server/discover` and must adopt 2026-07-28 (no fallback to the initialize handshake);
  "legacy"  runs the initialize handshake and must settle on 2025-11-25.
Then tools/list (ask_question listed) and a blocking `ask_question` whose question is found over REST on another
replica and answered with `POST /questions/{id}/answer` on REST_B; the call's result must carry that answer.

Environment:
  MCP_A, MCP_B, MCP_C     MCP endpoints of three replicas, e.g. http://127.0.0.1:8081/mcp
  REST_A, REST_B, REST_C  REST base URLs of the same replicas, e.g. http://127.0.0.1:8081
  MCP_TEST_TIMEOUT        seconds any single wait may take (default 20)

Prints `ok - <check>` per check and `N passed, 0 failed`; exits 1 at the first failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.types import CallToolResult, TextContent

RECIPIENT = "ark://users/dave"
T = TypeVar("T")

# The version each mode must end on against the broker.
EXPECTED = {"auto": "2026-07-28", "legacy": "2025-11-25"}


class CheckFailed(Exception):
    pass


def env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise CheckFailed(f"environment variable {name} is not set")
    return value.rstrip("/")


TIMEOUT = float(os.environ.get("MCP_TEST_TIMEOUT", "20"))


def expect(cond: Any, message: str) -> None:
    if not cond:
        raise CheckFailed(message)


async def within(what: str, aw: Awaitable[T], seconds: float = TIMEOUT) -> T:
    """Await `aw`, failing with a clear message after `seconds`."""
    try:
        with anyio.fail_after(seconds):
            return await aw
    except TimeoutError:
        raise CheckFailed(f"timed out after {seconds:g}s waiting for {what}") from None


def tool_payload(result: CallToolResult) -> dict[str, Any]:
    """structured_content, or else the first text content block that parses as a JSON object."""
    if isinstance(result.structured_content, dict):
        return result.structured_content
    for block in result.content:
        if isinstance(block, TextContent):
            try:
                value = json.loads(block.text)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise CheckFailed(f"tool result has neither structured content nor JSON text content: {result!r}")


class Rest:
    def __init__(self, client: httpx2.AsyncClient):
        self.http = client

    async def find_pending(self, base: str, content: str) -> dict[str, Any]:
        """The pending question whose content is `content`, polling briefly in case it is not visible yet."""

        async def poll() -> dict[str, Any]:
            while True:
                r = await self.http.get(f"{base}/questions", params={"status": "pending"})
                expect(r.status_code == 200, f"GET {base}/questions?status=pending: HTTP {r.status_code}: {r.text[:300]}")
                items = r.json().get("items")
                expect(isinstance(items, list), f"GET {base}/questions: no items list: {r.text[:300]}")
                found = [q for q in items if q.get("content") == content]
                expect(len(found) <= 1, f"{len(found)} questions with content {content!r}")
                if found:
                    return found[0]
                await asyncio.sleep(0.1)

        return await within(f"question {content!r} in GET {base}/questions?status=pending", poll())

    async def answer(self, base: str, qid: str, response: str) -> dict[str, Any]:
        url = f"{base}/questions/{qid}/answer"
        r = await within(f"POST {url}", self.http.post(url, json={"response": response}))
        expect(r.status_code == 200, f"POST {url}: HTTP {r.status_code}: {r.text[:300]}")
        return r.json()


async def run_mode(report: "Reporter", rest: Rest, mode: str, mcp_url: str, find_on: str, answer_on: str) -> None:
    want = EXPECTED[mode]
    report.start(f"[{mode}] connect negotiates {want}")
    client = Client(mcp_url, mode=mode, read_timeout_seconds=TIMEOUT)
    # The connect (probe or handshake) is bounded by the client's read timeout; a cancel scope may not be
    # entered around the client's own task group alone, so the whole mode gets an outer bound too.
    try:
        with anyio.fail_after(5 * TIMEOUT):
            async with client:
                await checks(report, rest, mode, client, find_on, answer_on)
    except TimeoutError:
        raise CheckFailed(f"timed out after {5 * TIMEOUT:g}s in mode {mode!r} on {mcp_url}") from None


async def checks(report: "Reporter", rest: Rest, mode: str, client: Client, find_on: str, answer_on: str) -> None:
    want = EXPECTED[mode]
    version = client.protocol_version
    print(f"# mode={mode}: negotiated protocol version {version}", flush=True)
    expect(version == want, f"negotiated protocol version {version!r}, want {want!r}")
    session = client.session
    if mode == "auto":
        expect(session.discover_result is not None, "auto: no DiscoverResult (fell back to initialize?)")
        supported = session.discover_result.supported_versions
        expect(want in supported, f"server/discover supportedVersions {supported!r} lacks {want!r}")
    else:
        expect(session.initialize_result is not None, "legacy: no InitializeResult")
    report.ok()

    report.start(f"[{mode}] tools/list has ask_question")
    listed = await within(f"tools/list ({mode})", client.list_tools())
    names = sorted(t.name for t in listed.tools)
    expect("ask_question" in names, f"ask_question not listed: {names}")
    report.ok()

    report.start(f"[{mode}] blocking ask_question returns the answer given over REST on B")
    content = f"client_modes.py {mode} {uuid.uuid4()}"
    call = asyncio.create_task(
        client.call_tool("ask_question", {"recipient": RECIPIENT, "content": content}, read_timeout_seconds=TIMEOUT)
    )
    try:
        question = await rest.find_pending(find_on, content)
        qid = question["id"]
        if call.done():
            outcome = call.exception() or call.result()
            raise CheckFailed(f"tools/call returned before the question was answered: {outcome!r}")
        await rest.answer(answer_on, qid, "yes")
        result = await within(f"the blocking tools/call ({mode}) to return", call)
    finally:
        if not call.done():
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
    expect(not result.is_error, f"tools/call is_error: {result!r}")
    payload = tool_payload(result)
    expect(payload.get("questionId") == qid, f"questionId {payload.get('questionId')!r}, want {qid!r}")
    expect(payload.get("response") == "yes", f"response {payload.get('response')!r}, want 'yes': {payload}")
    report.ok()


async def run(report: "Reporter") -> None:
    mcp_a, _mcp_b, mcp_c = env("MCP_A"), env("MCP_B"), env("MCP_C")
    rest_a, rest_b, rest_c = env("REST_A"), env("REST_B"), env("REST_C")
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        rest = Rest(http)
        # Each mode asks on one replica, finds the question on another and answers on B.
        await run_mode(report, rest, "auto", mcp_a, find_on=rest_c, answer_on=rest_b)
        await run_mode(report, rest, "legacy", mcp_c, find_on=rest_a, answer_on=rest_b)


class Reporter:
    def __init__(self) -> None:
        self.passed = 0
        self.current: str | None = None

    def start(self, name: str) -> None:
        self.current = name

    def ok(self) -> None:
        print(f"ok - {self.current}", flush=True)
        self.passed += 1
        self.current = None


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]


def main() -> int:
    return main_with(run)


def main_with(scenario: Any) -> int:
    """Runs `scenario(report)`, printing each check and the failure, if any; the exit status."""
    report = Reporter()
    try:
        asyncio.run(scenario(report))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - anything is a failure; anyio wraps errors in groups
        where = report.current or "setup"
        print(f"not ok - {where}", flush=True)
        for e in leaves(exc):
            if isinstance(e, CheckFailed):
                print(f"  error: {e}", file=sys.stderr)
            elif isinstance(e, MCPError):
                print(f"  MCP error {e.code}: {e.message} (data: {e.data!r})", file=sys.stderr)
            else:
                print("".join(traceback.format_exception(e)).rstrip(), file=sys.stderr)
        print(f"{report.passed} passed, 1 failed", flush=True)
        return 1
    print(f"{report.passed} passed, 0 failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
