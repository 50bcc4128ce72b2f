"""Drives ark-sdk's BrokerClient the way an execution engine does, against three broker replicas.

Usage: broker_client.py QUERY CONVERSATION BROKER_A BROKER_B BROKER_C

One query's whole output, each call from a BrokerClient bound to a different replica (as the SDK opens a new
connection per call, a Kubernetes Service spreads them the same way):

  A: send_chunk("The weather")                           B: send_chunk(" in Paris")
  C: send_chunk("", tool_calls=[get_weather])            A: send_chunk(" is sunny.", finish_reason="stop")
  B: send_messages(CONVERSATION, [user, assistant])      (ttl_seconds 3600)
  C: send_final_chunk(text, messages, token usage)       A: complete()        B: complete() again

The client's session is the conversation, as the SDK's own executor app sets it. The SDK never raises on a
broker failure: it logs a warning and carries on. So every warning it logs is collected, and the script exits
1 listing them; with none it prints `{"warnings": []}` and exits 0. The readers' side is checked by the caller.
"""

import asyncio
import json
import logging
import sys

from ark_sdk.broker import BrokerClient


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


TOOL_CALL = {
    "index": 0,
    "id": "call_weather_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
}
USER = {"role": "user", "content": "What is the weather in Paris?"}
ASSISTANT = {"role": "assistant", "content": "The weather in Paris is sunny."}
USAGE = {"promptTokens": 31, "completionTokens": 9, "totalTokens": 40}


async def main():
    query, conversation, bases = sys.argv[1], sys.argv[2], sys.argv[3:6]
    a, b, c = (
        BrokerClient(base, query, session_id=conversation, agent_name="weather-agent", message_ttl_seconds=3600)
        for base in bases
    )
    await a.send_chunk("The weather")
    await b.send_chunk(" in Paris")
    await c.send_chunk("", tool_calls=[TOOL_CALL])
    await a.send_chunk(" is sunny.", finish_reason="stop")
    await b.send_messages(conversation, [USER, ASSISTANT])
    await c.send_final_chunk(ASSISTANT["content"], response_messages=[ASSISTANT], token_usage=USAGE)
    await a.complete()
    await b.complete()


if __name__ == "__main__":
    collected = Collect()
    logging.getLogger("ark_sdk").addHandler(collected)
    asyncio.run(main())
    print(json.dumps({"warnings": collected.messages}))
    sys.exit(1 if collected.messages else 0)
