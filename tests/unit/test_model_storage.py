"""A model's files in its pod (shoal.render.model_fetch): a claim served read-only where
it is, a copy with the room its declared size needs, an https:// archive downloaded and
unpacked, and a CA bundle that the downloads trust.

The fetch container's scripts run here for real, with the real rclone: under busybox's
sh, tar and unzip (what the upstream rclone/rclone image has, Alpine's busybox) and
under Debian's dash, GNU tar and Info-ZIP's unzip (what another rclone image may have).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from e2e.https_files import FileServer, https_files
from pydantic import ValidationError

from shoal.api.formats import archive_format
from shoal.api.inferencemodel import CaBundle, InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.model_fetch import (
    ARCHIVE_SCRIPT,
    CA_FILE,
    COPY_SCRIPT,
    LINK_SCRIPT,
    FetchPlan,
    fetch_plan,
    repository_room,
)
from shoal.render.workload import deployment
from tests.support.resources import example

UID = "00000000-0000-0000-0000-000000000001"


def model(**source: Any) -> InferenceModel:
    doc = example("InferenceModel", "search-ranker")
    doc["metadata"]["uid"] = UID
    doc["spec"]["model"].update(source)
    return InferenceModel.model_validate(doc)


def pod(**source: Any) -> dict[str, Any]:
    pool = TenantPool.model_validate(example("TenantPool", "critical"))
    spec: dict[str, Any] = deployment(model(**source), pool.spec, "config")["spec"]["template"][
        "spec"
    ]
    return spec


def volume(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(dict(v) for v in spec["volumes"] if v["name"] == name)


def requests(container: dict[str, Any]) -> dict[str, str]:
    return dict(container["resources"]["requests"])


# ------------------------------------------------------------------ a claim, read in place


def test_a_claims_model_is_read_from_the_claim_not_copied() -> None:
    """Both containers mount the claim read-only inside the repository; the init
    container only links its entries beside the rendered config's mount point, so the
    emptyDir holds links and has a small bound."""
    spec = pod(storageUri="pvc://model-store/search/ranker")
    [fetch], [triton] = spec["initContainers"], spec["containers"]
    claim = {"name": "model-source", "mountPath": "/models/.source", "readOnly": True}
    assert claim in fetch["volumeMounts"]
    assert claim in triton["volumeMounts"]
    assert volume(spec, "model-source") == {
        "name": "model-source",
        "persistentVolumeClaim": {"claimName": "model-store", "readOnly": True},
    }
    assert fetch["command"][3:] == [
        "link-model",
        "/models/.source/search/ranker",
        "/models/ranker",
        "pvc://model-store/search/ranker",
    ]
    assert "args" not in fetch
    # The config is still mounted over the model's directory, which is the emptyDir's.
    assert {
        "name": "model-config",
        "mountPath": "/models/ranker/config.pbtxt",
        "subPath": "config.pbtxt",
        "readOnly": True,
    } in triton["volumeMounts"]
    assert volume(spec, "model-repository")["emptyDir"] == {"sizeLimit": "16Mi"}
    assert "ephemeral-storage" not in requests(fetch)
    assert "ephemeral-storage" not in requests(triton)


# ------------------------------------------------------------------ room for a copy


@pytest.mark.parametrize(
    "uri",
    ["s3://models/search/ranker", "gs://labs-models/ranker", "https://files.example/ranker"],
)
@pytest.mark.parametrize(
    ("size", "room"),
    [
        ("12Gi", "12903Mi"),  # 12288Mi and 5%, rounded up to a whole Mi
        ("100Gi", "105Gi"),  # 107520Mi, as the API server writes it
        ("10Mi", "74Mi"),  # the 64Mi floor of the margin
        ("1G", "1018Mi"),  # 953.7Mi and 64Mi
    ],
)
def test_a_declared_size_bounds_the_copy_and_is_requested(uri: str, size: str, room: str) -> None:
    spec = pod(storageUri=uri, size=size)
    [fetch], [triton] = spec["initContainers"], spec["containers"]
    assert volume(spec, "model-repository")["emptyDir"] == {"sizeLimit": room}
    assert requests(fetch)["ephemeral-storage"] == room
    assert requests(triton)["ephemeral-storage"] == room
    # A request, no limit: /tmp and the logs share the pod's storage and are not sized.
    assert "ephemeral-storage" not in fetch["resources"]["limits"]
    assert "ephemeral-storage" not in triton["resources"]["limits"]


def test_an_archive_has_room_for_itself_while_it_is_unpacked() -> None:
    spec = pod(storageUri="https://files.example/ranker.tar.gz", size="12Gi")
    [fetch], [triton] = spec["initContainers"], spec["containers"]
    assert volume(spec, "model-repository")["emptyDir"] == {"sizeLimit": "25805Mi"}
    assert requests(fetch)["ephemeral-storage"] == "25805Mi"
    # Once unpacked the archive is deleted: Triton's replica keeps only the files.
    assert requests(triton)["ephemeral-storage"] == "12903Mi"


def test_without_a_size_the_copy_is_unbounded_as_before() -> None:
    spec = pod(storageUri="s3://models/search/ranker")
    [fetch], [triton] = spec["initContainers"], spec["containers"]
    assert volume(spec, "model-repository")["emptyDir"] == {}
    assert requests(fetch) == {"cpu": "100m", "memory": "128Mi"}
    assert "ephemeral-storage" not in requests(triton)
    assert repository_room("s3://models/x", None).size_limit is None


def test_a_change_of_size_rolls_the_replicas() -> None:
    pool = TenantPool.model_validate(example("TenantPool", "critical"))

    def checksum(size: str) -> str:
        rendered = deployment(model(size=size), pool.spec, "config")
        return str(rendered["spec"]["template"]["metadata"]["annotations"])

    assert checksum("12Gi") != checksum("13Gi")


# ------------------------------------------------------------------ archives


@pytest.mark.parametrize(
    ("uri", "form"),
    [
        ("https://files.example/models/ranker.tar.gz", "tar.gz"),
        ("https://files.example/models/ranker.TGZ", "tar.gz"),
        ("https://files.example/ranker.tar", "tar"),
        ("https://files.example:8443/a/b/ranker.zip", "zip"),
        ("https://files.example/models/ranker", None),
        ("https://files.example/models/ranker.v2/", None),
        ("s3://models/ranker", None),
    ],
)
def test_an_https_url_ending_as_an_archive_is_downloaded_and_unpacked(
    uri: str, form: str | None
) -> None:
    assert archive_format(uri) == form
    plan = fetch_plan(uri, "ranker")
    if form is None:
        assert plan.args[0] == "copy"
        return
    assert plan.command[3:] == ["fetch-archive", "/models/ranker", "/models/.archive", form]
    assert plan.args == ["copyurl", "--config=/dev/null", "--stats-one-line", "-v", uri]


# ------------------------------------------------------------------ a CA bundle


@pytest.mark.parametrize(
    "uri",
    [
        "s3://models/search/ranker",
        "gs://labs-models/ranker",
        "https://files.example/ranker",
        "https://files.example/ranker.zip",
    ],
)
def test_a_ca_bundle_reaches_rclone_in_the_fetch_container_only(uri: str) -> None:
    bundle = {"name": "corporate-ca", "key": "bundle.pem"}
    spec = pod(storageUri=uri, caBundle=bundle)
    [fetch], [triton] = spec["initContainers"], spec["containers"]
    assert volume(spec, "model-ca") == {
        "name": "model-ca",
        "configMap": {"name": "corporate-ca", "items": [{"key": "bundle.pem", "path": "ca.crt"}]},
    }
    mount = {"name": "model-ca", "mountPath": "/etc/shoal/ca", "readOnly": True}
    assert mount in fetch["volumeMounts"]
    assert all(m["name"] != "model-ca" for m in triton["volumeMounts"])
    assert f"--ca-cert={CA_FILE}" in fetch["args"]
    assert CA_FILE == "/etc/shoal/ca/ca.crt"
    # Without one, the image's own CAs.
    plain = pod(storageUri=uri)
    assert not any(a.startswith("--ca-cert") for a in plain["initContainers"][0]["args"])
    assert all(v["name"] != "model-ca" for v in plain["volumes"])


def test_a_ca_bundles_key_defaults_to_ca_crt() -> None:
    bundle = model(caBundle={"name": "corporate-ca"}).spec.model.ca_bundle
    assert bundle == CaBundle(name="corporate-ca", key="ca.crt")


# ------------------------------------------------------------------ refusals, in words


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ({"storageUri": "pvc://model-store/ranker", "size": "12Gi"}, "size applies to a copied"),
        (
            {"storageUri": "pvc://model-store/ranker", "caBundle": {"name": "ca"}},
            "caBundle applies to a downloaded",
        ),
        # The schema's pattern refuses these first (the API server also quotes the rule's
        # words: tests/support/malformed.py).
        ({"size": "12GB"}, "spec.model.size"),
        ({"size": "1.5Gi"}, "spec.model.size"),
        ({"size": "512Ki"}, "must be from 1Mi to 1Pi"),
        ({"size": "2Pi"}, "must be from 1Mi to 1Pi"),
        ({"caBundle": {"name": "ca", "key": "..pem"}}, "must not be '.' nor start with '..'"),
        ({"caBundle": {"name": "ca", "key": "."}}, "must not be '.' nor start with '..'"),
        ({"caBundle": {"name": "ca", "key": "certs/ca.pem"}}, "spec.model.caBundle.key"),
        ({"caBundle": {"name": "Corporate_CA"}}, "name"),
        ({"storageUri": "s3://models/ranker.tar.gz"}, "only an https:// URL may name an archive"),
        ({"storageUri": "pvc://claim/ranker.zip"}, "only an https:// URL may name an archive"),
        ({"storageUri": "https://files.example/ranker.tar.xz"}, "must end in .tar, .tar.gz"),
        ({"storageUri": "https://files.example/ranker.7z"}, "must end in .tar, .tar.gz"),
        ({"storageUri": "https://files.example/model.onnx.gz"}, "must end in .tar, .tar.gz"),
    ],
)
def test_malformed_storage_is_refused_in_the_fields_words(
    source: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValidationError, match=words.replace(".", r"\.").replace("(", r"\(")):
        model(**source)


@pytest.mark.parametrize(
    "source",
    [
        {"size": "1Mi"},
        {"size": "1Pi"},
        {"size": "12000000000"},
        {"storageUri": "https://files.example/ranker.tar.gz", "size": "3G"},
        {"storageUri": "gs://labs-models/ranker", "caBundle": {"name": "ca", "key": "a.b-c_d"}},
        {"storageUri": "https://files.example/models/ranker.v2"},
    ],
)
def test_well_formed_storage_is_admitted(source: dict[str, Any]) -> None:
    model(**source)


# ------------------------------------------------------------------ the scripts, run


def _tools(kind: str, bin_dir: Path) -> Path:
    """A directory with exactly the programs the scripts may call, and rclone."""
    rclone = shutil.which("rclone")
    if rclone is None:
        if os.environ.get("CI"):
            pytest.fail("rclone is missing: `make system-deps`")
        pytest.skip("rclone is not installed")
    bin_dir.mkdir()
    (bin_dir / "rclone").symlink_to(rclone)
    programs = ("sh", "tar", "unzip", "ln", "rm", "mkdir")
    # GNU tar runs gzip for -z (busybox has it built in); Debian always has gzip.
    if kind == "busybox":
        busybox = Path("/bin/busybox")
        if not busybox.exists():
            if os.environ.get("CI"):
                pytest.fail("busybox is missing: `make system-deps`")
            pytest.skip("busybox is not installed")
        for name in programs:
            (bin_dir / name).symlink_to(busybox)
        return bin_dir
    for name in (*programs, "gzip"):
        found = shutil.which(name)
        if found is not None:
            (bin_dir / name).symlink_to(found)
    return bin_dir


@pytest.fixture(params=["busybox", "debian"])
def tools(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return _tools(str(request.param), tmp_path / "bin")


def run(
    plan: FetchPlan, root: Path, tools: Path, **replace: str
) -> subprocess.CompletedProcess[str]:
    """The init container's command and arguments as the kubelet runs them, with the
    repository's path moved under ``root`` and ``replace``'s arguments swapped."""

    def moved(arg: str) -> str:
        arg = replace.get(arg, arg)
        return str(root) + arg if arg.startswith("/models") else arg

    script = plan.command[:3]
    argv = [*script, *map(moved, plan.command[3:]), *map(moved, plan.args)]
    return subprocess.run(
        argv,
        env={"PATH": str(tools), "HOME": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _claim(root: Path) -> Path:
    source = root / "models" / ".source" / "ranker"
    (source / "1").mkdir(parents=True)
    (source / "1" / "model.py").write_text("weights")
    (source / "config.pbtxt").write_text('backend: "stale"')
    (source / "labels.txt").write_text("a\nb\n")
    (source / ".meta").write_text("{}")
    return source


def test_the_claims_entries_are_linked_but_its_config(tmp_path: Path, tools: Path) -> None:
    source = _claim(tmp_path)
    dest = tmp_path / "models" / "ranker"
    dest.mkdir()
    (dest / "stale").write_text("from a run before")
    plan = fetch_plan("pvc://model-store/ranker", "ranker")
    done = run(plan, tmp_path, tools)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in dest.iterdir()) == [".meta", "1", "labels.txt"]
    for entry in dest.iterdir():
        assert entry.is_symlink()
        assert os.readlink(entry) == f"{tmp_path}/models/.source/ranker/{entry.name}"
    assert "linked from the claim: 1 labels.txt .meta" in done.stdout
    # A retry links what the claim holds then.
    (source / "labels.txt").unlink()
    assert run(plan, tmp_path, tools).returncode == 0
    assert sorted(p.name for p in dest.iterdir()) == [".meta", "1"]


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("pvc://model-store/missing", "pvc://model-store/missing: no such directory in the claim"),
        ("pvc://model-store/empty", "pvc://model-store/empty: the directory holds no files"),
    ],
)
def test_a_claim_without_the_models_files_says_so(
    tmp_path: Path, tools: Path, uri: str, words: str
) -> None:
    (tmp_path / "models" / ".source" / "empty").mkdir(parents=True)
    (tmp_path / "models" / ".source" / "empty" / "config.pbtxt").write_text("")
    done = run(fetch_plan(uri, "ranker"), tmp_path, tools)
    assert done.returncode == 1
    assert words in done.stderr


def test_a_copy_starts_from_an_empty_directory(tmp_path: Path, tools: Path) -> None:
    """A retry finds the files of the try before; they are deleted first, so a file is
    never held twice (rclone writes a new copy beside the old one, then renames it)."""
    bucket = tmp_path / "bucket"
    (bucket / "1").mkdir(parents=True)
    (bucket / "1" / "model.py").write_text("weights")
    dest = tmp_path / "models" / "ranker"
    (dest / "1").mkdir(parents=True)
    (dest / "1" / "model.py").write_text("old weights")
    (dest / "1" / "gone.bin").write_text("a file the bucket no longer has")
    plan = fetch_plan("s3://models/ranker", "ranker")
    done = run(plan, tmp_path, tools, **{":s3:models/ranker": str(bucket)})
    assert done.returncode == 0, done.stderr
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == ["1", "1/model.py"]
    assert (dest / "1" / "model.py").read_text() == "weights"
    # Nothing to copy is still rclone's own failure, its exit code passed through.
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run(plan, tmp_path, tools, **{":s3:models/ranker": str(empty)})
    assert done.returncode == 9, done.stderr
    assert "nothing to transfer" in done.stderr


def _archives(directory: Path) -> None:
    """The model's version directories at an archive's root, in every form."""
    directory.mkdir()
    files = {"1/model.py": b"weights", "labels.txt": b"a\nb\n"}
    for name, mode in (("ranker.tar.gz", "w:gz"), ("ranker.tgz", "w:gz"), ("ranker.tar", "w")):
        with tarfile.open(directory / name, mode) as tar:  # type: ignore[call-overload]
            for path, data in files.items():
                info = tarfile.TarInfo(path)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    with zipfile.ZipFile(directory / "ranker.zip", "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    with tarfile.open(directory / "empty.tar.gz", "w:gz"):
        pass


@pytest.fixture
def files(tmp_path: Path) -> Any:
    _archives(tmp_path / "served")
    with https_files(tmp_path / "served", "127.0.0.1", tmp_path / "tls") as server:
        (tmp_path / "ca.crt").write_bytes(server.ca_pem)
        yield server


@pytest.mark.parametrize("name", ["ranker.tar.gz", "ranker.tgz", "ranker.tar", "ranker.zip"])
def test_an_archive_is_downloaded_with_the_ca_bundle_and_unpacked(
    tmp_path: Path, tools: Path, files: FileServer, name: str
) -> None:
    if not (tools / "unzip").exists():
        pytest.skip("no unzip here")
    uri = f"https://files.example/{name}"
    plan = fetch_plan(uri, "ranker", ca_bundle=CaBundle(name="ca"))
    ca = {f"--ca-cert={CA_FILE}": f"--ca-cert={tmp_path / 'ca.crt'}"}
    (tmp_path / "models").mkdir()
    done = run(plan, tmp_path, tools, **{uri: f"{files.url}/{name}"}, **ca)
    assert done.returncode == 0, done.stderr
    dest = tmp_path / "models" / "ranker"
    assert (dest / "1" / "model.py").read_text() == "weights"
    assert (dest / "labels.txt").read_text() == "a\nb\n"
    assert not (tmp_path / "models" / ".archive").exists(), "deleted once unpacked"
    # Without the bundle the private CA is not trusted, and rclone says so.
    plain = fetch_plan(uri, "ranker")
    done = run(plain, tmp_path, tools, **{uri: f"{files.url}/{name}"})
    assert done.returncode != 0
    assert "certificate" in done.stderr
    assert not dest.exists()


@pytest.mark.parametrize(
    ("name", "words"),
    [("empty.tar.gz", "the archive holds no files"), ("missing.zip", "404")],
)
def test_an_archive_without_the_models_files_says_so(
    tmp_path: Path, tools: Path, files: FileServer, name: str, words: str
) -> None:
    uri = f"https://files.example/{name}"
    plan = fetch_plan(uri, "ranker", ca_bundle=CaBundle(name="ca"))
    ca = {f"--ca-cert={CA_FILE}": f"--ca-cert={tmp_path / 'ca.crt'}"}
    (tmp_path / "models").mkdir()
    done = run(plan, tmp_path, tools, **{uri: f"{files.url}/{name}"}, **ca)
    assert done.returncode != 0
    assert words in done.stderr


@pytest.mark.parametrize("script", [COPY_SCRIPT, ARCHIVE_SCRIPT, LINK_SCRIPT])
def test_the_scripts_are_plain_sh_that_the_kubelet_leaves_alone(script: str) -> None:
    """POSIX sh (shellcheck), and nothing the kubelet would expand: it replaces $(NAME)
    in a container's command with the variable's value."""
    assert "$(" not in script
    assert "$$" not in script
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is missing: `make system-deps`")
        pytest.skip("shellcheck is not installed")
    done = subprocess.run(
        [shellcheck, "--shell=sh", "-"], input=script, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout
