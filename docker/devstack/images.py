"""The stack's container images, built on this machine from the artefacts `devstack fetch` caches.

No image registry needs to answer. The base is a Debian made here (`debootstrap --variant=minbase` of the
release and mirror apt already uses, imported with `docker import`), or `TOOLKIT_BASE_IMAGE` where a
registry serves one. On it, `dockerfiles/<service>/` holds each image's Dockerfile and start script:
Postgres 15 and Redis from Debian's packages, a Java 17 runtime, Kafka (KRaft) and Connect from the cached
Maven jars with Debezium, Apicurio's converter and the toolkit's plugins, Apicurio on a Java 21+ runtime,
and an OpenSearch node. The start scripts read the same variables as the official images
(`POSTGRES_*`, `KAFKA_*`, Debezium's `BOOTSTRAP_SERVERS`/`CONNECT_*`, `APICURIO_*`, `discovery.type`), so
docker/compose.yaml and `devstack.containers` configure either kind the same way.

Guarantees: an image's tag is the digest of everything that goes into it (its parent's tag, its folder's
files, the names and sizes of the artefacts copied in), so a changed pin or script gives a new tag and a
stale image is never taken for a current one; `build` rebuilds only the images whose tag is missing,
parents first; a failed build names the image and ends in its last build lines.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.artifacts import Artifacts
from devstack.errors import ImageBuildFailed, ImagesNotBuilt, PrerequisiteMissing
from devstack.services import REGISTRY_JAVA, java_at_least

log = logging.getLogger(__name__)

DOCKERFILES = Path(__file__).with_name("dockerfiles")
REPOSITORY = "kafka-toolkit"
# Every image and container the toolkit makes carries this label (with the digest or the stack's id).
LABEL = "org.kafka-toolkit"
BASE_NAME = "base"
# TOOLKIT_IMAGES: the images built here, or the upstream ones (where a registry answers).
IMAGE_SOURCES = ("built", "official")
DEFAULT_MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """One image: its folder under dockerfiles/, its parent (None: the base) and the artefacts copied
    into its build context (context path -> host file or folder)."""

    name: str
    parent: str | None
    inputs: Callable[[Artifacts], Mapping[str, Path]]


def _connect_plugins(arts: Artifacts) -> dict[str, Path]:
    folders = [Path(p) for p in arts.plugin_path.split(",")]
    return {f"plugins/{plugin.name}": plugin for folder in folders for plugin in sorted(folder.iterdir())}


def _registry_inputs(arts: Artifacts) -> dict[str, Path]:
    java_home = Path(java_at_least(REGISTRY_JAVA, "Apicurio Registry")).parents[1]
    return {"java": java_home, "apicurio": arts.apicurio_dir}


SPECS: tuple[ImageSpec, ...] = (
    ImageSpec("postgres", None, lambda arts: {}),
    ImageSpec("redis", None, lambda arts: {}),
    ImageSpec("jre", None, lambda arts: {}),
    ImageSpec("kafka", "jre", lambda arts: {"libs": arts.kafka_lib}),
    ImageSpec("connect", "kafka", _connect_plugins),
    ImageSpec("registry", None, _registry_inputs),
    ImageSpec(
        "opensearch", "jre", lambda arts: {"lib": arts.opensearch_lib, "launcher": arts.opensearch_launcher}
    ),
)
# The images a stack runs (jre is only a parent).
SERVICE_IMAGES = ("postgres", "redis", "kafka", "connect", "registry", "opensearch")


# ---------------------------------------------------------------- what to build (pure but for file listings)


@dataclass(frozen=True, slots=True)
class Base:
    """The Debian every image starts from: made here (suite, mirror) or an image a registry serves."""

    suite: str
    mirror: str
    external: str | None = None  # TOOLKIT_BASE_IMAGE: used as is, never built

    @property
    def tag(self) -> str:
        if self.external:
            return self.external
        digest = _digest([f"debootstrap minbase {self.suite} {self.mirror}".encode()])
        return f"{REPOSITORY}/{BASE_NAME}:{self.suite}-{digest}"

    @classmethod
    def from_machine(cls, environ: Mapping[str, str] | None = None) -> Base:
        env = os.environ if environ is None else environ
        return cls(
            suite=debian_suite(), mirror=debian_mirror(), external=env.get("TOOLKIT_BASE_IMAGE") or None
        )


def debian_suite(os_release: Path = Path("/etc/os-release")) -> str:
    """This machine's Debian release (bookworm): its packages are the ones the images install."""
    try:
        for line in os_release.read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip('"') or "bookworm"
    except OSError:
        pass
    return "bookworm"


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt already uses (deb822 `URIs:` or a one-line `deb URL suite main`)."""
    sources = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.sources"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for match in re.finditer(
            r"^(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+/debian)/?\s", text, re.MULTILINE
        ):
            return match.group(1)
    return DEFAULT_MIRROR


def _digest(parts: Iterable[bytes]) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.hexdigest()[:12]


def _files(root: Path) -> Iterator[tuple[str, Path]]:
    """(relative name, path) of every file under `root` (or `root` itself when it is a file), sorted."""
    if root.is_file():
        yield root.name, root
        return
    for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
        yield str(path.relative_to(root)), path


def _input_fingerprint(inputs: Mapping[str, Path]) -> list[bytes]:
    """Names and sizes of the copied artefacts: jars are named by version, so this changes with a pin."""
    lines = []
    for prefix, root in sorted(inputs.items()):
        if not root.exists():
            raise ImagesNotBuilt(
                f"{root} is missing (an artefact the images copy): run `devstack fetch` first"
            )
        lines += [f"{prefix}/{name} {path.lstat().st_size}".encode() for name, path in _files(root)]
    return lines


@dataclass(frozen=True, slots=True)
class PlannedImage:
    spec: ImageSpec
    tag: str
    parent_tag: str
    inputs: Mapping[str, Path]


def plan(arts: Artifacts, base: Base) -> dict[str, PlannedImage]:
    """Every image with its tag, parents before children."""
    planned: dict[str, PlannedImage] = {}
    for spec in SPECS:
        parent_tag = planned[spec.parent].tag if spec.parent else base.tag
        inputs = spec.inputs(arts)
        folder = DOCKERFILES / spec.name
        own = [f"{name}\n".encode() + path.read_bytes() for name, path in _files(folder)]
        digest = _digest([parent_tag.encode(), *own, *_input_fingerprint(inputs)])
        planned[spec.name] = PlannedImage(spec, f"{REPOSITORY}/{spec.name}:{digest}", parent_tag, inputs)
    return planned


# ---------------------------------------------------------------- the engine (docker-py)


def docker_client() -> Any:
    try:
        from docker.client import DockerClient
    except ImportError as exc:
        raise PrerequisiteMissing(
            "the Docker SDK is not installed: pip install 'kafka-toolkit[containers]'"
        ) from exc
    try:
        client = DockerClient.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # docker-py raises DockerException or requests' errors, wrapped variously
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        raise PrerequisiteMissing(
            f"no Docker engine answers at {where}: start one (`dockerd &`, or `make test-containers` starts "
            f"it) or set DOCKER_HOST ({exc.__class__.__name__})"
        ) from exc
    return client


def image_exists(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def missing(
    client: Any, planned: Mapping[str, PlannedImage], names: Iterable[str] = SERVICE_IMAGES
) -> list[str]:
    """The tags of `names` this engine lacks (a stale image counts as missing: its tag is another)."""
    return [planned[n].tag for n in names if not image_exists(client, planned[n].tag)]


def build(
    arts: Artifacts,
    base: Base | None = None,
    *,
    client: Any = None,
    progress: Callable[[str], None] = log.info,
) -> dict[str, PlannedImage]:
    """Build the base and every image whose tag is missing; return the plan."""
    client = client or docker_client()
    base = base or Base.from_machine()
    planned = plan(arts, base)
    if not image_exists(client, base.tag):
        if base.external:
            raise ImagesNotBuilt(
                f"TOOLKIT_BASE_IMAGE={base.external} is not on this engine: docker pull it first"
            )
        progress(f"base {base.tag}: debootstrap {base.suite} from {base.mirror}")
        build_base(client, base)
    for image in planned.values():
        if image_exists(client, image.tag):
            progress(f"{image.spec.name}: {image.tag} (up to date)")
            continue
        progress(f"{image.spec.name}: building {image.tag}")
        _build_one(client, image)
    return planned


def build_base(client: Any, base: Base) -> None:
    """debootstrap a minimal Debian and import it as the base image (needs root and debootstrap)."""
    if shutil.which("debootstrap") is None:
        raise PrerequisiteMissing("debootstrap is not installed: apt-get install -y debootstrap")
    with tempfile.TemporaryDirectory(prefix="toolkit-base-") as tmp:
        root = Path(tmp) / "root"
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", base.suite, str(root), base.mirror],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise ImageBuildFailed(f"debootstrap of {base.suite} from {base.mirror} failed:\n{tail}")
        archive = Path(tmp) / "root.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(archive), "."], check=True)
        repository, tag = base.tag.rsplit(":", 1)
        client.api.import_image_from_file(str(archive), repository=repository, tag=tag)
    if not image_exists(client, base.tag):
        raise ImageBuildFailed(f"docker import did not produce {base.tag}")


def _context(image: PlannedImage, into: Any) -> None:
    """The build context as a tar: the image's folder, then its artefacts (scripts executable)."""
    with tarfile.open(fileobj=into, mode="w") as tar:
        for name, path in _files(DOCKERFILES / image.spec.name):
            info = tar.gettarinfo(str(path), arcname=name)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            with path.open("rb") as fh:
                tar.addfile(info, fh)
        for prefix, root in image.inputs.items():
            tar.add(str(root), arcname=prefix)


