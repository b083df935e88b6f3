"""The study's own attributes: every study-level user attribute autotune stores, named here once.

A study carries what it was measured on (machine, torch, workload, space, settings), how a script
study runs its script, what the search found (the recommendation, the noise floors, each math
class's quality evidence) and, in a shared search, the workers' coordination. Each is an Optuna
study user attribute; this module is the only one that spells their keys, so one grep for a key
finds its one reader and writer. (Trial-level attributes belong to study/records.py.)

The stored names never change: studies written by any earlier autotune load, and
optuna-dashboard shows them under these names.

Reading: `StudyAttrs.of(study)`, or `StudyAttrs(attrs)` around a user-attribute dict already read
(a StudySummary's, or a Study's read once: each `study.user_attrs` is a round trip to storage).
Each fact is a typed property; an absent one reads as None, False or an empty dict as its type
says, and so does one of the wrong type or a number out of its bounds (study/bounded.py: a study
is data whoever can write it wrote). Writing: one `write_*` function per fact, each taking the
Optuna study.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from ..script.spec import ScriptSpec
from . import bounded

if TYPE_CHECKING:
    import optuna

    from ..probe.topology import Topology, TorchBuild

# What the study was measured on, written once by storage.describe_study.
SCHEMA_VERSION = "schema_version"
AUTOTUNE_VERSION = "autotune_version"
TOPOLOGY = "topology"                   # Topology.to_json() of the machine
FINGERPRINT = "fingerprint"             # Topology.fingerprint()
HARDWARE = "hardware"                   # Topology.hardware()
TORCH_BUILD = "torch_build"             # TorchBuild.to_json()
WORKLOAD = "workload"
SPACE = "space"                         # the search space's JSON
SETTINGS = "settings"                   # trial settings (target_seconds, max_accuracy_drop, ...)
LIBRARY_VERSIONS = "library_versions"
CLUSTER = "cluster"                     # the hosts of a search across hosts
# Script mode: the user's command (a template export fills), how it is scored, what its text
# showed, the knobs it overrides ({knob: why}) and its --accuracy noise floor over seeds.
SCRIPT_COMMAND = "script_command"
SCRIPT_METRIC = "script_metric"
SCRIPT_LOWER_IS_BETTER = "script_lower_is_better"
SCRIPT_ACCURACY = "script_accuracy"
SCRIPT_SCAN = "script_scan"
SCRIPT_WARNING = "script_warning"
SCRIPT_OVERRIDES = "script_overrides"
SCRIPT_NOISE_FLOOR = "script_noise_floor"   # {"seeds", "values"}, or {"note"}: why none
# What the search found.
RECOMMENDATION = "recommendation"       # Recommendation.to_json() and its rendered "command"
NOISE_FLOOR = "noise_floor"             # the default launch's seeded quality
QUALITY_PREFIX = "quality:"             # + math class: that class's ClassEvidence JSON
QUALITY_LENGTH = "quality_run_samples"  # samples of the study's seeded runs (quality/sizing.py)
BUDGET_ACCOUNT = "budget_account"       # where the last search's budget went (search/account.py)
# The user's run the last search weighed compiles against (--run-length): {"seconds"} or
# {"steps"} (recommend/weigh.RunLength); `verify` weighs with it again.
RUN_LENGTH = "weighed_run_length"
# A shared search (search/shared.py): the stored-accuracy markers and their claims, each
# worker's registration, and the verifier's claim.
ACCURACY_PREFIX = "accuracy:"
ACCURACY_CLAIM_PREFIX = "autotune:accuracy-claim:"
WORKER_PREFIX = "autotune:worker:"
VERIFIER = "autotune:verifier"

KEYS = (SCHEMA_VERSION, AUTOTUNE_VERSION, TOPOLOGY, FINGERPRINT, HARDWARE, TORCH_BUILD, WORKLOAD,
        SPACE, SETTINGS, LIBRARY_VERSIONS, CLUSTER, SCRIPT_COMMAND, SCRIPT_METRIC,
        SCRIPT_LOWER_IS_BETTER, SCRIPT_ACCURACY, SCRIPT_SCAN, SCRIPT_WARNING, SCRIPT_OVERRIDES,
        SCRIPT_NOISE_FLOOR, RECOMMENDATION, NOISE_FLOOR, QUALITY_LENGTH, BUDGET_ACCOUNT,
        RUN_LENGTH, VERIFIER)
PREFIXES = (QUALITY_PREFIX, ACCURACY_PREFIX, ACCURACY_CLAIM_PREFIX, WORKER_PREFIX)


class StudyAttrs:
    """Typed reads of one study's user attributes."""

    def __init__(self, attrs: "Mapping[str, Any] | StudyAttrs | None"):
        self.raw: Mapping[str, Any] = attrs.raw if isinstance(attrs, StudyAttrs) else (attrs or {})

    @classmethod
    def of(cls, study: Any) -> "StudyAttrs":
        """The attributes of an optuna Study (or a StudySummary), read now."""
        return cls(study.user_attrs)

    def _dict(self, key: str) -> dict[str, Any]:
        return bounded.mapping(self.raw.get(key))

    def _str(self, key: str) -> str | None:
        value = self.raw.get(key)
        return value if isinstance(value, str) else None

    # -- what the study was measured on --
    @property
    def described(self) -> bool:
        """Written by `autotune search` (describe_study): its machine is stored."""
        return TOPOLOGY in self.raw

    @property
    def topology_json(self) -> Any:
        """The stored Topology JSON object (None when absent or not an object; its fields are
        checked by Topology.from_json)."""
        return self._dict(TOPOLOGY) or None

    @property
    def fingerprint(self) -> str | None:
        return self._str(FINGERPRINT)

    @property
    def torch_build_json(self) -> Any:
        """The stored TorchBuild JSON (None: written before autotune recorded the build)."""
        return self._dict(TORCH_BUILD) or None

    @property
    def workload(self) -> str | None:
        return self._str(WORKLOAD)

    @property
    def space(self) -> dict[str, Any]:
        return self._dict(SPACE)

    @property
    def settings(self) -> dict[str, Any]:
        """The trial settings, each number within what a search writes (study/bounded.py)."""
        return bounded.settings(self.raw.get(SETTINGS))

    @property
    def library_versions(self) -> dict[str, Any]:
        return {k: v for k, v in self._dict(LIBRARY_VERSIONS).items() if isinstance(v, str)}

    @property
    def torch_version(self) -> str | None:
        return self.library_versions.get("torch")

    @property
    def cluster_json(self) -> Any:
        """The hosts of a study across hosts (cluster_to_json), None for one machine."""
        return self._dict(CLUSTER) or None

    # -- script mode --
    @property
    def script_command(self) -> list[str] | None:
        command = self.raw.get(SCRIPT_COMMAND)
        return command if isinstance(command, list) and command and \
            all(isinstance(a, str) for a in command) else None

    @property
    def script_metric(self) -> str | None:
        return self._str(SCRIPT_METRIC)

    @property
    def script_lower_is_better(self) -> bool:
        return bool(self.raw.get(SCRIPT_LOWER_IS_BETTER))

    @property
    def script_accuracy(self) -> str | None:
        return self._str(SCRIPT_ACCURACY)

    def script(self) -> ScriptSpec | None:
        """The stored script (None: a built-in workload), its file scanned again as it is now."""
        command = self.script_command
        if not command:
            return None
        return ScriptSpec.scanned(command, metric=self.script_metric,
                                  accuracy=self.script_accuracy,
                                  lower_is_better=self.script_lower_is_better)

    @property
    def script_scan(self) -> dict[str, Any]:
        return self._dict(SCRIPT_SCAN)

    @property
    def script_warning(self) -> str | None:
        return self._str(SCRIPT_WARNING)

    @property
    def script_overrides(self) -> dict[str, str]:
        return {k: v for k, v in self._dict(SCRIPT_OVERRIDES).items() if isinstance(v, str)}

    @property
    def script_noise_floor(self) -> dict[str, Any]:
        return bounded.script_noise_floor(self.raw.get(SCRIPT_NOISE_FLOOR))

    # -- what the search found --
    @property
    def recommendation(self) -> dict[str, Any] | None:
        return self._dict(RECOMMENDATION) or None

    @property
    def noise_floor(self) -> dict[str, Any] | None:
        return bounded.noise_floor(self.raw.get(NOISE_FLOOR))

    @property
    def quality_length(self) -> int | None:
        """Samples of the study's search-length quality runs (None: not fixed, or not a length
        a search writes; the search's own sizing then applies, quality/evidence.py)."""
        return bounded.quality_length(self.raw.get(QUALITY_LENGTH))

    @property
    def budget_account(self) -> dict[str, Any] | None:
        return bounded.budget_account(self.raw.get(BUDGET_ACCOUNT))

    @property
    def run_length_json(self) -> dict[str, Any]:
        """The stored --run-length (recommend/weigh.RunLength.from_json checks its numbers)."""
        return self._dict(RUN_LENGTH)

    @property
    def quality_evidence(self) -> list[str]:
        """Every math class's stored evidence (ClassEvidence JSON texts)."""
        return [v for k, v in self.raw.items() if k.startswith(QUALITY_PREFIX)
                and isinstance(v, str)]

    # -- a shared search --
    def has_accuracy(self, math_key: str) -> bool:
        return ACCURACY_PREFIX + math_key in self.raw

    def accuracy(self, math_key: str) -> float | None:
        """A class's accuracy another worker measured (None: its run failed, or not a number)."""
        return bounded.number(self.raw.get(ACCURACY_PREFIX + math_key), -math.inf, math.inf)

    def accuracy_claim(self, math_key: str) -> Any:
        return self.raw.get(ACCURACY_CLAIM_PREFIX + math_key)

    @property
    def workers(self) -> dict[str, Any]:
        """{worker id: its registration} of every worker that joined the search."""
        return {k[len(WORKER_PREFIX):]: v for k, v in self.raw.items()
                if k.startswith(WORKER_PREFIX)}

    @property
    def verifier(self) -> Any:
        return self.raw.get(VERIFIER)


