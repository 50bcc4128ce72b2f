// Runs the Durable Streams reference server (@durable-streams/server, pinned in ../package.json) for the
// benchmark's side-by-side phase (benches/cluster/durable.rs): in memory, or file-backed in DATA_DIR.
// Usage: node reference.mjs [DATA_DIR]. Prints {"url": "http://127.0.0.1:PORT"} once it listens; runs until
// its stdin closes (the benchmark holds it) or it is signalled.
import { DurableStreamTestServer } from "@durable-streams/server"

const [dataDir] = process.argv.slice(2)
const server = new DurableStreamTestServer({ port: 0, host: "127.0.0.1", ...(dataDir ? { dataDir } : {}) })
const url = await server.start()
process.stdout.write(`${JSON.stringify({ url })}\n`)
const stop = async () => {
  await server.stop()
  process.exit(0)
}
process.stdin.on("end", stop)
process.stdin.resume()
process.on("SIGTERM", stop)
