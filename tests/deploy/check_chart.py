#!/usr/bin/env python3
"""Checks chart/ without a cluster or a helm binary: strict lint, renders with the defaults and value variants
(Helm's Go SDK through helm-python-sdk, which validates the values against chart/values.schema.json before
rendering, as `helm` does), validates every rendered built-in kind with kubernetes-validate (strict, Kubernetes
KUBE_VERSION) and every custom resource (Memory, MCPServer, the CloudNativePG Cluster and Pooler, ServiceMonitor,
PrometheusRule, HTTPRoute) against the CRD schemas vendored in tests/deploy/crds/ (unknown fields rejected), checks
that bad values fail with a message naming the key, and asserts what operators rely on. The optional Grafana
dashboard and PrometheusRule are checked against the metric names the broker exports (src/telemetry/metrics.rs) and
the rules with `promtool check rules` and `promtool test rules` (tests/deploy/alerts_test.yaml; Debian's
prometheus package: the checks fail when promtool is missing).
Prints `ok - ...` per check and ends with `N passed, M failed`; exits non-zero on any failure.

Run: tests/deploy/.venv/bin/python tests/deploy/check_chart.py   (tests/deploy/install.sh makes the venv)
"""

import copy
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "chart"
CRDS = pathlib.Path(__file__).resolve().parent / "crds"
KUBE_VERSION = "1.31.0"
RELEASE, NAMESPACE = "ark-broker", "ark"
FULLNAME = "ark-broker"
SECRET_DB = {"database": {"urlSecretRef": {"name": "ark-broker-db", "key": "url"}}}
PLAIN_DB = {"database": {"url": "postgres://ark@pg.ark.svc:5432/ark"}}
DIGEST = "sha256:" + "0123456789abcdef" * 4
passed, failed = 0, 0


def check(name):
    """Runs the decorated function at once as one named check, printing ok / not ok."""

    def run(fn):
        global passed, failed
        try:
            fn()
            passed += 1
            print(f"ok - {name}")
        except Exception as error:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            print(f"not ok - {name}\n  {type(error).__name__}: {error}")
            if not isinstance(error, AssertionError):
                traceback.print_exc()
        return fn

    return run


def merged(*layers):
    out = {}
    for layer in layers:
        for key, value in layer.items():
            out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


# Every option on at once (image digest, HPA, Ingress, HTTPRoute, ServiceMonitor, PrometheusRule, the Grafana
# dashboard, NetworkPolicy, both channels).
ALL_ON = merged(SECRET_DB, {
    "app": {"image": {"digest": DIGEST}},
    "autoscaling": {"enabled": True, "maxReplicas": 6, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}}},
    "ingress": {"enabled": True, "className": "nginx",
                "annotations": {"nginx.ingress.kubernetes.io/proxy-buffering": "off"},
                "hosts": [{"host": "ark.example"},
                          {"host": "*.apps.example", "paths": [{"path": "/ui", "pathType": "Prefix"}]}],
                "tls": [{"secretName": "ark-broker-tls", "hosts": ["ark.example"]}]},
    "httpRoute": {"enabled": True, "hostnames": ["ark.gw.example"], "timeouts": {"request": "0s"},
                  "parentRefs": [{"name": "public", "namespace": "gateway-system", "sectionName": "https"}]},
    "metrics": {"serviceMonitor": {
        "enabled": True, "labels": {"release": "kube-prometheus-stack"}, "scrapeTimeout": "10s",
        "authorization": {"type": "Bearer", "credentials": {"name": "ark-broker-scrape", "key": "token"}}}},
    "prometheus": {"rules": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}},
    "grafana": {"dashboard": {"enabled": True, "annotations": {"grafana_folder": "Ark"}}},
    "networkPolicy": {"enabled": True, "ingress": {"mcpFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ark-system"}}}]},
        "egress": {"postgres": {"to": [{"ipBlock": {"cidr": "10.0.5.0/24"}}]}}},
    "auth": {"mode": "kubernetes"},
    "channels": {"slack": {"secretName": "ark-broker-slack"}, "github": {"secretName": "ark-broker-github"}}})
# The upstream chart's keys (issue 24): an operator's values file from it works here.
UPSTREAM_KEYS = merged(SECRET_DB, {"prometheus": {"enable": True, "interval": "15s"}, "networkPolicy": {
    "enabled": True, "allowNamespaces": ["ark-system", "monitoring"],
    "ingress": {"mcpFrom": [{"ipBlock": {"cidr": "10.1.0.0/16"}}]}}})
# CloudNativePG instead of a database URL, with a NetworkPolicy.
CNPG_ON = {"cnpg": {"enabled": True}, "networkPolicy": {"enabled": True}, "kube": {"statusPatching": "off"}}
# The same with CloudNativePG's PgBouncer Pooler in front of the primary.
POOLER_ON = merged(CNPG_ON, {"cnpg": {"pooler": {"enabled": True}}})


def render(values):
    """Renders the chart as an install into NAMESPACE; returns the parsed objects (NOTES.txt left out)."""
    with helm.Chart.load(str(CHART)) as chart:
        files = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def find(objects, kind, name=None):
    hits = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def kinds(objects):
    return sorted(o["kind"] for o in objects)


def strict_schema(schema):
    """The CRD schema as the apiserver applies it, but rejecting instead of pruning unknown fields. A Go pattern
    with a flag group after `^` (PrometheusRule's `^(?i)(abort|warn)?$`) gets the flag first, as Python's re
    wants it: the same language."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
                node.setdefault("additionalProperties", False)
            if isinstance(node.get("pattern"), str) and node["pattern"].startswith("^(?i)"):
                node["pattern"] = "(?i)^" + node["pattern"][len("^(?i)"):]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def load_crd_schemas():
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        kubernetes_validate.validate(crd, KUBE_VERSION, strict=True)
        for version in crd["spec"]["versions"]:
            api_version = f"{crd['spec']['group']}/{version['name']}"
            schema = strict_schema(version["schema"]["openAPIV3Schema"])
            jsonschema.Draft202012Validator.check_schema(schema)
            schemas[(api_version, crd["spec"]["names"]["kind"])] = schema
    return schemas


CRD_SCHEMAS = {}
VENDORED = {("ark.mckinsey.com/v1alpha1", "Memory"), ("ark.mckinsey.com/v1alpha1", "MCPServer"),
            ("postgresql.cnpg.io/v1", "Cluster"), ("postgresql.cnpg.io/v1", "Pooler"),
            ("monitoring.coreos.com/v1", "ServiceMonitor"),
            ("monitoring.coreos.com/v1", "PrometheusRule"), ("gateway.networking.k8s.io/v1", "HTTPRoute")}


@check("the vendored CRDs (Memory, MCPServer, CNPG Cluster and Pooler, ServiceMonitor, PrometheusRule, HTTPRoute) are "
       "valid CRDs")
def _():
    CRD_SCHEMAS.update(load_crd_schemas())
    assert set(CRD_SCHEMAS) == VENDORED, CRD_SCHEMAS.keys()


def validate_all(objects):
    """kubernetes-validate (strict) for built-in kinds, the vendored CRD schema for custom resources; a kind that
    has neither fails."""
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        name = obj["metadata"]["name"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) and len(name) <= 253, f"{where}: bad name"
        schema = CRD_SCHEMAS.get((obj["apiVersion"], obj["kind"]))
        try:
            if schema is not None:
                jsonschema.Draft202012Validator(schema).validate(obj)
            else:
                kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as error:
            path = "/".join(str(part) for part in getattr(error, "absolute_path", []))
            raise AssertionError(f"{where}: {path}: {getattr(error, 'message', error)}") from None
        except kubernetes_validate.SchemaNotFoundError:
            raise AssertionError(f"{where}: no schema for {obj['apiVersion']} {obj['kind']}") from None


# -- lint -----------------------------------------------------------------------------------------------------

for label, values in [("defaults", None), ("a plain database.url", PLAIN_DB), ("all options on", ALL_ON),
                      ("CNPG on", CNPG_ON), ("CNPG with its pooler", POOLER_ON),
                      ("autoscaling on", merged(SECRET_DB, {"autoscaling": {"enabled": True}}))]:

    @check(f"helm lint --strict (Kubernetes {KUBE_VERSION}) passes with {label}")
    def _():
        result = helm.lint(str(CHART), values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}")
        severities = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}
        for message in result.get("messages") or []:
            print(f"  # lint [{severities.get(message['severity'], message['severity'])}] "
                  f"{message['path']}: {message['error']}")
        errors = list(result.get("errors") or []) + [m for m in result.get("messages") or [] if m["severity"] >= 3]
        assert not errors, errors


# -- values.schema.json ---------------------------------------------------------------------------------------

VALUES_SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def merged_values(values):
    """The values an install would use: the chart's defaults coalesced with `values`, as Helm does."""
    with helm.Chart.load(str(CHART)) as chart:
        return chart.merge_values(values)


@check("values.schema.json is a draft-07 schema and values.yaml satisfies it (Python jsonschema, beside Helm)")
def _():
    jsonschema.Draft7Validator.check_schema(VALUES_SCHEMA)
    assert VALUES_SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert VALUES_SCHEMA["additionalProperties"] is False
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(VALUES_SCHEMA).iter_errors(defaults)]
    assert not errors, errors
    assert set(defaults) == set(VALUES_SCHEMA["properties"]), set(defaults) ^ set(VALUES_SCHEMA["properties"])