def machine_attrs(topology: "Topology", torch: "TorchBuild") -> dict[str, Any]:
    """The attributes that say which machine and torch measured a study (provenance compares
    them with this one's)."""
    return {TOPOLOGY: topology.to_json(), FINGERPRINT: topology.fingerprint(),
            HARDWARE: topology.hardware(), TORCH_BUILD: torch.to_json()}


def write_description(study: "optuna.Study", *, schema_version: int, autotune_version: str,
                      topology: "Topology", torch: "TorchBuild", workload: str,
                      space: dict[str, Any], settings: dict[str, Any],
                      library_versions: dict[str, Any]) -> None:
    """Each attribute is its own write, and workers of a shared search open the study at the same
    time: the topology, which makes a study `described`, goes last, so a reader sees either no
    description (and writes the same one) or all of it, never a machine without its torch."""
    attrs = {SCHEMA_VERSION: schema_version, AUTOTUNE_VERSION: autotune_version,
             **machine_attrs(topology, torch), WORKLOAD: workload, SPACE: space,
             SETTINGS: settings, LIBRARY_VERSIONS: library_versions}
    marker = attrs.pop(TOPOLOGY)
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    study.set_user_attr(TOPOLOGY, marker)


def write_cluster(study: "optuna.Study", cluster_json: dict[str, Any]) -> None:
    study.set_user_attr(CLUSTER, cluster_json)


