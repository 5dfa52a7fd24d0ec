"""Client of the OpenAlice scheduler's lease API, and the `leasectl` command.

```python
from openalice_scheduler_client import SchedulerClient

scheduler = SchedulerClient()  # $SCHEDULER_URL (default http://127.0.0.1:3000), $OPENALICE_SCHEDULER_TOKEN or
                               # $INTERNAL_SECRET (or token=..., secret=..., auth="iam": see SchedulerClient)
with scheduler.lease(kind="renderer", ttl_seconds=600) as lease:  # waits until the worker is ready
    render_on(lease.endpoint)  # renewed in the background, released on exit
```
"""

from .callers import AddedCaller, Callers
from .client import DEFAULT_URL, SchedulerClient, __version__, lease
from .credentials import Credential, CredentialError
from .errors import (
    BootFailed,
    BudgetExceeded,
    Conflict,
    Forbidden,
    Gone,
    InvalidRequest,
    InvalidResponse,
    NoCapacity,
    NotAdmitted,
    NotFound,
    Preempting,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    ReadyTimeout,
    SchedulerError,
    ServerError,
    ServiceUnreachable,
    Unauthorized,
    WorkerNotReady,
)
from .events import EVENT_TYPES, CreatedWebhook, LeaseEvent, Webhook
from .leasing import LeaseHandle
from .models import Caller, Lease
from .operations import NotReleased, OwnerRelease, WorkerLogs

__all__ = [
    "DEFAULT_URL",
    "EVENT_TYPES",
    "AddedCaller",
    "BootFailed",
    "BudgetExceeded",
    "Caller",
    "Callers",
    "Conflict",
    "CreatedWebhook",
    "Credential",
    "CredentialError",
    "Forbidden",
    "Gone",
    "InvalidRequest",
    "InvalidResponse",
    "Lease",
    "LeaseEvent",
    "LeaseHandle",
    "NoCapacity",
    "NotAdmitted",
    "NotFound",
    "NotReleased",
    "OwnerRelease",
    "Preempting",
    "ProviderError",
    "QuotaExceeded",
    "RateLimited",
    "ReadyTimeout",
    "SchedulerClient",
    "SchedulerError",
    "ServerError",
    "ServiceUnreachable",
    "Unauthorized",
    "Webhook",
    "WorkerLogs",
    "WorkerNotReady",
    "__version__",
    "lease",
]
