// Writes COUNT JSON messages ({"n": 0} …) to a new stream at URL with the official TypeScript client's
// idempotent producer, then closes the stream. Every request goes through the client's retrying fetch
// (createFetchWithBackoff), so a request whose answer was lost is sent again with the same Producer-Seq.
// Usage: node produce.mjs URL COUNT. Prints {"closed": offset, "errors": [...]} and exits 0.
import { DurableStream, IdempotentProducer, createFetchWithBackoff } from "@durable-streams/client"

const [url, count] = process.argv.slice(2)
const retrying = createFetchWithBackoff((...args) => fetch(...args), { initialDelay: 20, maxDelay: 200, multiplier: 2 })
const errors = []
const handle = await DurableStream.create({ url, contentType: "application/json", fetch: retrying, warnOnHttp: false })
const producer = new IdempotentProducer(handle, "producer-1", {
  fetch: retrying,
  lingerMs: 0,
  maxInFlight: 1,
  onError: (error) => errors.push(String(error)),
})
for (let n = 0; n < Number(count); n++) {
  producer.append(JSON.stringify({ n }))
  // A batch per message or a few: wait for each to be taken so the cuts fall on many batches.
  if (n % 3 === 2) await producer.flush()
}
const closed = await producer.close()
process.stdout.write(`${JSON.stringify({ closed: closed.finalOffset, errors })}\n`)
process.exit(0)
