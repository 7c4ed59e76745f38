"""``prefetch verify torchvision:NAME``: re-hash what a torchvision: name placed.

Planned exactly as ``get`` plans it (the same tables, ``--root``, ``TORCH_HOME``), so the
files checked are the ones torchvision and torch.hub read. A decompressed MNIST file has
no published hash: it is reported ``missing`` when absent, else ``unchecked``.
"""

from __future__ import annotations

from typing import Mapping

from prefetch.flow.planning import plan_request
from prefetch.flow.request import GetRequest
from prefetch.model.plans import FilePlan, VerifyResult
from prefetch.operations.listing import _verify_one


def verify_torchvision(name: str, *, root: str | None, registries: list[str],
                       env: Mapping[str, str] | None = None) -> list[VerifyResult]:
    """One ``VerifyResult`` per file of ``name`` (and per decompressed file beside it).

    Raises:
        UsageError (UnknownDatasetError): not a torchvision class or model prefetch knows.
    """
    plans, _ = plan_request(GetRequest(names=[name], root=root, registries=list(registries)), env=env)
    results = []
    for plan in plans:
        if not isinstance(plan, FilePlan):
            continue
        results.append(_verify_one(plan.final, plan.spec.expected))
        for target in plan.decompress_to:
            results.append(_verify_one(target, None))
    return results