def write_script(study: "optuna.Study", script: ScriptSpec) -> None:
    """The command (a template export fills), how it is scored and what its scan found."""
    for key, value in {SCRIPT_COMMAND: list(script.command), SCRIPT_METRIC: script.metric,
                       SCRIPT_LOWER_IS_BETTER: script.lower_is_better,
                       SCRIPT_ACCURACY: script.accuracy, SCRIPT_SCAN: script.scan.to_json(),
                       SCRIPT_WARNING: script.scan.warning()}.items():
        study.set_user_attr(key, value)


def write_script_overrides(study: "optuna.Study", overrides: dict[str, str]) -> None:
    study.set_user_attr(SCRIPT_OVERRIDES, overrides)


def write_script_noise_floor(study: "optuna.Study", floor: dict[str, Any]) -> None:
    study.set_user_attr(SCRIPT_NOISE_FLOOR, floor)


def write_recommendation(study: "optuna.Study", recommendation: dict[str, Any]) -> None:
    study.set_user_attr(RECOMMENDATION, recommendation)


def write_noise_floor(study: "optuna.Study", floor: dict[str, Any]) -> None:
    study.set_user_attr(NOISE_FLOOR, floor)


def write_quality_evidence(study: "optuna.Study", math_class: str, evidence_json: str) -> None:
    study.set_user_attr(QUALITY_PREFIX + math_class, evidence_json)


def write_quality_length(study: "optuna.Study", samples: int) -> None:
    study.set_user_attr(QUALITY_LENGTH, int(samples))


def write_budget_account(study: "optuna.Study", account: dict[str, Any]) -> None:
    study.set_user_attr(BUDGET_ACCOUNT, account)


def write_run_length(study: "optuna.Study", run_length: dict[str, Any]) -> None:
    study.set_user_attr(RUN_LENGTH, run_length)


def write_accuracy(study: "optuna.Study", math_key: str, value: float | None) -> None:
    study.set_user_attr(ACCURACY_PREFIX + math_key, value)


def write_accuracy_claim(study: "optuna.Study", math_key: str, claim: dict[str, Any]) -> None:
    study.set_user_attr(ACCURACY_CLAIM_PREFIX + math_key, claim)


def write_worker(study: "optuna.Study", worker_id: str, registration: dict[str, Any]) -> None:
    study.set_user_attr(WORKER_PREFIX + worker_id, registration)


def write_verifier(study: "optuna.Study", claim: dict[str, Any]) -> None:
    study.set_user_attr(VERIFIER, claim)
