"""gnnmon and the tools teams already run: a Lightning callback that opens one row per training
batch (its phases taken from the loop's own hooks), and sinks that send each row's figures on as
the run goes: a Prometheus endpoint (``prometheus``), MLflow metrics (``mlflow``) and W&B
(``wandb``); :mod:`gnnmon.integrations.metrics` names a row's figures for them.

May import: gnnmon.measure, gnnmon.record, gnnmon.data, gnnmon.devices and the root modules (it drives the
measurements the decorators use; nothing below imports it). Import the integration you use
(``gnnmon.integrations.lightning``): this package imports no third-party tool."""
