"""Errors of the local stack runner; each message names the missing piece and the fix."""

from __future__ import annotations

from kafkakit.errors import ToolkitError


class StackError(ToolkitError):
    """Root of the stack runner's errors."""


class PrerequisiteMissing(StackError):
    """A binary the stack needs (java, mvn, postgres, redis-server) is not installed."""


class ArtifactFetchFailed(StackError):
    """Maven could not resolve or download a JVM artefact."""


class PortTaken(StackError):
    """A configured port is already in use by another program."""


class ServiceNotReady(StackError):
    """A service did not answer its readiness probe in time; the message carries its log tail."""


class BackendUnavailable(StackError):
    """The stack backend asked for (TOOLKIT_STACK) cannot run here, or an external stack does not answer."""


class ImagesNotBuilt(StackError):
    """An image the container stack runs is not on the engine (or is stale: its inputs changed)."""


class ImageBuildFailed(StackError):
    """`devstack images build` failed; the message names the image and ends in its last build lines."""
