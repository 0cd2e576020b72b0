"""Forecasting before a run: the shapes of the batches a loader would make (without running the
model or gathering features), each batch's peak from a run's memory model, and the batch budgets
that keep the worst batch under a device's memory.

May import: gnnmon.measure, gnnmon.record, gnnmon.report, gnnmon.data, gnnmon.devices and the root
modules."""

from gnnmon.forecast.budget import Budget
from gnnmon.forecast.calibrate import Calibration, calibrate
from gnnmon.forecast.forecast import Forecast, forecast

__all__ = ["Budget", "Calibration", "Forecast", "calibrate", "forecast"]
