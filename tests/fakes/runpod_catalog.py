"""RunPod's catalog (GPU types, data centers) and pod placement, as the fake RunPod models them. Stdlib only.

What the fake knows about the world is two switches: the price table (USD per GPU per hour, per cloud) and
`data_centers`, which data centers exist and how much stock each has of each GPU type
(`{"US-KS-2": {"NVIDIA GeForce RTX 4090": "HIGH", ...}, ...}`; a level of `NONE` means offered but full).
The catalog lists every GPU type that is priced or stocked somewhere; a create lands in the first requested
(else configured) data center that stocks the type. A compute id no data center lists (CPU flavors, GPU
types the configuration leaves out) is not modelled: it places as it always did, in the first requested
data center or US-KS-2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

AVAILABILITY_LEVELS: Final = ("NONE", "LOW", "MEDIUM", "HIGH")
PRODUCTS: Final = ("POD", "CLUSTER", "SERVERLESS")
CLOUDS: Final = ("SECURE", "COMMUNITY")
REGIONS: Final = (
    "NORTH_AMERICA",
    "SOUTH_AMERICA",
    "EUROPE",
    "ASIA",
    "MIDDLE_EAST",
    "AFRICA",
    "OCEANIA",
    "ANTARCTICA",
    "UNKNOWN",
)
VOLUME_TYPES: Final = ("STANDARD", "HIGH_PERFORMANCE")
COMPLIANCE: Final = (
    "GDPR",
    "ISO_IEC_27001",
    "ISO_14001",
    "PCI_DSS",
    "HITRUST",
    "SOC_1_TYPE_2",
    "SOC_2_TYPE_2",
    "SOC_3_TYPE_2",
    "ITAR",
    "FISMA_HIGH",
    "HIPAA",
    "RENEWABLE",
)
DEFAULT_DATA_CENTER: Final = "US-KS-2"
RTX_4090: Final = "NVIDIA GeForce RTX 4090"
A100_PCIE: Final = "NVIDIA A100 80GB PCIe"
H100_SXM: Final = "NVIDIA H100 80GB HBM3"
# Stock per data center. Order matters: a create without dataCenterIds lands in the first that has stock,
# so US-KS-2 (where every pod landed before placement was modelled) comes first.
DEFAULT_DATA_CENTERS: Final[Mapping[str, Mapping[str, str]]] = {
    "US-KS-2": {RTX_4090: "HIGH", A100_PCIE: "HIGH", H100_SXM: "MEDIUM"},
    "US-TX-3": {RTX_4090: "MEDIUM", H100_SXM: "HIGH"},
    "EU-RO-1": {RTX_4090: "HIGH", A100_PCIE: "LOW"},
    "EU-SE-1": {A100_PCIE: "MEDIUM", H100_SXM: "LOW"},
}
CUDA_VERSIONS: Final = ("12.4", "12.6", "12.8")  # offered on every non-AMD GPU type's machines
# The query parameters listGpuTypes/getGpuType and listDataCenters/getDataCenter define (and the fake reads).
GPU_QUERY_PARAMETERS: Final = ("include", "product", "count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion")
DATA_CENTER_QUERY_PARAMETERS: Final = ("include", "regions", "networkVolumeTypes", "compliance", "globalNetwork")
CPU_FLAVORS: Final = (("cpu3c", "Compute-Optimized"), ("cpu3g", "General Purpose"), ("cpu5c", "Compute-Optimized"))


@dataclass(frozen=True)
class GpuModel:
    name: str
    pool: str | None
    manufacturer: str
    memory: int
    max_secure: int
    max_community: int


_GPU_MODELS: Final[Mapping[str, GpuModel]] = {
    RTX_4090: GpuModel("RTX 4090", "ADA_24", "NVIDIA", 24, 8, 4),
    A100_PCIE: GpuModel("A100 PCIe", "AMPERE_80", "NVIDIA", 80, 8, 8),
    H100_SXM: GpuModel("H100 SXM", "ADA_80_PRO", "NVIDIA", 80, 8, 8),
    "NVIDIA H100 PCIe": GpuModel("H100 PCIe", "ADA_80_PRO", "NVIDIA", 80, 8, 4),
    "NVIDIA L4": GpuModel("L4", "ADA_24", "NVIDIA", 24, 8, 8),
    "AMD Instinct MI300X OAM": GpuModel("MI300X", None, "AMD", 192, 8, 8),
}
_MEMORY: Final = re.compile(r"(\d+)\s*GB", re.IGNORECASE)


def gpu_model(gpu_id: str) -> GpuModel:
    """What the catalog says about a GPU type; for an id the fake does not know, read off its name."""
    known = _GPU_MODELS.get(gpu_id)
    if known is not None:
        return known
    manufacturer = next((m for m in ("NVIDIA", "AMD") if gpu_id.upper().startswith(m + " ")), "UNKNOWN")
    name = gpu_id[len(manufacturer) + 1 :] if manufacturer != "UNKNOWN" else gpu_id
    memory = _MEMORY.search(gpu_id)
    return GpuModel(name.removeprefix("GeForce "), None, manufacturer, int(memory.group(1)) if memory else 0, 8, 8)


@dataclass(frozen=True)
class DataCenterModel:
    name: str
    region: str
    country: str
    global_network: bool
    volume_types: tuple[str, ...]
    compliance: tuple[str, ...]


_DATA_CENTER_MODELS: Final[Mapping[str, DataCenterModel]] = {
    "US-KS-2": DataCenterModel(
        "US Kansas 2", "NORTH_AMERICA", "US", True, ("STANDARD", "HIGH_PERFORMANCE"), ("SOC_2_TYPE_2", "ISO_IEC_27001")
    ),
    "US-TX-3": DataCenterModel("US Texas 3", "NORTH_AMERICA", "US", True, ("STANDARD",), ("SOC_2_TYPE_2",)),
    "EU-RO-1": DataCenterModel("EU Romania 1", "EUROPE", "RO", True, ("STANDARD",), ("GDPR", "ISO_IEC_27001")),
    "EU-SE-1": DataCenterModel(
        "EU Sweden 1", "EUROPE", "SE", False, ("STANDARD", "HIGH_PERFORMANCE"), ("GDPR", "ISO_IEC_27001", "RENEWABLE")
    ),
}
_REGION_PREFIXES: Final[Mapping[str, str]] = {
    "US": "NORTH_AMERICA",
    "CA": "NORTH_AMERICA",
    "EU": "EUROPE",
    "EUR": "EUROPE",
    "AP": "ASIA",
    "OC": "OCEANIA",
    "SA": "SOUTH_AMERICA",
    "ME": "MIDDLE_EAST",
    "AF": "AFRICA",
}


def data_center_model(dc_id: str) -> DataCenterModel:
    """What the catalog says about a data center; for an id the fake does not know, read off the id
    (`EU-FR-1`: Europe, France; `CA-MTL-1`: North America, Canada)."""
    known = _DATA_CENTER_MODELS.get(dc_id)
    if known is not None:
        return known
    parts = dc_id.upper().split("-")
    region = _REGION_PREFIXES.get(parts[0], "UNKNOWN")
    if len(parts[0]) == 2 and parts[0] not in ("EU", "AP", "OC", "SA", "ME", "AF"):
        country = parts[0]
    else:
        country = parts[1] if len(parts) > 1 and len(parts[1]) == 2 else ""
    return DataCenterModel(dc_id, region, country, False, ("STANDARD",), ())


# --- query strings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryProblem:
    """A query RunPod refuses: 422 (a malformed value, `errors` says which) or 400 (a rule)."""

    status: int
    detail: str
    errors: list[str] | None = None


def _items(values: Mapping[str, list[str]], name: str) -> list[str] | None:
    """A form-style, non-exploded array parameter (`a,b`; repeating the parameter works too)."""
    if name not in values:
        return None
    return [item.strip() for value in values[name] for item in value.split(",") if item.strip()]


def _enum_error(name: str, item: str, allowed: Sequence[str]) -> str:
    return f"query.{name}: '{item}': value must be one of {', '.join(repr(a) for a in allowed)}"


def _enums(values: Mapping[str, list[str]], name: str, allowed: Sequence[str], errors: list[str]) -> list[str] | None:
    items = _items(values, name)
    for item in items or []:
        if item not in allowed:
            errors.append(_enum_error(name, item, allowed))
    return items


@dataclass(frozen=True)
class GpuQuery:
    """listGpuTypes / getGpuType parameters (availability fields only with include=AVAILABILITY)."""

    availability: bool = False
    products: tuple[str, ...] = ()
    count: int = 1
    cloud: str = "SECURE"
    countries: tuple[str, ...] | None = None
    cuda_versions: tuple[str, ...] | None = None
    min_cuda: str | None = None


_COUNTRY: Final = re.compile(r"[A-Z]{2}", re.ASCII)
_CUDA: Final = re.compile(r"\d+\.\d+", re.ASCII)
_MIN_CUDA: Final = re.compile(r"\d+(\.\d+)?", re.ASCII)


def parse_gpu_query(values: Mapping[str, list[str]]) -> GpuQuery | QueryProblem:
    errors: list[str] = []
    include = _enums(values, "include", ("AVAILABILITY",), errors)
    if include is not None and len(include) > 1:
        errors.append(f"query.include: maxItems: got {len(include)}, want 1")
    products = _enums(values, "product", PRODUCTS, errors)
    count = 1
    if "count" in values:
        raw = values["count"][-1]
        if not re.fullmatch(r"[+-]?\d+", raw):
            errors.append(f"query.count: got '{raw}', want integer")
        elif int(raw) < 1:
            errors.append(f"query.count: minimum: got {int(raw)}, want 1")
        else:
            count = int(raw)
    cloud = values["cloud"][-1] if "cloud" in values else "SECURE"
    if cloud not in CLOUDS:
        errors.append(_enum_error("cloud", cloud, CLOUDS))
    countries = _items(values, "countryCodes")
    for code in countries or []:
        if not _COUNTRY.fullmatch(code):
            errors.append(f"query.countryCodes: '{code}' does not match pattern '^[A-Z]{{2}}$'")
    cuda_versions = _items(values, "cudaVersions")
    for version in cuda_versions or []:
        if not _CUDA.fullmatch(version):
            errors.append(f"query.cudaVersions: '{version}' does not match pattern '^\\d+\\.\\d+$'")
    min_cuda = values["minCudaVersion"][-1] if "minCudaVersion" in values else None
    if min_cuda is not None and not _MIN_CUDA.fullmatch(min_cuda):
        errors.append(f"query.minCudaVersion: '{min_cuda}' does not match pattern '^\\d+(\\.\\d+)?$'")
    if errors:
        return QueryProblem(422, "Request validation failed.", errors)
    wants = bool(include)
    if wants and not products:
        return QueryProblem(400, "include=AVAILABILITY requires product (POD, CLUSTER or SERVERLESS)")
    scoped = ("product", "count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion")
    given = [name for name in scoped if name in values]
    if not wants and given:
        return QueryProblem(400, f"{', '.join(given)} valid only with include=AVAILABILITY")
    if cuda_versions and min_cuda is not None:
        return QueryProblem(400, "cudaVersions and minCudaVersion are mutually exclusive")
    return GpuQuery(
        availability=wants,
        products=tuple(products or ()),
        count=count,
        cloud=cloud,
        countries=tuple(countries) if countries is not None else None,
        cuda_versions=tuple(cuda_versions) if cuda_versions is not None else None,
        min_cuda=min_cuda,
    )


@dataclass(frozen=True)
class DataCenterQuery:
    gpu_availability: bool = False
    cpu_availability: bool = False
    regions: tuple[str, ...] | None = None
    volume_types: tuple[str, ...] | None = None
    compliance: tuple[str, ...] | None = None
    global_network: bool | None = None


def parse_data_center_query(values: Mapping[str, list[str]], *, filters: bool) -> DataCenterQuery | QueryProblem:
    """listDataCenters (`filters`) / getDataCenter parameters."""
    errors: list[str] = []
    include = _enums(values, "include", ("GPU_AVAILABILITY", "CPU_AVAILABILITY"), errors) or []
    regions = volume_types = compliance = None
    global_network: bool | None = None
    if filters:
        regions = _enums(values, "regions", REGIONS, errors)
        volume_types = _enums(values, "networkVolumeTypes", VOLUME_TYPES, errors)
        compliance = _enums(values, "compliance", COMPLIANCE, errors)
        if "globalNetwork" in values:
            raw = values["globalNetwork"][-1]
            if raw not in ("true", "false"):
                errors.append(f"query.globalNetwork: got '{raw}', want boolean")
            global_network = raw == "true"
    if errors:
        return QueryProblem(422, "Request validation failed.", errors)
    return DataCenterQuery(
        gpu_availability="GPU_AVAILABILITY" in include,
        cpu_availability="CPU_AVAILABILITY" in include,
        regions=tuple(regions) if regions is not None else None,
        volume_types=tuple(volume_types) if volume_types is not None else None,
        compliance=tuple(compliance) if compliance is not None else None,
        global_network=global_network if "globalNetwork" in values else None,
    )


# --- the catalog ----------------------------------------------------------------------------------


def _cuda_key(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor or 0)


class Catalog:
    """The catalog and placement as the fake's switches describe them at one moment."""

    def __init__(
        self,
        gpu_prices: Mapping[str, float],
        community_gpu_prices: Mapping[str, float],
        default_gpu_price: float,
        data_centers: Mapping[str, Mapping[str, str]],
    ) -> None:
        self._secure = gpu_prices
        self._community = community_gpu_prices
        self._default = default_gpu_price
        self._data_centers = data_centers

    def gpu_ids(self) -> list[str]:
        """Every GPU type the catalog lists: priced ones first (table order), then ones only stocked."""
        ids = list(self._secure)
        for stock in self._data_centers.values():
            ids.extend(gpu_id for gpu_id in stock if gpu_id not in ids)
        return ids

    def price(self, gpu_id: str, cloud: str = "SECURE") -> float:
        """List price per GPU per hour. A community price defaults to the secure one."""
        secure = self._secure.get(gpu_id, self._default)
        return self._community.get(gpu_id, secure) if cloud == "COMMUNITY" else secure

    def _stocking(self, compute_id: str) -> list[str]:
        return [dc for dc, stock in self._data_centers.items() if compute_id in stock]

    def place(self, compute_id: str, requested: Sequence[str], gpu_count: int | None, cloud: str) -> str | None:
        """The data center a create lands in, or None: no capacity (RunPod's 400)."""
        if not self._stocking(compute_id):  # not modelled: placed as before placement was modelled
            return requested[0] if requested else DEFAULT_DATA_CENTER
        if gpu_count is not None:
            model = gpu_model(compute_id)
            if gpu_count > (model.max_community if cloud == "COMMUNITY" else model.max_secure):
                return None
        for dc in dict.fromkeys(requested) if requested else self._data_centers:
            if self._data_centers.get(dc, {}).get(compute_id, "NONE") != "NONE":
                return dc
        return None

    # listGpuTypes / getGpuType

    def _stocked(self, gpu_id: str, countries: Sequence[str] | None) -> list[tuple[str, str]]:
        """(data center, level) for each data center (in those countries) that lists the GPU type."""
        return [
            (dc, stock[gpu_id])
            for dc, stock in self._data_centers.items()
            if gpu_id in stock and (countries is None or data_center_model(dc).country in countries)
        ]

    def gpu_type(self, gpu_id: str, query: GpuQuery) -> dict[str, Any]:
        """The GpuType object (availability fields only when the query asks for them)."""
        model = gpu_model(gpu_id)
        secure_price, community_price = self.price(gpu_id, "SECURE"), self.price(gpu_id, "COMMUNITY")
        gpu: dict[str, Any] = {
            "id": gpu_id,
            "name": model.name,
            "pool": model.pool,
            "manufacturer": model.manufacturer,
            "memory": model.memory,
            "secure": True,
            "community": True,
            "price": {"secure": secure_price, "community": community_price},
            "maxCount": {"secure": model.max_secure, "community": model.max_community},
        }
        if not query.availability:
            return gpu
        stocked = self._stocked(gpu_id, query.countries)
        versions = [] if model.manufacturer == "AMD" else list(CUDA_VERSIONS)
        if query.cuda_versions is not None:
            versions = [v for v in versions if v in query.cuda_versions]
        elif query.min_cuda is not None:
            versions = [v for v in versions if _cuda_key(v) >= _cuda_key(query.min_cuda)]
        cuda_filtered = query.cuda_versions is not None or query.min_cuda is not None
        fits = query.count <= (model.max_community if query.cloud == "COMMUNITY" else model.max_secure)
        fits = fits and (bool(versions) or not cuda_filtered)
        levels = [(dc, level if fits else "NONE") for dc, level in stocked]
        overall = max((level for _dc, level in levels), key=AVAILABILITY_LEVELS.index, default="NONE")
        gpu["availability"] = overall
        if overall != "NONE":
            gpu["dataCenters"] = [
                {"id": dc, "name": data_center_model(dc).name, "availability": level} for dc, level in levels
            ]
        if versions:
            gpu["cudaVersions"] = [{"version": v, "available": overall != "NONE"} for v in versions]
        return gpu

    def gpu_types(self, query: GpuQuery) -> list[dict[str, Any]]:
        """The list: with countryCodes, a type stocked in none of those countries drops out."""
        return [
            self.gpu_type(gpu_id, query)
            for gpu_id in self.gpu_ids()
            if not query.availability or query.countries is None or self._stocked(gpu_id, query.countries)
        ]

    def knows_gpu(self, gpu_id: str) -> bool:
        return gpu_id in self.gpu_ids()

    # listDataCenters / getDataCenter

    def knows_data_center(self, dc_id: str) -> bool:
        return dc_id in self._data_centers

    def data_center(self, dc_id: str, query: DataCenterQuery) -> dict[str, Any]:
        model = data_center_model(dc_id)
        dc: dict[str, Any] = {
            "id": dc_id,
            "name": model.name,
            "region": model.region,
            "globalNetwork": model.global_network,
            "networkVolumeTypes": list(model.volume_types),
            "compliance": list(model.compliance),
        }
        stock = self._data_centers.get(dc_id, {})
        if query.gpu_availability and stock:
            dc["gpuAvailability"] = [
                {"id": gpu_id, "name": gpu_model(gpu_id).name, "availability": level} for gpu_id, level in stock.items()
            ]
        if query.cpu_availability:
            dc["cpuAvailability"] = [{"id": cpu, "name": name, "availability": "HIGH"} for cpu, name in CPU_FLAVORS]
        return dc

    def data_centers(self, query: DataCenterQuery) -> list[dict[str, Any]]:
        shown = []
        for dc_id in self._data_centers:
            model = data_center_model(dc_id)
            if query.regions is not None and model.region not in query.regions:
                continue
            if query.volume_types is not None and not set(query.volume_types) <= set(model.volume_types):
                continue
            if query.compliance is not None and not set(query.compliance) <= set(model.compliance):
                continue
            if query.global_network is not None and model.global_network != query.global_network:
                continue
            shown.append(self.data_center(dc_id, query))
        return shown
