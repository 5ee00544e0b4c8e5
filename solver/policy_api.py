"""What a rolling policy of your own imports: one public home for the interface, which the
package's layout can move under without breaking plug-ins (docs/policies.md, "Your own
policy"; ``examples/my_policy.py``).

    from hetsched.policy_api import ClusterState, Decision, PolicyHooks, Start
"""

from hetsched.allocation.free_gpus import FreeGpuIndex
from hetsched.allocation.layout import Start
from hetsched.core.records import Cluster, Gpu, Job
from hetsched.core.throughput import ThroughputModel
from hetsched.policies.rolling import (
    ClusterState,
    Decision,
    PolicyHooks,
    RollingPolicy,
    RunningJob,
)

__all__ = ["Cluster", "ClusterState", "Decision", "FreeGpuIndex", "Gpu", "Job", "PolicyHooks",
           "RollingPolicy", "RunningJob", "Start", "ThroughputModel"]
