"""A worker image that boots: up about 2 s after it starts, and says so through its HEALTHCHECK.

Made with `docker import --change` from the busybox rootfs `make run` builds its workers from (no registry can be
reached); the engine keeps the healthcheck in the image's config, as a Dockerfile's HEALTHCHECK would.
"""

from __future__ import annotations

from typing import Any

from devstack.worker_image import _busybox_rootfs

BOOT_CHANGES = [
    'CMD ["/bin/sh", "-c", "sleep 2; echo up > /tmp/up; exec sleep 86400"]',
    'HEALTHCHECK --interval=1s --timeout=1s --retries=30 CMD ["/bin/sh", "-c", "cat /tmp/up"]',
]


def import_booting_image(docker_client: Any, image: str) -> None:
    """Import `image` (repository:tag) into the engine `docker_client` speaks to."""
    repository, tag = image.rsplit(":", 1)
    docker_client.api.import_image_from_data(_busybox_rootfs(), repository=repository, tag=tag, changes=BOOT_CHANGES)
