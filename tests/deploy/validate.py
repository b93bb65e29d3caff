#!/usr/bin/env python3
"""Checks the deployment files of docs/deploy (CI runs this; no cluster, no network):

- every manifest in docs/deploy/kubernetes against the Kubernetes API's JSON schemas, in
  strict mode (an unknown field is an error), with `kubernetes-validate`, which carries
  the schemas of each Kubernetes version in its package;
- what the replicas need of them: probes, resource limits, a graceful-stop budget, the pod
  IP as `--replica-address`, a disruption budget and a Service selecting the pods;
- docs/deploy/nginx/cordon.conf.template, rendered, with `nginx -t` in a private prefix.

Usage: tests/deploy/validate.py [MANIFEST…]   (default: every docs/deploy/kubernetes/*.yaml)
Exits 1 naming each problem."""

import pathlib
import sys
import tempfile

import kubernetes_validate
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import nginx_config  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "docs/deploy/kubernetes"
# The oldest Kubernetes the manifests are written for, and the newest the package knows.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
# A stopping replica pauses its idle sandboxes before it exits: it needs this long at least.
MIN_GRACE_SECONDS = 60


def documents(path):
    with open(path) as file:
        return [doc for doc in yaml.safe_load_all(file) if doc is not None]


def schema_problems(path, resource):
    name = f"{path.name}: {resource.get('kind')}/{resource.get('metadata', {}).get('name')}"
    problems = []
    for version in VERSIONS:
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = ".".join(str(part) for part in error.path)
            problems.append(f"{name} (Kubernetes {version}): {where}: {error.message}")
        except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError,
                TypeError, KeyError) as error:
            problems.append(f"{name} (Kubernetes {version}): {error}")
    return problems


def workload_problems(path, resource):
    """What every Deployment here must have, beyond the schema."""
    name = f"{path.name}: Deployment/{resource['metadata']['name']}"
    spec = resource["spec"]["template"]["spec"]
    problems = []
    for container in spec["containers"]:
        for probe in ("readinessProbe", "livenessProbe"):
            if probe not in container:
                problems.append(f"{name}: container {container['name']} has no {probe}")
        limits = container.get("resources", {}).get("limits", {})
        if not {"cpu", "memory"} <= limits.keys():
            problems.append(f"{name}: container {container['name']} needs cpu and memory limits")
    args = [arg for container in spec["containers"] for arg in container.get("args", [])]
    if "serve" in args:
        env = {item["name"]: item for container in spec["containers"]
               for item in container.get("env", [])}
        pod_ip = env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {})
        if pod_ip.get("fieldPath") != "status.podIP":
            problems.append(f"{name}: POD_IP must come from the downward API (status.podIP)")
        if "--replica-address=http://$(POD_IP):7420" not in args:
            problems.append(f"{name}: --replica-address must be the pod IP")
        if not any(arg.startswith("--db=") for arg in args) or "secretKeyRef" not in str(
                env.get("CORDON_DB_URL")):
            problems.append(f"{name}: --db must come from a Secret")
        if spec.get("terminationGracePeriodSeconds", 30) < MIN_GRACE_SECONDS:
            problems.append(f"{name}: terminationGracePeriodSeconds under {MIN_GRACE_SECONDS}")
    return problems


def selects(selector, labels):
    return all(labels.get(key) == value for key, value in selector.items())


def coverage_problems(resources):
    """Each Deployment's pods are selected by a PodDisruptionBudget and a Service."""
    problems = []
    for path, deployment in resources:
        if deployment["kind"] != "Deployment":
            continue
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        for kind, selector_of in (
                ("PodDisruptionBudget", lambda r: r["spec"]["selector"]["matchLabels"]),
                ("Service", lambda r: r["spec"]["selector"])):
            if not any(r["kind"] == kind and selects(selector_of(r), labels)
                       for _, r in resources):
                problems.append(f"{path.name}: no {kind} selects the pods of "
                                f"Deployment/{deployment['metadata']['name']}")
    return problems


def nginx_problems():
    with tempfile.TemporaryDirectory(prefix="cordon-nginx-check-") as prefix:
        ok, output = nginx_config.check(prefix, "127.0.0.1:18080",
                                        ["127.0.0.1:17420", "127.0.0.1:17421", "127.0.0.1:17422"])
    return [] if ok else [f"{nginx_config.TEMPLATE.name}: nginx -t failed:\n{output}"]


def main(paths):
    paths = [pathlib.Path(path) for path in paths] or sorted(MANIFESTS.glob("*.yaml"))
    if not paths:
        raise SystemExit(f"no manifests in {MANIFESTS}")
    problems, resources = [], []
    for path in paths:
        try:
            docs = documents(path)
        except yaml.YAMLError as error:
            problems.append(f"{path.name}: not YAML: {error}")
            continue
        for resource in docs:
            if not isinstance(resource, dict) or "kind" not in resource:
                problems.append(f"{path.name}: a document that is not a Kubernetes object")
                continue
            found = schema_problems(path, resource)
            problems += found
            if not found:
                resources.append((path, resource))
                if resource["kind"] == "Deployment":
                    problems += workload_problems(path, resource)
    problems += coverage_problems(resources)
    problems += nginx_problems()
    for problem in problems:
        print(f"deploy: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"deploy: {len(resources)} Kubernetes objects valid against {', '.join(VERSIONS)}; "
          f"nginx -t passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