# Values Helm must refuse before rendering: (what, values, the text Helm's message must contain).
BAD_VALUES = [
    ("a wrong type: replicaCount: three", {"replicaCount": "three"}, "at '/replicaCount': got string, want integer"),
    ("an unknown top-level key", {"replicas": 3}, "additional properties 'replicas' not allowed"),
    ("an unknown key below (service.prot)", {"service": {"prot": 80}}, "additional properties 'prot' not allowed"),
    ("a bad enum: auth.mode oauth", {"auth": {"mode": "oauth"}}, "at '/auth/mode': value must be one of"),
    ("a bad enum: logFormat xml", {"logFormat": "xml"}, "at '/logFormat': value must be one of"),
    ("a bad enum: podAntiAffinity.type soft", {"podAntiAffinity": {"type": "soft"}},
     "at '/podAntiAffinity/type': value must be one of"),
    ("a digest that is not sha256:<hex>", {"app": {"image": {"digest": "latest"}}}, "at '/app/image/digest'"),
    ("cnpg.synchronous.number 0", {"cnpg": {"synchronous": {"number": 0}}},
     "at '/cnpg/synchronous/number': minimum"),
    ("networkPolicy.enable (upstream's chart refuses this spelling too)", {"networkPolicy": {"enable": True}},
     "additional properties 'enable' not allowed"),
    ("a namespace name that is not one: networkPolicy.allowNamespaces [Ark]",
     {"networkPolicy": {"allowNamespaces": ["Ark"]}}, "at '/networkPolicy/allowNamespaces/0'"),
    ("grafana.dashboard.enable (the key is enabled)", {"grafana": {"dashboard": {"enable": True}}},
     "additional properties 'enable' not allowed"),
    ("a rule threshold that is not a number: prometheus.rules.deliveryLag.p99Seconds 1s",
     {"prometheus": {"rules": {"deliveryLag": {"p99Seconds": "1s"}}}}, "at '/prometheus/rules/deliveryLag/p99Seconds'"),
    ("a max_connections the connection check cannot read: cnpg.parameters.max_connections 1e3",
     {"cnpg": {"parameters": {"max_connections": "1e3"}}}, "at '/cnpg/parameters/max_connections'"),
    ("a negative database.maxConnections", {"database": {"maxConnections": -1}}, "at '/database/maxConnections'"),
    ("a PgBouncer pool size that is not a number: cnpg.pooler.parameters.default_pool_size ten",
     {"cnpg": {"pooler": {"parameters": {"default_pool_size": "ten"}}}},
     "at '/cnpg/pooler/parameters/default_pool_size'"),
]
for label, bad, expected in BAD_VALUES:

    @check(f"bad values fail to render, naming the key: {label}")
    def _():
        values = merged(SECRET_DB, bad)
        try:
            render(values)
        except helm.HelmValuesError as error:
            assert expected in str(error), error
        else:
            raise AssertionError(f"rendered {bad}")
        assert not jsonschema.Draft7Validator(VALUES_SCHEMA).is_valid(merged_values(values)), "jsonschema accepts it"


# -- renders --------------------------------------------------------------------------------------------------

