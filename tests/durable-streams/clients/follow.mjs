// Follows an Ark Query's chunk stream with the official TypeScript client (@durable-streams/client), as a
// frontend would: the runs list live, each run it names read live to its closure (the run's `[DONE]`).
// Usage: node follow.mjs BASE QUERY RUNS. Prints a JSON line per item it gets ({"run", "seen"}), one per run
// read to its end ({"run", "closed", "offset"}), then {"runs": [{"run", "items", "offset", "closed"}]} once run
// RUNS is read, and exits 0. Reconnecting after a replica goes away is the client's own retry and backoff.
import { stream } from "@durable-streams/client"

const [base, query, runsWanted] = process.argv.slice(2)
const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`)
const options = { warnOnHttp: false, backoffOptions: { initialDelay: 50, maxDelay: 500, multiplier: 2 } }

const runs = await stream({ ...options, url: `${base}/v1/stream/ark/${query}`, live: true })
const read = []
for await (const entry of runs.jsonStream()) {
  const run = await stream({ ...options, url: `${base}/v1/stream/${entry.path}`, live: true })
  const items = []
  for await (const item of run.jsonStream()) {
    items.push(item)
    say({ run: entry.run, seen: items.length })
  }
  say({ run: entry.run, closed: run.streamClosed, offset: run.offset })
  read.push({ run: entry.run, items, offset: run.offset, closed: run.streamClosed })
  if (entry.run === Number(runsWanted)) break
}
say({ runs: read })
process.exit(0)
