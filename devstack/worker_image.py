"""The worker image the loopback Docker daemon runs: busybox alone, imported from the host's static busybox
(no registry, no pull), tagged as each image the local stack names."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

import docker
import docker.errors

from devstack.docker_host import DockerHostError, DockerHostUnavailable

WORKER_IMAGE = "openalice/worker:dev"
# Tags the local stack runs; all point at the one busybox worker image unless a real image exists.
WORKER_IMAGES = {"renderer": "openalice/renderer:dev", "anim": "openalice/anim:dev"}
WORKER_CMD = 'CMD ["/bin/sleep","86400"]'
BUSYBOX = Path("/usr/bin/busybox")
BUSYBOX_APPLETS = ("sh", "sleep", "httpd", "echo", "cat", "ls", "env", "true")


def ensure_worker_image(client: docker.DockerClient, tag: str = WORKER_IMAGE) -> str:
    """Import a busybox-only image as `tag` (CMD sleep 86400) unless the daemon already has it."""
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    repository, version = _split_tag(tag)
    result = client.api.import_image_from_data(
        _busybox_rootfs(), repository=repository, tag=version, changes=[WORKER_CMD]
    )
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        raise DockerHostError(f"importing {tag} failed: {result}") from None
    return tag


def ensure_worker_images(client: docker.DockerClient) -> dict[str, str]:
    """Tag the worker image as each of `WORKER_IMAGES` that is missing; return kind -> tag."""
    image = client.images.get(ensure_worker_image(client))
    for tag in WORKER_IMAGES.values():
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            image.tag(*_split_tag(tag))
    return dict(WORKER_IMAGES)


def _split_tag(tag: str) -> tuple[str, str]:
    repository, _, version = tag.rpartition(":")
    if not repository or "/" in version:  # no tag, or the colon was a registry's port
        return tag, "latest"
    return repository, version


def _busybox_rootfs() -> bytes:
    """A tar of /bin/busybox plus applet symlinks and /tmp, owned by root."""
    if not BUSYBOX.is_file() or not _is_static_elf(BUSYBOX):
        raise DockerHostUnavailable(f"{BUSYBOX} is missing or not statically linked: `apt-get install busybox-static`")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, mode in (("bin", 0o755), ("tmp", 0o1777)):
            directory = tarfile.TarInfo(name)
            directory.type, directory.mode = tarfile.DIRTYPE, mode
            archive.addfile(directory)
        binary = tarfile.TarInfo("bin/busybox")
        binary.size, binary.mode = BUSYBOX.stat().st_size, 0o755
        with BUSYBOX.open("rb") as source:
            archive.addfile(binary, source)
        for applet in BUSYBOX_APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            archive.addfile(link)
    return buffer.getvalue()


def _is_static_elf(path: Path) -> bool:
    """Whether `path` is a 64-bit little-endian ELF without an interpreter (PT_INTERP)."""
    with path.open("rb") as elf:
        header = elf.read(64)
        if len(header) < 64 or header[:6] != b"\x7fELF\x02\x01":
            return False
        (phoff,) = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        elf.seek(phoff)
        table = elf.read(phentsize * phnum)
    pt_interp = 3
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != pt_interp for i in range(phnum))