variants = {
    "defaults with a database Secret": SECRET_DB,
    "a plain database.url, no Memory CR, no ConfigMaps": merged(
        PLAIN_DB, {"memory": {"createMemoryCRD": False}, "streaming": {"enabled": False},
                   "otelEndpoint": {"enabled": False}}),
    "cluster-wide RBAC, required anti-affinity, the sleep action": merged(
        PLAIN_DB, {"rbac": {"clusterWide": True}, "podAntiAffinity": {"type": "required"},
                   "shutdown": {"useSleepAction": True}, "memory": {"setAsDefault": False}}),
    "kubernetes auth with a client Authorization Secret and a trusted user header": merged(
        SECRET_DB, {"allowedHosts": ["ark.example"],
                    "auth": {"mode": "kubernetes", "trustedUserHeader": "X-Auth-Request-User",
                             "clientAuthorizationSecret": {"name": "ark-broker-client"}}}),
    "the Service on port 8080": merged(SECRET_DB, {"service": {"port": 8080}}),
    "token auth": merged(SECRET_DB, {"auth": {"mode": "token", "tokensSecret": {"name": "ark-broker-tokens"},
                                              "openArkRoutes": False}}),
    "token auth, the recipient answer policy with an answerers ConfigMap": merged(SECRET_DB, {"auth": {
        "mode": "token", "tokensSecret": {"name": "ark-broker-tokens"}, "answerPolicy": "recipient",
        "answerers": {"configMap": "ark-answerers", "identitiesKey": ""}}}),
    "token auth and the kubernetes answer policy": merged(SECRET_DB, {"auth": {
        "mode": "token", "tokensSecret": {"name": "ark-broker-tokens"}, "answerPolicy": "kubernetes"}}),
    "Slack and GitHub channels": merged(
        SECRET_DB, {"channels": {"slack": {"secretName": "ark-broker-slack"},
                                 "github": {"secretName": "ark-broker-github", "apiUrl": "https://ghe.example/api/v3"}}}),
    "Slack over Socket Mode only": merged(
        SECRET_DB, {"channels": {"slack": {"secretName": "ark-broker-slack", "signingSecretKey": "",
                                           "appTokenKey": "app-token"}}}),
    "all options on": ALL_ON,
    "strings that read as other YAML": merged(SECRET_DB, {
        "priorityClassName": "true", "probes": {"liveness": {"path": "/health: x"}},
        "metrics": {"serviceMonitor": {"enabled": True, "interval": "0"}}}),
    "CNPG on, with a NetworkPolicy and status patching off": CNPG_ON,
    "CNPG with its pooler, a NetworkPolicy and status patching off": POOLER_ON,
    "CNPG pooler tuned: autoscaling to 10, 3 PgBouncers, own parameters and extra spec": {
        "autoscaling": {"enabled": True}, "cnpg": {"enabled": True, "pooler": {
            "enabled": True, "instances": 3,
            "parameters": {"default_pool_size": "15", "reserve_pool_size": "5", "max_client_conn": "500"},
            "extraSpec": {"template": {"spec": {"containers": [
                {"name": "pgbouncer", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}}},
    "an external pooler with a direct database.listenUrlSecretRef, the connection check off": merged(SECRET_DB, {
        "replicaCount": 30, "database": {"maxConnections": 0, "listenUrlSecretRef": {"name": "ark-broker-db-direct"}}}),
    "upstream's values: prometheus.enable and interval, networkPolicy.enabled and allowNamespaces": UPSTREAM_KEYS,
    "dashboard and rules tuned: own label, namespace, selector and thresholds": merged(SECRET_DB, {
        "database": {"poolMax": 25, "maxConnections": 200},
        "grafana": {"dashboard": {"enabled": True, "label": "grafana.example/dashboard", "labelValue": "ark",
                                  "namespace": "monitoring", "labels": {"team": "ark"}}},
        "prometheus": {"rules": {
            "enabled": True, "selector": 'job="ark",cluster="eu-1"', "alertLabels": {"team": "ark"},
            "replicaDownFor": "2m", "deliveryLag": {"p99Seconds": 0.5, "for": "5m"},
            "outboxBacklog": {"rows": 1000}, "pendingQuestions": {"count": 7, "for": "1h"},
            "poolExhausted": {"waitSeconds": 0.25},
            "memoryNearLimit": {"fraction": 0.75, "for": "30m", "limitBytes": 2000000000}}}}),
    "rules on, the container without a memory limit": merged(SECRET_DB, {
        "app": {"resources": {"limits": {"cpu": "1", "memory": None}}}, "prometheus": {"rules": {"enabled": True}}}),
    "CNPG tuned: own name, image, storage class, parameters, no synchronous commit, extra spec": {"cnpg": {
        "enabled": True, "name": "ark-pg", "imageName": "ghcr.io/cloudnative-pg/postgresql:17.6",
        "storage": {"size": "50Gi", "storageClass": "fast-ssd"}, "parameters": {"max_connections": "200"},
        "synchronous": None, "podAntiAffinityType": "required", "keepOnUninstall": False,
        "extraSpec": {"enablePDB": True, "storage": {"resizeInUseVolumes": True}}}},
}
rendered = {}
for label, values in variants.items():

    @check(f"renders and validates ({label})")
    def _():
        rendered[label] = render(values)
        validate_all(rendered[label])


@check("string values render as strings, however they read (quoted, not taken for YAML)")
def _():
    objects = rendered["strings that read as other YAML"]
    pod = find(objects, "Deployment", FULLNAME)["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "true", pod["priorityClassName"]
    assert pod["containers"][0]["livenessProbe"]["httpGet"]["path"] == "/health: x"
    monitor = find(objects, "ServiceMonitor", FULLNAME)
    assert monitor["spec"]["endpoints"][0]["interval"] == "0", monitor["spec"]["endpoints"][0]


@check("rendering without a database URL fails with the `required` message")
def _():
    try:
        render(None)
    except helm.HelmRenderError as error:
        assert "set database.urlSecretRef.name" in str(error), error
    else:
        raise AssertionError("rendered without a database URL")


@check("rendering fails when terminationGracePeriodSeconds < preStop sleep + shutdown timeout")
def _():
    try:
        render(merged(SECRET_DB, {"shutdown": {"terminationGracePeriodSeconds": 10}}))
    except helm.HelmRenderError as error:
        assert "terminationGracePeriodSeconds" in str(error), error
    else:
        raise AssertionError("rendered a grace period shorter than preStop + shutdown")


@check("a typo in the MCPServer spec is rejected by the vendored schema")
def _():
    mcp = copy.deepcopy(find(rendered["defaults with a database Secret"], "MCPServer"))
    mcp["spec"]["timout"] = "30m"
    try:
        validate_all([mcp])
    except AssertionError:
        return
    raise AssertionError("an unknown spec field passed")


# -- what operators rely on (defaults) ------------------------------------------------------------------------

objects = rendered.get("defaults with a database Secret") or []
values = yaml.safe_load((CHART / "values.yaml").read_text())
deployment = next((o for o in objects if o["kind"] == "Deployment"), None) or {"spec": {"template": {"spec": {}}}}
pod = deployment["spec"]["template"]["spec"]
container = (pod.get("containers") or [{}])[0]
env = {e["name"]: e for e in container.get("env", [])}
selector = deployment["spec"].get("selector", {}).get("matchLabels")


@check("defaults render the expected objects")
def _():
    assert kinds(objects) == sorted(["ConfigMap", "ConfigMap", "Deployment", "MCPServer", "Memory",
                                     "PodDisruptionBudget", "Role", "RoleBinding", "Service",
                                     "ServiceAccount"]), kinds(objects)


@check("3 replicas, rolling update with maxUnavailable 0")
def _():
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


@check("preferred pod anti-affinity on kubernetes.io/hostname for the broker's own pods")
def _():
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


@check("a PodDisruptionBudget with maxUnavailable 1 selects the pods")
def _():
    pdb = find(objects, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}, pdb["spec"]


@check("startup and liveness probe /health, readiness /readyz, on the http port")
def _():
    probes = {kind: container[f"{kind}Probe"]["httpGet"] for kind in ("startup", "liveness", "readiness")}
    assert probes == {"startup": {"path": "/health", "port": "http"}, "liveness": {"path": "/health", "port": "http"},
                      "readiness": {"path": "/readyz", "port": "http"}}, probes


@check("the LISTEN relay: from 8 live replicas, at the pod's IP")
def _():
    assert env["ARK_BROKER_LISTEN_RELAY_FROM"]["value"] == "8"
    assert env["ARK_BROKER_RELAY_ADDRESS"] == {
        "name": "ARK_BROKER_RELAY_ADDRESS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, env


@check("preStop sleeps 5 s and the grace period covers preStop + the shutdown timeout it passes")
def _():
    assert container["lifecycle"]["preStop"] == {"exec": {"command": ["sleep", "5"]}}
    shutdown = int(env["ARK_BROKER_SHUTDOWN_TIMEOUT_SECONDS"]["value"])
    assert shutdown == values["shutdown"]["shutdownTimeoutSeconds"] == 120
    assert pod["terminationGracePeriodSeconds"] >= 5 + shutdown + 5, pod["terminationGracePeriodSeconds"]


@check("non-root uid 1001, read-only root FS with an emptyDir /tmp, no capabilities, seccomp RuntimeDefault")
def _():
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == "tmp")


@check("resource requests and limits are set")
def _():
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()


@check("container ports http 8080 and mcp 8081 match PORT and MCP_PORT")
def _():
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8080, "mcp": 8081}, ports
    assert (env["PORT"]["value"], env["MCP_PORT"]["value"]) == ("8080", "8081")


@check("Service ports http 80 -> http and mcp 8081 -> mcp, selecting the pods")
def _():
    service = find(objects, "Service", FULLNAME)
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert ports == {"http": (80, "http"), "mcp": (8081, "mcp")}, ports
    assert service["spec"]["selector"] == selector


@check("DATABASE_URL comes from the Secret")
def _():
    assert env["DATABASE_URL"] == {"name": "DATABASE_URL",
                                   "valueFrom": {"secretKeyRef": {"name": "ark-broker-db", "key": "url"}}}


@check("MCP accepts the Service's DNS names and loopback as Host")
def _():
    hosts = env["ARK_BROKER_MCP_ALLOWED_HOSTS"]["value"].split(",")
    assert hosts == [FULLNAME, f"{FULLNAME}.{NAMESPACE}", f"{FULLNAME}.{NAMESPACE}.svc",
                     f"{FULLNAME}.{NAMESPACE}.svc.cluster.local", "localhost", "127.0.0.1"], hosts
    assert env["ARK_BROKER_KUBE_STATUS_PATCHING"]["value"] == "auto"
    assert env["ARK_BROKER_WAITING_PHASE"]["value"] == "input-required"
    assert (env["ARK_BROKER_AGENT_HEADER"]["value"], env["ARK_BROKER_QUERY_HEADER"]["value"]) == \
        ("x-ark-agent", "x-ark-query")


@check("the pods run as a ServiceAccount that mounts its token")
def _():
    account = find(objects, "ServiceAccount")
    assert account["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == account["metadata"]["name"] and pod["automountServiceAccountToken"] is True


QUERY_RULES = [
    {"apiGroups": ["ark.mckinsey.com"], "resources": ["queries"], "verbs": ["patch"]},
    {"apiGroups": ["ark.mckinsey.com"], "resources": ["queries/status"], "verbs": ["patch"]},
]


def assert_rbac(objects, role_kind, namespaced):
    role, binding = find(objects, role_kind), find(objects, f"{role_kind}Binding")
    assert role["rules"] == QUERY_RULES, role["rules"]
    assert ("namespace" in role["metadata"]) == namespaced and ("namespace" in binding["metadata"]) == namespaced
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                                  "name": role["metadata"]["name"]}
    account = find(objects, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]


@check("a Role grants patch on queries and on queries/status, bound to the account")
def _():
    assert_rbac(objects, "Role", namespaced=True)


@check("Memory `default` points at the Service's http port")
def _():
    memory = find(objects, "Memory", "default")
    assert memory["apiVersion"] == "ark.mckinsey.com/v1alpha1"
    assert memory["spec"] == {"address": {"valueFrom": {"serviceRef": {
        "name": FULLNAME, "namespace": NAMESPACE, "port": "http"}}}}, memory["spec"]


@check("MCPServer points at the Service's mcp port, path /mcp, http transport, a long timeout")
def _():
    mcp = find(objects, "MCPServer", FULLNAME)
    assert mcp["spec"]["address"] == {"valueFrom": {"serviceRef": {
        "name": FULLNAME, "namespace": NAMESPACE, "port": "mcp", "path": "/mcp"}}}, mcp["spec"]
    assert (mcp["spec"]["transport"], mcp["spec"]["timeout"]) == ("http", "30m")
    assert mcp["spec"]["description"]


@check("ConfigMaps ark-config-streaming and ark-config-broker have upstream's exact data")
def _():
    data = find(objects, "ConfigMap", "ark-config-streaming")["data"]
    assert data == {"enabled": "true", "serviceRef": f'name: {FULLNAME}\nport: "http"'}, data
    assert yaml.safe_load(data["serviceRef"]) == {"name": FULLNAME, "port": "http"}
    # Ark's telemetry routing takes this port as a number ("http" as 80), not as the Service's port name.
    data = find(objects, "ConfigMap", "ark-config-broker")["data"]
    assert data == {"enabled": "true", "serviceRef": f'name: {FULLNAME}\nport: "80"'}, data


@check("variant: ark-config-broker carries service.port as a number, so Ark's routing reaches any port")
def _():
    objects = rendered["the Service on port 8080"]
    data = find(objects, "ConfigMap", "ark-config-broker")["data"]
    assert yaml.safe_load(data["serviceRef"]) == {"name": FULLNAME, "port": "8080"}, data
    (port,) = [p for p in find(objects, "Service", FULLNAME)["spec"]["ports"] if p["name"] == "http"]
    assert port["port"] == 8080, port


# -- variants -------------------------------------------------------------------------------------------------

@check("variant: a plain database.url is passed as a value; Memory and ConfigMaps can be switched off")
def _():
    objects = rendered["a plain database.url, no Memory CR, no ConfigMaps"]
    (container,) = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["DATABASE_URL"] == {"name": "DATABASE_URL", "value": PLAIN_DB["database"]["url"]}
    assert "Memory" not in kinds(objects) and "ConfigMap" not in kinds(objects), kinds(objects)
    assert "MCPServer" in kinds(objects)


@check("variant: cluster-wide RBAC is a ClusterRole + ClusterRoleBinding; required anti-affinity; sleep action")
def _():
    objects = rendered["cluster-wide RBAC, required anti-affinity, the sleep action"]
    assert "Role" not in kinds(objects) and "RoleBinding" not in kinds(objects)
    assert_rbac(objects, "ClusterRole", namespaced=False)
    spec = find(objects, "Deployment")["spec"]["template"]["spec"]
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert spec["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    find(objects, "Memory", FULLNAME)  # not "default" when setAsDefault is false


@check("variant: kubernetes auth binds the account to system:auth-delegator and Ark sends the client token")
def _():
    objects = rendered["kubernetes auth with a client Authorization Secret and a trusted user header"]
    binding = find(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "system:auth-delegator"}, binding
    account = find(objects, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    (container,) = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ARK_BROKER_AUTH"] == "kubernetes" and env["ARK_BROKER_AUTH_AUDIENCES"] == "ark-broker", env
    assert env["ARK_BROKER_TRUSTED_USER_HEADER"] == "X-Auth-Request-User"
    assert env["ARK_BROKER_AUTH_OPEN_ARK_ROUTES"] == "true", "Ark's header-less calls still work by default"
    hosts = env["ARK_BROKER_ALLOWED_HOSTS"].split(",")
    assert hosts[0] == FULLNAME and "localhost" in hosts and hosts[-1] == "ark.example", hosts
    header = {"name": "Authorization",
              "value": {"valueFrom": {"secretKeyRef": {"name": "ark-broker-client", "key": "authorization"}}}}
    assert find(objects, "Memory", "default")["spec"]["headers"] == [header]
    assert find(objects, "MCPServer", FULLNAME)["spec"]["headers"] == [header]


@check("variant: token auth mounts the tokens Secret as a directory (rotations reach the broker)")
def _():
    objects = rendered["token auth"]
    assert "ClusterRoleBinding" not in kinds(objects)
    spec = find(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ARK_BROKER_AUTH"] == "token" and env["ARK_BROKER_AUTH_TOKENS_FILE"] == "/etc/ark-broker/auth/tokens"
    assert env["ARK_BROKER_AUTH_OPEN_ARK_ROUTES"] == "false", "auth.openArkRoutes: false is passed on"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "auth-tokens")
    assert mount == {"name": "auth-tokens", "mountPath": "/etc/ark-broker/auth", "readOnly": True}, mount
    volume = next(v for v in spec["volumes"] if v["name"] == "auth-tokens")
    assert volume["secret"] == {"secretName": "ark-broker-tokens", "items": [{"key": "tokens", "path": "tokens"}]}


def refused_to_render(cases):
    """Each (values, expected) fails to render, with `expected` in the message."""
    for values, expected in cases:
        try:
            render(values)
        except Exception as error:  # noqa: BLE001 - the message is what is checked
            assert expected in str(error), error
        else:
            raise AssertionError(f"rendered {values['auth']}")


@check("variant: the answer policy reaches the broker; its ConfigMap is mounted as a directory; kubernetes binds the delegator")
def _():
    objects = rendered["token auth, the recipient answer policy with an answerers ConfigMap"]
    spec = find(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ARK_BROKER_ANSWER_POLICY"] == "recipient", env
    assert env["ARK_BROKER_TEAMS_FILE"] == "/etc/ark-broker/answerers/teams", env
    assert "ARK_BROKER_IDENTITIES_FILE" not in env, "an empty key leaves the file out"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "answerers")
    assert mount == {"name": "answerers", "mountPath": "/etc/ark-broker/answerers", "readOnly": True}, mount
    volume = next(v for v in spec["volumes"] if v["name"] == "answerers")
    assert volume["configMap"] == {"name": "ark-answerers"}, volume
    assert "ClusterRoleBinding" not in kinds(objects), "recipient asks Kubernetes nothing"
    defaults = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert defaults["ARK_BROKER_ANSWER_POLICY"] == "any", defaults
    objects = rendered["token auth and the kubernetes answer policy"]
    binding = find(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "system:auth-delegator", binding
    (container,) = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in container["env"]}["ARK_BROKER_ANSWER_POLICY"] == "kubernetes"
    refused_to_render(((merged(SECRET_DB, {"auth": {"answerPolicy": "recipient"}}), "needs auth.mode token"),
                       (merged(SECRET_DB, {"auth": {"answerPolicy": "anyone"}}), "answerPolicy")))


@check("token auth without a tokens Secret, and an unknown auth.mode, fail to render with a clear message")
def _():
    refused_to_render(((merged(SECRET_DB, {"auth": {"mode": "token"}}), "auth.tokensSecret.name"),
                       (merged(SECRET_DB, {"auth": {"mode": "oauth"}}), "'/auth/mode': value must be one of")))


@check("variant: channel tokens come from their Secrets, never from values")
def _():
    (container,) = find(rendered["Slack and GitHub channels"], "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    expected = {"ARK_BROKER_SLACK_BOT_TOKEN": ("ark-broker-slack", "bot-token"),
                "ARK_BROKER_SLACK_SIGNING_SECRET": ("ark-broker-slack", "signing-secret"),
                "ARK_BROKER_GITHUB_TOKEN": ("ark-broker-github", "token"),
                "ARK_BROKER_GITHUB_WEBHOOK_SECRET": ("ark-broker-github", "webhook-secret")}
    for name, (secret, key) in expected.items():
        assert env[name] == {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}, env[name]
    assert env["ARK_BROKER_GITHUB_API_URL"]["value"] == "https://ghe.example/api/v3"
    assert "ARK_BROKER_SLACK_APP_TOKEN" not in env, "Socket Mode only when its key is named"
    (default,) = find(rendered["defaults with a database Secret"], "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not any(e["name"].startswith(("ARK_BROKER_SLACK", "ARK_BROKER_GITHUB")) for e in default["env"])
    (socket,) = find(rendered["Slack over Socket Mode only"], "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in socket["env"]}
    assert env["ARK_BROKER_SLACK_APP_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "ark-broker-slack", "key": "app-token"}
    assert "ARK_BROKER_SLACK_SIGNING_SECRET" not in env, "no signing secret: no HTTP routes for Slack"


@check("defaults: auth is off and no Authorization header is configured")
def _():
    (container,) = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ARK_BROKER_AUTH"] == "none" and "ARK_BROKER_AUTH_TOKENS_FILE" not in env
    assert "ARK_BROKER_AUTH_OPEN_ARK_ROUTES" not in env
    assert "headers" not in find(objects, "Memory", "default")["spec"]


# -- all options on -------------------------------------------------------------------------------------------

def parts(objects):
    """The Deployment's pod spec, its one container and that container's env by name."""
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container, {e["name"]: e for e in container["env"]}


every = rendered.get("all options on") or []


@check("all options: HPA, Ingress, HTTPRoute, ServiceMonitor and NetworkPolicy render beside the defaults")
def _():
    for kind in ("HorizontalPodAutoscaler", "Ingress", "HTTPRoute", "ServiceMonitor", "NetworkPolicy"):
        find(every, kind, FULLNAME)
    assert "Cluster" not in kinds(every)


@check("all options: the image is pinned by digest (the tag ignored)")
def _():
    _, container, _ = parts(every)
    assert container["image"] == f"ark-broker@{DIGEST}", container["image"]
    assert parts(objects)[1]["image"] == "ark-broker:0.1.0"


@check("all options: the HPA scales the Deployment on CPU, and the Deployment leaves replicas to it")
def _():
    hpa = find(every, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 6)
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}], hpa["spec"]["metrics"]
    assert hpa["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 600}}
    assert "replicas" not in find(every, "Deployment")["spec"]


@check("all options: Ingress and HTTPRoute go to the Service's http port; their exact host names are allowed")
def _():
    ingress = find(every, "Ingress")["spec"]
    assert ingress["ingressClassName"] == "nginx"
    assert ingress["tls"] == [{"secretName": "ark-broker-tls", "hosts": ["ark.example"]}]
    backend = {"service": {"name": FULLNAME, "port": {"name": "http"}}}
    assert ingress["rules"] == [
        {"host": "ark.example", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}},
        {"host": "*.apps.example", "http": {"paths": [{"path": "/ui", "pathType": "Prefix", "backend": backend}]}},
    ], ingress["rules"]
    route = find(every, "HTTPRoute")["spec"]
    assert route["parentRefs"] == [{"name": "public", "namespace": "gateway-system", "sectionName": "https"}]
    assert route["hostnames"] == ["ark.gw.example"]
    assert route["rules"] == [{"backendRefs": [{"name": FULLNAME, "port": 80}],
                               "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                               "timeouts": {"request": "0s"}}], route["rules"]
    hosts = parts(every)[2]["ARK_BROKER_ALLOWED_HOSTS"]["value"].split(",")
    assert hosts[-2:] == ["ark.example", "ark.gw.example"] and not any("*" in h for h in hosts), hosts


@check("all options: the ServiceMonitor scrapes /metrics on the http port of this release's Service")
def _():
    monitor = find(every, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = find(every, "Service", FULLNAME)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [{
        "port": "http", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s",
        "authorization": {"type": "Bearer", "credentials": {"name": "ark-broker-scrape", "key": "token"}}}]
    assert "http" in {p["name"] for p in service["spec"]["ports"]}


@check("all options: NetworkPolicy lets peers reach http and mcp; egress only to DNS, Postgres, API, Slack, GitHub")
def _():
    policy = find(every, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": selector}
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    http, mcp, peers = policy["spec"]["ingress"]
    assert http == {"ports": [{"port": "http", "protocol": "TCP"}]}, http  # no `from`: any source
    # The broker's own pods always reach each other's http port (the LISTEN relay's stream).
    assert peers == {"ports": [{"port": "http", "protocol": "TCP"}], "from": [{"podSelector": {"matchLabels": selector}}]}
    assert mcp["ports"] == [{"port": "mcp", "protocol": "TCP"}]
    assert mcp["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ark-system"}}}]
    anywhere = [{"ipBlock": {"cidr": "0.0.0.0/0"}}]
    rules = [(sorted((p["port"], p["protocol"]) for p in rule["ports"]), rule.get("to"))
             for rule in policy["spec"]["egress"]]
    assert rules == [
        ([(8080, "TCP")], [{"podSelector": {"matchLabels": selector}}]),  # a replica following the LISTEN relay
        ([(53, "TCP"), (53, "UDP")], [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]),
        ([(5432, "TCP")], [{"ipBlock": {"cidr": "10.0.5.0/24"}}]),
        ([(443, "TCP"), (6443, "TCP")], anywhere),  # the API server: kubernetes auth and status patching
        ([(443, "TCP")], anywhere),  # Slack
        ([(443, "TCP")], anywhere),  # GitHub
    ], rules


@check("upstream's prometheus.enable renders the ServiceMonitor, at upstream's prometheus.interval")
def _():
    monitor = find(rendered["upstream's values: prometheus.enable and interval, networkPolicy.enabled and "
                            "allowNamespaces"], "ServiceMonitor", FULLNAME)
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}], monitor["spec"]
    assert "ServiceMonitor" not in kinds(objects), "off by default"


@check("upstream's networkPolicy.allowNamespaces lets this namespace and the named ones reach http and mcp")
def _():
    policy = find(rendered["upstream's values: prometheus.enable and interval, networkPolicy.enabled and "
                           "allowNamespaces"], "NetworkPolicy", FULLNAME)
    http, mcp, _peers = policy["spec"]["ingress"]
    namespaces = [{"podSelector": {}}] + [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}
        for name in ("ark-system", "monitoring")]
    assert http == {"ports": [{"port": "http", "protocol": "TCP"}], "from": namespaces}, http
    assert mcp["from"] == [{"ipBlock": {"cidr": "10.1.0.0/16"}}] + namespaces, mcp  # added to mcpFrom


# -- Grafana dashboard and PrometheusRule ---------------------------------------------------------------------

METRICS_RS = (ROOT / "src" / "telemetry" / "metrics.rs").read_text()
OPERATING = (ROOT / "docs/operating.md").read_text()
CHART_README = (CHART / "README.md").read_text()
DASHBOARD_FILE = json.loads((CHART / "dashboards" / "ark-broker.json").read_text())
TUNED = "dashboard and rules tuned: own label, namespace, selector and thresholds"
ALERTS = ["ArkBrokerReplicaDown", "ArkBrokerDeliveryLagHigh", "ArkBrokerOutboxBacklogGrowing",
          "ArkBrokerOutboxFailing", "ArkBrokerQuestionsPending", "ArkBrokerDbPoolExhausted", "ArkBrokerRetentionBehind",
          "ArkBrokerMemoryNearLimit"]
# The process's families (metrics-process, collected at each scrape in src/telemetry/metrics.rs): docs/operating.md lists
# them, and tests/api/observability.rs checks a fresh replica exports them.
PROCESS_FAMILIES = {"process_resident_memory_bytes": "Gauge", "process_virtual_memory_bytes": "Gauge",
                    "process_virtual_memory_max_bytes": "Gauge", "process_cpu_seconds_total": "Counter",
                    "process_open_fds": "Gauge", "process_max_fds": "Gauge", "process_threads": "Gauge",
                    "process_start_time_seconds": "Gauge"}


def broker_families():
    """{family: Counter|Gauge|Histogram} of the broker's own metrics (the constants and HELP table of
    src/telemetry/metrics.rs), plus upstream's size gauges and the process's families."""
    constants = dict(re.findall(r'pub const ([A-Z_]+): &str = "([a-z_:]+)";', METRICS_RS))
    families = {constants[name]: kind for name, kind in re.findall(r"\(\s*([A-Z_]+),\s*Kind::(\w+)", METRICS_RS)}
    assert len(families) >= 17, families
    families.update({name: "Gauge" for name in re.findall(r'"(broker_[a-z_]+_count)"', METRICS_RS)})
    assert "metrics_process::Collector" in METRICS_RS, "the process families are collected"
    families.update(PROCESS_FAMILIES)
    return families


def exported_series():
    """Every series name a scrape of the broker can hold: a histogram's as _bucket, _sum and _count."""
    names = set()
    for family, kind in broker_families().items():
        names |= {family + suffix for suffix in ("_bucket", "_sum", "_count")} if kind == "Histogram" else {family}
    return names


def metric_names(expr):
    """The metric names a PromQL expression selects: an identifier before `{` (string literals, which hold label
    values, removed first), and any word that reads as one of the broker's (ark_broker_*, broker_*_count)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    names = set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", bare))
    names |= set(re.findall(r"\b(ark_broker_[a-z0-9_]+|broker_[a-z0-9_]+_count)\b", bare))
    return names


def dashboard_exprs(dashboard):
    """Every PromQL expression of the dashboard: its panels' targets and its variables' queries."""
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def rules_of(objects_):
    return [rule for group in find(objects_, "PrometheusRule")["spec"]["groups"] for rule in group["rules"]]


@check("the broker's metric families (src/telemetry/metrics.rs) are the ones docs/operating.md lists")
def _():
    for family in broker_families():
        assert f"`{family}" in OPERATING, f"{family} is not in docs/operating.md"


@check("dashboard and rules are off by default: no dashboard ConfigMap, no PrometheusRule")
def _():
    assert "PrometheusRule" not in kinds(objects)
    assert not [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    assert values["grafana"]["dashboard"]["enabled"] is False and values["prometheus"]["rules"]["enabled"] is False


@check("all options: the dashboard ConfigMap carries the sidecar label and holds chart/dashboards/ark-broker.json")
def _():
    config_map = find(every, "ConfigMap", f"{FULLNAME}-dashboard")
    metadata = config_map["metadata"]
    assert metadata["labels"]["grafana_dashboard"] == "1", metadata["labels"]
    assert metadata["annotations"]["grafana_folder"] == "Ark" and "namespace" not in metadata, metadata
    assert list(config_map["data"]) == ["ark-broker.json"], list(config_map["data"])
    assert json.loads(config_map["data"]["ark-broker.json"]) == DASHBOARD_FILE
    assert DASHBOARD_FILE["uid"] == "ark-broker" and DASHBOARD_FILE["panels"], "a dashboard with panels"


@check("dashboard tuned: the sidecar label key and value, labels and namespace are the values'")
def _():
    config_map = find(rendered[TUNED], "ConfigMap", f"{FULLNAME}-dashboard")
    metadata = config_map["metadata"]
    assert metadata["namespace"] == "monitoring", metadata
    assert metadata["labels"]["grafana.example/dashboard"] == "ark" and metadata["labels"]["team"] == "ark"
    assert "grafana_dashboard" not in metadata["labels"], metadata["labels"]


@check("the dashboard queries only metrics the broker exports, and shows ingest, lag, readers, waiters, questions, "
       "outboxes, the pool, HTTP errors and each replica's memory and CPU")
def _():
    exported = exported_series()
    used = set()
    for expr in dashboard_exprs(DASHBOARD_FILE):
        names = metric_names(expr)
        assert names, f"no metric in {expr}"
        unknown = names - exported
        assert not unknown, f"{expr}: {sorted(unknown)} are not exported by the broker"
        used |= names
    wanted = {"ark_broker_ingest_lines_total", "ark_broker_notify_delivery_lag_seconds_bucket",
              "ark_broker_sse_readers", "ark_broker_mcp_waiters", "ark_broker_questions", "ark_broker_outbox_backlog",
              "ark_broker_db_pool_connections", "ark_broker_db_pool_idle_connections",
              "ark_broker_db_pool_acquire_wait_seconds", "ark_broker_http_requests_total",
              "process_resident_memory_bytes", "process_cpu_seconds_total"}
    assert wanted <= used, sorted(wanted - used)
    assert any('status=~"5.."' in expr and "by (route)" in expr for expr in dashboard_exprs(DASHBOARD_FILE))
    assert len({panel["id"] for panel in DASHBOARD_FILE["panels"]}) == len(DASHBOARD_FILE["panels"]), "unique ids"


@check("all options: the PrometheusRule carries its labels and the alerts, each with a runbook line in the chart "
       "README")
def _():
    rule = find(every, "PrometheusRule", FULLNAME)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack", rule["metadata"]["labels"]
    rules = rules_of(every)
    assert [r["alert"] for r in rules] == ALERTS, [r["alert"] for r in rules]
    section = CHART_README.split("## Alerts and runbook", 1)[1].split("\n## ", 1)[0]
    for r in rules:
        assert r["labels"]["severity"] in ("warning", "critical"), r
        assert r["annotations"]["summary"] and r["annotations"]["description"], r
        assert f"`{r['alert']}`" in section, f"{r['alert']} has no runbook line in chart/README.md"
        assert r["alert"] in r["annotations"]["runbook"], r["annotations"]
    assert 'up{job="ark-broker",namespace="ark"} == 0' == rules[0]["expr"], rules[0]["expr"]


@check("the rules use only metrics the broker exports (and Prometheus' own `up`), on this release's series")
def _():
    exported = exported_series() | {"up"}
    for objects_, selector in ((every, 'job="ark-broker",namespace="ark"'),
                               (rendered[TUNED], 'job="ark",cluster="eu-1"')):
        for r in rules_of(objects_):
            names = metric_names(r["expr"])
            assert names and not names - exported, f"{r['alert']}: {sorted(names - exported)} are not exported"
            selectors = re.findall(r"[a-z_]+\{([^}]*)\}", r["expr"])
            assert selectors and all(s.startswith(selector) for s in selectors), (r["alert"], selectors)


@check("rules tuned: thresholds, durations, pool size and alert labels come from the values")
def _():
    rules = {r["alert"]: r for r in rules_of(rendered[TUNED])}
    assert rules["ArkBrokerReplicaDown"]["for"] == "2m"
    lag = rules["ArkBrokerDeliveryLagHigh"]
    assert lag["expr"].endswith("> 0.5") and lag["for"] == "5m", lag
    assert "> 1000" in rules["ArkBrokerOutboxBacklogGrowing"]["expr"]
    pending = rules["ArkBrokerQuestionsPending"]
    assert pending["expr"].endswith("> 7") and pending["for"] == "1h", pending
    pool = rules["ArkBrokerDbPoolExhausted"]["expr"]
    assert "> 0.25" in pool and ">= 25)" in pool, pool
    memory = rules["ArkBrokerMemoryNearLimit"]
    assert memory["expr"].endswith("> 1500000000") and memory["for"] == "30m", memory
    assert all(r["labels"]["team"] == "ark" for r in rules.values())


@check("the memory alert's threshold is 0.9 of app.resources.limits.memory (512Mi) by default; without a limit "
       "(and no limitBytes) there is no memory alert")
def _():
    memory = {r["alert"]: r for r in rules_of(every)}["ArkBrokerMemoryNearLimit"]
    assert memory["expr"].endswith(f"> {int(0.9 * 512 * 1024 * 1024)}") and memory["for"] == "15m", memory
    assert "process_resident_memory_bytes{" in memory["expr"] and "by (namespace, job, pod)" in memory["expr"]
    unlimited = [r["alert"] for r in rules_of(rendered["rules on, the container without a memory limit"])]
    assert unlimited == ALERTS[:-1], unlimited


for label, source in (("all options", "all options on"), ("tuned", TUNED)):

    @check(f"promtool check rules passes on the rendered PrometheusRule's groups ({label})")
    def _():
        promtool = shutil.which("promtool")
        assert promtool, "promtool is missing: install Debian's prometheus package (./scripts/test does, as root)"
        spec = find(rendered[source], "PrometheusRule")["spec"]
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
            yaml.safe_dump(spec, file)
            file.flush()
            result = subprocess.run([promtool, "check", "rules", file.name], capture_output=True, text=True,
                                    check=False)
        assert result.returncode == 0, f"promtool check rules:\n{result.stdout}{result.stderr}"
        assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout, result.stdout


@check("promtool test rules: each alert fires on the series of tests/deploy/alerts_test.yaml, with its labels, "
       "and stays quiet before its `for` and on healthy series")
def _():
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: install Debian's prometheus package (./scripts/test does, as root)"
    spec = copy.deepcopy(find(every, "PrometheusRule")["spec"])
    for group in spec["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")  # promtool would compare them too; `check rules` checks their templates
    tests = pathlib.Path(__file__).resolve().parent / "alerts_test.yaml"
    assert {t["name"].split()[0] for t in yaml.safe_load(tests.read_text())["tests"]} == set(ALERTS)
    with tempfile.TemporaryDirectory() as folder:
        (pathlib.Path(folder) / "rules.yaml").write_text(yaml.safe_dump(spec))
        shutil.copy(tests, pathlib.Path(folder) / tests.name)
        result = subprocess.run([promtool, "test", "rules", str(pathlib.Path(folder) / tests.name)],
                                capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, f"promtool test rules:\n{result.stdout}{result.stderr}"


# -- CloudNativePG --------------------------------------------------------------------------------------------

cnpg = rendered.get("CNPG on, with a NetworkPolicy and status patching off") or []


@check("CNPG: a postgresql.cnpg.io/v1 Cluster of 3 instances with storage, resources, quorum commit and anti-affinity")
def _():
    cluster = find(cnpg, "Cluster", f"{FULLNAME}-db")
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    spec = cluster["spec"]
    # Sized from cnpg.storage.sizing: 100 chunks/s × (86,400 s + 1.5 × 7,200 s) × 540 B = 4.9 GiB → 5, × 2 + 1.
    assert spec["instances"] == 3 and spec["storage"] == {"size": "11Gi"}, spec
    # The app user may not create roles: the bootstrap makes the reporting role the migrations grant to.
    assert spec["bootstrap"] == {"initdb": {"database": "ark", "owner": "ark",
                                            "postInitSQL": ["CREATE ROLE ark_broker_reporting NOLOGIN"]}}
    assert spec["resources"] == values["cnpg"]["resources"]
    # max_connections left empty: the chart's, max(100, 4 pods × (10 + 2) + 3 + 0 + 10) = 100.
    assert spec["postgresql"] == {"parameters": {"max_connections": "100"},
                                  "synchronous": {"method": "any", "number": 1, "dataDurability": "required"}}
    assert spec["affinity"] == {"enablePodAntiAffinity": True, "podAntiAffinityType": "preferred",
                                "topologyKey": "kubernetes.io/hostname"}
    assert spec["primaryUpdateStrategy"] == "unsupervised" and "imageName" not in spec
    assert cluster["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


@check("CNPG: each instance's volume follows the chunk rate and retention of cnpg.storage.sizing, or its size")
def _():
    def size(sizing):
        objects = render(merged(CNPG_ON, {"cnpg": {"storage": {"sizing": sizing}}}))
        return find(objects, "Cluster", f"{FULLNAME}-db")["spec"]["storage"]["size"]

    # 1,000 chunks/s a day: 97.2M rows, 48.9 GiB → 49, × 2 + 1.
    assert size({"chunksPerSecond": 1000, "streamRetentionSeconds": 86400}) == "99Gi"
    # An hour's retention (buckets of 5 minutes): 4.05M rows, 2.04 GiB → 3, × 2 + 1 = 7, under the floor.
    assert size({"chunksPerSecond": 1000, "streamRetentionSeconds": 3600}) == "10Gi"
    assert size({"chunksPerSecond": 0, "streamRetentionSeconds": 86400}) == "10Gi"


@check("CNPG: the broker reads DATABASE_URL from the operator's app Secret (<cluster>-app, key uri)")
def _():
    _, _, env = parts(cnpg)
    assert env["DATABASE_URL"] == {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {
        "name": f"{FULLNAME}-db-app", "key": "uri"}}}, env["DATABASE_URL"]
    tuned = rendered["CNPG tuned: own name, image, storage class, parameters, no synchronous commit, extra spec"]
    assert parts(tuned)[2]["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "ark-pg-app", "key": "uri"}


@check("CNPG: the NetworkPolicy lets the broker reach the Cluster's pods only, and not the API server when unused")
def _():
    rules = find(cnpg, "NetworkPolicy")["spec"]["egress"]
    postgres = [rule for rule in rules if rule["ports"] == [{"port": 5432, "protocol": "TCP"}]]
    assert postgres == [{"ports": [{"port": 5432, "protocol": "TCP"}],
                         "to": [{"podSelector": {"matchLabels": {"cnpg.io/cluster": f"{FULLNAME}-db"}}}]}], rules
    # The broker's own pods, DNS and PostgreSQL: status patching is off, no channel is configured.
    assert len(rules) == 3, rules


@check("CNPG tuned: name, image, storage class, parameters and extra spec pass through; synchronous off; not kept")
def _():
    tuned = rendered["CNPG tuned: own name, image, storage class, parameters, no synchronous commit, extra spec"]
    cluster = find(tuned, "Cluster", "ark-pg")
    spec = cluster["spec"]
    assert spec["imageName"] == "ghcr.io/cloudnative-pg/postgresql:17.6"
    assert spec["storage"] == {"size": "50Gi", "storageClass": "fast-ssd", "resizeInUseVolumes": True}, spec["storage"]
    assert spec["postgresql"] == {"parameters": {"max_connections": "200"}}, spec["postgresql"]
    assert spec["affinity"]["podAntiAffinityType"] == "required" and spec["enablePDB"] is True
    assert "helm.sh/resource-policy" not in cluster["metadata"].get("annotations", {})


@check("a typo in the CNPG Cluster or Pooler, ServiceMonitor, PrometheusRule or HTTPRoute spec is rejected by its "
       "vendored schema")
def _():
    pooler = rendered.get("CNPG with its pooler, a NetworkPolicy and status patching off") or []
    for kind, objects_, path, typo in (("Cluster", cnpg, ["spec"], "instance"),
                                       ("Pooler", pooler, ["spec", "pgbouncer"], "pool_mode"),
                                       ("ServiceMonitor", every, ["spec", "endpoints", 0], "intervall"),
                                       ("PrometheusRule", every, ["spec", "groups", 0, "rules", 0], "fore"),
                                       ("HTTPRoute", every, ["spec", "rules", 0], "backendRef")):
        obj = copy.deepcopy(find(objects_, kind))
        node = obj
        for part in path:
            node = node[part]
        node[typo] = 1
        try:
            validate_all([obj])
        except AssertionError as error:
            assert typo in str(error), error
        else:
            raise AssertionError(f"{kind}: an unknown field {typo} passed")


# -- PostgreSQL connections -----------------------------------------------------------------------------------

def refuses(values_, *expected):
    """Rendering `values_` fails in a template (not the schema), with every one of `expected` in the message."""
    try:
        render(values_)
    except helm.HelmRenderError as error:
        for text in expected:
            assert text in str(error), f"{text!r} not in: {error}"
    else:
        raise AssertionError(f"rendered {values_}")


def env_of(objects_):
    return parts(objects_)[2]


def pool_of(objects_):
    """The rendered DATABASE_POOL_MAX, as a number."""
    return int(env_of(objects_)["DATABASE_POOL_MAX"]["value"])


def pods_of(values_):
    """The broker pods the connection check counts: replicaCount (autoscaling.maxReplicas with autoscaling) +
    an integer updateStrategy.maxSurge."""
    values_ = merged_values(values_)
    replicas = values_["autoscaling"]["maxReplicas"] if values_["autoscaling"]["enabled"] else values_["replicaCount"]
    return replicas + values_["updateStrategy"]["maxSurge"]


@check("connections: the defaults fit an external PostgreSQL's max_connections of 100 (4 pods × 12 = 48 <= 97), "
       "and no DATABASE_LISTEN_URL is set")
def _():
    assert values["database"]["maxConnections"] == 100 and values["database"]["reservedConnections"] == 3
    assert values["autoscaling"]["enabled"] is False and values["cnpg"]["pooler"]["enabled"] is False
    # database.poolMax empty: min(10, floor(97 / 4) - 2) = 10, the broker's own default.
    assert values["database"]["poolMax"] is None and pool_of(objects) == 10
    assert (values["replicaCount"] + values["updateStrategy"]["maxSurge"]) * (pool_of(objects) + 2) <= 97
    assert find(objects, "Deployment")["spec"]["replicas"] == 3
    assert "DATABASE_LISTEN_URL" not in env and not any(name.startswith("CNPG_APP_") for name in env), list(env)


@check("connections: 30 replicas at poolMax 10 on an external database of 100 connections refuse to render, "
       "naming max_connections and the numbers; with poolMax empty too (31 × (2 + 2) = 124 > 97)")
def _():
    refuses(merged(SECRET_DB, {"replicaCount": 30, "database": {"poolMax": 10}}), "max_connections",
            "31 broker pods (replicaCount 30 + updateStrategy.maxSurge 1", "= 372 connections",
            "database.maxConnections 100 - database.reservedConnections 3 = 97", "Lower database.poolMax or the replicas")
    # The derived pool stops at the broker's least, 2, and says that lowering the replicas is what is left.
    refuses(merged(SECRET_DB, {"replicaCount": 30}), "31 broker pods (replicaCount 30",
            "database.poolMax empty: a pool of 2, the broker's least", "= 124 connections", "= 97. Lower the replicas")
    # A server that allows them: database.maxConnections says so.
    render(merged(SECRET_DB, {"replicaCount": 30, "database": {"maxConnections": 400}}))


@check("connections: autoscaling counts maxReplicas (10 + 1 surge × (poolMax 10 + 2) = 132 > 97 refused; 7 + 1 "
       "fits), a percentage maxSurge rounds up")
def _():
    pool10 = {"database": {"poolMax": 10}}
    refuses(merged(SECRET_DB, pool10, {"autoscaling": {"enabled": True}}), "max_connections",
            "11 broker pods (autoscaling.maxReplicas 10 + updateStrategy.maxSurge 1", "= 132 connections")
    render(merged(SECRET_DB, pool10, {"autoscaling": {"enabled": True, "maxReplicas": 7}}))
    # 25% of 6 replicas is 1.5, rounded up: 8 pods × 12 = 96 fit; of 7, 1.75: 9 × 12 = 108 do not.
    render(merged(SECRET_DB, pool10, {"replicaCount": 6, "updateStrategy": {"maxSurge": "25%"}}))
    refuses(merged(SECRET_DB, pool10, {"replicaCount": 7, "updateStrategy": {"maxSurge": "25%"}}),
            "9 broker pods (replicaCount 7 + updateStrategy.maxSurge 2", "= 108 connections")
    # With poolMax empty those 9 pods get min(10, floor(97 / 9) - 2) = 8: 9 × 10 = 90.
    assert pool_of(render(merged(SECRET_DB, {"replicaCount": 7, "updateStrategy": {"maxSurge": "25%"}}))) == 8


@check("connections: autoscaling.enabled alone on the defaults renders; each pod's pool is derived, "
       "min(10, floor(97 / 11) - 2) = 6, and 11 pods × (6 + 2) = 88 fit 97; the pool alert counts 6")
def _():
    on = merged(SECRET_DB, {"autoscaling": {"enabled": True}, "prometheus": {"rules": {"enabled": True}}})
    objects_ = render(on)
    validate_all(objects_)
    hpa = find(objects_, "HorizontalPodAutoscaler", FULLNAME)["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 10), hpa
    assert "replicas" not in find(objects_, "Deployment")["spec"]
    pool = pool_of(objects_)
    assert pool == 6 and pods_of(on) == 11 and pods_of(on) * (pool + 2) <= 100 - 3, (pool, pods_of(on))
    (rule,) = [r for group in find(objects_, "PrometheusRule")["spec"]["groups"] for r in group["rules"]
               if r.get("alert") == "ArkBrokerDbPoolExhausted"]
    assert ">= 6)" in rule["expr"] and "all 6 connections" in rule["annotations"]["description"], rule


@check("connections: an explicit database.poolMax is kept as is and refused, with the message, when it does not "
       "fit; poolMax empty follows database.maxConnections and replicaCount (10 at most, 2 at least)")
def _():
    auto = merged(SECRET_DB, {"autoscaling": {"enabled": True}})
    # 11 pods: 7 + 2 = 9 each, 99 > 97; 6 fits; a smaller one is not raised.
    refuses(merged(auto, {"database": {"poolMax": 7}}), "(database.poolMax 7 + 2", "= 99 connections",
            "database.maxConnections 100 - database.reservedConnections 3 = 97", "Lower database.poolMax or the replicas")
    assert pool_of(render(merged(auto, {"database": {"poolMax": 6}}))) == 6
    assert pool_of(render(merged(auto, {"database": {"poolMax": 3}}))) == 3
    # Explicitly null is empty too (`--set database.poolMax=null` brings the derived pool back).
    assert pool_of(render(merged(auto, {"database": {"poolMax": None}}))) == 6
    for extra, pool in [({"database": {"maxConnections": 200}}, 10),  # floor(197 / 11) - 2 = 15, at most 10
                        ({"database": {"maxConnections": 120, "reservedConnections": 10}}, 8),  # 110 / 11 - 2
                        ({"database": {"maxConnections": 0}}, 10),  # the check off: the broker's default
                        ({"autoscaling": {"maxReplicas": 20}}, 2)]:  # floor(97 / 21) - 2 = 2
        values_ = merged(auto, extra)
        objects_ = render(values_)
        assert pool_of(objects_) == pool, (extra, pool_of(objects_))
        budget = merged_values(values_)["database"]
        if budget["maxConnections"]:
            assert pods_of(values_) * (pool + 2) <= budget["maxConnections"] - budget["reservedConnections"], extra
    assert pool_of(render(merged(SECRET_DB, {"replicaCount": 20}))) == 2  # 21 × 4 = 84


# Each switch chart/README.md documents, alone on the defaults (with the one value it cannot do without: Ingress
# hosts, the HTTPRoute's Gateway, token auth's Secret), and the CloudNativePG combinations it documents together.
SWITCHES = {
    "autoscaling.enabled": merged(SECRET_DB, {"autoscaling": {"enabled": True}}),
    "autoscaling.enabled with a plain database.url": merged(PLAIN_DB, {"autoscaling": {"enabled": True}}),
    "ingress.enabled (with ingress.hosts)": merged(SECRET_DB, {"ingress": {"enabled": True,
                                                                           "hosts": [{"host": "ark.example"}]}}),
    "httpRoute.enabled (with httpRoute.parentRefs)": merged(SECRET_DB, {"httpRoute": {
        "enabled": True, "parentRefs": [{"name": "public"}]}}),
    "networkPolicy.enabled": merged(SECRET_DB, {"networkPolicy": {"enabled": True}}),
    "metrics.serviceMonitor.enabled": merged(SECRET_DB, {"metrics": {"serviceMonitor": {"enabled": True}}}),
    "prometheus.enable (upstream's key)": merged(SECRET_DB, {"prometheus": {"enable": True}}),
    "prometheus.rules.enabled": merged(SECRET_DB, {"prometheus": {"rules": {"enabled": True}}}),
    "grafana.dashboard.enabled": merged(SECRET_DB, {"grafana": {"dashboard": {"enabled": True}}}),
    "auth.mode kubernetes": merged(SECRET_DB, {"auth": {"mode": "kubernetes"}}),
    "auth.mode token (with auth.tokensSecret.name)": merged(SECRET_DB, {"auth": {
        "mode": "token", "tokensSecret": {"name": "ark-broker-tokens"}}}),
    "rbac.clusterWide": merged(SECRET_DB, {"rbac": {"clusterWide": True}}),
    "podAntiAffinity.type required": merged(SECRET_DB, {"podAntiAffinity": {"type": "required"}}),
    "shutdown.useSleepAction": merged(SECRET_DB, {"shutdown": {"useSleepAction": True}}),
    "kube.statusPatching off": merged(SECRET_DB, {"kube": {"statusPatching": "off"}}),
    "cnpg.enabled": {"cnpg": {"enabled": True}},
    "cnpg.enabled and cnpg.pooler.enabled": {"cnpg": {"enabled": True, "pooler": {"enabled": True}}},
    "cnpg.enabled and autoscaling.enabled": {"cnpg": {"enabled": True}, "autoscaling": {"enabled": True}},
    "cnpg.enabled, cnpg.pooler.enabled and autoscaling.enabled": {
        "cnpg": {"enabled": True, "pooler": {"enabled": True}}, "autoscaling": {"enabled": True}},
}
for label, values_ in SWITCHES.items():

    @check(f"a documented switch on the defaults renders, validates and fits PostgreSQL's connections: {label}")
    def _():
        objects_ = render(values_)
        validate_all(objects_)
        pods, pool = pods_of(values_), pool_of(objects_)
        if not values_.get("cnpg"):
            assert pods * (pool + 2) <= 100 - 3, (pods, pool)
            return
        assert pool == 10, pool  # the chart sizes the Cluster's max_connections (or PgBouncer stands between)
        cluster_max = int(find(objects_, "Cluster")["spec"]["postgresql"]["parameters"]["max_connections"])
        if values_["cnpg"].get("pooler"):
            # 2 PgBouncers × (default_pool_size 20 + 1) + 2 direct connections a pod, + 3 + 10 reserved.
            assert 2 * 21 + pods * 2 + 13 <= cluster_max, (pods, cluster_max)
        else:
            assert pods * (pool + 2) + 13 <= cluster_max, (pods, pool, cluster_max)


@check("connections: database.maxConnections 0 turns the check off (an external pooler); listenUrl and "
       "listenUrlSecretRef become DATABASE_LISTEN_URL")
def _():
    objects_ = rendered["an external pooler with a direct database.listenUrlSecretRef, the connection check off"]
    assert find(objects_, "Deployment")["spec"]["replicas"] == 30
    environment = env_of(objects_)
    assert environment["DATABASE_LISTEN_URL"] == {"name": "DATABASE_LISTEN_URL", "valueFrom": {"secretKeyRef": {
        "name": "ark-broker-db-direct", "key": "listen-url"}}}, environment["DATABASE_LISTEN_URL"]
    assert environment["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "ark-broker-db", "key": "url"}
    plain = env_of(render(merged(PLAIN_DB, {"database": {"listenUrl": "postgres://ark@pg-direct.ark.svc:5432/ark"}})))
    assert plain["DATABASE_LISTEN_URL"] == {"name": "DATABASE_LISTEN_URL",
                                            "value": "postgres://ark@pg-direct.ark.svc:5432/ark"}
    names = [e["name"] for e in parts(objects_)[1]["env"]]
    assert names.index("DATABASE_URL") < names.index("DATABASE_LISTEN_URL"), names


@check("connections, CNPG: max_connections left empty is set from the replicas: max(100, pods × (poolMax + 2) + 13)")
def _():
    def max_connections(values_):
        spec = find(render(merged({"cnpg": {"enabled": True}}, values_)), "Cluster")["spec"]
        return spec["postgresql"]["parameters"]["max_connections"]

    assert max_connections({}) == "100"  # 4 × 12 + 13 = 61
    assert max_connections({"autoscaling": {"enabled": True}}) == "145"  # 11 × 12 + 13
    assert max_connections({"replicaCount": 12, "updateStrategy": {"maxSurge": "25%"}}) == "193"  # 15 × 12 + 13
    # superuser_reserved_connections and reserved_connections set in cnpg.parameters count instead of 3 and 0.
    assert max_connections({"autoscaling": {"enabled": True}, "cnpg": {"parameters": {
        "superuser_reserved_connections": "5", "reserved_connections": "4"}}}) == "151"  # 132 + 5 + 4 + 10
    # Other parameters pass through beside it.
    spec = find(render({"cnpg": {"enabled": True, "parameters": {"work_mem": "8MB"}}}), "Cluster")["spec"]
    assert spec["postgresql"]["parameters"] == {"work_mem": "8MB", "max_connections": "100"}


@check("connections, CNPG: an explicit max_connections too small for the replicas refuses to render; one that fits "
       "is kept; one in extraSpec is refused")
def _():
    refuses({"database": {"poolMax": 10}, "cnpg": {"enabled": True, "parameters": {"max_connections": "60"}}},
            "cnpg.parameters.max_connections 60", "= 48 connections", "leaves them: 47",
            "superuser_reserved_connections 3, reserved_connections 0 and 10", "at least 61",
            "lower database.poolMax or the replicas")
    refuses({"database": {"poolMax": 10}, "autoscaling": {"enabled": True},
             "cnpg": {"enabled": True, "parameters": {"max_connections": "120"}}}, "max_connections 120",
            "= 132 connections")
    # poolMax empty fits the pool to them: min(10, floor(47 / 4) - 2) = 9; floor(107 / 11) - 2 = 7 (11 × 9 = 99).
    assert pool_of(render({"cnpg": {"enabled": True, "parameters": {"max_connections": "60"}}})) == 9
    assert pool_of(render({"autoscaling": {"enabled": True},
                           "cnpg": {"enabled": True, "parameters": {"max_connections": "120"}}})) == 7
    refuses({"replicaCount": 20, "cnpg": {"enabled": True, "parameters": {"max_connections": "60"}}},
            "database.poolMax empty: a pool of 2", "= 84 connections", "leaves them: 47", "or lower the replicas, or "
            "turn on cnpg.pooler")
    spec = find(render({"cnpg": {"enabled": True, "parameters": {"max_connections": "61"}}}), "Cluster")["spec"]
    assert spec["postgresql"]["parameters"] == {"max_connections": "61"}
    refuses({"cnpg": {"enabled": True, "extraSpec": {"postgresql": {"parameters": {"max_connections": "500"}}}}},
            "set max_connections in cnpg.parameters")


@check("pooler: a postgresql.cnpg.io/v1 Pooler <cluster>-pooler-rw, rw, 2 instances spread over nodes, transaction "
       "pooling, derived PgBouncer parameters, no monitoring")
def _():
    pooler = find(rendered["CNPG with its pooler, a NetworkPolicy and status patching off"], "Pooler",
                  f"{FULLNAME}-db-pooler-rw")
    assert pooler["apiVersion"] == "postgresql.cnpg.io/v1"
    spec = pooler["spec"]
    assert spec["cluster"] == {"name": f"{FULLNAME}-db"} and spec["type"] == "rw" and spec["instances"] == 2, spec
    # 4 pods × poolMax 10 = 40 client connections: default_pool_size min(20, 40), max_client_conn max(100, 40).
    assert spec["pgbouncer"] == {"poolMode": "transaction",
                                 "parameters": {"default_pool_size": "20", "max_client_conn": "100"}}, spec["pgbouncer"]
    assert "monitoring" not in spec, spec
    assert spec["template"] == {"spec": {"containers": [], "affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"cnpg.io/poolerName": f"{FULLNAME}-db-pooler-rw"}}}}]}}}}, spec
    assert "Pooler" not in kinds(cnpg), "off by default"


@check("pooler: DATABASE_URL is the Pooler's Service with the app Secret's username, password and dbname; "
       "DATABASE_LISTEN_URL the Secret's uri (the -rw Service)")
def _():
    (_, container, environment) = parts(rendered["CNPG with its pooler, a NetworkPolicy and status patching off"])
    secret = f"{FULLNAME}-db-app"
    for name, key in (("CNPG_APP_USERNAME", "username"), ("CNPG_APP_PASSWORD", "password"), ("CNPG_APP_DBNAME", "dbname")):
        assert environment[name] == {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
    assert environment["DATABASE_URL"] == {"name": "DATABASE_URL", "value": (
        f"postgresql://$(CNPG_APP_USERNAME):$(CNPG_APP_PASSWORD)@{FULLNAME}-db-pooler-rw.{NAMESPACE}:5432/"
        "$(CNPG_APP_DBNAME)")}, environment["DATABASE_URL"]
    assert environment["DATABASE_LISTEN_URL"] == {"name": "DATABASE_LISTEN_URL", "valueFrom": {"secretKeyRef": {
        "name": secret, "key": "uri"}}}
    # Kubernetes expands $(VAR) only from variables defined before it.
    names = [e["name"] for e in container["env"]]
    assert max(names.index(n) for n in ("CNPG_APP_USERNAME", "CNPG_APP_PASSWORD", "CNPG_APP_DBNAME")) < \
        names.index("DATABASE_URL"), names


@check("pooler: the NetworkPolicy lets the broker reach the Cluster's and the Pooler's pods on 5432")
def _():
    rules = find(rendered["CNPG with its pooler, a NetworkPolicy and status patching off"], "NetworkPolicy")["spec"]["egress"]
    postgres = [rule for rule in rules if rule["ports"] == [{"port": 5432, "protocol": "TCP"}]]
    assert postgres == [{"ports": [{"port": 5432, "protocol": "TCP"}], "to": [
        {"podSelector": {"matchLabels": {"cnpg.io/cluster": f"{FULLNAME}-db"}}},
        {"podSelector": {"matchLabels": {"cnpg.io/poolerName": f"{FULLNAME}-db-pooler-rw"}}}]}], rules


@check("pooler: PostgreSQL counts instances × (default_pool_size + reserve_pool_size + 1) + pods × 2, and "
       "max_connections is set from that")
def _():
    def cluster_max(values_):
        return find(render(values_), "Cluster")["spec"]["postgresql"]["parameters"]["max_connections"]

    # 2 × (20 + 0 + 1) + 4 × 2 = 50, + 13 < 100.
    assert cluster_max(POOLER_ON) == "100"
    tuned = rendered["CNPG pooler tuned: autoscaling to 10, 3 PgBouncers, own parameters and extra spec"]
    spec = find(tuned, "Pooler")["spec"]
    assert spec["instances"] == 3 and spec["pgbouncer"]["parameters"] == {
        "default_pool_size": "15", "reserve_pool_size": "5", "max_client_conn": "500"}, spec["pgbouncer"]
    assert spec["template"]["spec"]["containers"] == [
        {"name": "pgbouncer", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}], spec["template"]
    # 3 × (15 + 5 + 1) + 11 × 2 = 85, + 13 = 98 < 100; autoscaling to 10 without the pooler needs 145.
    assert find(tuned, "Cluster")["spec"]["postgresql"]["parameters"]["max_connections"] == "100"
    # 30 replicas: 2 × 21 + 31 × 2 = 104, + 13 = 117; max_client_conn max(100, 31 × 10).
    big = render(merged(POOLER_ON, {"replicaCount": 30}))
    assert find(big, "Cluster")["spec"]["postgresql"]["parameters"]["max_connections"] == "117"
    assert find(big, "Pooler")["spec"]["pgbouncer"]["parameters"] == {"default_pool_size": "20",
                                                                      "max_client_conn": "310"}


@check("pooler: a max_connections or max_client_conn too small, PgBouncer parameters in extraSpec, and a pooler "
       "without cnpg refuse to render")
def _():
    refuses(merged(POOLER_ON, {"cnpg": {"parameters": {"max_connections": "60"}}}), "max_connections 60",
            "cnpg.pooler.instances 2 × (default_pool_size 20 + reserve_pool_size 0 + 1", "= 50 connections",
            "at least 63", "default_pool_size")
    render(merged(POOLER_ON, {"cnpg": {"parameters": {"max_connections": "63"}}}))
    refuses(merged(POOLER_ON, {"cnpg": {"pooler": {"parameters": {"max_client_conn": "30"}}}}),
            "= 40 pooled connections", "max_client_conn is 30")
    refuses(merged(POOLER_ON, {"cnpg": {"pooler": {"extraSpec": {"pgbouncer": {"parameters": {
        "default_pool_size": "80"}}}}}}), "cnpg.pooler.parameters")
    refuses(merged(SECRET_DB, {"cnpg": {"pooler": {"enabled": True}}}), "cnpg.pooler.enabled needs cnpg.enabled")
    refuses(merged(POOLER_ON, {"database": {"listenUrl": "postgres://x@h/db"}}),
            "leave database.url and database.urlSecretRef.name empty")


# -- what the templates refuse --------------------------------------------------------------------------------

@check("inconsistent options fail to render with a message naming the values to fix")
def _():
    cases = [
        (merged(PLAIN_DB, {"cnpg": {"enabled": True}}), "leave database.url and database.urlSecretRef.name empty"),
        (merged(SECRET_DB, {"ingress": {"enabled": True}}), "needs at least one entry in ingress.hosts"),
        (merged(SECRET_DB, {"httpRoute": {"enabled": True}}), "httpRoute.enabled needs httpRoute.parentRefs"),
        (merged(SECRET_DB, {"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 4}}),
         "autoscaling.minReplicas (5) must not exceed autoscaling.maxReplicas (4)"),
        (merged(SECRET_DB, {"autoscaling": {"enabled": True, "maxReplicas": 6}, "app": {"resources": {"requests": None}}}),
         "autoscaling.enabled needs app.resources.requests.cpu"),
        ({"cnpg": {"enabled": True, "instances": 2, "synchronous": {"number": 2}}},
         "cnpg.synchronous.number (2) must be lower than cnpg.instances (2)"),
    ]
    for values_, expected in cases:
        try:
            render(values_)
        except helm.HelmRenderError as error:
            assert expected in str(error), error
        else:
            raise AssertionError(f"rendered {values_}")


print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
