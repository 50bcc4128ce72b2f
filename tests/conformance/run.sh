#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json) against
# one Ark Broker MCP endpoint:   tests/conformance/run.sh http://127.0.0.1:8080/mcp
#
# Scenarios: every one that applies to a server of tools without resources, prompts or completions (the
# list in README.md), each tasks-* scenario the installed suite lists among them. The broker must serve the
# suite's fixture tools (`--features conformance-fixtures`, `--mcp-conformance-fixtures`). Each run is judged against expected-failures.yml: exit 0 only when every failing
# (or WARNING) check is listed there and no listed check now passes (the suite calls that a stale baseline).
# Prints one summary line per scenario; full logs and checks.json go to results/<run>/ (git-ignored).
#
# Environment: CONFORMANCE_TIMEOUT_MS (per scenario, default 30000), CONFORMANCE_RESULTS (default ./results),
# CONFORMANCE_EXPECTED_FAILURES (default ./expected-failures.yml).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 <mcp-url>   (e.g. http://127.0.0.1:8080/mcp)" >&2
  exit 2
fi
url="$1"
timeout_ms="${CONFORMANCE_TIMEOUT_MS:-30000}"
baseline="$(realpath "${CONFORMANCE_EXPECTED_FAILURES:-$here/expected-failures.yml}")"
pkg="node_modules/@modelcontextprotocol/conformance"
want_version="$(node -p 'require("./package.json").devDependencies["@modelcontextprotocol/conformance"]')"

# 1. Install (npm ci) when node_modules is missing or holds another version than package.json pins.
have_version="$(node -p "try{require('./$pkg/package.json').version}catch(e){''}" 2>/dev/null || true)"
if [ ! -d node_modules ] || [ "$have_version" != "$want_version" ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

# 2. Node < 22 has no fs.globSync; the suite imports it (used only by `tier-check` report globbing). Drop it
#    from the import and define a stub with the same minified name. Idempotent; fails loudly if the bundle
#    changed shape.
dist="$pkg/dist/index.js"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 22 ] && ! grep -q 'ark-broker: node20 globSync stub' "$dist"; then
  alias="$(grep -o 'globSync as [A-Za-z_$][A-Za-z0-9_$]*' "$dist" | head -1 | sed 's/^globSync as //')"
  if [ -z "$alias" ]; then
    echo "run.sh: cannot find 'globSync as <name>' in $dist; the Node 20 patch needs updating" >&2
    exit 1
  fi
  sed -i -e "s/,globSync as ${alias},/,/" -e "s/{globSync as ${alias},/{/" -e "s/,globSync as ${alias}}/}/" "$dist"
  if grep -q 'globSync' "$dist"; then
    echo "run.sh: globSync still referenced in $dist after patching; the Node 20 patch needs updating" >&2
    exit 1
  fi
  printf '\n;function %s(){return []} /* ark-broker: node20 globSync stub */\n' "$alias" >> "$dist"
fi
conformance=(node "$dist")

# 3. Scenario list: the fixed ones plus every tasks-* the suite lists. `name@version` runs a scenario at that
#    protocol version (those that apply to both the versions we serve run at each).
listing="$("${conformance[@]}" list --server)"
mapfile -t tasks_scenarios < <(printf '%s\n' "$listing" | sed -n 's/^ *- \(tasks-[a-z0-9-]*\).*/\1/p')
if [ "${#tasks_scenarios[@]}" -eq 0 ]; then
  echo "run.sh: the suite lists no tasks-* scenarios" >&2
  exit 1
fi
scenarios=(
  server-initialize http-header-validation server-stateless "${tasks_scenarios[@]}"
  ping tools-list tools-list@2026-07-28 dns-rebinding-protection dns-rebinding-protection@2026-07-28
  server-sse-multiple-streams server-sse-multiple-streams@2026-07-28 input-required-result-unsupported-methods
)
for entry in "${scenarios[@]}"; do
  s="${entry%@*}"
  # A here-string, not `printf | grep -q`: grep -q exits at its first match, printf can then die of SIGPIPE,
  # and pipefail would take that for a missing scenario.
  grep -q "^ *- $s " <<<"$listing" || { echo "run.sh: the suite has no scenario '$s'" >&2; exit 1; }
