#!/usr/bin/env bash
# Validates docker-compose.yml and deploy/nginx/ offline (no Docker engine needed): `docker-compose config -q`
# (Debian's docker-compose 1.29.2), the resolved model's shape (Postgres 15 with a healthcheck, three brokers
# waiting for it, nginx on one host port with both config files), and `nginx -t` of deploy/nginx/ark-broker.conf
# with loopback upstreams. Prints `ok - ...` per check, `N passed, M failed`; exits non-zero on failure.
# Needs docker-compose and nginx (apt) and tests/deploy/.venv (install.sh), all installed by scripts/test.
set -uo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-tests/deploy/.venv/bin/python}"
passed=0 failed=0
ok() { echo "ok - $1"; passed=$((passed + 1)); }
not_ok() { echo "not ok - $1"; shift; printf '  %s\n' "$@"; failed=$((failed + 1)); }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ! command -v docker-compose >/dev/null 2>&1; then
  not_ok "docker-compose is installed" "apt-get install docker-compose (scripts/test does this as root)"
elif out="$(docker-compose -f docker-compose.yml config -q 2>&1)"; then
  ok "docker-compose.yml is valid ($(docker-compose version --short))"
else
  not_ok "docker-compose.yml is valid" "$out"
fi

if command -v docker-compose >/dev/null 2>&1 && docker-compose -f docker-compose.yml config >"$tmp/resolved.yml" 2>"$tmp/err"; then
  if out="$("$python" - "$tmp/resolved.yml" <<'PY' 2>&1
import sys, yaml
services = yaml.safe_load(open(sys.argv[1]))["services"]
assert sorted(services) == ["broker-1", "broker-2", "broker-3", "nginx", "postgres"], sorted(services)
pg = services["postgres"]
assert pg["image"].startswith("postgres:15."), pg["image"]
assert "pg_isready" in " ".join(pg["healthcheck"]["test"]), pg.get("healthcheck")
for name in ("broker-1", "broker-2", "broker-3"):
    broker = services[name]
    assert broker["environment"]["DATABASE_URL"].startswith("postgres://ark:ark@postgres:5432/"), name
    assert broker["depends_on"] == {"postgres": {"condition": "service_healthy"}}, broker["depends_on"]
    assert broker["read_only"] is True and "/tmp" in broker["tmpfs"], name
    assert "/readyz" in " ".join(broker["healthcheck"]["test"]), name
nginx = services["nginx"]
assert [str(p["published"]) for p in nginx["ports"]] == ["8080"], nginx["ports"]
# docker-compose 1.29 prints short syntax ("source:target:ro"), Compose v2 long syntax.
mounts = dict((v["target"], v["source"]) if isinstance(v, dict) else v.split(":")[1::-1] for v in nginx["volumes"])
assert mounts["/etc/nginx/conf.d/default.conf"].endswith("/deploy/nginx/ark-broker.conf"), mounts
assert mounts["/etc/nginx/conf.d/00-upstreams.conf"].endswith("/deploy/nginx/upstreams.compose.conf"), mounts
for source in mounts.values():
    open(source).close()
assert sorted(nginx["depends_on"]) == ["broker-1", "broker-2", "broker-3"], nginx["depends_on"]
PY
  )"; then
    ok "compose runs Postgres 15 (healthchecked), three brokers waiting for it, nginx on host port 8080"
  else
    not_ok "compose runs Postgres 15 (healthchecked), three brokers waiting for it, nginx on host port 8080" "$out"
  fi
else
  not_ok "docker-compose config resolves" "$(cat "$tmp/err" 2>/dev/null)"
fi

upstreams="deploy/nginx/upstreams.compose.conf"
if [ "$(grep -cE 'server broker-[123]:8080;' "$upstreams")" = 3 ] && [ "$(grep -cE 'server broker-[123]:8081;' "$upstreams")" = 3 ]; then
  ok "$upstreams lists broker-1..3 for HTTP (8080) and MCP (8081)"
else
  not_ok "$upstreams lists broker-1..3 for HTTP (8080) and MCP (8081)" "$(cat "$upstreams")"
fi

nginx="${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}"
if [ ! -x "$nginx" ]; then
  not_ok "nginx is installed" "apt-get install nginx (scripts/test does this as root)"
else
  mkdir -p "$tmp/logs"
  sed -E 's/server broker-[0-9]+:/server 127.0.0.1:/' "$upstreams" >"$tmp/upstreams.conf"
  sed -E 's/^( *)listen 8080;/\1listen 127.0.0.1:1;/' deploy/nginx/ark-broker.conf >"$tmp/ark-broker.conf"
  cat >"$tmp/nginx.conf" <<CONF
pid $tmp/nginx.pid;
error_log stderr;
events {}
http {
    access_log off;
    include $tmp/upstreams.conf;
    include $tmp/ark-broker.conf;
}
CONF
  if out="$("$nginx" -t -p "$tmp" -c "$tmp/nginx.conf" 2>&1)"; then
    ok "deploy/nginx/ark-broker.conf passes nginx -t ($("$nginx" -v 2>&1 | sed 's/.*version: //'))"
  else
    not_ok "deploy/nginx/ark-broker.conf passes nginx -t" "$out"
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
