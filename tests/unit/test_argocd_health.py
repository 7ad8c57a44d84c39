"""manifests/argocd/argocd-cm-health.yaml is generated from the Lua scripts next to it
and must not drift from them. (What the scripts decide, on real objects, is
tests/cluster/test_gitops_health.py's business.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from e2e import argocd_health
from shoal.api.crd import KINDS


def test_the_committed_fragment_is_generated_from_the_scripts() -> None:
    assert argocd_health.FRAGMENT.read_text() == argocd_health.render(), (
        f"{argocd_health.FRAGMENT} is stale: run `python -m e2e.argocd_health --write`"
    )
    assert argocd_health.main(["--check"]) == 0


def test_every_kind_has_its_key_and_carries_its_script_verbatim() -> None:
    fragment = yaml.safe_load(argocd_health.FRAGMENT.read_text())
    assert (fragment["apiVersion"], fragment["kind"]) == ("v1", "ConfigMap")
    assert fragment["metadata"]["name"] == "argocd-cm"
    assert "namespace" not in fragment["metadata"]  # the patch fits any namespace
    data = fragment["data"]
    expected = {f"resource.customizations.health.shoal.dev_{kind.name}" for kind in KINDS}
    assert set(data) == expected
    shared = (argocd_health.SCRIPTS / "shoal.dev.lua").read_text()
    for kind in KINDS:
        own = argocd_health.SCRIPTS / f"{kind.name.lower()}.lua"
        script = own.read_text() if own.exists() else shared
        assert data[argocd_health.key(kind.name)] == script, kind.name


def test_an_edited_script_makes_the_fragment_stale(tmp_path: Path) -> None:
    """The drift check can fail: a kind's own script replaces the shared one for it."""
    copy = tmp_path / "health"
    shutil.copytree(argocd_health.SCRIPTS, copy)
    (copy / "batchpolicy.lua").write_text('return {status = "Healthy", message = "edited"}\n')
    rendered = argocd_health.render(copy)
    assert rendered != argocd_health.FRAGMENT.read_text()
    data = yaml.safe_load(rendered)["data"]
    assert data[argocd_health.key("BatchPolicy")] == (copy / "batchpolicy.lua").read_text()
    assert data[argocd_health.key("TenantPool")] == (copy / "shoal.dev.lua").read_text()


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("stray.lua", "return {}\n", "scripts for no kind"),
        ("inferencemodel.lua", "  return {}\n", "literal block"),
    ],
)
def test_scripts_the_fragment_cannot_carry_are_refused(
    tmp_path: Path, name: str, text: str, error: str
) -> None:
    copy = tmp_path / "health"
    shutil.copytree(argocd_health.SCRIPTS, copy)
    (copy / name).write_text(text)
    with pytest.raises(ValueError, match=error):
        argocd_health.render(copy)


def test_the_scripts_use_no_library_argo_cd_leaves_closed() -> None:
    """Argo CD opens only base, table, package and a safe subset of os for health
    scripts: a call into string, io or debug fails there at run time."""
    for path in argocd_health.SCRIPTS.glob("*.lua"):
        code = "\n".join(line.split("--", 1)[0] for line in path.read_text().splitlines())
        for library in ("string.", "io.", "debug.", ":format(", ":find(", ":match("):
            assert library not in code, f"{path.name} uses {library}"
