"""The runpod driver's price ceiling, GPU order and regions, against the fake's catalog (GET /v2/catalog/gpus)
and placement (dataCenterIds): prices decide which types are tried, a pod's own `cost` decides whether it stays."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import PriceAboveCeiling
from scheduler.providers.runpod.catalog import CatalogCache
from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
from scheduler.request_models import LeaseRequest
from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.unit.builders import new_lease

KEY = "test-key"
RTX_4090, A100, H100 = "NVIDIA GeForce RTX 4090", "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3"
PRICES = {RTX_4090: 0.69, A100: 1.64, H100: 2.99}  # the fake's default secure prices


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRunPod]:
    with start_fake_runpod(KEY, {"tpl-renderer": {}, "tpl-anim": {}}) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeRunPod) -> FakeRunPod:
    server.reset()
    return server


def driver(
    fake: FakeRunPod, types: tuple[str, ...] = (H100, A100, RTX_4090), *, cheapest: bool = False, **options: object
) -> RunPodProvider:
    return RunPodProvider(
        api=RunPodApi(fake.url, lambda: KEY),
        templates={WorkerKind.RENDERER: "tpl-renderer", WorkerKind.ANIM: "tpl-anim"},
        gpu_types={GpuClass.ENTRY: types, GpuClass.MID: types, GpuClass.HIGH: types},
        http_port=8080,
        retry=RetryPolicy(sleep=lambda _: None, release_confirm_seconds=5),
        cheapest_first=cheapest,
        catalog=CatalogCache(),
        **options,  # type: ignore[arg-type]
    )


def lease(ceiling: float | None = None, region: str | None = None) -> Lease:
    now = datetime.now(UTC).replace(microsecond=0)
    made = new_lease(provider="runpod", gpu=GpuClass.HIGH, created_at=now, region=region)
    return made.replace(max_cost_per_hour=ceiling)


def created_types(fake: FakeRunPod) -> list[str]:
    return [str(record["body"]["gpu"]["id"]) for record in fake.requests_to("POST", "/v2/pods")]  # type: ignore[index]


def test_the_ceiling_skips_dearer_types_and_creates_the_first_within_it(fake: FakeRunPod) -> None:
    worker = driver(fake).provision(lease(ceiling=1.0), {})

    assert (worker.cost_per_hour, created_types(fake)) == (0.69, [RTX_4090])


def test_nothing_within_the_ceiling_creates_no_pod_and_names_the_cheapest_price(fake: FakeRunPod) -> None:
    with pytest.raises(PriceAboveCeiling) as refused:
        driver(fake).provision(lease(ceiling=0.5), {})

    assert refused.value.cheapest == 0.69
    assert (created_types(fake), fake.pods) == ([], {})


def test_a_pod_that_bills_above_the_ceiling_is_deleted_at_once_and_the_next_type_tried(fake: FakeRunPod) -> None:
    fake.configure(cost_markup=1.5)  # pods bill 1.5x the catalog price: the A100 at 2.46, the 4090 at 1.035

    worker = driver(fake, (A100, RTX_4090)).provision(lease(ceiling=2.0), {})

    assert created_types(fake) == [A100, RTX_4090]
    assert worker.cost_per_hour == pytest.approx(1.035)
    assert list(fake.pods) == [worker.token] and len(fake.deleted_pod_ids) == 1


def test_cheapest_order_tries_the_cheapest_type_first(fake: FakeRunPod) -> None:
    worker = driver(fake, cheapest=True).provision(lease(), {})

    assert (worker.cost_per_hour, created_types(fake)) == (0.69, [RTX_4090])


def test_listed_order_without_a_ceiling_never_reads_the_catalog(fake: FakeRunPod) -> None:
    driver(fake).provision(lease(), {})

    assert created_types(fake) == [H100] and fake.requests_to("GET", "/v2/catalog/gpus") == []


def test_the_catalog_is_read_once_per_execution_environment_while_fresh(fake: FakeRunPod) -> None:
    provider = driver(fake)
    for _ in range(3):
        provider.provision(lease(ceiling=1.0), {})

    assert len(fake.requests_to("GET", "/v2/catalog/gpus")) == 1


def test_the_price_bound_is_the_dearest_type_within_the_ceiling(fake: FakeRunPod) -> None:
    request = LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass.HIGH)

    assert driver(fake).price_bound(request) == 2.99
    assert driver(fake).price_bound(request._replace(max_cost_per_hour=2.0)) == 1.64


def test_a_region_places_pods_only_in_its_data_centers(fake: FakeRunPod) -> None:
    provider = driver(fake, (A100,), regions={"eu": ("EU-RO-1", "EU-SE-1"), "us": ("US-TX-3",)})

    worker = provider.provision(lease(region="eu"), {})

    assert fake.requests_to("POST", "/v2/pods")[0]["body"]["dataCenterIds"] == ["EU-RO-1", "EU-SE-1"]  # type: ignore[index]
    assert fake.pods[worker.token]["dataCenterId"] in ("EU-RO-1", "EU-SE-1")
    assert provider.regions() == ("eu", "us")


def test_a_region_without_the_type_in_stock_is_no_capacity_there(fake: FakeRunPod) -> None:
    provider = driver(fake, (A100,), regions={"us": ("US-TX-3",)})  # the fake's US-TX-3 stocks no A100

    with pytest.raises(Exception, match="could not place"):
        provider.provision(lease(region="us"), {})

    assert fake.pods == {}


def test_without_a_region_a_pod_places_anywhere(fake: FakeRunPod) -> None:
    provider = driver(fake, (A100,), regions={"eu": ("EU-RO-1",)})

    provider.provision(lease(), {})

    assert "dataCenterIds" not in fake.requests_to("POST", "/v2/pods")[0]["body"]  # type: ignore[operator]
