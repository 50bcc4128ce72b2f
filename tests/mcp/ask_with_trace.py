#!/usr/bin/env python3
"""One blocking `ask_question` with a W3C trace context in the call's `_meta`, through the official Python SDK.

Usage: ask_with_trace.py MCP_URL TRACEPARENT CONTENT

Uses mcp==1.29.0 (`streamable_http_client` + `ClientSession.call_tool(..., meta=...)`, which sends
`params._meta.traceparent` as SEP-414 has it). Waits for the answer (the test answers over REST) and prints the
tool result's structuredContent and isError as one JSON line. MCP_TEST_TIMEOUT bounds the wait (default 20 s).
"""

import asyncio
import json
import os
import sys
from datetime import timedelta

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

TIMEOUT = float(os.environ.get("MCP_TEST_TIMEOUT", "20"))


async def main() -> None:
    url, traceparent, content = sys.argv[1], sys.argv[2], sys.argv[3]
    async with streamable_http_client(url, terminate_on_close=False) as (read, write, _):
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=TIMEOUT)) as session:
            await asyncio.wait_for(session.initialize(), TIMEOUT)
            arguments = {"recipient": "ark://users/dave", "content": content, "toolCallId": "call_sdk"}
            result = await asyncio.wait_for(
                session.call_tool("ask_question", arguments, meta={"traceparent": traceparent}), TIMEOUT
            )
    print(json.dumps({"isError": result.isError, "structuredContent": result.structuredContent}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
