#!/usr/bin/env python3
"""Renders chart/ as an install of release `ark-broker` into NAMESPACE with VALUES (JSON, merged over the
chart's defaults and a database URL) through Helm's Go SDK (helm-python-sdk), and prints the rendered objects
as one JSON array (NOTES.txt left out). The real API server tests (tests/api/kube_apiserver.rs) apply the
chart's own ServiceAccount, Role and RoleBinding from it.

Run: tests/deploy/.venv/bin/python tests/deploy/render.py NAMESPACE '{"auth": {"mode": "kubernetes"}}'
"""

import json
import pathlib
import sys

import helm_python as helm
import yaml

CHART = pathlib.Path(__file__).resolve().parents[2] / "chart"
DATABASE = {"database": {"url": "postgres://ark@pg.ark.svc:5432/ark"}}


def main():
    namespace, values = sys.argv[1], json.loads(sys.argv[2])
    with helm.Chart.load(str(CHART)) as chart:
        files = chart.render({**DATABASE, **values}, name="ark-broker", namespace=namespace, is_install=True)
    objects = []
    for path, text in sorted(files.items()):
        if not path.endswith("NOTES.txt"):
            objects += [doc for doc in yaml.safe_load_all(text) if doc]
    json.dump(objects, sys.stdout)


if __name__ == "__main__":
    main()
