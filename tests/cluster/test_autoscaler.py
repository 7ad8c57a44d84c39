"""The autoscaler Shoal renders, under the real HPA controller: missing metrics hold
the replicas where they are, and an open scheduled window raises the warm pool."""

from __future__ import annotations

from e2e.cluster.target import Target
from e2e.operator import OperatorProcess
from kubernetes import client

from tests.support.hpa_syncs import wait_for_hpa_syncs
from tests.support.passes import wait_for_passes
from tests.support.shoal_objects import Shoal, condition, inference_model, wait_ready
from tests.support.wait import wait_for


def test_missing_metrics_never_scale_down(
    api: client.ApiClient, operator: OperatorProcess, namespace: str, kube_target: Target
) -> None:
    """No queue-depth series exists for this model: the HPA controller cannot compute a
    recommendation, so it keeps the replicas it has (upstream: a failed metric yields
    no scale change; ScalingActive turns False with the reason)."""
    shoal = Shoal(api)
    apps, autoscaling = client.AppsV1Api(api), client.AutoscalingV2Api(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("unmetered", pool), namespace)
        wait_ready(shoal, namespace, "unmetered")
        apps.patch_namespaced_deployment_scale("unmetered", namespace, {"spec": {"replicas": 3}})
        hpa = wait_for(
            "the HPA to report its metric missing",
            lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler("unmetered", namespace),
            lambda h: any(
                c.type == "ScalingActive" and c.status == "False" for c in h.status.conditions or []
            ),
            timeout=60,
        )
        reason = next(c.reason for c in hpa.status.conditions if c.type == "ScalingActive")
        assert reason.startswith("FailedGet"), reason
        # The model, Ready and serving, says its autoscaling cannot work, in the HPA's
        # words, and a Warning Event says it once.
        model = wait_for(
            "the model's AutoscalerReady to turn False",
            lambda: shoal.get("InferenceModel", "unmetered", namespace),
            lambda m: condition(m, "AutoscalerReady").get("status") == "False",
            timeout=30,
        )
        said = condition(model, "AutoscalerReady")
        assert said["reason"] == reason
        assert "unable to get metric" in said["message"], said
        assert condition(model, "Ready")["status"] == "True"
        warnings = wait_for(
            "a Warning Event for the autoscaler",
            lambda: [
                e
                for e in client.CoreV1Api(api)
                .list_namespaced_event(namespace, field_selector="involvedObject.name=unmetered")
                .items
                if e.reason == reason and e.involved_object.kind == "InferenceModel"
            ],
            bool,
            timeout=30,
        )
        assert [e.type for e in warnings] == ["Warning"]
        # Proven looked at again, by the HPA controller and by the operator's passes.
        wait_for_hpa_syncs(kube_target, api, rounds=2)
        wait_for_passes(operator.metrics_url, rounds=1)
        assert apps.read_namespaced_deployment("unmetered", namespace).spec.replicas == 3
        # Still one Event after several HPA syncs: the condition is written once.
        again = client.CoreV1Api(api).list_namespaced_event(
            namespace, field_selector="involvedObject.name=unmetered"
        )
        mine = [e for e in again.items if e.involved_object.kind == "InferenceModel"]
        assert [e.count or 1 for e in mine if e.reason == reason] == [1]


def test_an_open_schedule_raises_the_warm_pool(
    api: client.ApiClient, operator: OperatorProcess, namespace: str
) -> None:
    shoal = Shoal(api)
    apps = client.AppsV1Api(api)
    with shoal.pool([namespace]) as pool:
        body = inference_model("peaky", pool, min_replicas=1)
        body["spec"]["scaling"]["maxReplicas"] = 4
        body["spec"]["scaling"]["schedules"] = [
            # Opens every minute and stays open an hour: open now, whatever the time.
            {"name": "always", "start": "* * * * *", "duration": "1h", "minReplicas": 3},
        ]
        shoal.create(body, namespace)
        model = wait_for(
            "the open window in status",
            lambda: shoal.get("InferenceModel", "peaky", namespace),
            lambda m: (m.get("status") or {}).get("openSchedules") == ["always"],
            timeout=60,
        )
        assert model["status"]["warmPool"] == 3
        hpa = client.AutoscalingV2Api(api).read_namespaced_horizontal_pod_autoscaler(
            "peaky", namespace
        )
        assert hpa.spec.min_replicas == 3
        wait_for(
            "the HPA controller to raise the Deployment to the window's floor",
            lambda: apps.read_namespaced_deployment("peaky", namespace).spec.replicas,
            lambda r: r == 3,
            timeout=60,
        )
