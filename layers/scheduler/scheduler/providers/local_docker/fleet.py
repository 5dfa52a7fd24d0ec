"""`local-docker` on a fleet of Docker hosts (`DOCKER_HOSTS`): each lease placed on the host with the most
free slots that can serve it, each host's cap atomic, a host that does not answer passed over.

Each host is driven by its own single-host driver (`driver.LocalDockerProvider`, or any `Provider`
in tests). A worker's token is `<host name>/<container id>`, so the lease records its host and every
later call (release, stopped_reason, the reconciler) goes to that host (`tokens.py`).

A bare token (a lease made before the fleet) names a worker on the old single DOCKER_HOST, which joins
the fleet as host `default`. It is looked for on every host (the operator may have listed the old host
under another name), but only host `default` can say it is gone: not found anywhere, it counts as gone
when `default` is configured (and answers) or retired, and otherwise waits like a worker on any host that
is no longer configured. A lease that never recorded a token but holds a host's slot is looked for on
that host (`placement_token`), which alone may say it is gone.

A token naming a host no longer in DOCKER_HOSTS is never looked for elsewhere: only its own host can
confirm its worker gone. Until the host is configured again its release fails (WorkerHostNotConfigured,
so the lease stays `releasing` and the sweep retries), the reconciler judges none of its leases, and
nothing calls its worker gone. A host the operator names in DOCKER_RETIRED_HOSTS is gone on the
operator's word: its workers count as removed, and their leases end saying so.

Placement: the hosts that serve the request (its GPU class, its region if it names one) and are not
remembered as down, most free slots first (cap minus the live count; an uncapped host counts as
unlimited, fewest live leases first), then the ones remembered as down. Each host gets at most
`attempt_seconds` of the acquire's budget, so a hung host costs one short attempt and is then
remembered as down (`DOWN_SECONDS`) and skipped until then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from scheduler.deadline import Deadline, or_never
from scheduler.models import Lease
from scheduler.observability.log import Logger
from scheduler.providers.base import (
    ManagedWorker,
    PlaceCounter,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    Readiness,
    StoppedWorker,
    WorkerGone,
    WorkerHostNotConfigured,
    WorkerOutcomeUnknown,
)
from scheduler.providers.local_docker import NAME
from scheduler.providers.local_docker.hosts import DEFAULT_HOST_NAME, DockerHostSpec, DownHosts
from scheduler.providers.local_docker.tokens import (
    container_id,
    host_token,
    placement_token,
    retired_reason,
    split_token,
)
from scheduler.worker_logs import LogLine, LogQuery

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.request_models import LeaseRequest

logger = Logger(child=True)

HOST_ATTEMPT_SECONDS = 6.0


class HostSlots(Protocol):
    """The hosts' live-lease counters (the store's, see `store/host_slots.py`)."""

    def counts(self, counters: Sequence[str]) -> dict[str, int]:
        """Live leases on each named counter."""

    def move(self, lease_id: str, give_back: str | None, take: tuple[str, int | None] | None) -> bool:
        """Move a pending lease's host slot; False when the host to take is full."""


