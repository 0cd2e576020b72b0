"""A real MLflow tracking store for a test: sqlite in the test's folder, its artifacts beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def make_store(folder: Path, experiment: str = "e") -> tuple[str, Any]:
    """A sqlite tracking store in ``folder`` with ``experiment`` made (artifacts in
    ``folder/artifacts``): its URI and an ``MlflowClient`` on it. Needs mlflow installed."""
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(store)
    client.create_experiment(experiment, artifact_location=(folder / "artifacts").as_uri())
    return store, client