done

# Flags per scenario, as in shared/reference/mcp-tasks.md §6: the legacy handshake and the header checks at
# their own version; server-stateless and the (extension) tasks scenarios forced onto 2026-07-28; an entry
# with `@version` at that version; the rest at the suite's default (2025-11-25).
flags_for() {
  case "$1" in
    *@*) echo "--spec-version ${1#*@}" ;;
    server-stateless | tasks-*) echo "--spec-version 2026-07-28 --force" ;;
    *) ;;
  esac
}

# The fixture tools (greet, slow_compute, …) must be served, or most tasks checks cannot run.
if ! curl -fsS -X POST "$url" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"run.sh","version":"0"}}}' \
  >/dev/null 2>&1 || ! curl -fsS -X POST "$url" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' \
  -d '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}' 2>/dev/null | grep -q '"slow_compute"'; then
  echo "run.sh: $url serves no fixture tools: run the broker built with --features conformance-fixtures and" \
    "started with --mcp-conformance-fixtures (README.md)" >&2
  exit 1
fi

run_dir="${CONFORMANCE_RESULTS:-$here/results}/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$run_dir"
echo "conformance $want_version against $url (logs: $run_dir)"

passed=0
failed=0
for entry in "${scenarios[@]}"; do
  s="${entry%@*}"
  log="$run_dir/${entry/@/_}.log"
  # shellcheck disable=SC2046
  set +e
  timeout --kill-after=10 $((timeout_ms / 1000 + 60)) "${conformance[@]}" server --url "$url" --scenario "$s" \
    $(flags_for "$entry") --timeout "$timeout_ms" --expected-failures "$baseline" -o "$run_dir" >"$log" 2>&1
  rc=$?
  set -e
  checks="$(ls -d "$run_dir"/server-"$s"-*/checks.json 2>/dev/null | tail -1 || true)"
  plain="$(sed 's/\x1b\[[0-9;]*m//g' "$log")"
  counts="no checks"
  failing=""
  if [ -n "$checks" ]; then
    counts="$(node -e '
      const c = require(process.argv[1]), n = (s) => c.filter((x) => x.status === s).length;
      let out = `${n("SUCCESS")} passed, ${n("FAILURE")} failed`;
      for (const s of ["WARNING", "SKIPPED", "INFO"]) if (n(s)) out += `, ${n(s)} ${s.toLowerCase()}`;
      console.log(out);' "$checks")"
    failing="$(node -e '
      const c = require(process.argv[1]);
      console.log([...new Set(c.filter((x) => x.status === "FAILURE" || x.status === "WARNING").map((x) => x.id))].join(" "));' "$checks")"
  else
    crash="$(printf '%s\n' "$plain" | grep -m1 -E 'error|Error' || true)"
    counts="no checks (scenario aborted: ${crash:-see log})"
  fi
  expected="$(printf '%s\n' "$plain" | grep -c '^  ~ ' || true)"
  note=""
  [ "$expected" -gt 0 ] && note=" ($expected expected by baseline)"
  if grep -q '^SKIPPED: scenario' <<<"$plain"; then
    rc=1
    note="$note; the suite skipped the scenario"
  fi
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASS $entry: $counts$note"
  else
    failed=$((failed + 1))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then note="$note; timed out"; fi
    stale="$(printf '%s\n' "$plain" | sed -n 's/^  ✓ //p' | paste -sd' ' -)"
    badbl="$(printf '%s\n' "$plain" | grep -m1 'Invalid expected-failures file' || true)"
    [ -n "$badbl" ] && note="$note; $badbl"
    [ -n "$failing" ] && note="$note; failing checks: $failing"
    [ -n "$stale" ] && note="$note; stale baseline entries (now pass, remove them): $stale"
    echo "FAIL $entry: $counts$note; log: $log"
  fi
done
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
