"""Client of the OpenAlice scheduler's lease API, and the `leasectl` command.

```python
from openalice_scheduler_client import SchedulerClient

scheduler = SchedulerClient()  # $SCHEDULER_URL (default http://127.0.0.1:3000), $INTERNAL_SECRET
with scheduler.lease(kind="renderer", ttl_seconds=600) as lease:
    render_on(lease.endpoint)  # renewed in the background, released on exit
```
"""

from .client import DEFAULT_URL, SchedulerClient, __version__, lease
from .errors import (
    BudgetExceeded,
    Conflict,
    Forbidden,
    InvalidRequest,
    InvalidResponse,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    SchedulerError,
    ServerError,
    ServiceUnreachable,
    Unauthorized,
)
from .leasing import LeaseHandle
from .models import Lease

__all__ = [
    "DEFAULT_URL",
    "BudgetExceeded",
    "Conflict",
    "Forbidden",
    "InvalidRequest",
    "InvalidResponse",
    "Lease",
    "LeaseHandle",
    "NoCapacity",
    "NotFound",
    "ProviderError",
    "QuotaExceeded",
    "RateLimited",
    "SchedulerClient",
    "SchedulerError",
    "ServerError",
    "ServiceUnreachable",
    "Unauthorized",
    "__version__",
    "lease",
]
