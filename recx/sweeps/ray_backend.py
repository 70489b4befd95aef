"""The Ray backend: each run is a Ray task on an existing cluster (`--address`) or on a local one started here with
`--jobs` CPUs. A task asks for one GPU when its run is on CUDA (device cuda, or auto on a cluster with GPUs), else
for its share of the cluster's CPUs (the cluster's CPUs / jobs, at most one node's; also its torch thread count).
Workers read the data root and write the run store by path, so both must be on a filesystem every node shares; recx
must be importable on every node.
Ray is an optional extra: `pip install -e ".[dist]"`.
"""

from __future__ import annotations

from recx.core.errors import RecxError
from recx.sweeps.task import Outcome, RunTask


def _run(task_json: str, threads: int) -> tuple[str, str]:

    from recx.core.memory import keep_freed_memory
    from recx.core.threads import set_compute_threads
    from recx.sweeps.task import execute

    keep_freed_memory()
    set_compute_threads(threads)
    outcome = execute(RunTask.from_json(task_json))
    return outcome.status, outcome.message


class RayCluster:
    def __init__(self, jobs: int, address: str | None):
        try:
            import ray
        except ImportError:
            raise RecxError('--backend ray needs Ray: pip install -e ".[dist]" (or pip install ray)') from None
        self.ray, self.started = ray, not ray.is_initialized()
        if self.started:
            options = {"address": address} if address else {"address": "local", "num_cpus": jobs}
            try:
                ray.init(**options, include_dashboard=False, log_to_driver=False, configure_logging=False)
            except ConnectionError as error:
                raise RecxError(
                    f"--address {address}: cannot join that Ray cluster ({error}); a cluster with "
                    f"Ray's token authentication must find its token here too (~/.ray/auth_token)"
                ) from None
        resources = ray.cluster_resources()
        self.capacity = jobs
        self.has_gpus = resources.get("GPU", 0) > 0
        largest_node = max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")), default=1)
        self.threads = max(1, int(min(largest_node, resources.get("CPU", 1) // jobs)))
        self.remote = ray.remote(_run)
        self.pending: dict = {}

    def start(self, task: RunTask):
        device = task.config.get("device")
        on_cuda = device == "cuda" or (device == "auto" and self.has_gpus)
        ref = self.remote.options(
            num_cpus=0 if on_cuda else self.threads, num_gpus=1 if on_cuda else 0, max_retries=0
        ).remote(task.to_json(), self.threads)
        self.pending[ref] = task
        return ref

    def poll(self, timeout: float) -> list:
        if not self.pending:
            return []
        ready, _ = self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=timeout)
        finished = []
        for ref in ready:
            task = self.pending.pop(ref)
            try:
                finished.append((ref, Outcome(*self.ray.get(ref))))
            except self.ray.exceptions.RayError as error:
                finished.append((ref, Outcome("failed", f"Ray task of run {task.run_id} failed: {error}")))
        return finished

    def close(self) -> None:
        for ref in self.pending:
            self.ray.cancel(ref, force=True)
        self.pending.clear()
        if self.started:
            self.ray.shutdown()
