"""A loopback-only Docker daemon behind mutual TLS, for the tests and the local stack.

python -m devstack.docker_host start --state-dir .local/docker   # prints eval-able exports
python -m devstack.docker_host status --state-dir .local/docker
python -m devstack.docker_host stop --state-dir .local/docker

Its certificates are `docker_tls`'s, its clients `docker_clients`', the image it runs `worker_image`'s.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
import requests

from devstack.docker_clients import server_api_version, tls_client
from devstack.docker_tls import TlsMaterial, generate_tls_material, utcnow, write_atomically

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 20.0
# The daemon's own unix sockets live under the exec root; a sun_path holds at most 107 bytes.
MAX_EXEC_ROOT_LENGTH = 70
# Extra places to look for the daemon's binaries: /usr/sbin is often missing from a user's PATH.
DAEMON_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_MNT_DETACH = 2


class DockerHostError(RuntimeError):
    """The TLS Docker host could not be started, reused or stopped."""


class DockerHostUnavailable(DockerHostError):
    """This machine lacks what the TLS Docker host needs (dockerd, root, busybox-static)."""


# --- the daemon ------------------------------------------------------------------------------


@dataclass
class TlsDockerHost:
    """A running dockerd listening on `host` (tcp://127.0.0.1:PORT) behind mutual TLS."""

    host: str
    port: int
    pid: int
    state_dir: Path
    cert_path: Path
    data_root: Path
    exec_root: Path
    pidfile: Path
    log_file: Path
    reused: bool = False
    api_version: str | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def env(self) -> dict[str, str]:
        """The DOCKER_* variables that point a Docker client (CLI or SDK) at this daemon."""
        return {
            "DOCKER_HOST": self.host,
            "DOCKER_TLS_VERIFY": "1",
            "DOCKER_CERT_PATH": str(self.cert_path),
        }

    def client(self, timeout: int = 60) -> docker.DockerClient:
        """A `docker.DockerClient` that presents our client cert and trusts only our CA."""
        if self.api_version is None:
            self.api_version = server_api_version(self.host, self.cert_path, timeout)
        return tls_client(self.host, self.cert_path, self.api_version, timeout)

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM dockerd, wait up to `timeout` s (then SIGKILL), and remove its pidfile and mounts."""
        if _is_running(self.pid):
            self._kill_containers()
            os.kill(self.pid, signal.SIGTERM)
            if not self._wait_exit(timeout):
                _log(f"dockerd (pid {self.pid}) ignored SIGTERM for {timeout:.0f} s; killing it")
                # Its containerd dies with it (parent-death signal); containers' shims do not.
                with suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self._wait_exit(5.0)
        elif self._process is not None:
            self._process.poll()
        _unmount_under(self.exec_root, self.data_root)
        self.pidfile.unlink(missing_ok=True)
        _state_file(self.state_dir).unlink(missing_ok=True)

    def _kill_containers(self) -> None:
        # The worker image's PID 1 (sleep) ignores SIGTERM, so dockerd's shutdown would wait out
        # each running container's 10 s stop timeout before killing it anyway.
        try:
            client = self.client(timeout=5)
            try:
                for container in client.containers.list():
                    container.kill()
            finally:
                client.close()
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            pass  # not answering, or a container already gone: the daemon's shutdown handles it

    def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None:
                if self._process.poll() is not None:
                    return True
            elif not _is_running(self.pid):
                return True
            time.sleep(0.05)
        return False


def check_prerequisites() -> str:
    """Return the dockerd path, or raise `DockerHostUnavailable` naming the fix."""
    search_path = os.pathsep.join([os.environ.get("PATH", ""), DAEMON_PATH])
    missing = [name for name in ("dockerd", "containerd", "runc") if not shutil.which(name, path=search_path)]
    if missing:
        raise DockerHostUnavailable(
            f"{', '.join(missing)} not found: install Docker's daemon with `apt-get install docker.io`"
        )
    if os.geteuid() != 0:
        raise DockerHostUnavailable("dockerd must run as root (try the tests or the CLI with sudo)")
    return str(shutil.which("dockerd", path=search_path))


def start_tls_docker_host(
    state_dir: Path, port: int | None = None, timeout: float = START_TIMEOUT_SECONDS
) -> TlsDockerHost:
    """Start (or reuse) a dockerd for `state_dir` on 127.0.0.1 with mutual TLS, and wait until it answers."""
    dockerd = check_prerequisites()
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _locked(state_dir / "start.lock"):
        material = generate_tls_material(state_dir / "certs")
        previous = load_tls_docker_host(state_dir)
        if previous is not None and _is_running(previous.pid):
            try:
                previous.api_version = server_api_version(previous.host, previous.cert_path, 5)
            except (docker.errors.DockerException, requests.exceptions.RequestException):
                _log(f"dockerd (pid {previous.pid}) for {state_dir} is not answering; restarting it")
                previous.stop()
            else:
                if port is not None and port != previous.port:
                    raise DockerHostError(
                        f"a TLS Docker host for {state_dir} already runs on {previous.host}; stop it first"
                    )
                previous.reused = True
                _log(f"reusing TLS Docker host on {previous.host} (pid {previous.pid})")
                return previous
        _clear_leftovers(state_dir)
        return _launch(dockerd, state_dir, material, port or _free_port(), timeout)


def load_tls_docker_host(state_dir: Path) -> TlsDockerHost | None:
    """The host recorded in `state_dir` by a previous start (alive or not), or None."""
    try:
        state = json.loads(_state_file(state_dir.resolve()).read_text())
        return TlsDockerHost(
            host=state["host"],
            port=int(state["port"]),
            pid=int(state["pid"]),
            state_dir=Path(state["state_dir"]),
            cert_path=Path(state["cert_path"]),
            data_root=Path(state["data_root"]),
            exec_root=Path(state["exec_root"]),
            pidfile=Path(state["pidfile"]),
            log_file=Path(state["log_file"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _launch(dockerd: str, state_dir: Path, material: TlsMaterial, port: int, timeout: float) -> TlsDockerHost:
    host = _host_in(state_dir, port, pid=0)
    # Our own config file, so a machine-wide /etc/docker/daemon.json does not apply; the key
    # path keeps dockerd from writing its identity key to /etc/docker/key.json.
    config_file = state_dir / "daemon.json"
    config_file.write_text(json.dumps({"deprecated-key-path": str(state_dir / "key.json")}) + "\n")
    command = [
        dockerd,
        "--config-file", str(config_file),
        "--tlsverify",
        "--tlscacert", str(material.ca_cert),
        "--tlscert", str(material.server_cert),
        "--tlskey", str(material.server_key),
        # Only this host: no unix socket at /var/run/docker.sock.
        "-H", host.host,
        "--bridge=none",
        "--iptables=false",
        "--ip-forward=false",
        "--ip-masq=false",
        "--data-root", str(host.data_root),
        "--exec-root", str(host.exec_root),
        "--pidfile", str(host.pidfile),
        # A daemon sharing the system containerd (when one runs) keeps its containers apart.
        "--containerd-namespace", f"openalice-{_short_hash(state_dir)}",
        "--containerd-plugins-namespace", f"openalice-{_short_hash(state_dir)}-plugins",
        "--shutdown-timeout", "5",
    ]  # fmt: skip
    environment = dict(os.environ, PATH=os.pathsep.join([os.environ.get("PATH", ""), DAEMON_PATH]))
    _log(f"starting TLS Docker host on {host.host} ...")
    started = time.monotonic()
    with host.log_file.open("wb") as log:
        # Its own session: the daemon outlives the CLI and ignores the terminal's Ctrl-C.
        process = subprocess.Popen(  # noqa: S603 - fixed argv: our dockerd and our own flags  # nosec B603
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=state_dir,
            env=environment,
            start_new_session=True,
        )
    host.pid = process.pid
    host._process = process
    deadline = started + timeout
    while True:
        if process.poll() is not None:
            host.stop()  # it may have mounted its data root before failing
            raise DockerHostError(
                f"dockerd exited with code {process.returncode} while starting; "
                f"{host.log_file} ends with:\n{_log_tail(host.log_file)}"
            )
        try:
            host.api_version = server_api_version(host.host, host.cert_path, 2)
            break
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            if time.monotonic() > deadline:
                host.stop()
                raise DockerHostError(
                    f"dockerd did not answer on {host.host} within {timeout:.0f} s; "
                    f"{host.log_file} ends with:\n{_log_tail(host.log_file)}"
                ) from None
            time.sleep(0.1)
    _write_state(host)
    _log(f"ready in {time.monotonic() - started:.1f} s (pid {host.pid})")
    return host


def _host_in(state_dir: Path, port: int, pid: int) -> TlsDockerHost:
    return TlsDockerHost(
        host=f"tcp://127.0.0.1:{port}",
        port=port,
        pid=pid,
        state_dir=state_dir,
        cert_path=state_dir / "certs",
        data_root=state_dir / "data",
        exec_root=_exec_root(state_dir),
        pidfile=state_dir / "docker.pid",
        log_file=state_dir / "dockerd.log",
    )


def _clear_leftovers(state_dir: Path) -> None:
    """Stop a dockerd still holding this state dir, and clear what a killed one left behind."""
    exec_root = _exec_root(state_dir)
    pid = _read_pid(state_dir / "docker.pid")
    if _is_running(pid, "dockerd"):
        _log(f"stopping dockerd (pid {pid}) left behind in {state_dir}")
        _host_in(state_dir, port=0, pid=pid).stop()
    # dockerd refuses to start, and waits 15 s for "its" containerd, while a pidfile names a pid
    # that still exists, even as a zombie that init has not reaped yet.
    (state_dir / "docker.pid").unlink(missing_ok=True)
    containerd_pidfile = exec_root / "containerd" / "containerd.pid"
    if not _is_running(_read_pid(containerd_pidfile), "containerd"):
        containerd_pidfile.unlink(missing_ok=True)
    _unmount_under(state_dir / "data", exec_root)


def _read_pid(pidfile: Path) -> int:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return 0


def _is_running(pid: int, name: str = "dockerd") -> bool:
    """Whether `pid` is a live (not zombie) process of the program `name`."""
    if pid <= 0:
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return os.path.basename(command) == name.encode() and state != "Z"


def _unmount_under(*roots: Path) -> None:
    """Detach mounts the daemon left behind (it keeps e.g. exec-root/netns/default mounted)."""
    mountpoints = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mountpoint = _unescape_mountinfo(line.split()[4])
        if any(mountpoint == str(root) or mountpoint.startswith(f"{root}/") for root in roots):
            mountpoints.append(mountpoint)
    libc = ctypes.CDLL(None, use_errno=True)
    for mountpoint in sorted(mountpoints, key=len, reverse=True):
        if libc.umount2(mountpoint.encode(), _MNT_DETACH) != 0:
            _log(f"could not unmount {mountpoint}: {os.strerror(ctypes.get_errno())}")


def _unescape_mountinfo(value: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match[1], 8)), value)


def _exec_root(state_dir: Path) -> Path:
    exec_root = state_dir / "exec"
    if len(str(exec_root)) <= MAX_EXEC_ROOT_LENGTH:
        return exec_root
    return Path(tempfile.gettempdir()) / f"openalice-dockerd-{_short_hash(state_dir)}"


def _short_hash(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:10]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _state_file(state_dir: Path) -> Path:
    return state_dir / "state.json"


def _write_state(host: TlsDockerHost) -> None:
    state = {
        "host": host.host,
        "port": host.port,
        "pid": host.pid,
        "state_dir": str(host.state_dir),
        "cert_path": str(host.cert_path),
        "data_root": str(host.data_root),
        "exec_root": str(host.exec_root),
        "pidfile": str(host.pidfile),
        "log_file": str(host.log_file),
        "started_at": utcnow().isoformat(),
    }
    write_atomically(_state_file(host.state_dir), (json.dumps(state, indent=2) + "\n").encode(), 0o644)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise starts that share a state dir (e.g. parallel test processes)."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as error:
        return f"(no log: {error})"
    return "\n".join(line[:400] for line in text)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- command line --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """`start` prints eval-able exports and leaves the daemon running; `stop`; `status`."""
    parser = argparse.ArgumentParser(
        prog="python -m devstack.docker_host", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--state-dir", type=Path, default=Path(".local/docker"))
    parser.add_argument("--port", type=int, default=None, help="start: listen on this port (default: a free one)")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            started = start_tls_docker_host(args.state_dir, args.port)
            for name, value in started.env().items():
                print(f"export {name}={shlex.quote(value)}")
            return 0
        host = load_tls_docker_host(args.state_dir)
        running = host is not None and _is_running(host.pid)
        if args.command == "stop":
            if host is None or not running:
                _log(f"no TLS Docker host running for {args.state_dir}")
                _clear_leftovers(args.state_dir.resolve())
                return 0
            host.stop()
            _log(f"stopped dockerd (pid {host.pid})")
            return 0
        if host is None or not running:
            print(f"not running ({args.state_dir})")
            return 1
        try:
            client = host.client(timeout=5)
            version = client.version()
            client.close()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
            print(f"dockerd pid {host.pid} runs but does not answer on {host.host}: {error}")
            return 1
        print(f"running: {host.host} pid {host.pid}, Docker {version['Version']} (API {version['ApiVersion']})")
        return 0
    except DockerHostError as error:
        _log(f"error: {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
