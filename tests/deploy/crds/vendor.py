#!/usr/bin/env python3
"""Owns the third-party CRDs vendored in this folder (CloudNativePG Cluster and Pooler, prometheus-operator
ServiceMonitor and PrometheusRule, Gateway API HTTPRoute): turns an upstream CustomResourceDefinition into the file check_chart.py
reads.

It keeps the upstream CRD as it is except for two cuts that change no validation: the schemas' `description`
strings are dropped (most of the bytes), and only the API versions the chart renders are kept (check_chart.py
validates each CR against the one version it names). The written file starts with a comment naming the
upstream repository, tag, commit, path and the sha256 of the upstream file, so it can be checked and refreshed:

    git -C <clone of cloudnative-pg/cloudnative-pg> show v1.30.0:config/crd/bases/postgresql.cnpg.io_clusters.yaml \\
      | tests/deploy/.venv/bin/python tests/deploy/crds/vendor.py --repo cloudnative-pg/cloudnative-pg \\
          --tag v1.30.0 --commit <sha> --path config/crd/bases/postgresql.cnpg.io_clusters.yaml \\
          --version v1 --out tests/deploy/crds/postgresql.cnpg.io_clusters.yaml

(the commands for all of them are in README.md beside this file).
"""

import argparse
import hashlib
import sys

import yaml


def strip_descriptions(node):
    """Drops every `description` whose value is text (a property *named* description is a mapping: kept)."""
    if isinstance(node, dict):
        return {key: strip_descriptions(value) for key, value in node.items()
                if not (key == "description" and isinstance(value, str))}
    if isinstance(node, list):
        return [strip_descriptions(value) for value in node]
    return node


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--repo", "--tag", "--commit", "--path", "--out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--version", action="append", required=True, help="API version to keep (repeatable)")
    args = parser.parse_args()

    upstream = sys.stdin.buffer.read()
    (crd,) = [doc for doc in yaml.safe_load_all(upstream) if doc]
    versions = [v for v in crd["spec"]["versions"] if v["name"] in args.version]
    assert {v["name"] for v in versions} == set(args.version), f"versions not in the CRD: {args.version}"
    crd["spec"]["versions"] = [strip_descriptions(v) for v in versions]
    header = (
        f"# Vendored for tests/deploy/check_chart.py by tests/deploy/crds/vendor.py; do not edit by hand.\n"
        f"# Upstream: github.com/{args.repo} {args.tag} (commit {args.commit}), {args.path}\n"
        f"# Upstream sha256: {hashlib.sha256(upstream).hexdigest()}\n"
        f"# Changes: schema descriptions dropped; only version(s) {', '.join(args.version)} kept.\n"
    )
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(header)
        yaml.safe_dump(crd, out, sort_keys=False, width=120, allow_unicode=True)


if __name__ == "__main__":
    main()
