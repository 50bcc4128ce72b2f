#!/usr/bin/env python3
"""Checks chart/ without a cluster or a helm binary: strict lint, renders with the defaults and value variants
(Helm's Go SDK through helm-python-sdk), validates every rendered built-in kind with kubernetes-validate
(strict, Kubernetes KUBE_VERSION), validates Memory and MCPServer against the CRD schemas vendored in
tests/deploy/crds/ (unknown fields rejected), and asserts what operators rely on. Prints `ok - ...` per check
and ends with `N passed, M failed`; exits non-zero on any failure.

Run: tests/deploy/.venv/bin/python tests/deploy/check_chart.py   (tests/deploy/install.sh makes the venv)
"""

import copy
import pathlib
import re
import sys
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
    """The CRD schema as the apiserver applies it, but rejecting instead of pruning unknown fields."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
                node.setdefault("additionalProperties", False)
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
        (version,) = crd["spec"]["versions"]
        api_version = f"{crd['spec']['group']}/{version['name']}"
        schemas[(api_version, crd["spec"]["names"]["kind"])] = strict_schema(version["schema"]["openAPIV3Schema"])
    return schemas


CRD_SCHEMAS = {}


@check("the vendored Memory and MCPServer CRDs are valid CustomResourceDefinitions")
def _():
    CRD_SCHEMAS.update(load_crd_schemas())
    assert {kind for _, kind in CRD_SCHEMAS} == {"Memory", "MCPServer"}, CRD_SCHEMAS.keys()


def validate_all(objects):
    """kubernetes-validate (strict) for built-in kinds, the vendored CRD schema for Ark's kinds."""
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
            raise AssertionError(f"{where}: {getattr(error, 'message', error)}") from None


# -- lint -----------------------------------------------------------------------------------------------------

for label, values in [("defaults", None), ("a plain database.url", PLAIN_DB)]:

    @check(f"helm lint --strict (Kubernetes {KUBE_VERSION}) passes with {label}")
    def _():
        result = helm.lint(str(CHART), values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}")
        severities = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}
        for message in result.get("messages") or []:
            print(f"  # lint [{severities.get(message['severity'], message['severity'])}] "
                  f"{message['path']}: {message['error']}")
        errors = list(result.get("errors") or []) + [m for m in result.get("messages") or [] if m["severity"] >= 3]
        assert not errors, errors


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
    "token auth": merged(SECRET_DB, {"auth": {"mode": "token", "tokensSecret": {"name": "ark-broker-tokens"}}}),
    "Slack and GitHub channels": merged(
        SECRET_DB, {"channels": {"slack": {"secretName": "ark-broker-slack"},
                                 "github": {"secretName": "ark-broker-github", "apiUrl": "https://ghe.example/api/v3"}}}),
}
rendered = {}
for label, values in variants.items():

    @check(f"renders and validates ({label})")
    def _():
        rendered[label] = render(values)
        validate_all(rendered[label])


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


@check("preStop sleeps 5 s and the grace period covers preStop + the shutdown timeout it passes")
def _():
    assert container["lifecycle"]["preStop"] == {"exec": {"command": ["sleep", "5"]}}
    shutdown = int(env["ARK_BROKER_SHUTDOWN_TIMEOUT_SECONDS"]["value"])
    assert shutdown == values["shutdown"]["shutdownTimeoutSeconds"] == 8
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
    {"apiGroups": ["ark.mckinsey.com"], "resources": ["queries"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": ["ark.mckinsey.com"], "resources": ["queries/status"], "verbs": ["get", "patch"]},
]


def assert_rbac(objects, role_kind, namespaced):
    role, binding = find(objects, role_kind), find(objects, f"{role_kind}Binding")
    assert role["rules"] == QUERY_RULES, role["rules"]
    assert ("namespace" in role["metadata"]) == namespaced and ("namespace" in binding["metadata"]) == namespaced
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                                  "name": role["metadata"]["name"]}
    account = find(objects, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]


@check("a Role grants get/list/watch/patch on queries and get/patch on queries/status, bound to the account")
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
    for name in ("ark-config-streaming", "ark-config-broker"):
        data = find(objects, "ConfigMap", name)["data"]
        assert data == {"enabled": "true", "serviceRef": f'name: {FULLNAME}\nport: "http"'}, data
        assert yaml.safe_load(data["serviceRef"]) == {"name": FULLNAME, "port": "http"}


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
    mount = next(m for m in container["volumeMounts"] if m["name"] == "auth-tokens")
    assert mount == {"name": "auth-tokens", "mountPath": "/etc/ark-broker/auth", "readOnly": True}, mount
    volume = next(v for v in spec["volumes"] if v["name"] == "auth-tokens")
    assert volume["secret"] == {"secretName": "ark-broker-tokens", "items": [{"key": "tokens", "path": "tokens"}]}


@check("token auth without a tokens Secret, and an unknown auth.mode, fail to render with a clear message")
def _():
    for values, expected in ((merged(SECRET_DB, {"auth": {"mode": "token"}}), "auth.tokensSecret.name"),
                             (merged(SECRET_DB, {"auth": {"mode": "oauth"}}), "auth.mode must be")):
        try:
            render(values)
        except Exception as error:  # noqa: BLE001 - the message is what is checked
            assert expected in str(error), error
        else:
            raise AssertionError(f"rendered {values['auth']}")


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
    (default,) = find(rendered["defaults with a database Secret"], "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not any(e["name"].startswith(("ARK_BROKER_SLACK", "ARK_BROKER_GITHUB")) for e in default["env"])


@check("defaults: auth is off and no Authorization header is configured")
def _():
    (container,) = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ARK_BROKER_AUTH"] == "none" and "ARK_BROKER_AUTH_TOKENS_FILE" not in env
    assert "headers" not in find(objects, "Memory", "default")["spec"]


print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
