"""``Broker``: one app's roles over one ``Link``, and nothing else.

Each caller takes the role it needs (``roles.py`` has their protocols):
a producer ``jobs``, a worker ``claims``, the workflow machinery ``ledger``,
the operators' tools ``inspection``, ``cleanup`` and ``flow`` (pause and
resume), a running job's durable ``steps``, the search ``index``. ``client``,
``url`` and ``scripts`` are the link's, for the tools and tests that speak to
Redis directly.
"""

from __future__ import annotations

from typing import TypeVar

import redis

from .cleanup import Cleanup
from .connection import broker_errors
from .drivers import drive
from .flow import Flow
from .index import Index
from .inspection import Inspection
from .jobs import Jobs
from .link import Link
from .plan import Plan
from .queue import Claims
from .roles import ClaimsRole, CleanupRole, FlowRole, IndexRole, InspectionRole, JobsRole, LedgerRole, StepsRole
from .steps import Steps
from .workflows import WorkflowStore

T = TypeVar("T")


class Broker:
    """One app's view of Redis: its roles, sharing one client, its scripts and its settings."""

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        url: str,
        retention_ms: int,
        dead_retention_ms: int,
        durability: str = "async",
    ) -> None:
        self.link = link = Link(client, url, retention_ms, dead_retention_ms, durability)
        self.client = client
        self.url = url
        self.scripts = link.scripts
        # Typed as their protocols: mypy checks each role against its protocol here.
        self.jobs: JobsRole = Jobs(link)
        self.claims: ClaimsRole = Claims(link)
        self.ledger: LedgerRole = WorkflowStore(link)
        self.inspection: InspectionRole = Inspection(link)
        self.cleanup: CleanupRole = Cleanup(link)
        self.flow: FlowRole = Flow(link)
        self.steps: StepsRole = Steps(link)
        self.index: IndexRole = Index(link)
        self.settings = link.settings

    def drive(self, plan: Plan[T]) -> T:
        """Run a plan that spans roles (``workflows/delivery.py``'s) on this client (``drivers.drive``)."""
        return drive(self.link, plan)

    def ping(self) -> None:
        """Raise BrokerUnavailable now rather than at the first job."""
        with broker_errors(self.url):
            self.client.ping()
