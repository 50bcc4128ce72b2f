"""A chunk writer that dies mid-body: it opens `POST /stream/<id>` with a chunked body, sends one NDJSON line,
says so on stdout, and then waits to be killed (the test SIGKILLs it, so its connection breaks mid-body the
way a crashed executor's does). Standard library only."""

import socket
import sys
import time

host, port, stream = sys.argv[1], int(sys.argv[2]), sys.argv[3]
connection = socket.create_connection((host, port))
connection.sendall(
    f"POST /stream/{stream} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
)
line = b'{"choices":[{"index":0,"delta":{"content":"partial"}}]}\n'
connection.sendall(b"%x\r\n%s\r\n" % (len(line), line))
print("sent", flush=True)
time.sleep(3600)
