"""`devstack up|down|status|fetch|images|containers`: the local stack from the command line (what `make up` runs).

Exit codes: 0 ok; 1 a service is down (status) or did not become ready (up); 2 a prerequisite is
missing or an artefact could not be fetched.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from devstack import stack
from devstack.artifacts import fetch_all
from devstack.config import TOPOLOGIES, StackConfig
from devstack.environment import VARIABLES
from devstack.errors import (
    ArtifactFetchFailed,
    ImageBuildFailed,
    ImagesNotBuilt,
    PortTaken,
    PrerequisiteMissing,
    ServiceNotReady,
    StackError,
)
from kafkakit.environment import refuse_bad_settings
from kafkakit.logs import configure_cli_logging
from kafkakit.secrets import masked

console = Console(stderr=True)


def _up(config: StackConfig, _: argparse.Namespace) -> int:
    result = stack.up(config)
    table = Table(title="local stack ready", title_justify="left")
    table.add_column("service")
    table.add_column("ready after", justify="right")
    for name, seconds in result.ready_seconds.items():
        table.add_row(name, f"{seconds:.1f}s")
    console.print(table)
    console.print(f"whole stack ready in {result.total_seconds:.1f}s; endpoints in {config.env_file}:")
    for key, value in result.endpoints.items():  # PG_SECURE_DSN holds a password: the file has it
        print(f"export {key}={masked(value)}")
    return 0


def _down(config: StackConfig, _: argparse.Namespace) -> int:
    stopped = stack.down(config)
    console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def _status(config: StackConfig, args: argparse.Namespace) -> int:
    states = stack.status(config)
    total = sum(s.rss_bytes for s in states)
    if args.json:
        print(json.dumps({"services": [_as_dict(s) for s in states],
                          "total_rss_bytes": total}, indent=2))  # fmt: skip
    else:
        table = Table(title=f"local stack ({config.state_dir})", title_justify="left")
        for column in ("service", "pid", "port", "ready", "rss"):
            table.add_column(column)
        for s in states:
            table.add_row(
                s.name,
                str(s.pid or "-"),
                str(s.port or "-"),
                "yes" if s.ready else "NO",
                f"{s.rss_bytes / 2**20:.0f} MiB",
            )
        table.add_row("total", "", "", "", f"{total / 2**20:.0f} MiB")
        console.print(table)
    return 0 if all(s.ready for s in states) else 1


def _as_dict(state: stack.ServiceState) -> dict[str, object]:
    return {
        "name": state.name,
        "pid": state.pid,
        "ready": state.ready,
        "rss_bytes": state.rss_bytes,
        "port": state.port,
    }


def _fetch(_: StackConfig, __: argparse.Namespace) -> int:
    from materializers.spark.session import warm_class_archive

    arts = fetch_all()
    console.print(f"artefacts cached under {arts.root}")
    # A materializer driver restarted on this machine maps Spark's classes instead of loading them.
    archive = warm_class_archive()
    if archive is not None:
        console.print(f"Spark driver class archive: {archive}")
    return 0


def _images_build(_: StackConfig, args: argparse.Namespace) -> int:
    from devstack import images

    started = time.monotonic()
    planned = images.build(fetch_all(), progress=console.print)
    console.print(f"images ready in {time.monotonic() - started:.0f}s")
    if args.env_file:
        images.write_image_env(Path(args.env_file), planned)
        console.print(f"image names for docker compose in {args.env_file}")
    return 0


def _images_list(_: StackConfig, args: argparse.Namespace) -> int:
    from devstack import images
    from devstack.artifacts import Artifacts, cache_root
    from devstack.pins import Pins

    client = images.docker_client()
    planned = images.plan(Artifacts(cache_root(), Pins.load()), images.Base.from_machine())
    table = Table(title="the stack's images", title_justify="left")
    for column in ("image", "tag", "built", "size"):
        table.add_column(column)
    for name, image in planned.items():
        present = images.image_exists(client, image.tag)
        size = client.images.get(image.tag).attrs.get("Size", 0) if present else 0
        table.add_row(
            name, image.tag, "yes" if present else "NO", f"{size / 2**20:.0f} MiB" if present else "-"
        )
    console.print(table)
    return 0 if not images.missing(client, planned) else 1


def _containers_prune(_: StackConfig, __: argparse.Namespace) -> int:
    from devstack import images
    from devstack.containers import prune

    removed = prune(images.docker_client())
    console.print("removed: " + (", ".join(removed) if removed else "nothing was left"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devstack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--topology",
        choices=sorted(TOPOLOGIES),
        help="single (default: one broker, one Connect worker, Spark local[*]; state in .stack) or cluster "
        "(3 KRaft brokers, 2 Connect workers, a Spark master with 2 workers; state in .stack-cluster); "
        "env STACK_TOPOLOGY",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "up",
        help="start Postgres, Kafka, Connect+Debezium, Redis and Apicurio (and the cluster's "
        "further nodes); write <state>/env",
    ).set_defaults(run=_up)
    sub.add_parser("down", help="stop everything the stack started; leaves no process behind").set_defaults(
        run=_down
    )
    st = sub.add_parser(
        "status", help="each service's pid, port, readiness and memory; exit 1 if one is down"
    )
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(run=_status)
    sub.add_parser("fetch", help="download the JVM artefacts from Maven Central into the cache").set_defaults(
        run=_fetch
    )
    images = sub.add_parser("images", help="the container images, built here from the cached artefacts")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    build = images_sub.add_parser(
        "build", help="build the base (debootstrap) and every image whose inputs changed; the rest is kept"
    )
    build.add_argument(
        "--env-file", help="also write the image names as TOOLKIT_IMAGE_<SERVICE>=... (compose)"
    )
    build.set_defaults(run=_images_build)
    images_sub.add_parser(
        "list", help="each image's tag, whether it is built, its size; exit 1 if one is missing"
    ).set_defaults(run=_images_list)
    containers = sub.add_parser("containers", help="the containers a test session or the demo started")
    containers_sub = containers.add_subparsers(dest="containers_command", required=True)
    containers_sub.add_parser(
        "prune",
        help="remove the containers and networks a killed session left (Ryuk's job; Ryuk cannot be pulled here)",
    ).set_defaults(run=_containers_prune)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (refused := refuse_bad_settings("devstack", VARIABLES, parser, args)) is not None:
        return refused
    configure_cli_logging(logging.INFO, fmt="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        config = StackConfig.from_env()
        if args.topology:
            config = config.with_topology(args.topology)
        return int(args.run(config, args))
    except (PrerequisiteMissing, ArtifactFetchFailed, ImagesNotBuilt) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    except (ServiceNotReady, PortTaken, ImageBuildFailed, StackError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
