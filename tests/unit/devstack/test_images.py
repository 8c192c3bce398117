"""What `devstack images build` would build, without an engine: the Debian it starts from, each image's
tag as the digest of its inputs (so a changed script or artefact gives a new tag, down to its children),
the build context's content, and the env file docker/compose.yaml reads."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from devstack import images
from devstack.artifacts import Artifacts
from devstack.errors import ImagesNotBuilt
from devstack.pins import Pins

BASE = images.Base(suite="bookworm", mirror="http://deb.debian.org/debian")


@pytest.fixture
def arts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Artifacts:
    """An artefact cache with one small file where each image copies a folder, and a copy of the
    dockerfiles that a test may edit."""
    cache = Artifacts(tmp_path / "cache", Pins.load())
    folders = [cache.kafka_lib, cache.apicurio_dir, cache.opensearch_lib, cache.opensearch_launcher]
    folders += [Path(p) / "some-plugin" for p in cache.plugin_path.split(",")]
    for index, folder in enumerate(folders):
        folder.mkdir(parents=True)
        (folder / f"part-{index}.jar").write_bytes(b"x" * (index + 1))
    java_home = tmp_path / "java21"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    monkeypatch.setattr(images, "java_at_least", lambda feature, why: str(java_home / "bin" / "java"))
    dockerfiles = tmp_path / "dockerfiles"
    shutil.copytree(images.DOCKERFILES, dockerfiles)
    monkeypatch.setattr(images, "DOCKERFILES", dockerfiles)
    return cache


def test_every_image_is_tagged_by_its_inputs_and_parents_come_first(arts: Artifacts) -> None:
    planned = images.plan(arts, BASE)
    assert list(planned) == ["postgres", "redis", "jre", "kafka", "connect", "registry", "opensearch"]
    assert planned["kafka"].parent_tag == planned["jre"].tag
    assert planned["connect"].parent_tag == planned["kafka"].tag
    assert planned["postgres"].parent_tag == BASE.tag
    assert all(p.tag.startswith(f"kafka-toolkit/{name}:") for name, p in planned.items())
    assert images.plan(arts, BASE) == planned, "the same inputs give the same tags"
    assert sorted(planned["connect"].inputs) == ["plugins/some-plugin"], (
        "every plugin folder on Connect's plugin.path is copied under plugins/"
    )


def test_a_changed_script_gives_the_image_and_its_children_new_tags(arts: Artifacts) -> None:
    before = images.plan(arts, BASE)
    script = images.DOCKERFILES / "kafka" / "entrypoint.sh"
    script.write_text(script.read_text() + "\n# changed\n")
    after = images.plan(arts, BASE)
    assert after["kafka"].tag != before["kafka"].tag
    assert after["connect"].tag != before["connect"].tag, "a child follows its parent"
    assert after["postgres"].tag == before["postgres"].tag and after["jre"].tag == before["jre"].tag


def test_a_changed_artefact_or_base_gives_new_tags(arts: Artifacts) -> None:
    before = images.plan(arts, BASE)
    (arts.kafka_lib / "kafka-clients-9.9.9.jar").write_bytes(b"new")
    assert images.plan(arts, BASE)["kafka"].tag != before["kafka"].tag
    other_base = images.Base(suite="trixie", mirror=BASE.mirror)
    assert images.plan(arts, other_base)["postgres"].tag != before["postgres"].tag


def test_a_missing_artefact_names_the_folder_and_the_fix(arts: Artifacts) -> None:
    shutil.rmtree(arts.kafka_lib)
    with pytest.raises(ImagesNotBuilt, match=r"kafka-.*lib is missing .* run `devstack fetch` first"):
        images.plan(arts, BASE)


def test_the_build_context_holds_the_folder_and_the_artefacts_with_scripts_executable(
    arts: Artifacts,
) -> None:
    context = io.BytesIO()
    images._context(images.plan(arts, BASE)["kafka"], context)
    context.seek(0)
    with tarfile.open(fileobj=context) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert {"Dockerfile", "entrypoint.sh", "ready.sh", "log4j2.properties", "libs/part-0.jar"} <= set(members)
    assert members["entrypoint.sh"].mode == 0o755 and members["Dockerfile"].mode == 0o644


def test_compose_reads_one_variable_per_service_image(arts: Artifacts) -> None:
    planned = images.plan(arts, BASE)
    env = images.compose_env(planned)
    assert env["TOOLKIT_IMAGE_CONNECT"] == planned["connect"].tag
    assert set(env) == {f"TOOLKIT_IMAGE_{n.upper()}" for n in images.SERVICE_IMAGES}
    assert "TOOLKIT_IMAGE_JRE" not in env, "the runtime is a parent only"


def test_the_base_is_the_machines_debian_or_the_image_named(tmp_path: Path) -> None:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\n"
    )
    assert images.debian_mirror(apt) == "http://mirror.example/debian"
    (apt / "sources.list").write_text("deb [arch=amd64] http://other.example/debian bookworm main\n")
    assert images.debian_mirror(apt) == "http://other.example/debian", "sources.list is read first"
    assert images.debian_mirror(tmp_path / "none") == images.DEFAULT_MIRROR
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian"\nVERSION_CODENAME=trixie\n')
    assert images.debian_suite(release) == "trixie"
    assert (
        images.Base.from_machine({"TOOLKIT_BASE_IMAGE": "debian:bookworm-slim"}).tag == "debian:bookworm-slim"
    )
    assert BASE.tag.startswith("kafka-toolkit/base:bookworm-")