class DockerFleet(Provider):
    """Several Docker hosts as one provider."""

    name = NAME

    def __init__(
        self,
        hosts: Sequence[tuple[DockerHostSpec, Provider]],
        slots: HostSlots | None = None,
        down: DownHosts | None = None,
        attempt_seconds: float = HOST_ATTEMPT_SECONDS,
        retired: Iterable[str] = (),
    ) -> None:
        self.specs = [spec for spec, _ in hosts]
        self._members: dict[str, Provider] = {spec.name: member for spec, member in hosts}
        self.retired = frozenset(retired) - set(self._members)  # DOCKER_RETIRED_HOSTS
        self._slots = slots
        self.down = down or DownHosts()
        self._attempt_seconds = attempt_seconds
        self.unlisted: frozenset[str] = frozenset()  # hosts the last list_managed could not list

    def member(self, host: str) -> Provider:
        """The driver of one host."""
        return self._members[host]

    def available(self, request: LeaseRequest) -> bool:
        return any(
            _serves(spec, request.gpu, request.region) and self._members[spec.name].available(request)
            for spec in self.specs
        )

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        deadline = or_never(deadline)
        candidates = [spec for spec in self.specs if _serves(spec, lease.gpu, lease.region)]
        if not candidates:
            raise ProviderCapacityError(f"no Docker host serves gpu={lease.gpu} region={lease.region or 'any'}")
        counts = self._slots.counts([spec.counter(NAME) for spec in candidates]) if self._slots else {}
        reasons: dict[str, str] = {}
        held: str | None = None
        refused: ProviderRequestFailed | None = None
        may_exist = False
        for spec in self._placement(candidates, counts, reasons):
            if deadline.expired:
                reasons[spec.name] = "not tried: the request's time budget ran out"
                continue
            counter = spec.counter(NAME)
            if self._slots is not None:
                if not self._slots.move(lease.lease_id, held, (counter, spec.max_leases)):
                    reasons[spec.name] = f"at its cap of {spec.max_leases} live leases"
                    continue
                held = counter
            try:
                worker = self._members[spec.name].provision(lease, env, deadline.sooner(self._attempt_seconds))
            except (ProviderCapacityError, ProviderRequestFailed) as error:
                reasons[spec.name] = str(error)
                if isinstance(error, ProviderUnreachable):
                    self.down.mark(spec.name)
                    may_exist = may_exist or isinstance(error, WorkerOutcomeUnknown)
                    logger.warning("Docker host down; trying the next", extra={"host": spec.name, "error": str(error)})
                if isinstance(error, ProviderRequestFailed):
                    refused = error
                if self._slots is not None and held is not None:
                    self._slots.move(lease.lease_id, held, None)
                    held = None
                continue
            self.down.clear(spec.name)
            return ProvisionedWorker(
                token=host_token(spec.name, worker.token),
                endpoint=worker.endpoint,
                cost_per_hour=worker.cost_per_hour,
                ready=worker.ready,
                held=(held,) if held is not None else (),
            )
        summary = "; ".join(f"{name}: {why}" for name, why in reasons.items())
        if may_exist:
            raise WorkerOutcomeUnknown(f"no Docker host served the lease ({summary})")
        if refused is not None and all("cap" not in why for why in reasons.values()):
            raise ProviderRequestFailed(f"no Docker host made the worker ({summary})") from refused
        raise ProviderCapacityError(f"no Docker host can take the lease now ({summary})")

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> str | None:
        host, bare = split_token(token) if token else (None, None)
        if bare and host is None:
            return self._release_bare(lease_id, bare, deadline)
        note = None
        if host in self.retired:
            logger.warning("worker on a retired Docker host counted as gone", extra={"host": host, "token": token})
            note = retired_reason(str(host))
            if bare:
                return note
        elif host is not None:
            member = self._member_holding(host, str(token) if bare else f"of lease {lease_id}", "removed")
            if bare:  # bounded per host: a hung host must not hold a sweep thread for the whole run
                return member.release(lease_id, bare, self._host_deadline(deadline))
        # No token, or only the host it was placed on (`placement_token`), confirmed there or retired: the
        # worker, if any was made, by the lease's name on every host (one tried before may hold it too).
        self._release_everywhere(lease_id, None, deadline)
        return note

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        workers: list[ManagedWorker] = []
        unlisted: set[str] = set()
        for spec in self.specs:
            try:
                listed = self._members[spec.name].list_managed(self._host_deadline(deadline))
            except (ProviderRequestFailed, ProviderUnreachable) as error:
                unlisted.add(spec.name)
                logger.warning(
                    "cannot list a Docker host; its leases are not judged",
                    extra={"host": spec.name, "error": str(error)},
                )
                continue
            workers += [
                ManagedWorker(
                    worker.lease_id, host_token(spec.name, worker.token), worker.created_at, worker.stopped_reason
                )
                for worker in listed
            ]
        self.unlisted = frozenset(unlisted)
        if len(unlisted) == len(self.specs):
            raise ProviderRequestFailed(f"no Docker host could be listed: {', '.join(sorted(unlisted))}")
        return workers

    def vouches_for(self, token: str | None) -> bool:
        """Whether the last listing covered the host this token's worker lives on (never a host that is not
        configured: it was not listed at all, so a worker missing from the listing says nothing). A retired
        host is covered by the operator's word. A bare token's worker may be on any host, and only host
        `default` (the old DOCKER_HOST) can have it unlisted for being gone."""
        if token is None:
            return not self.unlisted
        host, _ = split_token(token)
        if host is None:
            return (DEFAULT_HOST_NAME in self._members or DEFAULT_HOST_NAME in self.retired) and not self.unlisted
        return host in self.retired or (host in self._members and host not in self.unlisted)

    def worker_key(self, token: str) -> str:
        """The container id: the listing names `<host>/<id>`, a lease made before the fleet the bare id."""
        return container_id(token)

    def placement_token(self, held: tuple[str, ...]) -> str | None:
        """`<host>/` for the host whose slot a token-less lease holds: its worker, if made, is there."""
        return placement_token(held)

    def place_counters(self) -> tuple[PlaceCounter, ...]:
        """Each host's slot counter (`host#local-docker#<name>`), with its `max_leases`."""
        return tuple(PlaceCounter(spec.name, spec.counter(NAME), spec.max_leases) for spec in self.specs)

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        stopped: list[StoppedWorker] = []
        failed = 0
        for spec in self.specs:
            try:
                found = self._members[spec.name].stopped_workers(self._host_deadline(deadline))
            except (ProviderRequestFailed, ProviderUnreachable):
                failed += 1
                continue
            stopped += [
                StoppedWorker(worker.lease_id, host_token(spec.name, worker.token), worker.reason) for worker in found
            ]
        if failed == len(self.specs):
            raise ProviderRequestFailed("no Docker host could be listed")
        return stopped

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        host, bare = split_token(token)
        if host is None:
            raise ProviderRequestFailed(f"the worker {token} names no host of the fleet")
        if host in self.retired:
            return retired_reason(host)
        if host not in self._members:
            return None  # cannot tell (and asking costs nothing, so no host is left alone for it)
        return self._members[host].stopped_reason(lease_id, bare, deadline)

    def price_bound(self, request: LeaseRequest, deadline: Deadline | None = None) -> float | None:
        """Every host charges LOCAL_DOCKER_COST_PER_HOUR: any member's bound is the fleet's."""
        return self._members[self.specs[0].name].price_bound(request, deadline)

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        host, bare = split_token(token)
        if host is None:
            raise ProviderRequestFailed(f"the worker {token} names no host of the fleet")
        if host in self.retired:
            return Readiness.failed(retired_reason(host))
        return self._member_holding(host, token, "asked").readiness(lease_id, bare, self._host_deadline(deadline))

    def readiness_of(self, workers: Mapping[str, str], deadline: Deadline | None = None) -> dict[str, Readiness]:
        """Host by host: a host that cannot be asked (or is remembered down) leaves its workers unanswered,
        so the sweep still judges every other host's booting workers."""
        by_host: dict[str, dict[str, str]] = {}
        answered: dict[str, Readiness] = {}
        for token, lease_id in workers.items():
            host, bare = split_token(token)
            if host is not None and host in self._members:
                by_host.setdefault(host, {})[bare] = lease_id
            elif host is not None and host in self.retired:
                answered[token] = Readiness.failed(retired_reason(host))
        for host, bare_workers in by_host.items():
            if self.down.is_down(host):
                continue
            try:
                said = self._members[host].readiness_of(bare_workers, self._host_deadline(deadline))
            except (ProviderRequestFailed, ProviderUnreachable) as error:
                logger.warning(
                    "cannot ask a Docker host about booting workers", extra={"host": host, "error": str(error)}
                )
                continue
            answered.update({host_token(host, bare): readiness for bare, readiness in said.items()})
        return answered

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        host, bare = split_token(token) if token else (None, None)
        if host is not None:
            if host in self.retired:
                raise WorkerGone(retired_reason(host))
            return self._member_holding(host, str(token), "read").logs(
                lease_id, bare, query, self._host_deadline(deadline)
            )
        for spec in self.specs:  # no token: the worker is found by its lease's name on whichever host has it
            try:
                return self._members[spec.name].logs(lease_id, bare, query, self._host_deadline(deadline))
            except WorkerGone:
                continue
        if bare and DEFAULT_HOST_NAME not in self._members:  # made before the fleet, on the old DOCKER_HOST
            if DEFAULT_HOST_NAME in self.retired:
                raise WorkerGone(retired_reason(DEFAULT_HOST_NAME))
            raise self._old_host_not_configured(lease_id, bare, "read")
        raise WorkerGone(f"no Docker host of the fleet holds the worker of lease {lease_id}")

    def _placement(
        self, candidates: list[DockerHostSpec], counts: dict[str, int], reasons: dict[str, str]
    ) -> list[DockerHostSpec]:
        """Most free slots first; hosts remembered as down are skipped (unless every candidate is)."""

        def key(spec: DockerHostSpec) -> tuple[float, int]:
            live = counts.get(spec.counter(NAME), 0)
            free = float("inf") if spec.max_leases is None else spec.max_leases - live
            return (-free, live)

        up = [spec for spec in candidates if not self.down.is_down(spec.name)]
        for spec in candidates:
            if up and spec not in up:
                reasons[spec.name] = "skipped: it did not answer lately"
        return sorted(up or candidates, key=key)

    def _host_deadline(self, deadline: Deadline | None) -> Deadline:
        return or_never(deadline).sooner(self._attempt_seconds * 2)

    def _member_holding(self, host: str, worker: str, done: str) -> Provider:
        """The driver of the host a worker lives on; WorkerHostNotConfigured when the fleet no longer has it."""
        member = self._members.get(host)
        if member is None:
            raise WorkerHostNotConfigured(
                host,
                f"Docker host {host} is not configured (DOCKER_HOSTS); its worker {worker} cannot be {done}"
                " until it is configured again, or named in DOCKER_RETIRED_HOSTS once it is gone",
            )
        return member

    def _release_everywhere(self, lease_id: str, bare: str | None, deadline: Deadline | None) -> None:
        """Remove the worker (by id, or by the lease's name) on every host; each confirms it gone there."""
        failures = []
        for spec in self.specs:
            try:
                self._members[spec.name].release(lease_id, bare, self._host_deadline(deadline))
            except (ProviderRequestFailed, ProviderUnreachable) as error:
                failures.append(f"{spec.name}: {error}")
        if failures:
            raise ProviderRequestFailed("; ".join(failures))

    def _release_bare(self, lease_id: str, bare: str, deadline: Deadline | None) -> str | None:
        """A worker made before the fleet, on the old DOCKER_HOST (host `default`): removed wherever it is
        found; not found, it is gone only on `default`'s word (configured) or the operator's (retired)."""
        if DEFAULT_HOST_NAME in self._members:
            self._release_everywhere(lease_id, bare, deadline)
            return None
        holder = self._holder_of(bare, deadline)
        if holder is not None:
            self._members[holder].release(lease_id, bare, self._host_deadline(deadline))
            return None
        if DEFAULT_HOST_NAME in self.retired:
            logger.warning("worker on a retired Docker host counted as gone", extra={"host": DEFAULT_HOST_NAME})
            return retired_reason(DEFAULT_HOST_NAME)
        raise self._old_host_not_configured(lease_id, bare, "removed")

    def _holder_of(self, bare: str, deadline: Deadline | None) -> str | None:
        """The configured host that lists the container `bare` (None: none does; ProviderRequestFailed when
        a host that may hold it cannot be listed)."""
        failures = []
        for spec in self.specs:
            try:
                listed = self._members[spec.name].list_managed(self._host_deadline(deadline))
            except (ProviderRequestFailed, ProviderUnreachable) as error:
                failures.append(f"{spec.name}: {error}")
                continue
            if any(worker.token == bare for worker in listed):
                return spec.name
        if failures:
            raise ProviderRequestFailed(f"cannot tell which Docker host holds {bare}: {'; '.join(failures)}")
        return None

    def _old_host_not_configured(self, lease_id: str, bare: str, done: str) -> WorkerHostNotConfigured:
        return WorkerHostNotConfigured(
            DEFAULT_HOST_NAME,
            f"the worker {bare} of lease {lease_id} was made on the single DOCKER_HOST before DOCKER_HOSTS, and no"
            f" host of the fleet holds it: it cannot be {done} until DOCKER_HOST is set again (it joins the fleet"
            f" as host {DEFAULT_HOST_NAME}), or {DEFAULT_HOST_NAME} is named in DOCKER_RETIRED_HOSTS once it is gone",
        )


def _serves(spec: DockerHostSpec, gpu: str, region: str | None) -> bool:
    return str(gpu) in spec.gpus and (region is None or spec.region == region)
