"""The Helm chart, rendered and linted by the real Helm v4 library (helm-python-sdk), every
manifest checked against the Kubernetes API schemas (kubernetes-validate, strict), and the pod
started on loopback exactly as rendered."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import httpx
import kubernetes_validate
import pytest
import yaml
from processes import ROOT, Process, free_port, wait_for_http

CHART = ROOT / "helm" / "aigw"
EXAMPLE = ROOT / "helm" / "examples" / "sidecar-kustomize"
KUBERNETES = "1.33.0"
CUSTOM_RESOURCES = {("gateway.networking.k8s.io/v1", "HTTPRoute"),
                    ("monitoring.coreos.com/v1", "ServiceMonitor")}
INGRESS = {"upstream": {"service": {"name": "legacy-api", "port": 8000}}}
SIDECAR = {"mode": "sidecar", "app": {"image": {"repository": "registry.example.com/legacy"},
                                      "port": 8000}}
EVERYTHING = {
    **INGRESS, "replicaCount": 3, "checksumAnnotations": True,
    "config": {"rate_limits": {"storage": "${REDIS_URL}",
                               "rules": [{"name": "api", "limit": "100/minute"}]}},
    "secrets": {"REDIS_URL": "redis+sentinel://sentinel.redis.svc:26379/aigw"},
    "policies": {"aip.yaml": "description: AIP rules.\n"},
    "ingress": {"enabled": True, "className": "nginx",
                "tls": [{"secretName": "api-tls", "hosts": ["api.example.com"]}]},
    "httpRoute": {"enabled": True, "parentRefs": [{"name": "public", "namespace": "edge"}],
                  "hostnames": ["api.example.com"]},
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 6},
    "networkPolicy": {"enabled": True,
                      "from": [{"namespaceSelector": {"matchLabels": {"name": "edge"}}}],
                      "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "mon"}}}]},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "dashboards": {"enabled": True},
}


def render(values: dict[str, Any], namespace: str = "prod") -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name="gw", namespace=namespace)
    return [doc for path, text in sorted(manifests.items()) if not path.endswith("NOTES.txt")
            for doc in yaml.safe_load_all(text) if doc]


def notes(values: dict[str, Any]) -> str:
    with helm.Chart.load(CHART) as chart:
        return chart.render(values, name="gw", namespace="prod")["aigw/templates/NOTES.txt"]


def one(docs: list[dict[str, Any]], kind: str, name: str = "gw-aigw") -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def container(docs: list[dict[str, Any]], name: str = "aigw") -> dict[str, Any]:
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    [found] = [c for c in pod["containers"] if c["name"] == name]
    return found


def gateway_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(docs, "ConfigMap")["data"]["aigw.yaml"])


def validate(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_RESOURCES:
            continue  # CRDs: kubernetes-validate knows only the built-in API
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


# --------------------------------------------------------------------------- render and lint


@pytest.mark.parametrize("values", [INGRESS, SIDECAR, EVERYTHING,
                                    {**SIDECAR, "serviceMonitor": {"enabled": True}}],
                         ids=["ingress", "sidecar", "ingress-everything", "sidecar-metrics"])
def test_every_rendered_manifest_is_valid_kubernetes_and_lints_clean(values: dict):
    docs = render(values)
    validate(docs)
    report = helm.lint(CHART, values, strict=True, kube_version=f"v{KUBERNETES}")
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    assert problems == []


def test_everything_switched_on_renders_each_kind_once():
    kinds = sorted(d["kind"] for d in render(EVERYTHING))
    assert kinds == sorted(["ConfigMap", "ConfigMap", "Deployment", "HTTPRoute",
                            "HorizontalPodAutoscaler",
                            "Ingress", "NetworkPolicy", "PodDisruptionBudget", "Secret",
                            "Service", "Service", "ServiceAccount", "ServiceMonitor"])


def test_the_dashboard_ships_as_a_configmap_for_the_grafana_sidecar():
    dashboards = [d for d in render(EVERYTHING) if d["kind"] == "ConfigMap"
                  and d["metadata"]["name"].endswith("-dashboards")]
    assert len(dashboards) == 1
    assert dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(dashboards[0]["data"]["aigw.json"])
    assert shipped == json.loads((ROOT / "helm" / "dashboards" / "aigw.json").read_text())
    assert not [d for d in render(INGRESS) if d["metadata"]["name"].endswith("-dashboards")]


def test_ingress_mode_forwards_to_the_named_service_and_the_pod_is_locked_down():
    docs = render(INGRESS)
    config = gateway_config(docs)
    assert config["upstreams"]["app"]["url"] == "http://legacy-api.prod.svc:8000"
    assert config["default_upstream"] == "app"
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    aigw = container(docs)
    assert [c["name"] for c in pod["containers"]] == ["aigw"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert aigw["securityContext"]["readOnlyRootFilesystem"] is True
    assert aigw["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert aigw["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["automountServiceAccountToken"] is False
    assert aigw["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert aigw["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    assert pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == \
        one(docs, "Deployment")["spec"]["selector"]["matchLabels"]


def test_the_pod_outlives_the_prestop_sleep_plus_the_drain():
    docs = render({**INGRESS, "gateway": {"shutdownGrace": 45, "preStopSleep": 8}})
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert gateway_config(docs)["shutdown"]["grace"] == 45
    assert container(docs)["lifecycle"]["preStop"] == {"sleep": {"seconds": 8}}
    assert pod["terminationGracePeriodSeconds"] == 8 + 45 + 10


def test_sidecar_mode_puts_the_app_in_the_pod_and_the_service_on_aigw():
    docs = render(SIDECAR)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["aigw", "app"]
    assert container(docs, "app")["image"] == "registry.example.com/legacy:latest"
    assert gateway_config(docs)["upstreams"]["app"]["url"] == "http://127.0.0.1:8000"
    target = one(docs, "Service")["spec"]["ports"][0]["targetPort"]
    assert target in {p["name"] for p in container(docs)["ports"]}
    assert target not in {p["name"] for p in container(docs, "app")["ports"]}


def test_a_required_upstream_is_asked_for_by_name():
    with pytest.raises(helm.HelmError, match=r"upstream\.service\.name"):
        render({})
    with pytest.raises(helm.HelmError, match=r"app\.image\.repository"):
        render({"mode": "sidecar"})


def test_config_from_a_set_file_gets_the_same_chart_owned_keys(tmp_path: Path):
    source = tmp_path / "aigw.yaml"
    source.write_text("version: 1\nlisten: {port: 1}\nupstreams:\n  app:\n"
                      "    add_headers: {Authorization: '${UPSTREAM_TOKEN}'}\n")
    values = {**INGRESS, **helm.parse_set_file(f"configFile={source}")}
    config = gateway_config(render(values))
    assert config["listen"] == {"host": "0.0.0.0", "port": 8080}
    assert config["upstreams"]["app"] == {"url": "http://legacy-api.prod.svc:8000",
                                          "add_headers": {"Authorization": "${UPSTREAM_TOKEN}"}}
    with pytest.raises(helm.HelmError, match="configFile"):
        render({**INGRESS, "configFile": "- a list\n- not a mapping\n"})


def test_secrets_become_the_environment_or_an_existing_secret_is_used():
    docs = render({**INGRESS, "secrets": {"UPSTREAM_TOKEN": "s3cret"}})
    assert one(docs, "Secret")["stringData"] == {"UPSTREAM_TOKEN": "s3cret"}
    assert container(docs)["envFrom"] == [{"secretRef": {"name": "gw-aigw"}}]
    assert "s3cret" not in one(docs, "ConfigMap")["data"]["aigw.yaml"]
    existing = render({**INGRESS, "existingSecret": "team-aigw"})
    assert not [d for d in existing if d["kind"] == "Secret"]
    assert container(existing)["envFrom"] == [{"secretRef": {"name": "team-aigw"}}]


def test_checksum_annotations_change_with_the_config_only_when_asked():
    def annotations(values: dict) -> dict:
        pod = one(render(values), "Deployment")["spec"]["template"]
        return pod["metadata"].get("annotations", {})

    assert "checksum/config" not in annotations(INGRESS)  # hot reload, no rollout
    first = annotations({**INGRESS, "checksumAnnotations": True})
    changed = annotations({**INGRESS, "checksumAnnotations": True,
                           "config": {"logging": {"level": "debug"}}})
    assert first["checksum/config"] != changed["checksum/config"]
    assert first["checksum/secret"] == changed["checksum/secret"]


MEMORY_LIMITS = {"rate_limits": {"rules": [{"name": "api", "limit": "100/minute"}]}}


@pytest.mark.parametrize("scale", [{"replicaCount": 2},
                                   {"autoscaling": {"enabled": True, "maxReplicas": 4}}])
def test_memory_rate_limits_with_several_replicas_are_refused_unless_allowed(scale: dict):
    values = {**INGRESS, **scale, "config": MEMORY_LIMITS}
    with pytest.raises(helm.HelmError, match="each pod would count alone"):
        render(values)
    assert render({**values, "allowMemoryRateLimitsWithReplicas": True})
    redis = {"rate_limits": {**MEMORY_LIMITS["rate_limits"], "storage": "${REDIS_URL}"}}
    assert render({**values, "config": redis})
    assert render({**INGRESS, "config": MEMORY_LIMITS})  # one replica counts everything


AIP = {"publisher": {"id": "acme", "name": "Acme", "domain": "acme.example.com"},
       "editorial_domains": ["support"], "sources": {}}
LOCAL_STORES = [  # (config, what the refusal names, the same store shared through Redis)
    ({"aidip": {"agents": {}}}, "aidip.registry.redis_url is unset",
     {"aidip": {"agents": {}, "registry": {"redis_url": "${REDIS_URL}"}}}),
    ({"aip": {**AIP, "signing": {"enabled": True, "keys": {}}}},
     "aip.signing.nonce_store is memory://",
     {"aip": {**AIP, "signing": {"enabled": True, "keys": {},
                                 "nonce_store": "redis+cluster://redis:7000"}}}),
    ({"aip": {**AIP, "events": {"file": "events.jsonl"}}}, "aip.events has no redis_url",
     {"aip": {**AIP, "events": {"redis_url": "${REDIS_URL}"}}}),
    ({"aip": {**AIP, "event": {"path": "/pag/events"}, "events": {"redis_url": "${REDIS_URL}"}}},
     "aip.event.store is memory://",
     {"aip": {**AIP, "event": {"path": "/pag/events", "store": "${REDIS_URL}"},
              "events": {"redis_url": "${REDIS_URL}"}}}),
]


@pytest.mark.parametrize(("config", "named", "shared"), LOCAL_STORES)
@pytest.mark.parametrize("scale", [{"replicaCount": 2},
                                   {"autoscaling": {"enabled": True, "maxReplicas": 4}}])
def test_per_pod_aidip_and_aip_stores_with_several_replicas_are_refused_unless_allowed(
        config: dict, named: str, shared: dict, scale: dict):
    values = {**INGRESS, **scale, "config": config}
    with pytest.raises(helm.HelmError, match=f"replicas, but .*{re.escape(named)}"):
        render(values)
    assert render({**values, "allowLocalStoresWithReplicas": True})
    assert render({**values, "config": shared})
    assert render({**INGRESS, "config": config})  # one replica holds all of it
    section = next(iter(config))
    assert render({**values, "config": {section: {**config[section], "enabled": False}}})


def test_every_per_pod_store_is_named_in_one_refusal():
    config = {"aidip": {"agents": {}},
              "aip": {**AIP, "signing": {"enabled": True, "keys": {}},
                      "event": {"path": "/pag/events"}, "events": {"file": "e.jsonl"}}}
    with pytest.raises(helm.HelmError) as refused:
        render({**INGRESS, "replicaCount": 3, "config": config})
    assert all(named in str(refused.value) for _, named, _ in LOCAL_STORES)


@pytest.mark.parametrize("bad", [
    {"mode": "gateway"},
    {"replicaCount": "two"},
    {"gateway": {"port": "http"}},
    {"gateway": {"port": 70000}},
    {"ingress": {"enabled": "yes"}},
    {"replicas": 2},
    {"secrets": {"REDIS_URL": 6379}},
    {"policies": {"aip.json": "{}"}},
])
def test_values_schema_rejects_wrong_types_and_unknown_modes(bad: dict):
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError):
        chart.validate_schema({**INGRESS, **bad})
    with pytest.raises(helm.HelmValuesError):
        render({**INGRESS, **bad})


def test_notes_print_the_urls_and_the_first_curl():
    text = notes(EVERYTHING)
    assert "https://api.example.com/" in text
    assert "http://gw-aigw.prod.svc:80/" in text
    assert "port-forward svc/gw-aigw 8080:80" in text
    assert "curl -i http://127.0.0.1:8080/.well-known/ai" in text


def test_the_chart_readme_is_generated_from_the_values_comments():
    sys.path.insert(0, str(ROOT / "helm"))
    try:
        import values_readme
    finally:
        sys.path.remove(str(ROOT / "helm"))
    assert (CHART / "README.md").read_text() == values_readme.render()
    documented = {key for key, _ in values_readme.documented((CHART / "values.yaml").read_text())}

    def leaves(node: Any, path: str) -> list[str]:
        if isinstance(node, dict) and node:
            return [leaf for key, value in node.items()
                    for leaf in leaves(value, f"{path}.{key}" if path else key)]
        return [path]

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    undocumented = [leaf for leaf in leaves(values, "")
                    if not any(leaf == key or leaf.startswith(key + ".") for key in documented)]
    assert undocumented == []


def test_the_kustomize_example_adds_the_chart_s_sidecar_container():
    base = list(yaml.safe_load_all((EXAMPLE / "app.yaml").read_text()))
    patch = yaml.safe_load((EXAMPLE / "aigw-sidecar.yaml").read_text())
    deployment = next(d for d in base if d["kind"] == "Deployment")
    pod, extra = deployment["spec"]["template"]["spec"], patch["spec"]["template"]["spec"]
    pod["containers"] += extra.pop("containers")  # strategic merge: containers by name
    pod.update(extra)
    validate([deployment])
    ours = next(c for c in pod["containers"] if c["name"] == "aigw")
    chart = container(render(SIDECAR))
    for field in ("command", "args", "lifecycle", "securityContext"):
        assert ours[field].items() >= chart[field].items() if field == "securityContext" \
            else ours[field] == chart[field]
    for probe in ("livenessProbe", "readinessProbe"):
        assert ours[probe]["httpGet"] == chart[probe]["httpGet"]
    config = yaml.safe_load((EXAMPLE / "aigw.yaml").read_text())
    assert pod["terminationGracePeriodSeconds"] == (
        ours["lifecycle"]["preStop"]["sleep"]["seconds"] + config["shutdown"]["grace"] + 10)


# --------------------------------------------------------------------------- the pod, run


def _port(container_spec: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container_spec["ports"] if p["name"] == port)


def test_the_pod_as_rendered_serves_probes_and_reaches_the_upstream(echo: str, tmp_path: Path):
    echo_port = int(echo.rsplit(":", 1)[1])
    values = {**SIDECAR, "app": {**SIDECAR["app"], "port": echo_port},
              "gateway": {"port": free_port(), "adminPort": free_port()},
              "config": {"upstreams": {"app": {
                  "add_headers": {"X-Upstream-Token": "${UPSTREAM_TOKEN}"}}}},
              "secrets": {"UPSTREAM_TOKEN": "from-the-secret"},
              "policies": {"notes.yaml": "description: Rendered by the chart test.\n"}}
    docs = render(values)
    aigw = container(docs)
    mount_root = "/etc/aigw"
    [config_mount] = [m for m in aigw["volumeMounts"] if m["name"] == "config"]
    assert config_mount["mountPath"] == mount_root
    root = tmp_path / "etc-aigw"
    configmap = one(docs, "ConfigMap")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "config"]
    for item in volume["configMap"]["items"]:
        (root / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (root / item["path"]).write_text(configmap["data"][item["key"]])

    env: dict[str, str] = {}
    for source in aigw.get("envFrom", []):
        env.update(one(docs, "Secret", source["secretRef"]["name"])["stringData"])
    env.update({e["name"]: e["value"] for e in aigw.get("env", [])})
    assert aigw["command"] == ["aigw"]
    command = [str(Path(sys.executable).parent / "aigw")] + [
        arg.replace(mount_root, str(root)) for arg in aigw["args"]]
    process = Process(command, tmp_path, "pod-aigw", env=env)
    try:
        live = aigw["livenessProbe"]["httpGet"]
        ready = aigw["readinessProbe"]["httpGet"]
        base = "http://127.0.0.1:{}"
        wait_for_http(base.format(_port(aigw, live["port"])) + live["path"],
                      process=process.popen)
        assert httpx.get(base.format(_port(aigw, live["port"])) + live["path"]).status_code == 200
        assert httpx.get(base.format(_port(aigw, ready["port"])) + ready["path"]).status_code \
            == 200

        service_port = one(docs, "Service")["spec"]["ports"][0]
        listen = _port(aigw, service_port["targetPort"])
        assert listen == values["gateway"]["port"]
        response = httpx.get(base.format(listen) + "/echo/through-the-service", timeout=10)
        assert response.status_code == 200, response.text
        sent = dict(response.json()["headers"])
        assert response.json()["raw_path"] == "/echo/through-the-service"
        assert sent["x-upstream-token"] == "from-the-secret"
    finally:
        assert process.stop() == 0
