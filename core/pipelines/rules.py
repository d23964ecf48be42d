"""Named rule sets of PPipe: ``paper`` (the text and pseudocode) and ``artifact`` (the authors' code).

The authors' public artifact (GitHub ``JonnyKong/PPipe``: the MILP in Python,
the simulator in Java under ``cluster-sim/``, the plans under ``data/plans/``)
differs from the paper's text in a few rules. Each rule is one documented
field of a typed config, so a user can also mix them (``--set`` on
``simulate``; planner fields through :class:`~shepherd.solvers.ppipe_milp.PPipePlanConfig`):

Data plane (:class:`~shepherd.core.policies.ppipe.PPipeDataPlaneConfig`):

* ``uplink_score`` — (a) a candidate GPU of a non-last stage is scored by the
  later of its finish time and its server uplink's last reservation (artifact
  simulator); paper: Algorithm 2 scores by the GPU's finish time only.
* ``head_drop`` — (b) a request that becomes the head of its queue is
  dropped unless a batch of ``round(0.95·bs)`` … ``bs`` (the planned size,
  for bs < 10) still meets its deadline; once admitted it is served by the
  paper's rule (artifact load balancer, ``ReservationSlaLoadBalancer``);
  paper: Algorithm 1 lines 9–14 shrink every head's batch from ``bs`` down to 1.
* ``slot_receive`` — (c) every last-stage GPU slot (vGPU) has its own receive
  link (artifact network model); paper §4 C3 / §7.1: the GPUs of a server
  share one NIC.
* ``stage_servers`` — (d) the GPUs of each pipeline's stage sit on servers of
  their own: a non-last stage's vGPUs, in order, fill servers of
  ``max(per-server GPUs of its type, of the next stage's type) × k`` vGPUs
  (``k`` its MPS level), each server one link shared by its vGPUs; no
  server holds two stages, two pipelines or two DNNs (artifact simulator:
  ``Pipeline`` makes one ``RequestsDelayer`` per such group, and each DNN is
  simulated alone); paper (§7.1): GPUs are packed on the cluster's servers
  by type, so stages, pipelines and DNNs share NICs
  (:func:`~shepherd.core.pipelines.plan.place`).
* ``fill_wait`` — (e) a queue holding fewer requests than the largest batch
  that meets its head's deadline waits until a batch of one more request
  would miss that deadline even on an idle pipeline (wake-up at
  ``deadline − work(len(q)+1) + 1``, ``work`` the batch's inference and
  transfer time), and re-decides at every arrival and at the wake-up: the
  largest batch meeting the deadline, sent once that many are queued
  (artifact ``ReservationSlaLoadBalancer.execute``, the "wait to get more
  requests" branch: ``waitFor = deadline − rSmall.completionTime() +
  rSmall.queuingLatency + 1``); paper (Algorithm 1 line 17, "wait till the
  requests in q are about to miss their deadline"): one wake-up at the last
  moment the probed batch fits, ``deadline − (finish − now)``, which then
  sends what is queued.
* ``transfer_round`` — (f) a batch of ``b`` crosses a link in ``b`` times the
  per-request transfer rounded to the nearest µs (artifact
  ``RequestsDelayer.networkLatency`` × ``bs`` in ``ReservationOffer``);
  paper: ``ceil(b ×`` per-request time ``)``.

Planner (:class:`~shepherd.solvers.ppipe_milp.PPipePlanConfig`):

* ``batch_build`` — the batch-building latency ``factor·10⁶·(bs−1)/est_xput``
  µs added to a pipeline's latency in the MILP, ``est_xput`` the NP
  throughput of that DNN (artifact MILP, factor 1.3; the paper has no such
  term: 0);
* ``max_partitions`` — 2 (artifact plans; 3 only in its single-model
  ablation); paper §3: 3;
* ``np_mps`` — NP may use MPS shares (paper §7.1: "PPipe's MILP without model
  partitioning"); the artifact's NP uses whole GPUs;
* ``gpu_sharing`` — ``False``: the GPUs of a DNN's partition (same position in
  its pipelines, GPU type and MPS level) are whole physical GPUs of their own,
  never shared with another DNN or partition (artifact MILP, ``ilp_v4.py``
  with ``force_sum_gpu_integer_per_partition``, set for all four maf19
  clusters); ``True`` (paper, Eq. 23): vGPUs of one MPS level from any DNN
  share physical GPUs;
* ``spare`` — ``"fill"``: the GPUs the MILP leaves idle are kept in pipeline
  stages, as the authors' plans show (their Gurobi solutions leave spare GPUs
  in stages, e.g. 17 T4 for a gcnet stage needing 11); one GPU at a time to
  the most loaded stage that is not its pipeline's bottleneck, so no
  pipeline's throughput changes (our deterministic stand-in for the
  solver's choice, :func:`~shepherd.solvers.ppipe_milp.fill_spare`); ``"trim"``
  (paper): a stage keeps only the vGPUs its pipeline's bottleneck needs;
* ``dart`` — ``"artifact"``: GPUs are split between DNNs by the NP plan, the
  GPUs NP leaves unused are divided evenly (floor) among the DNNs, then each
  DNN replicates a 1 high + 1 low GPU sub-plan ``min`` times and runs whole
  DNNs on the rest of its more numerous type (artifact
  ``get_multidnn_dart_plan``); ``"paper"``: pairs for the whole cluster
  (§7.1 "Baselines").

Cluster: :func:`bandwidth_gbps` — the artifact plans use 10 Gbit/s on the T4
clusters and 6 on the P4 clusters; the paper's Table 1 / 5 gives 6.4 and 10.
"""

from __future__ import annotations

from shepherd.core.errors import UserError

RULE_SETS = ("paper", "artifact")

#: data-plane fields per rule set (PPipeDataPlaneConfig)
DATAPLANE = {
    "paper": {"uplink_score": False, "head_drop": False, "slot_receive": False, "stage_servers": False,
              "fill_wait": False, "transfer_round": False},
    "artifact": {"uplink_score": True, "head_drop": True, "slot_receive": True, "stage_servers": True,
                 "fill_wait": True, "transfer_round": True},
}
#: planner fields per rule set (PPipePlanConfig)
PLANNER = {
    "paper": {"batch_build": 0.0, "max_partitions": 3, "np_mps": True, "dart": "paper", "gpu_sharing": True,
              "spare": "trim"},
    "artifact": {"batch_build": 1.3, "max_partitions": 2, "np_mps": False, "dart": "artifact",
                 "gpu_sharing": False, "spare": "fill"},
}
#: effective bandwidth (Gbit/s) of the artifact's plans, by the cluster's low-class GPU type
ARTIFACT_BANDWIDTH = {"T4": 10.0, "P4": 6.0}


def check(rules: str) -> str:
    if rules not in RULE_SETS:
        raise UserError(f"--rules must be one of {', '.join(RULE_SETS)}, got '{rules}'")
    return rules


def dataplane_fields(rules: str) -> dict:
    return dict(DATAPLANE[check(rules)])


def planner_fields(rules: str) -> dict:
    return dict(PLANNER[check(rules)])


def bandwidth_gbps(cluster_name: str, rules: str) -> float | None:
    """The effective bandwidth a rule set gives a Table 1 cluster (``None``: the cluster's Table 1 / 5 default)."""
    if check(rules) == "paper":
        return None
    low = {"HC1": "P4", "HC2": "T4", "HC3": "P4", "HC4": "T4"}.get(cluster_name.upper().split("-")[0])
    return ARTIFACT_BANDWIDTH.get(low) if low else None
