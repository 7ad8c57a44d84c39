"""The release workflow cannot run here, so it is checked two ways: actionlint (built from
its Go module, with shellcheck over the run: blocks where shellcheck is installed) must
report nothing on .github/workflows/, and the workflow must keep doing what
docs/releasing.md says: a linux/amd64 + linux/arm64 image pushed and signed by digest,
that digest in the packaged chart's values, the chart pushed and signed by its own
digest, every action pinned by commit SHA, no permission granted at the top level."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e.cluster.local import ensure_tool

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
CI = WORKFLOWS / "ci.yml"
CHART = REPO / "charts" / "shoal"

SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")


@pytest.fixture(scope="module")
def actionlint() -> Path:
    return ensure_tool("actionlint", "github.com/rhysd/actionlint/cmd/actionlint", "actionlint")


def run_actionlint(actionlint: Path, files: list[Path], cwd: Path) -> list[dict[str, Any]]:
    """actionlint's findings as JSON objects (message, filepath, line, kind)."""
    proc = subprocess.run(
        [str(actionlint), "-no-color", "-format", "{{json .}}", *map(str, files)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    # 0: nothing found, 1: problems found; anything else is actionlint failing to run.
    assert proc.returncode in (0, 1), proc.stderr
    findings: list[dict[str, Any]] = json.loads(proc.stdout or "[]") or []
    return findings


def load(path: Path) -> dict[str, Any]:
    raw: dict[Any, Any] = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the bare key `on` as True.
    return {("on" if key is True else str(key)): value for key, value in raw.items()}


def step_output(step_id: str, name: str = "digest") -> str:
    return "${{ steps.%s.outputs.%s }}" % (step_id, name)  # noqa: UP031 (braces)


def unpinned(text: str) -> list[str]:
    """Every `uses:` that is not owner/repo@<40-hex commit> # vX.Y.Z (local ./ actions
    excepted)."""
    refs = re.findall(r"^\s*(?:-\s+)?uses:\s*(.+?)\s*$", text, flags=re.MULTILINE)
    return [ref for ref in refs if not ref.startswith("./") and not SHA_PIN.match(ref)]


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = job["steps"]
    return [s for s in steps if str(s.get("uses", "")).split("@")[0].lower() == action]


def step_running(job: dict[str, Any], command: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = job["steps"]
    matches = [s for s in steps if command in str(s.get("run", ""))]
    assert len(matches) == 1, f"expected one step running {command!r}, found {len(matches)}"
    return matches[0]


@pytest.fixture(scope="module")
def release() -> dict[str, Any]:
    return load(RELEASE)


def test_actionlint_reports_nothing(actionlint: Path) -> None:
    if os.environ.get("CI") and shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is missing, so run: blocks go unchecked: `make system-deps`")
    files = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
    assert RELEASE in files
    assert CI in files
    findings = run_actionlint(actionlint, files, REPO)
    assert findings == [], "\n".join(
        f"{f['filepath']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in findings
    )


def test_actionlint_bites_on_a_broken_workflow(actionlint: Path, tmp_path: Path) -> None:
    """The lint is known to catch mistakes: a typo'd step id in the digest handed to
    cosign, a job needing one that does not exist, an unknown runner label."""
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        "on: push\n"
        "permissions: {}\n"
        "jobs:\n"
        "  image:\n"
        "    runs-on: ubuntu-24.04\n"
        "    needs: versoin\n"
        "    steps:\n"
        "      - id: build\n"
        '        run: echo digest=sha256:0 >> "$GITHUB_OUTPUT"\n'
        "      - env:\n"
        "          DIGEST: ${{ steps.biuld.outputs.digest }}\n"
        '        run: cosign sign --yes "ghcr.io/x/y@$DIGEST"\n'
        "  summary:\n"
        "    runs-on: ubuntu-99.04\n"
        "    steps:\n"
        "      - run: echo done\n"
    )
    findings = run_actionlint(actionlint, [broken], tmp_path)
    messages = "\n".join(f["message"] for f in findings)
    assert {"expression", "job-needs", "runner-label"} <= {f["kind"] for f in findings}, messages
    for typo in ("biuld", "versoin", "ubuntu-99.04"):
        assert typo in messages


def test_triggers_and_least_privilege(release: dict[str, Any]) -> None:
    assert release["on"]["push"] == {"tags": ["v*"]}
    assert "workflow_dispatch" in release["on"]
    assert release["permissions"] == {}
    granted = {name: job.get("permissions") for name, job in release["jobs"].items()}
    assert all(p is not None for p in granted.values()), granted  # every job says what it needs
    writers = {name for name, p in granted.items() if p and any(v == "write" for v in p.values())}
    assert writers == {"image", "chart"}, granted
    for name in writers:
        assert granted[name] == {"contents": "read", "packages": "write", "id-token": "write"}
    assert granted["version"] == {"contents": "read"}
    assert load(CI)["permissions"] == {"contents": "read"}


def test_every_action_is_pinned_by_commit_sha() -> None:
    for path in (RELEASE, CI):
        text = path.read_text()
        assert "uses:" in text
        assert unpinned(text) == [], path.name
    # The check itself bites.
    sample = "      - uses: docker/build-push-action@v7\n    uses: actions/checkout@3d3c42e # v7\n"
    assert unpinned(sample) == ["docker/build-push-action@v7", "actions/checkout@3d3c42e # v7"]


def test_image_is_multi_arch_and_signed_by_digest(release: dict[str, Any]) -> None:
    job = release["jobs"]["image"]
    names = [str(s.get("uses", "")).split("@")[0].lower() for s in job["steps"]]
    for action in ("docker/setup-qemu-action", "docker/setup-buildx-action"):
        assert names.index(action) < names.index("docker/build-push-action"), names
    (build,) = steps_using(job, "docker/build-push-action")
    inputs = build["with"]
    assert set(inputs["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert inputs["push"] is True
    assert inputs["provenance"]
    assert inputs["sbom"] is True
    digest = step_output(build["id"])
    assert job["outputs"]["digest"] == digest
    sign = step_running(job, "cosign sign")
    assert sign["env"]["DIGEST"] == digest
    assert '"$IMAGE@$DIGEST"' in sign["run"]
    assert steps_using(job, "sigstore/cosign-installer")
    # Pushed where the chart's default image lives (same repository name).
    default = yaml.safe_load((CHART / "values.yaml").read_text())["image"]["repository"]
    assert job["env"]["IMAGE"] == "${{ needs.version.outputs.image }}"
    version_run = step_running(release["jobs"]["version"], "GITHUB_OUTPUT")["run"]
    assert f'echo "image=ghcr.io/$owner/{default.rsplit("/", 1)[1]}"' in version_run


def test_chart_carries_the_image_digest_and_is_signed_by_its_own(
    release: dict[str, Any],
) -> None:
    job = release["jobs"]["chart"]
    assert job["needs"] == ["version", "image"]
    assert job["env"]["IMAGE_DIGEST"] == "${{ needs.image.outputs.digest }}"
    package = step_running(job, "helm package")["run"]
    edit = ".image.repository = strenv(IMAGE) | .image.digest = strenv(IMAGE_DIGEST)"
    assert edit in package
    assert package.index(edit) < package.index("helm package")
    # The keys it sets are the ones the chart's image helper reads.
    image = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
    assert {"repository", "digest"} <= set(image)
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert "{{ .Values.image.repository }}@{{ .Values.image.digest }}" in helpers
    push = step_running(job, "helm push")
    assert "2>&1" in push["run"]
    assert "sed -n 's/^Digest: //p'" in push["run"]
    assert job["outputs"]["digest"] == step_output(push["id"])
    sign = step_running(job, "cosign sign")
    assert sign["env"]["DIGEST"] == step_output(push["id"])
    assert '"$CHARTS/shoal@$DIGEST"' in sign["run"]
    assert "oci://$CHARTS" in push["run"]
    assert steps_using(job, "azure/setup-helm")


def test_summary_lists_both_references_by_digest(release: dict[str, Any]) -> None:
    job = release["jobs"]["summary"]
    assert job["permissions"] == {}
    (step,) = job["steps"]
    assert step["env"]["IMAGE_REF"].endswith("@${{ needs.image.outputs.digest }}")
    assert step["env"]["CHART_REF"].endswith("/shoal@${{ needs.chart.outputs.digest }}")
    assert "$GITHUB_STEP_SUMMARY" in step["run"]
    assert "$IMAGE_REF" in step["run"]
    assert "oci://$CHART_REF" in step["run"]


def run_version_check(
    release: dict[str, Any], tag: str, cwd: Path, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The version job's own script under bash, as the runner runs it (-eo pipefail).
    Stand-ins on PATH: this interpreter as python3, and a yq that reads one top-level
    key (all the script asks of yq)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").unlink(missing_ok=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    yq = bin_dir / "yq"
    yq.write_text(
        f"#!{sys.executable}\n"
        "import sys, yaml\n"
        "print(yaml.safe_load(open(sys.argv[2]))[sys.argv[1].lstrip('.')])\n"
    )
    yq.chmod(0o755)
    output = tmp_path / "output"
    output.write_text("")
    script = step_running(release["jobs"]["version"], "GITHUB_OUTPUT")["run"]
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TAG": tag,
        "GITHUB_OUTPUT": str(output),
        "GITHUB_REPOSITORY_OWNER": "Shoal-Dev",
    }
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return proc, outputs


def test_version_check_accepts_the_matching_tag_only(
    release: dict[str, Any], tmp_path: Path
) -> None:
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    proc, outputs = run_version_check(release, f"v{version}", REPO, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outputs["version"] == version
    assert outputs["image"] == "ghcr.io/shoal-dev/shoal-operator"  # GHCR wants lowercase
    assert outputs["charts"] == "ghcr.io/shoal-dev/charts"
    assert re.fullmatch(r"[0-9a-f]{40}", outputs["revision"])

    for tag in ("v99.0.0", version, f"v{version}.1", "latest"):
        proc, outputs = run_version_check(release, tag, REPO, tmp_path)
        assert proc.returncode != 0, tag
        assert outputs == {}, tag

    # Chart.yaml's appVersion behind the tag: refused, and the message says which.
    copy = tmp_path / "copy"
    (copy / "charts" / "shoal").mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    chart = (CHART / "Chart.yaml").read_text()
    stale = chart.replace(f'appVersion: "{version}"', 'appVersion: "0.0.1"')
    assert stale != chart
    (copy / "charts" / "shoal" / "Chart.yaml").write_text(stale)
    proc, outputs = run_version_check(release, f"v{version}", copy, tmp_path)
    assert proc.returncode != 0
    assert outputs == {}
    assert "Chart.yaml appVersion=0.0.1" in proc.stdout


def test_the_release_doc_describes_what_the_workflow_does(release: dict[str, Any]) -> None:
    doc = (REPO / "docs" / "releasing.md").read_text()
    (build,) = steps_using(release["jobs"]["image"], "docker/build-push-action")
    for platform in build["with"]["platforms"].split(","):
        assert platform in doc
    for claim in ("actionlint", ".github/workflows/release.yml", "digest", "cosign"):
        assert claim in doc
