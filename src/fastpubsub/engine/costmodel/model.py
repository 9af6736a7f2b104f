"""The cost model of Fabret et al., section 3.1 (equation 3.1, simplified form).

Per event::

    matching = K_r * |H| + sum_H mu(H) * (C_h + K_h * |H.A|) + sum_s nu(C(s).p) * checking

and space::

    Space = sum_H (i_space + entries(H) * h_space) + K_space * sum_s (size(s) - |C(s).p|) + line * |S|

All constants live in :class:`CostModel`; the values the engine uses come
from a calibration on the running machine (``engine.costmodel.calibration``), never
from guesses.  Times are in nanoseconds, space in bytes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CostModel:
    K_r: float  # ns per hash table of the configuration, per event (retrieving the relevant tables)
    C_h: float  # ns per probe of a table, fixed part
    K_h: float  # ns per attribute of a probed table's schema (building the key)
    K_c: float  # ns per subscription checked in a cluster scan
    i_space: float = 4096.0  # bytes of an empty hash table
    h_space: float = 48.0  # bytes per access predicate entry of a table (key words, value, cluster list head)
    K_space: float = 4.0  # bytes per predicate reference left in a cluster column (int32)
    line_space: float = 4.0  # bytes per subscription in a cluster line (int32 handle)

    def table_cost(self, mu: np.ndarray | float, schema_size: np.ndarray | int) -> np.ndarray | float:
        """Per-event cost of having one more table: retrieval plus the expected probe."""
        return self.K_r + mu * (self.C_h + self.K_h * schema_size)

    def checking_cost(self, nu_sum: float) -> float:
        """Per-event cost of checking subscriptions whose nu add up to ``nu_sum``."""
        return self.K_c * nu_sum

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def matching_cost(model: CostModel, table_mu: np.ndarray, table_size: np.ndarray, sub_nu: np.ndarray) -> float:
    """Equation 3.1 (simplified) for one configuration and clustering instance.

    ``table_mu`` / ``table_size``: mu(H) and |H.A| of every table whose cost
    depends on the configuration (the single-attribute tables are the
    predicate phase's own and the same for every configuration, so callers
    leave them out); ``sub_nu``: nu of each subscription's access predicate.
    """
    tables = float(np.sum(model.table_cost(np.asarray(table_mu, float), np.asarray(table_size, float))))
    return tables + model.checking_cost(float(np.sum(sub_nu)))


def space_cost(model: CostModel, table_entries: np.ndarray, sub_size: np.ndarray, sub_access_len: np.ndarray) -> float:
    """Space of a configuration: its tables plus the cluster columns and lines."""
    entries = np.asarray(table_entries, dtype=float)
    tables = len(entries) * model.i_space + float(entries.sum()) * model.h_space
    columns = float(np.sum(np.asarray(sub_size) - np.asarray(sub_access_len))) * model.K_space
    return tables + columns + len(sub_size) * model.line_space


#: Measured with ``python -m fastpubsub.engine.costmodel.calibration`` on the development machine (2 cores,
#: see docs/benchmarks.md); used until a machine saves its own with ``--save``.
CALIBRATED = CostModel(K_r=0.66, C_h=126.0, K_h=0.0, K_c=0.52)


MODEL_PATH_ENV = "PUBSUB_COST_MODEL"


def model_path() -> Path:
    """Where a machine's own calibration is saved (``$PUBSUB_COST_MODEL`` overrides)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fastpubsub" / "cost_model.json"
    return Path(os.environ.get(MODEL_PATH_ENV, default))


def save_calibration(path: Path, constants: Any) -> Path:
    """A calibration's constants (a dataclass with ``as_dict``) saved at ``path`` as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(constants.as_dict(), indent=2))
    return path


def load_calibration(path: Path, cls: type, default: Any, what: str) -> Any:
    """The ``cls`` saved at ``path`` if there is one, else ``default``; ``what`` names it in the error."""
    if path.is_file():
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"unreadable {what} in {path}: {exc}; rerun python -m "
                             f"fastpubsub.engine.costmodel.calibration --save") from None
    return default


def save_model(model: CostModel) -> Path:
    return save_calibration(model_path(), model)


def calibrated_model() -> CostModel:
    """This machine's saved calibration if there is one, else :data:`CALIBRATED`."""
    return load_calibration(model_path(), CostModel, CALIBRATED, "cost model")
