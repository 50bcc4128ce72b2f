#!/usr/bin/env python3
"""2025-11-25 ("legacy", SEP-1686) MCP tasks against three Ark Broker replicas, with the official Python SDK.

Uses mcp==1.29.0: `mcp.client.streamable_http.streamable_http_client` + `mcp.ClientSession`, and the experimental
tasks API `session.experimental.{call_tool_as_task, get_task, get_task_result, list_tasks, cancel_task}`.

Environment:
  MCP_A, MCP_B, MCP_C     MCP endpoints of three replicas, e.g. http://127.0.0.1:8081/mcp
  REST_A, REST_B, REST_C  REST base URLs of the same replicas, e.g. http://127.0.0.1:8081
  MCP_TEST_TIMEOUT        seconds any single wait may take (default 20)

Prints `ok - <check>` per check and `N passed, 0 failed`; exits 1 at the first failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import traceback
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from typing import Any, TypeVar

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError
from mcp.types import INVALID_PARAMS, LATEST_PROTOCOL_VERSION, CallToolResult, TextContent

# `session.experimental` is marked deprecated in 1.29.0 (tasks left the core spec); it is exactly what we test.
warnings.filterwarnings("ignore", message=r".*experimental tasks API is deprecated.*")

RELATED_TASK = "io.modelcontextprotocol/related-task"
RECIPIENT = "ark://users/dave"
T = TypeVar("T")


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


async def expect_mcp_error(what: str, aw: Awaitable[Any], code: int) -> McpError:
    try:
        result = await within(what, aw)
    except McpError as e:
        expect(e.error.code == code, f"{what}: expected MCP error {code}, got {e.error.code} ({e.error.message})")
        return e
    raise CheckFailed(f"{what}: expected MCP error {code}, got a result: {result!r}")


def unique(label: str) -> str:
    return f"legacy_tasks.py {label} {uuid.uuid4()}"


def tool_payload(result: CallToolResult) -> dict[str, Any]:
    """structuredContent, or else the first text content block that parses as a JSON object."""
    if isinstance(result.structuredContent, dict):
        return result.structuredContent
    for block in result.content:
        if isinstance(block, TextContent):
            try:
                value = json.loads(block.text)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise CheckFailed(f"tool result has neither structuredContent nor JSON text content: {result!r}")


def result_text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


@contextlib.asynccontextmanager
async def mcp_session(url: str) -> AsyncIterator[tuple[ClientSession, Any]]:
    """A fresh, initialized ClientSession on `url`; yields (session, InitializeResult)."""
    # Read timeout above TIMEOUT so that our own bounds (and the session's) fire first with a clear message.
    http = create_mcp_http_client(timeout=httpx.Timeout(TIMEOUT, read=TIMEOUT + 10))
    async with http:
        async with streamable_http_client(url, http_client=http, terminate_on_close=False) as (read, write, sid):
            async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=TIMEOUT)) as session:
                init = await within(f"initialize on {url}", session.initialize())
                expect(sid() is None, f"{url}: server assigned an Mcp-Session-Id ({sid()!r}); it must be stateless")
                yield session, init


class Rest:
    def __init__(self, client: httpx.AsyncClient):
        self.http = client

    async def questions(self, base: str, **params: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        query = dict(params)
        for _ in range(100):  # pages
            r = await within(f"GET {base}/questions", self.http.get(f"{base}/questions", params=query))
            expect(r.status_code == 200, f"GET {base}/questions?{query}: HTTP {r.status_code}: {r.text[:300]}")
            body = r.json()
            expect(isinstance(body.get("items"), list), f"GET {base}/questions: no items list: {r.text[:300]}")
            expect("resourceVersion" in body, f"GET {base}/questions: no resourceVersion: {r.text[:300]}")
            items += body["items"]
            if not (body.get("hasMore") and body.get("nextCursor")):
                return items
            query["cursor"] = body["nextCursor"]
        raise CheckFailed(f"GET {base}/questions: more than 100 pages")

    async def find_question(self, base: str, content: str, **params: str) -> dict[str, Any]:
        """The question whose content is `content`, polling briefly in case it is not visible yet."""

        async def poll() -> dict[str, Any]:
            while True:
                found = [q for q in await self.questions(base, **params) if q.get("content") == content]
                expect(len(found) <= 1, f"{len(found)} questions with content {content!r}")
                if found:
                    return found[0]
                await asyncio.sleep(0.1)

        return await within(f"question {content!r} in GET {base}/questions?{params}", poll())

    async def get_question(self, base: str, qid: str) -> dict[str, Any]:
        r = await within(f"GET {base}/questions/{qid}", self.http.get(f"{base}/questions/{qid}"))
        expect(r.status_code == 200, f"GET {base}/questions/{qid}: HTTP {r.status_code}: {r.text[:300]}")
        return r.json()

    async def answer(self, base: str, qid: str, response: str) -> dict[str, Any]:
        r = await within(
            f"PATCH {base}/questions/{qid}", self.http.patch(f"{base}/questions/{qid}", json={"response": response})
        )
        expect(r.status_code == 200, f"PATCH {base}/questions/{qid}: HTTP {r.status_code}: {r.text[:300]}")
        return r.json()


async def list_all_task_ids(session: ClientSession) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    for _ in range(100):  # pages
        page = await within("tasks/list", session.experimental.list_tasks(cursor))
        ids += [t.taskId for t in page.tasks]
        cursor = page.nextCursor
        if not cursor:
            return ids
    raise CheckFailed("tasks/list: more than 100 pages")


async def run(report: "Reporter") -> None:
    mcp_a, mcp_b, mcp_c = env("MCP_A"), env("MCP_B"), env("MCP_C")
    rest_a, rest_c = env("REST_A"), env("REST_C")
    env("REST_B")  # required for symmetry; the checks answer on C and read on A

    async with contextlib.AsyncExitStack() as stack:
        rest = Rest(await stack.enter_async_context(httpx.AsyncClient(timeout=TIMEOUT)))
        a, init_a = await stack.enter_async_context(mcp_session(mcp_a))
        b, _ = await stack.enter_async_context(mcp_session(mcp_b))
        c, _ = await stack.enter_async_context(mcp_session(mcp_c))
        background: list[asyncio.Task[Any]] = []

        async def stop_background() -> None:
            for t in background:
                t.cancel()
            await asyncio.gather(*background, return_exceptions=True)

        stack.push_async_callback(stop_background)

        # a. initialize: 2025-11-25 tasks capability
        report.start("initialize on A advertises tasks {list, cancel, requests.tools.call}")
        expect(
            init_a.protocolVersion == LATEST_PROTOCOL_VERSION,
            f"negotiated protocolVersion {init_a.protocolVersion!r}, want {LATEST_PROTOCOL_VERSION!r}",
        )
        tasks_cap = init_a.capabilities.tasks
        raw_caps = init_a.capabilities.model_dump(by_alias=True, exclude_none=True)
        expect(tasks_cap is not None, f"capabilities.tasks missing: {raw_caps}")
        expect(tasks_cap.list is not None, f"capabilities.tasks.list missing: {raw_caps}")
        expect(tasks_cap.cancel is not None, f"capabilities.tasks.cancel missing: {raw_caps}")
        expect(
            tasks_cap.requests is not None
            and tasks_cap.requests.tools is not None
            and tasks_cap.requests.tools.call is not None,
            f"capabilities.tasks.requests.tools.call missing: {raw_caps}",
        )
        report.ok()

        # b. tools/list
        report.start("tools/list has ask_question (execution.taskSupport optional) and list_pending_questions")
        tools = {t.name: t for t in (await within("tools/list on A", a.list_tools())).tools}
        expect("ask_question" in tools, f"ask_question not listed: {sorted(tools)}")
        expect("list_pending_questions" in tools, f"list_pending_questions not listed: {sorted(tools)}")
        ask = tools["ask_question"]
        expect(
            ask.execution is not None and ask.execution.taskSupport == "optional",
            f"ask_question execution = {ask.execution!r}, want taskSupport 'optional'",
        )
        report.ok()

        # c. task-augmented tools/call on A
        report.start("call_tool_as_task(ask_question) on A creates a working task")
        content1 = unique("task")
        created = await within(
            "task-augmented tools/call on A",
            a.experimental.call_tool_as_task("ask_question", {"recipient": RECIPIENT, "content": content1}, ttl=60000),
        )
        task = created.task
        task_id = task.taskId
        expect(task_id, f"empty taskId: {created!r}")
        expect(task.status == "working", f"status {task.status!r}, want 'working'")
        expect(isinstance(task.ttl, int), f"ttl {task.ttl!r}, want a number")
        expect(isinstance(task.pollInterval, int), f"pollInterval {task.pollInterval!r}, want a number")
        report.ok()

        # d. the task is visible on the other replicas
        report.start("get_task on B sees the task working")
        got = await within("tasks/get on B", b.experimental.get_task(task_id))
        expect(got.taskId == task_id, f"tasks/get returned taskId {got.taskId!r}, want {task_id!r}")
        expect(got.status == "working", f"status {got.status!r}, want 'working'")
        report.ok()

        report.start("list_tasks on C includes the task")
        ids = await list_all_task_ids(c)
        expect(task_id in ids, f"task {task_id} not in tasks/list on C ({len(ids)} tasks)")
        report.ok()

        # e. blocking tasks/result on B, answered over REST on C
        report.start("get_task_result on B blocks until the answer given on C, with related-task _meta")
        pending_result = asyncio.create_task(b.experimental.get_task_result(task_id, CallToolResult))
        background.append(pending_result)
        question = await rest.find_question(rest_c, content1, status="pending")
        qid = question["id"]
        if pending_result.done():
            outcome = pending_result.exception() or pending_result.result()
            raise CheckFailed(f"tasks/result returned before the question was answered: {outcome!r}")
        await rest.answer(rest_c, qid, "yes from C")
        result = await within("tasks/result on B to return", pending_result)
        expect(not result.isError, f"tasks/result isError: {result!r}")
        payload = tool_payload(result)
        expect(payload.get("questionId") == qid, f"questionId {payload.get('questionId')!r}, want {qid!r}")
        expect(payload.get("response") == "yes from C", f"response {payload.get('response')!r}, want 'yes from C'")
        expect(payload.get("answeredAt"), f"answeredAt missing: {payload}")
        related = (result.meta or {}).get(RELATED_TASK)
        expect(
            isinstance(related, dict) and related.get("taskId") == task_id,
            f"_meta[{RELATED_TASK!r}] = {related!r}, want {{'taskId': {task_id!r}}}",
        )
        report.ok()

        report.start("get_task on A shows completed")
        got = await within("tasks/get on A", a.experimental.get_task(task_id))
        expect(got.status == "completed", f"status {got.status!r}, want 'completed'")
        report.ok()

        # f. cancel
        report.start("cancel_task on C cancels a task created on A")
        content2 = unique("cancel")
        created2 = await within(
            "task-augmented tools/call on A",
            a.experimental.call_tool_as_task("ask_question", {"recipient": RECIPIENT, "content": content2}, ttl=60000),
        )
        task2 = created2.task.taskId
        expect(created2.task.status == "working", f"status {created2.task.status!r}, want 'working'")
        cancelled = await within("tasks/cancel on C", c.experimental.cancel_task(task2))
        expect(cancelled.taskId == task2, f"tasks/cancel returned taskId {cancelled.taskId!r}, want {task2!r}")
        expect(cancelled.status == "cancelled", f"status {cancelled.status!r}, want 'cancelled'")
        report.ok()

        report.start("get_task on B shows cancelled")
        got = await within("tasks/get on B", b.experimental.get_task(task2))
        expect(got.status == "cancelled", f"status {got.status!r}, want 'cancelled'")
        report.ok()

        report.start("cancel_task on a cancelled task fails with -32602")
        await expect_mcp_error("second tasks/cancel on C", c.experimental.cancel_task(task2), INVALID_PARAMS)
        report.ok()

        report.start("REST shows the cancelled task's question cancelled")
        q2 = await rest.find_question(rest_a, content2)
        q2 = await rest.get_question(rest_a, q2["id"])
        expect(q2.get("status") == "cancelled", f"question {q2.get('id')} status {q2.get('status')!r}, want 'cancelled'")
        report.ok()

        # g. blocking tools/call with progress
        report.start("blocking call_tool on A streams progress until answered on C")
        content3 = unique("blocking")
        progress: list[tuple[float, float | None, str | None]] = []
        first_progress = asyncio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message))
            first_progress.set()

        call = asyncio.create_task(
            a.call_tool(
                "ask_question",
                {"recipient": RECIPIENT, "content": content3},
                read_timeout_seconds=timedelta(seconds=TIMEOUT + 5),
                progress_callback=on_progress,
            )
        )
        background.append(call)
        waiter = asyncio.create_task(first_progress.wait())
        background.append(waiter)
        await within("a first notifications/progress", asyncio.wait({waiter, call}, return_when=asyncio.FIRST_COMPLETED))
        if not first_progress.is_set():
            raise CheckFailed(f"tools/call returned before any progress: {call.result()!r}")
        question3 = await rest.find_question(rest_c, content3, status="pending")
        await rest.answer(rest_c, question3["id"], "blocking yes")
        result3 = await within("blocking tools/call to return", call)
        expect(not result3.isError, f"blocking call isError: {result3!r}")
        try:
            payload3 = tool_payload(result3)
        except CheckFailed:
            payload3 = {}
        expect(
            payload3.get("response") == "blocking yes" or "blocking yes" in result_text(result3),
            f"answer not in the result: {result3!r}",
        )
        values = [p[0] for p in progress]
        expect(all(x < y for x, y in zip(values, values[1:])), f"progress not strictly increasing: {values}")
        expect(
            any(m and "pending" in m.lower() for _, _, m in progress),
            f"no progress message mentions 'pending': {[m for _, _, m in progress]}",
        )
        report.ok()

        # h. unknown task
        report.start("get_task with an unknown id fails with -32602")
        await expect_mcp_error("tasks/get of a random id on A", a.experimental.get_task(str(uuid.uuid4())), INVALID_PARAMS)
        report.ok()


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
    report = Reporter()
    try:
        asyncio.run(run(report))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - anything is a failure; anyio wraps errors in groups
        errors = leaves(exc)
        where = report.current or "setup"
        print(f"not ok - {where}", flush=True)
        for e in errors:
            if isinstance(e, CheckFailed):
                print(f"  error: {e}", file=sys.stderr)
            elif isinstance(e, McpError):
                print(f"  MCP error {e.error.code}: {e.error.message}", file=sys.stderr)
            elif isinstance(e, httpx.HTTPError):
                url = e.request.url if getattr(e, "_request", None) is not None else "?"
                print(f"  HTTP error ({type(e).__name__}) on {url}: {e}", file=sys.stderr)
            else:
                print("".join(traceback.format_exception(e)).rstrip(), file=sys.stderr)
        print(f"{report.passed} passed, 1 failed", flush=True)
        return 1
    print(f"{report.passed} passed, 0 failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