def _build_one(client: Any, image: PlannedImage) -> None:
    lines: list[str] = []
    with tempfile.TemporaryFile() as context:
        _context(image, context)
        context.seek(0)
        stream = client.api.build(
            fileobj=context, custom_context=True, tag=image.tag, buildargs={"BASE": image.parent_tag},
            labels={LABEL: image.spec.name}, rm=True, forcerm=True, decode=True,
        )  # fmt: skip
        for chunk in stream:
            if "error" in chunk:
                tail = "\n".join(lines[-15:])
                raise ImageBuildFailed(f"building {image.tag} failed: {chunk['error'].strip()}\n{tail}")
            lines += [line for line in chunk.get("stream", "").splitlines() if line.strip()]


# The variables docker/compose.yaml's `image:` entries read, by image.
COMPOSE_VARIABLES = {name: f"TOOLKIT_IMAGE_{name.upper()}" for name in SERVICE_IMAGES}


def compose_env(planned: Mapping[str, PlannedImage]) -> dict[str, str]:
    """The env file `docker-compose --env-file` reads (pure)."""
    return {variable: planned[name].tag for name, variable in COMPOSE_VARIABLES.items()}


def write_image_env(path: Path, planned: Mapping[str, PlannedImage]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in compose_env(planned).items()))
