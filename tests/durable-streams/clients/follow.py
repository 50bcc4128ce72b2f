"""Follows an Ark Query's chunk stream with the Python client (durable-streams on PyPI), long-polling: the
runs list, then each run it names read live to its closure (the run's `[DONE]`).

Usage: follow.py BASE QUERY RUNS. Prints a JSON line per batch it gets ({"run", "seen"}), one per run read to
its end ({"run", "closed"}), then {"runs": [{"run", "items", "closed"}]} once run RUNS is read. The client (0.1.0) predates the protocol's
Stream-Closed: it reads a batch that carries it, and long-polls again after a 204 that does, so this script
stops at the header itself (an httpx response hook). A request that fails (a replica went away) is retried
after a short pause, through the client's own on_error hook. Live reads name their offset (`-1`: the start):
the protocol refuses a live read without one, which the client would otherwise send.
"""

import json
import sys
import time

import httpx
from durable_streams import stream


class RunClosed(Exception):
    """A run's long-poll answered 204 with Stream-Closed: nothing more will come."""


def closed(response: httpx.Response) -> bool:
    return response.headers.get("stream-closed") == "true"


def stop_at_closure(response: httpx.Response) -> None:
    if response.status_code == 204 and closed(response):
        raise RunClosed()


def retry(error: Exception):
    if isinstance(error, RunClosed):
        return None
    time.sleep(0.1)
    return {}


def say(line) -> None:
    print(json.dumps(line), flush=True)


def read_run(base: str, run: dict) -> dict:
    items, was_closed = [], False
    with httpx.Client(event_hooks={"response": [stop_at_closure]}, timeout=30) as client:
        url = f"{base}/v1/stream/{run['path']}"
        try:
            res = stream(url, offset="-1", live="long-poll", on_error=retry, client=client)
            for batch in res.iter_json_batches():
                items.extend(batch)
                say({"run": run["run"], "seen": len(items)})
                if res.headers.get("stream-closed") == "true":
                    was_closed = True
                    break
        except RunClosed:
            was_closed = True
    say({"run": run["run"], "closed": was_closed})
    return {"run": run["run"], "items": items, "closed": was_closed}


def main() -> None:
    base, query, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
    read = []
    runs = stream(f"{base}/v1/stream/ark/{query}", offset="-1", live="long-poll", on_error=retry)
    for entry in runs.iter_json():
        read.append(read_run(base, entry))
        if entry["run"] == wanted:
            break
    say({"runs": read})


if __name__ == "__main__":
    main()
