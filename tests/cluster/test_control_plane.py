"""The local cluster is a real one: scheduler, controllers and GPU accounting at work.

KWOK stands in for the kubelets (there is no container runtime here): it marks pods
the real scheduler bound to a simulated node as Running. Everything else is real.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.support.wait import wait_for

GPU = "nvidia.com/gpu"


def gpu_deployment(name: str, gpus: int, replicas: int = 1) -> client.V1Deployment:
    labels = {"app": name}
    container = client.V1Container(
        name="main",
        image="registry.invalid/placeholder:1",  # never pulled: KWOK plays the kubelet
        resources=client.V1ResourceRequirements(limits={GPU: str(gpus)}),
    )
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container]),
            ),
        ),
    )


def pods_of(core: client.CoreV1Api, namespace: str, app: str) -> list[client.V1Pod]:
    return list(core.list_namespaced_pod(namespace, label_selector=f"app={app}").items)


def allocatable(node: client.V1Node) -> dict[str, str]:
    """What ``node`` offers the scheduler; every registered node reports it."""
    assert node.status.allocatable is not None, node.metadata.name
    return node.status.allocatable


def summary(pods: list[client.V1Pod]) -> list[dict[str, Any]]:
    return [
        {
            "name": p.metadata.name,
            "node": p.spec.node_name,
            "phase": p.status.phase,
            "conditions": [
                (c.type, c.status, c.reason, c.message) for c in (p.status.conditions or [])
            ],
        }
        for p in pods
    ]


def test_gpu_nodes_are_ready_with_allocatable_gpus(gpu_nodes: list[client.V1Node]) -> None:
    assert len(gpu_nodes) >= 2
    for node in gpu_nodes:
        ready = {c.type: c.status for c in node.status.conditions or []}.get("Ready")
        assert ready == "True", f"{node.metadata.name} Ready={ready}"
        assert int(allocatable(node)[GPU]) > 0, node.status.allocatable
        assert node.metadata.labels.get("nvidia.com/gpu.product"), node.metadata.labels


def test_dedicated_gpu_nodes_are_tainted(gpu_nodes: list[client.V1Node]) -> None:
    dedicated = [
        n for n in gpu_nodes if n.metadata.labels.get("shoal.dev/node-group") == "dedicated-gpu"
    ]
    assert dedicated, "no dedicated GPU node group"
    for node in dedicated:
        assert any(t.key == "shoal.dev/dedicated" for t in node.spec.taints or []), node.spec


def test_one_gpu_pod_is_scheduled_to_a_gpu_node_and_runs(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    gpu_nodes: list[client.V1Node],
) -> None:
    apps.create_namespaced_deployment(namespace, gpu_deployment("one-gpu", gpus=1))
    pods = wait_for(
        "a Running pod of one-gpu",
        lambda: pods_of(core, namespace, "one-gpu"),
        lambda ps: len(ps) == 1 and ps[0].status.phase == "Running",
        timeout=60,
    )
    gpu_node_names = {n.metadata.name for n in gpu_nodes}
    assert pods[0].spec.node_name in gpu_node_names, summary(pods)
    assert pods[0].spec.node_name is not None  # it is one of gpu_node_names
    # The untainted (shared) group: the pod does not tolerate the dedicated taint.
    node = core.read_node(pods[0].spec.node_name)
    assert node.metadata.labels is not None
    assert node.metadata.labels["shoal.dev/node-group"] == "shared-gpu"


def test_pod_asking_more_gpus_than_any_node_has_stays_pending(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    gpu_nodes: list[client.V1Node],
) -> None:
    most = max(int(allocatable(n)[GPU]) for n in gpu_nodes)
    apps.create_namespaced_deployment(namespace, gpu_deployment("too-big", gpus=most + 1))

    def unschedulable(pods: list[client.V1Pod]) -> bool:
        return any(
            c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
            for p in pods
            for c in p.status.conditions or []
        )

    pods = wait_for(
        "the scheduler to report too-big Unschedulable",
        lambda: pods_of(core, namespace, "too-big"),
        unschedulable,
        timeout=60,
    )
    assert pods[0].status.phase == "Pending"
    assert pods[0].spec.node_name is None
    message = next(c.message for c in pods[0].status.conditions if c.type == "PodScheduled")
    assert message is not None  # the scheduler says why it is Unschedulable
    assert f"Insufficient {GPU}" in message, message


def test_deleting_an_owner_garbage_collects_its_dependents(
    core: client.CoreV1Api, namespace: str
) -> None:
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    assert owner.metadata.uid is not None  # the API server sets it on create
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    for i in range(3):
        core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"dependent-{i}", owner_references=[ref])
            ),
        )
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")
    wait_for(
        "the garbage collector to delete the dependents",
        lambda: [
            cm.metadata.name
            for cm in core.list_namespaced_config_map(namespace).items
            if cm.metadata.name.startswith("dependent-")
        ],
        lambda names: names == [],
        timeout=60,
    )


def test_hpa_controller_scales_a_deployment_up_to_min_replicas(
    api: client.ApiClient,
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    gpu_nodes: list[client.V1Node],
) -> None:
    """The HPA controller in kube-controller-manager acts on the Deployment.

    No metrics API is needed for this: below minReplicas the controller scales up
    without reading metrics, and it records why in the HPA's status.
    """
    apps.create_namespaced_deployment(namespace, gpu_deployment("scaled", gpus=1, replicas=1))
    hpa = client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="scaled"),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(
                api_version="apps/v1", kind="Deployment", name="scaled"
            ),
            min_replicas=3,
            max_replicas=5,
            metrics=[
                client.V2MetricSpec(
                    type="Resource",
                    resource=client.V2ResourceMetricSource(
                        name="cpu",
                        target=client.V2MetricTarget(type="Utilization", average_utilization=80),
                    ),
                )
            ],
        ),
    )
    client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(namespace, hpa)
    wait_for(
        "the HPA controller to scale 'scaled' to 3 Running pods",
        lambda: summary(pods_of(core, namespace, "scaled")),
        lambda ps: len(ps) == 3 and all(p["phase"] == "Running" for p in ps),
        timeout=90,
    )
    status = (
        client.AutoscalingV2Api(api)
        .read_namespaced_horizontal_pod_autoscaler("scaled", namespace)
        .status
    )
    assert status.desired_replicas == 3, status
